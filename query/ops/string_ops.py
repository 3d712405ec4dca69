"""``str``: Hydra's postfix string calculator over a row's columns."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from query.ops.base import Op, OpArgs, Row, Value, as_number, as_text, set_cell

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

    def _compile(self, word: str, index: int) -> _Step:
        if word in _WORDS:
            canonical, pops, pushes = _WORDS[word]
            return _Step(canonical, index, pops, pushes)
        if word.startswith("c") and word[1:].isdigit():
            return _Step("col", index, 0, 1, int(word[1:]))
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

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Apply the calculator to each row; rows failing an eq/neq test are dropped."""
        for row in rows:
            try:
                yield self._apply(row)
            except _DropRow:
                continue


def _col(op: StrOp, step: _Step, row: Row, stack: list[Value]) -> None:
    index = step.operand
    assert isinstance(index, int)
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
