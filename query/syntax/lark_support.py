"""The one place treestore builds lark parsers and reads lark's errors.

Every language of the project (query paths, op strings, JSON job files) parses with a
LALR grammar shipped as package data. :func:`parser` builds each once, lazily;
:func:`parse` runs it and turns any lark failure into a :class:`Failure` (end of
text, an unexpected character or an unexpected token, with line, column and what
would have been accepted), which the caller words as its own positioned error.
Lark's exceptions never leave this module.
"""

from __future__ import annotations

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

__all__ = ["Failure", "parse", "parser", "transform"]


@cache
def parser(package: str, grammar_file: str, start: str) -> Lark:
    """The LALR parser of ``grammar_file`` (package data of ``package``), built once."""
    grammar = resources.files(package).joinpath(grammar_file).read_text()
    return Lark(grammar, start=start, parser="lalr", propagate_positions=True)


@dataclass(frozen=True)
class Failure:
    """Why a text did not parse, in lark-free terms.

    ``kind`` is ``end`` (the text stopped too early; line and column are just past its
    last character), ``character`` (no token starts here) or ``token`` (a token the
    grammar does not take here; ``token`` is its text). ``expected`` holds the names
    of the terminals that would have been accepted.
    """

    kind: Literal["end", "character", "token"]
    line: int
    column: int
    token: str = ""
    expected: frozenset[str] = frozenset()


def _failure(text: str, exc: UnexpectedInput) -> Failure:
    if isinstance(exc, UnexpectedEOF) or (
        isinstance(exc, UnexpectedToken) and exc.token.type == "$END"
    ):
        lines = text.splitlines() or [""]
        expected = frozenset(str(e) for e in getattr(exc, "expected", ()) or ())
        return Failure("end", len(lines), len(lines[-1]) + 1, expected=expected)
    line = exc.line if isinstance(exc.line, int) and exc.line > 0 else 1
    column = exc.column if isinstance(exc.column, int) and exc.column > 0 else 1
    if isinstance(exc, UnexpectedCharacters):
        return Failure("character", line, column, expected=frozenset(exc.allowed or ()))
    assert isinstance(exc, UnexpectedToken)
    return Failure("token", line, column, str(exc.token), frozenset(map(str, exc.expected)))


def parse(lark: Lark, text: str, error: Callable[[Failure], PositionedError]) -> Tree:  # type: ignore[type-arg]
    """Parse ``text``; on failure raise ``error(failure)`` (the caller's own error class)."""
    try:
        return lark.parse(text)
    except UnexpectedInput as exc:
        raise error(_failure(text, exc)) from None


def transform(transformer: Transformer[Any, Any], tree: Tree) -> Any:  # type: ignore[type-arg]
    """Run ``transformer`` over ``tree``; an error of ours raised inside it comes out as
    itself (lark wraps it in a ``VisitError``, which never leaves this module)."""
    try:
        return transformer.transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, PositionedError):
            raise exc.orig_exc from None
        raise
