"""Op strings -> a pipeline of op instances that runs over a stream of rows.

An op string is ``name=args;name=args``. Ops are looked up in
:data:`query.ops.REGISTRY`; inside ``args`` a backslash takes the next
character literally, so ``\\;`` is a semicolon that does not end the op.
Arguments are never URL-decoded.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from lark import Token

from query.ops import REGISTRY, Op, OpArgs, Value
from query.ops.chain import chain
from query.syntax.lark_support import Failure, line_column, parse, parser
from treestore.errors import OpError, did_you_mean

__all__ = ["MOST_NESTED", "OpsPipeline", "compile_ops", "unknown_op_hint"]

MOST_NESTED = 32
"""How deep ops may hold ops (``groupby=k:groupby=k:...``): each level is compiled, and
runs, inside the one that holds it."""


def _unescape(token: Token) -> tuple[str, tuple[int, ...]]:
    """Resolve backslash escapes, keeping each character's offset in the op string."""
    text: list[str] = []
    offsets: list[int] = []
    raw = str(token)
    start = token.start_pos or 0
    i = 0
    while i < len(raw):
        if raw[i] == "\\" and i + 1 < len(raw):
            i += 1
        text.append(raw[i])
        offsets.append(start + i)
        i += 1
    offsets.append(start + len(raw))
    return "".join(text), tuple(offsets)


def _syntax_error(text: str, failure: Failure) -> OpError:
    if failure.kind == "end":
        return OpError("The ops end too early", text, failure.line, failure.column)
    if failure.kind == "surrogate":
        return OpError(
            f"A lone surrogate ({failure.token!r}) cannot stand in the ops",
            text,
            failure.line,
            failure.column,
        )
    if failure.kind == "character":
        reason = f"Unexpected character {failure.token!r} in the ops"
    else:
        reason = f"Unexpected {failure.token[:20]!r} in the ops"
    return OpError(
        reason, text, failure.line, failure.column, hint="Write ops as name=args;name=args."
    )


@dataclass(frozen=True)
class OpsPipeline:
    """A chain of ops, applied left to right."""

    ops: tuple[Op, ...] = ()
    text: str = ""

    def run(self, rows: Iterable[Iterable[Value]]) -> Iterator[tuple[Value, ...]]:
        """Run every op over ``rows``, lazily; yields tuples. Any number of ops runs (see
        :func:`query.ops.chain.chain`)."""
        stream = chain([op.run for op in self.ops], (list(row) for row in rows))
        return (tuple(row) for row in stream)

    def warnings(self) -> list[OpError]:
        """The ops' warnings so far (an :class:`OpError` each, with its column): lenient
        arguments at once, problems seen on the rows (a column past a row) once run."""
        return [warning for op in self.ops for warning in op.warnings]

    def column_names(self, names: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """The names of the columns the ops make from columns named ``names``, or ``None``
        when an op (``pivot``, ``trans``...) makes columns that cannot be named ahead."""
        for op in self.ops:
            if names is None:
                return None
            names = op.column_names(names)
        return names

    def column_prefix(self, types: list[str]) -> tuple[tuple[Op, ...], OpsPipeline]:
        """The leading ops that run on column chunks typed ``types`` (see
        :mod:`query.ops.columns`), and a pipeline of the ops after them (which run on rows)."""
        ops: list[Op] = []
        for op in self.ops:
            out = op.column_types(types)
            if out is None:
                break
            ops.append(op)
            types = out
        return tuple(ops), OpsPipeline(self.ops[len(ops) :], self.text)

    def __bool__(self) -> bool:
        return bool(self.ops)


def unknown_op_hint(
    name: str, listing: str = "`treestore ops` (or \\ops in the shell) lists them all."
) -> str:
    """The hint under an unknown op: the closest op names, and where the catalogue is."""
    close = did_you_mean(name, REGISTRY)
    return f"{close} {listing}" if close else listing


def compile_ops(text: str | None) -> OpsPipeline:
    """Parse an op string into a pipeline; raise :class:`OpError` at the offending column.

    Any number of ops may follow each other; ops hold ops (``groupby``) at most
    :data:`MOST_NESTED` deep.

    >>> list(compile_ops("str=c0,c1,cat,v2,set").run([["A", 1, "art"]]))
    [('A', 1, 'A1')]
    """
    return _compile(text, 0)


def _compile(text: str | None, nesting: int) -> OpsPipeline:
    """:func:`compile_ops` of ops held ``nesting`` deep in other ops."""
    if text is None or not text.strip():
        return OpsPipeline()
    if nesting > MOST_NESTED:
        start = len(text) - len(text.lstrip())
        raise OpError(
            f"the ops are nested too deeply (ops in ops more than {MOST_NESTED} deep)",
            text,
            *line_column(text, start),
            hint=f"Nest at most {MOST_NESTED} groupby ops inside each other.",
        )
    tree = parse(parser("query.syntax", "ops.lark", "ops"), text, partial(_syntax_error, text))
    ops: list[Op] = []
    op_tree: Any
    for op_tree in tree.children:
        name_token, *rest = op_tree.children
        name = str(name_token)
        op_class = REGISTRY.get(name)
        if op_class is None:
            raise OpError(
                f"Unknown op {name!r}",
                text,
                *line_column(text, name_token.start_pos or 0),
                hint=unknown_op_hint(name),
            )
        args_token = rest[0] if rest and rest[0] is not None else None
        if args_token is not None:
            args_text, offsets = _unescape(args_token)
        else:
            args_text, offsets = "", (name_token.end_pos or 0,)
        op = op_class(OpArgs(name, args_text, offsets, text))
        op.bind(partial(_compile, nesting=nesting + 1))
        ops.append(op)
    return OpsPipeline(tuple(ops), text)
