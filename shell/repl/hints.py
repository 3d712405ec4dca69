"""One-line hints under a query's rows: a path name no shard has, keys ``gather`` would merge.

Both read what the shell already has: the store's trees in this process (as
completion does) and the rows it printed; ``treestore query`` counts repeated keys as
its rows stream out (:class:`KeyRepeats`).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Iterator, Sequence

from query.ops import Value
from query.syntax.ast import Path
from query.syntax.path_parser import parse_path
from query.walk.names import child_names
from query.walk.row_walker import matching_nodes
from treestore.errors import QuerySyntaxError, TreestoreError
from treestore.store.versions import StoreVersion

__all__ = ["KeyRepeats", "missing_name", "repeated_keys"]


def missing_name(version: StoreVersion, text: str) -> QuerySyntaxError | None:
    """The first name a path looks up that no node it reaches has, in any shard, as an
    error at that element's column with the closest existing names; ``None`` if every
    name exists (or the path looks up no name)."""
    try:
        path = parse_path(text)
    except TreestoreError:
        return None
    for index, element in enumerate(path.elements):
        unknown = _unknown_attachment(version, path, index, text)
        if unknown is not None:
            return unknown
        if element.kind != "names" or element.stand_in is not None:
            continue
        parent = Path(path.elements[:index]) if index else None
        try:
            children = child_names(version, parent, "", limit=10_000)
        except (TreestoreError, OSError):
            return None
        absent = [name for name in element.names if name not in children]
        if not absent or len(absent) < len(element.names):
            continue
        where = f"under {parent}" if parent else "at the top"
        close = difflib.get_close_matches(absent[0], children, n=3)
        hint = "Closest: " + ", ".join(close) + "." if close else None
        return QuerySyntaxError(
            f"no node {where} is named {absent[0]!r} in any shard",
            text,
            1,
            element.column,
            hint=hint,
        )
    return None


def attachments(version: StoreVersion, parent: Path, limit: int = 200) -> tuple[int, list[str]]:
    """How many nodes ``parent`` reaches (the first ``limit`` per shard) and the data
    attachments they have, by name: what ``parent/+%?`` lists."""
    found: set[str] = set()
    nodes = 0
    for shard in sorted(version.manifest.trees):
        tree = version.tree(shard)
        for count, node in enumerate(matching_nodes(tree, parent) if parent.elements else ()):
            if count >= limit:
                break
            nodes += 1
            found.update(node.data or {})
    return nodes, sorted(found)


def _unknown_attachment(
    version: StoreVersion, path: Path, index: int, text: str
) -> QuerySyntaxError | None:
    """An error when element ``index`` reads an attachment (``%name``, ``$name``) that none
    of the nodes it reads it on has (and there are such nodes)."""
    element = path.elements[index]
    if element.kind == "data" and element.names:
        wanted, parent = [element.names[0]], Path(path.elements[:index])
    elif element.fields:
        wanted = [f.name for f in element.fields]
        parent = Path((*path.elements[:index], dataclasses.replace(element, fields=())))
    else:
        return None
    try:
        nodes, present = attachments(version, parent)
    except (TreestoreError, OSError):
        return None
    missing = [name for name in wanted if name not in present]
    if not missing or not nodes:
        return None
    close = difflib.get_close_matches(missing[0], present, n=3) or present[:3]
    hint = "Attachments there: " + ", ".join(close) + "." if close else "Its nodes have none."
    return QuerySyntaxError(
        f"no node here has an attachment {missing[0]!r}", text, 1, element.column, hint=hint
    )


class KeyRepeats:
    """Counts the rows that repeat a key (the tuple of their text columns) among rows with
    numbers to merge, as the rows go by: each shard sends its own rows (Hydra's
    semantics), so a key found in several shards comes once per shard."""

    def __init__(self) -> None:
        self.seen: set[tuple[Value, ...]] = set()
        self.repeats = 0
        self.letters = ""

    def see(self, row: Sequence[Value]) -> None:
        """Count ``row``."""
        numeric = [isinstance(v, int | float) and not isinstance(v, bool) for v in row]
        if not any(numeric) or all(numeric):
            return
        key = tuple(v for v, number in zip(row, numeric, strict=True) if not number)
        if key in self.seen:
            self.repeats += 1
            self.letters = self.letters or "".join("s" if n else "k" for n in numeric)
        self.seen.add(key)

    def watch(self, rows: Iterable[Sequence[Value]]) -> Iterator[Sequence[Value]]:
        """Yield ``rows``, counting each."""
        for row in rows:
            self.see(row)
            yield row

    def hint(self) -> str | None:
        """The hint naming the ``gather`` that merges the repeats, or None if none."""
        if not self.repeats:
            return None
        return (
            f"hint: {self.repeats:,} row(s) repeat a key: each shard sends its own rows;"
            f" | ops gather={self.letters} merges them"
        )


def repeated_keys(rows: Sequence[Sequence[Value]]) -> str | None:
    """The :class:`KeyRepeats` hint for ``rows``."""
    repeats = KeyRepeats()
    for row in rows:
        repeats.see(row)
    return repeats.hint()
