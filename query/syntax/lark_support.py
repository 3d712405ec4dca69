"""The one place treestore builds lark parsers and reads lark's errors.

Every language of the project (query paths, op strings, JSON job files) parses with a
LALR grammar shipped as package data. :func:`parser` builds each once, lazily;
:func:`parse` runs it and turns any lark failure into a :class:`Failure` (end of
text, an unexpected character or an unexpected token, with line, column and what
would have been accepted), which the caller words as its own positioned error.
Lark's exceptions never leave this module.

Lines are counted as lark counts them: only ``"\\n"`` ends a line (``str.splitlines``
also splits at ``"\\r"``, ``"\\x0b"``, ``"\\u2028"``...), so every position in the
project is :func:`line_column` of an offset, and :func:`line_text` shows its line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

from lark import Lark, Transformer, Tree
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)

from treestore.errors import PositionedError

__all__ = [
    "LARGEST_WHOLE",
    "Failure",
    "bounded_whole",
    "first_surrogate",
    "line_column",
    "line_text",
    "offset_of",
    "parse",
    "parser",
    "transform",
]


LARGEST_WHOLE = 2**63 - 1
"""The largest whole number the parsers read (a path's limit or bound, an op's count, a
job's number): Java's ``Long.MAX_VALUE``, as in Hydra."""


def bounded_whole(digits: str, largest: int = LARGEST_WHOLE) -> int | None:
    """ASCII ``digits`` as a number if it is at most ``largest``, else ``None``; a run of
    digits longer than ``largest`` has is never converted (Python refuses past 4,300)."""
    digits = digits.lstrip("0") or "0"
    if len(digits) > len(str(largest)):
        return None
    number = int(digits)
    return number if number <= largest else None


@cache
def parser(package: str, grammar_file: str, start: str) -> Lark:
    """The LALR parser of ``grammar_file`` (package data of ``package``), built once."""
    grammar = resources.files(package).joinpath(grammar_file).read_text()
    return Lark(grammar, start=start, parser="lalr", propagate_positions=True)


def line_column(text: str, offset: int) -> tuple[int, int]:
    """The 1-based line and column of ``text[offset]``, counted as lark counts them.

    >>> line_column("a\\rb\\nc", 4)
    (2, 1)
    """
    offset = max(0, min(offset, len(text)))
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


def offset_of(text: str, line: int, column: int) -> int:
    """The offset of line ``line``, column ``column`` of ``text`` (the inverse of
    :func:`line_column`; a place past the text is its end).

    >>> offset_of("a\\rb\\nc", 2, 1)
    4
    """
    start = 0
    for _ in range(line - 1):
        newline = text.find("\n", start)
        if newline < 0:
            return len(text)
        start = newline + 1
    return max(0, min(start + column - 1, len(text)))


def line_text(text: str, line: int) -> str:
    """Line ``line`` (1-based, lark's lines) of ``text``, or '' past its end."""
    lines = text.split("\n")
    return lines[line - 1] if 0 < line <= len(lines) else ""


_SURROGATE = re.compile("[\ud800-\udfff]")


def first_surrogate(text: str) -> int | None:
    """The offset of the first lone surrogate (``"\\ud800"``...) in ``text``, or ``None``.

    A lone surrogate is no character: it cannot be written as UTF-8, so a name or a value
    holding one would fail later, far from where it was written.
    """
    found = _SURROGATE.search(text)
    return found.start() if found else None


@dataclass(frozen=True)
class Failure:
    """Why a text did not parse, in lark-free terms.

    ``kind`` is ``end`` (the text stopped too early; line and column are just past its
    last token), ``character`` (no token starts here; ``token`` is that character),
    ``token`` (a token the grammar does not take here; ``token`` is its text) or
    ``surrogate`` (a lone surrogate, refused before parsing; ``token`` is it).
    ``expected`` holds the names of the terminals that would have been accepted.
    """

    kind: Literal["end", "character", "token", "surrogate"]
    line: int
    column: int
    token: str = ""
    expected: frozenset[str] = frozenset()


def _end_position(text: str, exc: UnexpectedInput) -> tuple[int, int]:
    """Just past the last token lark read (lark's ``$END`` borrows its place), else just
    past the text's last character that is not blank."""
    token = getattr(exc, "token", None)
    end = getattr(token, "end_pos", None)
    if isinstance(end, int) and end > 0:
        return line_column(text, end)
    return line_column(text, len(text.rstrip()))


def _failure(text: str, exc: UnexpectedInput) -> Failure:
    expected = frozenset(str(e) for e in getattr(exc, "expected", ()) or ())
    if isinstance(exc, UnexpectedEOF) or (
        isinstance(exc, UnexpectedToken) and exc.token.type == "$END"
    ):
        return Failure("end", *_end_position(text, exc), expected=expected)
    if isinstance(exc, UnexpectedCharacters):
        offset = exc.pos_in_stream or 0
        return Failure(
            "character",
            *line_column(text, offset),
            text[offset : offset + 1],
            frozenset(exc.allowed or ()),
        )
    assert isinstance(exc, UnexpectedToken)
    token = exc.token
    offset = token.start_pos if isinstance(token.start_pos, int) else 0
    return Failure("token", *line_column(text, offset), str(token), expected)


def parse(lark: Lark, text: str, error: Callable[[Failure], PositionedError]) -> Tree:  # type: ignore[type-arg]
    """Parse ``text``; on failure raise ``error(failure)`` (the caller's own error class).

    A lone surrogate anywhere in ``text`` is a failure too (kind ``surrogate``).
    """
    surrogate = first_surrogate(text)
    if surrogate is not None:
        raise error(Failure("surrogate", *line_column(text, surrogate), text[surrogate]))
    try:
        return lark.parse(text)
    except UnexpectedInput as exc:
        raise error(_failure(text, exc)) from None


def transform(transformer: Transformer[Any, Any], tree: Tree) -> Any:  # type: ignore[type-arg]
    """Run ``transformer`` over ``tree``; an exception raised inside it comes out as itself
    (lark wraps it in a ``VisitError``, which never leaves this module)."""
    try:
        return transformer.transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, PositionedError):
            raise exc.orig_exc from None
        raise exc.orig_exc from exc  # a bug: shown with its own traceback
