"""Parsing query paths: grammar.lark -> lark tree -> typed AST (:mod:`query.ast`).

Every lark error becomes a :class:`~treestore.errors.QuerySyntaxError` with the
line, column, a caret snippet and the expected tokens in words.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import Any

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from query.ast import Bound, Element, Path, Property
from treestore.errors import QuerySyntaxError

__all__ = ["parse_path"]

# Terminal names as a user should read them in "expected ..." lists.
_WORDS = {
    "NAME": "a node name",
    "STRING": 'a "quoted" node name',
    "PLUS": "'+'",
    "STAR": "'*'",
    "PROPERTY": "a property (hits, nodes)",
    "COMPARE": "a bound ('>', '<', '=')",
    "INT": "a whole number",
    "SLASH": "'/'",
    "COLON": "':'",
    "COMMA": "','",
    "$END": "the end of the path",
}


@cache
def _path_parser() -> Lark:
    grammar = resources.files("query").joinpath("grammar.lark").read_text()
    return Lark(grammar, start="path", parser="lalr", propagate_positions=True)


@v_args(inline=True)
class _ToAst(Transformer[Token, Any]):
    def path(self, *elements: Element) -> Path:
        return Path(tuple(elements))

    @v_args(meta=True, inline=True)
    def element(self, meta: Any, selector: dict[str, Any], properties: tuple[Property, ...] = ()):
        return Element(**selector, properties=properties, line=meta.line, column=meta.column)

    def shown_names(self, _plus: Token, names: tuple[str, ...]) -> dict[str, Any]:
        return {"kind": "names", "names": names, "show": True}

    def all_shown(self, _plus: Token) -> dict[str, Any]:
        return {"kind": "all", "show": True}

    def all_hidden(self, _star: Token) -> dict[str, Any]:
        return {"kind": "all", "show": False}

    def hidden_names(self, names: tuple[str, ...]) -> dict[str, Any]:
        return {"kind": "names", "names": names, "show": False}

    def names(self, *names: str) -> tuple[str, ...]:
        return names

    def name(self, token: Token) -> str:
        if token.type == "STRING":
            decoded: str = json.loads(token)
            return decoded
        return str(token)

    def properties(self, *props: Property) -> tuple[Property, ...]:
        return props

    def prop(self, *parts: Any) -> Property:
        show = isinstance(parts[0], Token) and parts[0].type == "PLUS"
        rest = parts[1:] if show else parts
        return Property(name=str(rest[0]), show=show, bounds=tuple(rest[1:]))  # type: ignore[arg-type]

    def bound(self, op: Token, value: Token) -> Bound:
        return Bound(op=str(op), value=int(value))  # type: ignore[arg-type]


def _expected_words(names: Iterable[object]) -> tuple[str, ...]:
    return tuple(sorted({_WORDS.get(str(n), repr(str(n))) for n in names}))


def _syntax_error(text: str, exc: UnexpectedInput) -> QuerySyntaxError:
    line, column = exc.line, exc.column
    if isinstance(exc, UnexpectedEOF) or (
        isinstance(exc, UnexpectedToken) and exc.token.type == "$END"
    ):
        lines = text.splitlines() or [""]
        line, column = len(lines), len(lines[-1]) + 1
        expected = _expected_words(exc.expected)
        reason = "The path ends too early"
    elif isinstance(exc, UnexpectedCharacters):
        expected = _expected_words(exc.allowed or set())
        reason = f"Unexpected character {text.splitlines()[line - 1][column - 1]!r} in the path"
    else:
        assert isinstance(exc, UnexpectedToken)
        expected = _expected_words(exc.expected)
        reason = f"Unexpected {str(exc.token)[:20]!r} in the path"
    hint = "Expected " + " or ".join(expected) + "." if expected else None
    return QuerySyntaxError(reason, text, line, column, expected=expected, hint=hint)


def parse_path(text: str) -> Path:
    """Parse a query path into its typed AST.

    >>> str(parse_path("root/+:nodes>1/+/+"))
    'root/+:nodes>1/+/+'
    >>> parse_path("root/+").elements[1].show
    True
    """
    if not text.strip():
        raise QuerySyntaxError(
            "The path is empty", text, 1, 1, hint="Start with a node name or '+', e.g. root/+."
        )
    try:
        tree = _path_parser().parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(text, exc) from None
    path: Path = _ToAst().transform(tree)
    return path
