"""``str``: Hydra's postfix string calculator over a row's columns."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from query.ops.base import (
    MOST_COLUMNS,
    Op,
    OpArgs,
    Row,
    Value,
    as_number,
    as_text,
    set_cell,
    whole_argument,
)
from query.ops.columns import Chunk, as_text_column

__all__ = ["StrOp"]


@dataclass(frozen=True)
class _Step:
    word: str
    index: int  # position of the word in the op's arguments, for errors
    pops: int
    pushes: int
    operand: Value = None


# word -> (canonical word, pops, pushes)
_WORDS: dict[str, tuple[str, int, int]] = {
    "cat": ("cat", 2, 1),
    "+": ("cat", 2, 1),
    "range": ("range", 3, 1),
    ":": ("range", 3, 1),
    "split": ("split", 3, 1),
    "/": ("split", 3, 1),
    "set": ("set", 2, 0),
    "=": ("set", 2, 0),
    "eq": ("eq", 2, 0),
    "==": ("eq", 2, 0),
    "neq": ("neq", 2, 0),
    "!=": ("neq", 2, 0),
}


class _DropRow(Exception):
    """An ``eq``/``neq`` test failed: the row leaves the stream."""


class StrOp(Op):
    """str=OP,OP,... : a postfix (RPN) string calculator, run once per row.

    Loads: ``cN`` pushes column N (0-based; null past the row's end), ``vTEXT``
    pushes TEXT (a bare ``v`` pushes a comma). Words: ``cat``/``+`` joins the
    top two; ``range``/``:`` pops end, start, string and pushes the slice
    (negative offsets count from the end); ``split``/``/`` pops index, separator,
    string and pushes that piece; ``set``/``=`` pops a column number and a value
    and sets that column (appends past the end); ``eq``/``==`` and ``neq``/``!=``
    pop two values and drop the row unless they are equal / different.
    Null joins as the empty string.

    Example: ``str=c0,c1,cat,v2,set`` turns ``A 1 art`` into ``A 1 A1``.
    """

    name = "str"
    keeps_columns = True
    separator = ","
    arguments = (
        ("c0", "push column 0 (cN: column N)"),
        ("v", "push the text after v"),
        ("cat", "join the top two"),
        ("range", "slice: pops end, start, string"),
        ("split", "piece: pops index, separator, string"),
        ("set", "set a column: pops column, value"),
        ("eq", "keep the row if the top two are equal"),
        ("neq", "keep the row if the top two differ"),
    )

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        steps: list[_Step] = []
        depth = 0
        for word, index in args.split(","):
            step = self._compile(word, index)
            if depth < step.pops:
                raise args.error(
                    index,
                    f"{word!r} needs {step.pops} values but the stack holds {depth}",
                    hint="Push values with cN (a column) or vTEXT (a constant) first.",
                )
            depth += step.pushes - step.pops
            steps.append(step)
        self.steps = tuple(steps)
        if not any(step.word in ("set", "eq", "neq") for step in steps):
            self.warn(
                len(args.text),
                "str sets no column and tests nothing: the rows pass unchanged",
                hint="End with a column number and set (str=c0,c1,cat,v2,set), or eq/neq.",
            )

    def _compile(self, word: str, index: int) -> _Step:
        if word in _WORDS:
            canonical, pops, pushes = _WORDS[word]
            return _Step(canonical, index, pops, pushes)
        if word.startswith("c") and word[1:].isascii() and word[1:].isdigit():
            column = whole_argument(
                self.args, word[1:], index + 1, "a column number", MOST_COLUMNS - 1
            )
            return _Step("col", index, 0, 1, column)
        if word.startswith("v"):
            return _Step("const", index, 0, 1, word[1:] if len(word) > 1 else ",")
        raise self.args.error(
            index,
            f"unknown word {word!r}",
            hint="Use cN, vTEXT, cat, range, split, set, eq or neq.",
        )

    def _int(self, value: Value, step: _Step) -> int:
        number = as_number(value)
        if not isinstance(number, int):
            raise self.args.error(step.index, f"{step.word} needs a whole number, got {value!r}")
        return number

    def _apply(self, row: Row) -> Row:
        stack: list[Value] = []
        for step in self.steps:
            handler = _HANDLERS[step.word]
            handler(self, step, row, stack)
        return row

    def column_types(self, types: list[str]) -> list[str] | None:
        """Chunks when only cN, vTEXT, cat, eq, neq and set (of a constant column) are used."""
        return _column_types(self.steps, types)

    def run_columns(self, chunks: Iterator[Chunk]) -> Iterator[Chunk]:
        """The calculator over whole chunks (see :meth:`column_types`)."""
        for chunk in chunks:
            yield _run_chunk(self.steps, chunk)

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Apply the calculator to each row; rows failing an eq/neq test are dropped."""
        for row in rows:
            try:
                yield self._apply(row)
            except _DropRow:
                continue


_COLUMN_WORDS = frozenset({"col", "const", "cat", "set", "eq", "neq"})


def _set_column(step: _Step, stack: list[tuple[str, Value]]) -> int | None:
    """The column a ``set`` writes when a constant names it, else ``None``."""
    kind, operand = stack.pop()
    number = as_number(operand) if kind == "const" else None
    return number if isinstance(number, int) else None


def _column_types(steps: tuple[_Step, ...], types: list[str]) -> list[str] | None:
    """What the columns' types become, or ``None`` if the steps need rows (see StrOp)."""
    out = list(types)
    stack: list[tuple[str, Value]] = []  # (type or "const", the constant)
    for step in steps:
        if step.word not in _COLUMN_WORDS:
            return None
        if step.word == "col":
            index = int(step.operand)  # type: ignore[arg-type]
            stack.append((out[index] if index < len(out) else "null", None))
        elif step.word == "const":
            stack.append(("const", step.operand))
        elif step.word == "cat":
            del stack[-2:]
            stack.append(("str", None))
        elif step.word == "set":
            column = _set_column(step, stack)
            if column is None:
                return None
            kind = stack.pop()[0]
            kind = "str" if kind == "const" else kind
            if 0 <= column < len(out):
                out[column] = kind
            else:
                out.append(kind)
        else:
            del stack[-2:]
    return out


def _equal_rows(left: pa.Array | str | None, right: pa.Array | str | None, rows: int) -> np.ndarray:
    """Per row, whether the two values are equal as text."""
    left, right = as_text_column(left, rows), as_text_column(right, rows)
    if isinstance(left, str) and isinstance(right, str):
        return np.full(rows, left == right)
    return pc.equal(left, right).to_numpy(zero_copy_only=False)


def _run_chunk(steps: tuple[_Step, ...], chunk: Chunk) -> Chunk:
    """The str program over a whole chunk (only the words of :data:`_COLUMN_WORDS`)."""
    rows, columns = chunk[0], list(chunk[1])
    stack: list[pa.Array | str | None] = []
    keep = np.ones(rows, dtype=bool)
    for step in steps:
        if step.word == "col":
            index = int(step.operand)  # type: ignore[arg-type]
            stack.append(columns[index] if index < len(columns) else None)
        elif step.word == "const":
            stack.append(str(step.operand))
        elif step.word == "cat":
            right, left = as_text_column(stack.pop(), rows), as_text_column(stack.pop(), rows)
            if isinstance(left, str) and isinstance(right, str):
                stack.append(left + right)
            else:
                stack.append(pc.binary_join_element_wise(left, right, ""))
        elif step.word == "set":
            column = int(as_number(stack.pop()))  # type: ignore[arg-type]
            value = stack.pop()
            if value is None:
                value = pa.nulls(rows)
            elif isinstance(value, str):
                value = pa.repeat(value, rows)
            if 0 <= column < len(columns):
                columns[column] = value
            else:
                columns.append(value)
        else:
            same = _equal_rows(stack.pop(), stack.pop(), rows)
            keep &= same if step.word == "eq" else ~same
    if keep.all():
        return rows, columns
    mask = pa.array(keep)
    return int(keep.sum()), [c.filter(mask) for c in columns]


def _col(op: StrOp, step: _Step, row: Row, stack: list[Value]) -> None:
    index = step.operand
    assert isinstance(index, int)
    if index >= len(row):
        op.warn(
            step.index,
            f"column {index} is past the row ({len(row)} columns): it pushes null",
            hint="Column numbers start at 0.",
        )
    stack.append(row[index] if index < len(row) else None)


def _const(op: StrOp, step: _Step, row: Row, stack: list[Value]) -> None:
    stack.append(step.operand)


def _cat(op: StrOp, step: _Step, row: Row, stack: list[Value]) -> None:
    right = stack.pop()
    stack.append(as_text(stack.pop()) + as_text(right))


def _range(op: StrOp, step: _Step, row: Row, stack: list[Value]) -> None:
    end, start = op._int(stack.pop(), step), op._int(stack.pop(), step)
    text = as_text(stack.pop())
    stack.append(text[start:end] if text else "")


def _split(op: StrOp, step: _Step, row: Row, stack: list[Value]) -> None:
    index = op._int(stack.pop(), step)
    separator = as_text(stack.pop())
    if not separator:
        raise op.args.error(step.index, "split needs a non-empty separator")
    pieces = as_text(stack.pop()).split(separator)
    stack.append(pieces[index] if -len(pieces) <= index < len(pieces) else None)


def _set(op: StrOp, step: _Step, row: Row, stack: list[Value]) -> None:
    column = op._int(stack.pop(), step)
    set_cell(row, column, stack.pop())


def _eq(op: StrOp, step: _Step, row: Row, stack: list[Value]) -> None:
    if as_text(stack.pop()) != as_text(stack.pop()):
        raise _DropRow


def _neq(op: StrOp, step: _Step, row: Row, stack: list[Value]) -> None:
    if as_text(stack.pop()) == as_text(stack.pop()):
        raise _DropRow


_HANDLERS: dict[str, Callable[[StrOp, _Step, Row, list[Value]], None]] = {
    "col": _col,
    "const": _const,
    "cat": _cat,
    "range": _range,
    "split": _split,
    "set": _set,
    "eq": _eq,
    "neq": _neq,
}
