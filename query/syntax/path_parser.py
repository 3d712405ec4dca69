"""Parsing query paths: grammar.lark -> lark tree -> typed AST (:mod:`query.syntax.ast`).

Every lark error becomes a :class:`~treestore.errors.QuerySyntaxError` with the
line, column, a caret snippet and the expected tokens in words.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from lark import Token, Transformer, v_args

from query.syntax.ast import Bound, Element, Field, Path, Property, regex_problem
from query.syntax.lark_support import (
    LARGEST_WHOLE,
    Failure,
    bounded_whole,
    first_surrogate,
    parse,
    parser,
    transform,
)
from treestore.errors import QuerySyntaxError, did_you_mean

__all__ = ["LARGEST_WHOLE", "parse_path"]


# Terminal names as a user should read them in "expected ..." lists.
_WORDS = {
    "NAME": "a node name",
    "STRING": 'a "quoted" node name',
    "PLUS": "'+'",
    "STAR": "'*'",
    "PROPERTY": "a property (hits, count, nodes)",
    "COMPARE": "a bound ('>', '<', '=')",
    "INT": "a whole number",
    "SLASH": "'/'",
    "UP": "'..'",
    "AT": "'@'",
    "TILDE": "'~'",
    "MARK": "'|' or '!'",
    "LPAR": "'('",
    "RPAR": "')'",
    "LSQB": "'['",
    "RSQB": "']'",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
    "MINUS": "'-'",
    "TRAP": "'-'",
    "VBAR": "'|'",
    "COLON": "':'",
    "COMMA": "','",
    "PERCENT": "'%' (a data attachment)",
    "DOLLAR": "'$' (a data attachment's value)",
    "QMARK": "'?'",
    "EQUALS": "'='",
    "SEMI_SEP": "';'",
    "FLAT": "';' (a flat element)",
    "DATA_NAME": "a data attachment's name",
    "$END": "the end of the path",
}


@v_args(inline=True)
class _ToAst(Transformer[Token, Any]):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def path(self, *elements: Element) -> Path:
        if elements and elements[0].kind == "up":
            first = elements[0]
            raise QuerySyntaxError(
                "'..' cannot be the first element: there is nothing above the root",
                self.text,
                first.line,
                first.column,
                hint="Start with a node name, '+' or '*'.",
            )
        for element in elements[:-1]:
            if element.flat:
                raise QuerySyntaxError(
                    "A flat element (with ';') must be the last element of the path",
                    self.text,
                    element.line,
                    element.column,
                    hint="It gives one row per parent, so nothing can follow it.",
                )
        return Path(tuple(elements))

    @v_args(meta=True, inline=True)
    def element(self, meta: Any, *parts: Any) -> Element:
        fields: dict[str, Any] = {}
        for part in parts:
            if isinstance(part, Token) and part.type == "TILDE":
                fields["null_ok"] = True
            elif isinstance(part, Token) and part.type == "FLAT":
                fields["flat"] = True
            elif isinstance(part, tuple) and part and isinstance(part[0], Property):
                fields["properties"] = part
            elif isinstance(part, Field):
                fields["fields"] = (*fields.get("fields", ()), part)
            elif isinstance(part, dict):
                fields.update({k: v for k, v in part.items() if k != "flat" or v})
        return Element(**fields, line=meta.line, column=meta.column)

    def limit_only(self, limit: Token) -> dict[str, Any]:
        return {"limit": self._whole(limit, "A limit")}

    def skip_limit(self, skip: Token, limit: Token) -> dict[str, Any]:
        return {"skip": self._whole(skip, "A skip"), "limit": self._whole(limit, "A limit")}

    def _whole(self, token: Token, what: str) -> int:
        """An INT token as a number, refused past :data:`LARGEST_WHOLE` (at the token)."""
        number = bounded_whole(str(token))
        if number is None:
            raise QuerySyntaxError(
                f"{what} is too large",
                self.text,
                token.line or 1,
                token.column or 1,
                hint=f"Write at most {LARGEST_WHOLE}.",
            )
        return number

    def up_hidden(self, _up: Token) -> dict[str, Any]:
        return {"kind": "up"}

    def up_shown(self, _plus: Token, _up: Token) -> dict[str, Any]:
        return {"kind": "up", "show": True}

    def regex_hidden(self, mark: Token, names: _Names) -> dict[str, Any]:
        self._needs_names(names, "A regex element")
        return {
            "kind": "regex",
            "names": self._patterns(names),
            "traps": self._patterns(names, traps=True),
            "negate": str(mark) == "!",
            "flat": names.flat,
        }

    def regex_shown(self, mark: Token, _plus: Token, deco: dict[str, Any], names: _Names):
        return {**self.regex_hidden(mark, names), "show": True, **deco}

    def prefix_shown(self, _plus: Token, deco: dict[str, Any], _plus2: Token, names: _Names):
        self._needs_names(names, "A prefix element")
        return {"kind": "prefix", "names": names.values, "show": True, **names.extras, **deco}

    def reference_hidden(self, _at: Token, _at2: Token, name: tuple[str, Token]):
        return {"kind": "reference", "names": tuple(name[0].split("/"))}

    def reference_shown(
        self, _plus: Token, deco: dict[str, Any], _at: Token, _at2: Token, name: tuple[str, Token]
    ) -> dict[str, Any]:
        return {**self.reference_hidden(_at, _at2, name), "show": True, **deco}

    def range_shown(self, _plus: Token, deco: dict[str, Any], _at: Token, names: _Names):
        return {**self.range_hidden(_at, names), "show": True, **deco}

    def range_hidden(self, _at: Token, names: _Names) -> dict[str, Any]:
        self._needs_names(names, "A range")
        if len(names.values) > 2:
            raise QuerySyntaxError(
                "A range takes one or two names (from, to)",
                self.text,
                names.line,
                names.columns[2],
                hint="Write @from,to (to is not included) or @from (to the end).",
            )
        return {"kind": "range", "names": names.values, **names.extras}

    def shown_names(self, _plus: Token, deco: dict[str, Any], names: _Names) -> dict[str, Any]:
        return {**self.hidden_names(names), "show": True, **deco}

    def shown_after_comma(self, _plus: Token, deco: dict[str, Any], names: _Names):
        return self.shown_names(_plus, deco, names)

    def hidden_after_star(self, _star: Token, names: _Names) -> dict[str, Any]:
        return self.hidden_names(names)

    def all_shown(self, _plus: Token, deco: dict[str, Any]) -> dict[str, Any]:
        return {"kind": "all", "show": True, **deco}

    def all_hidden(self, _star: Token) -> dict[str, Any]:
        return {"kind": "all", "show": False}

    def data_shown(
        self, _plus: Token, deco: dict[str, Any], _percent: Token, ref: dict[str, Any]
    ) -> dict[str, Any]:
        return {**ref, "show": True, **deco}

    @v_args(meta=True, inline=True)
    def data_shown_default(
        self,
        meta: Any,
        _plus: Token,
        deco: dict[str, Any],
        _percent: Token,
        default: dict[str, Any],
        ref: dict[str, Any],
    ) -> dict[str, Any]:
        if "default" in deco:
            raise QuerySyntaxError(
                "An element can have only one default",
                self.text,
                meta.line,
                meta.column,
                hint="Write the default once: +%[default]name or +[default]%name.",
            )
        return {**ref, "show": True, **deco, **default}

    def data_hidden(self, _percent: Token, ref: dict[str, Any]) -> dict[str, Any]:
        return ref

    def data_list(self, _mark: Token) -> dict[str, Any]:
        return {"kind": "data", "names": ()}

    def data_named(self, name: tuple[str, Token], *rest: Any) -> dict[str, Any]:
        keys = self._no_traps(rest[1]).values if rest else ()
        return {"kind": "data", "names": (name[0],), "data_keys": keys}

    def data_name(self, token: Token) -> tuple[str, Token]:
        return self.name(token)

    def field(self, _dollar: Token, *parts: Any) -> Field:
        show = isinstance(parts[0], Token) and parts[0].type == "PLUS"
        if show:
            parts = parts[1:]
        keys = self._no_traps(parts[2]).values if len(parts) > 1 else ()
        return Field(parts[0][0], keys, show)

    def sorted_shown(self, _plus: Token, deco: dict[str, Any], names: _Names) -> dict[str, Any]:
        return {**self.shown_names(_plus, deco, names), "names": _sorted(names.values)}

    def sorted_hidden(self, names: _Names) -> dict[str, Any]:
        return {**self.hidden_names(names), "names": _sorted(names.values)}

    def hidden_names(self, names: _Names) -> dict[str, Any]:
        kind = "names" if names.values else "all"  # traps alone: every child
        return {"kind": kind, "names": names.values, "show": False, **names.extras}

    def _needs_names(self, names: _Names, what: str) -> None:
        if not names.values:
            raise QuerySyntaxError(
                f"{what} needs at least one name before its traps",
                self.text,
                names.line,
                names.trap_column,
                hint="Write the names first, then the traps: |a.*,-ab.",
            )

    def _no_traps(self, names: _Names) -> _Names:
        if names.traps:
            raise QuerySyntaxError(
                "An attachment's keys cannot be traps ('-')",
                self.text,
                names.line,
                names.trap_column,
                hint='Quote a key that starts with "-": "-1".',
            )
        return names

    def deco(self, *parts: dict[str, Any]) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for part in parts:
            merged.update(part)
        return merged

    def default(self, name: tuple[str, Token], hits: Token | None = None) -> dict[str, Any]:
        return {
            "default": name[0],
            "default_hits": None if hits is None else self._whole(hits, "A default's hits"),
        }

    def data_default(self, name: tuple[str, Token], hits: Token | None = None) -> dict[str, Any]:
        return self.default(name, hits)

    def label(self, name: tuple[str, Token]) -> dict[str, Any]:
        return {"label": name[0]}

    prop_label = label

    def names(self, *parts: Any) -> _Names:
        items = [p for p in parts if isinstance(p, tuple)]
        # As in Hydra, a "-" makes its name and every later one a trap.
        first_trap = next((i for i, item in enumerate(items) if item[2]), len(items))
        names, traps = items[:first_trap], items[first_trap:]
        return _Names(
            tuple(n for n, _, _ in names),
            items[0][1].line or 1,
            tuple(t.column or 1 for _, t, _ in names),
            flat=any(isinstance(p, Token) and p.type == "SEMI_SEP" for p in parts),
            traps=tuple(n for n, _, _ in traps),
            trap_columns=tuple(t.column or 1 for _, t, _ in traps),
        )

    def name_item(self, *parts: Any) -> tuple[str, Token, bool]:
        trap = isinstance(parts[0], Token) and parts[0].type == "TRAP"
        name, token = parts[-1]
        return name, parts[0] if trap else token, trap  # a trap stands where its "-" is

    def name(self, token: Token) -> tuple[str, Token]:
        if token.type != "STRING":
            return str(token), token
        try:
            decoded: str = json.loads(token)
        except json.JSONDecodeError as exc:
            raise QuerySyntaxError(
                f"Not a valid quoted name ({exc.msg.removesuffix(' at').lower()})",
                self.text,
                token.line or 1,
                (token.column or 1) + exc.pos,
                hint='A quoted name is a JSON string: escape \\ and " with a backslash, '
                "and write a tab as \\t.",
            ) from None
        surrogate = first_surrogate(decoded)
        if surrogate is not None:
            raise QuerySyntaxError(
                f"A quoted name cannot hold a lone surrogate ({decoded[surrogate]!r})",
                self.text,
                token.line or 1,
                token.column or 1,
                hint='Write a character outside the BMP as a pair: "\\ud83d\\ude00".',
            )
        return decoded, token

    def _patterns(self, names: _Names, traps: bool = False) -> tuple[str, ...]:
        values = names.traps if traps else names.values
        columns = names.trap_columns if traps else names.columns
        for pattern, column in zip(values, columns, strict=True):
            problem = regex_problem(pattern)
            if problem is not None:
                raise QuerySyntaxError(
                    f"Not a regular expression ({problem})",
                    self.text,
                    names.line,
                    column,
                    hint='Quote a pattern with special characters: |"a.*b".',
                )
        return values

    def properties(self, *props: Property) -> tuple[Property, ...]:
        return props

    def prop(self, *parts: Any) -> Property:
        show = isinstance(parts[0], Token) and parts[0].type == "PLUS"
        rest = parts[1:] if show else parts
        label = None
        if rest and isinstance(rest[0], dict):  # ":+{h}hits": the column's label
            label, rest = rest[0]["label"], rest[1:]
        name = "hits" if str(rest[0]) == "count" else str(rest[0])  # Hydra's alias
        return Property(
            name=name,  # type: ignore[arg-type]
            show=show,
            bounds=tuple(rest[1:]),
            label=label,
        )

    def bound(self, op: Token, value: Token) -> Bound:
        return Bound(op=str(op), value=self._whole(value, "A bound"))  # type: ignore[arg-type]


@dataclass(frozen=True)
class _Names:
    """A list of names with where each stood (for errors)."""

    values: tuple[str, ...]
    line: int
    columns: tuple[int, ...]
    flat: bool = False  # separated by ";"
    traps: tuple[str, ...] = ()  # the names from the first "-name" on
    trap_columns: tuple[int, ...] = ()

    @property
    def trap_column(self) -> int:
        """Where the first trap stands (or the first name, without traps)."""
        return (self.trap_columns or self.columns or (1,))[0]

    @property
    def extras(self) -> dict[str, Any]:
        """The element fields besides the names that a name list sets."""
        return {"flat": self.flat, "traps": self.traps}


def _sorted(names: tuple[str, ...]) -> tuple[str, ...]:
    """Distinct names in Java's string order (UTF-16 code units), as Hydra's TreeSet."""
    return tuple(sorted(set(names), key=lambda name: name.encode("utf-16-be")))


def _expected_words(names: Iterable[object]) -> tuple[str, ...]:
    return tuple(sorted({_WORDS.get(str(n), repr(str(n))) for n in names}))


PROPERTIES = ("hits", "nodes", "count")  # the grammar's PROPERTY terminal


def _syntax_error(text: str, failure: Failure) -> QuerySyntaxError:
    expected = _expected_words(failure.expected)
    if failure.kind == "end":
        reason = "The path ends too early"
    elif failure.kind == "character":
        reason = f"Unexpected character {failure.token!r} in the path"
    elif failure.kind == "surrogate":
        reason = f"A lone surrogate ({failure.token!r}) cannot stand in a path"
        expected = ()
    else:
        reason = f"Unexpected {failure.token[:20]!r} in the path"
    hint = "Expected " + " or ".join(expected) + "." if expected else None
    close = did_you_mean(failure.token, PROPERTIES) if "PROPERTY" in failure.expected else None
    if close is not None and failure.kind == "token":
        hint = f"{close} {hint}"
    return QuerySyntaxError(
        reason, text, failure.line, failure.column, expected=expected, hint=hint
    )


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
    tree = parse(parser("query.syntax", "path.lark", "path"), text, partial(_syntax_error, text))
    path: Path = transform(_ToAst(text), tree)
    return path
