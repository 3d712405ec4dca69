"""One line of the shell: a path, then optionally ``| rops OPS`` and ``| ops OPS``.

    root/+:nodes>1/+/+ | rops str=c1,v=,cat,c2,cat,v2,set;merge=kij | ops sort=0

The parts are found by a space, a ``|``, then the word ``rops`` or ``ops`` and a
space, so a ``|`` anywhere else (a regex element such as ``|ops``) stays part of
the path or the ops. Each part
keeps its offset in the line, so an error's column points into the line typed.

>>> split_line("root/+ | rops merge=kj")
QueryLine(path='root/+', rops='merge=kj', ops=None, offsets={'path': 0, 'rops': 14})
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["PART_SEPARATOR", "QueryLine", "join_lines", "needs_more", "split_line"]

PART_SEPARATOR = re.compile(r"\s+\|\s*(rops|ops)(?:\s+|$)")


@dataclass(frozen=True)
class QueryLine:
    """The parts of a query line and where each starts in it (0-based)."""

    path: str
    rops: str | None = None
    ops: str | None = None
    offsets: dict[str, int] = field(default_factory=dict)


def split_line(line: str) -> QueryLine:
    """Split ``line`` into its path, rops and ops (a part given twice: the last wins)."""
    parts: dict[str, str] = {}
    offsets: dict[str, int] = {}
    matches = list(PART_SEPARATOR.finditer(line))
    path_end = matches[0].start() if matches else len(line)
    leading = len(line) - len(line.lstrip())
    parts["path"], offsets["path"] = line[:path_end].strip(), leading
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(line)
        kind = match.group(1)
        parts[kind], offsets[kind] = line[match.end() : end].rstrip(), match.end()
    return QueryLine(parts["path"], parts.get("rops"), parts.get("ops"), offsets)


def needs_more(text: str) -> bool:
    """Whether ``text`` goes on on the next line: it ends with a ``\\`` (not a meta-command
    alone) or leaves a ``"`` quote open."""
    if _open_quote(text):
        return True
    stripped = text.rstrip()
    return stripped.endswith("\\") and not stripped.endswith("\\\\") and stripped != "\\"


def join_lines(text: str, more: str) -> str:
    """``text`` continued by the line ``more``: a trailing ``\\`` is dropped (the lines join
    as typed), an open quote keeps its line break."""
    if _open_quote(text):
        return text + "\n" + more
    return text.rstrip()[:-1] + more


def _open_quote(text: str) -> bool:
    inside = False
    escaped = False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\" and inside:
            escaped = True
        elif char == '"':
            inside = not inside
    return inside
