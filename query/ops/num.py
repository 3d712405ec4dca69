"""``num`` (alias ``math``): a postfix (RPN) calculator over numbers, run once per row."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Iterator

from query.ops.base import Op, OpArgs, Row, as_number, cell, set_cell

__all__ = ["NumOp"]

Number = int | float
_Stack = list[Number]


def _binary(function: Callable[[Number, Number], Number]) -> Callable[[_Stack], None]:
    def apply(stack: _Stack) -> None:
        a = stack.pop()
        b = stack.pop()
        stack.append(function(b, a))

    return apply


def _unary(function: Callable[[Number], Number]) -> Callable[[_Stack], None]:
    def apply(stack: _Stack) -> None:
        stack.append(function(stack.pop()))

    return apply


def _whole_div(b: Number, a: Number) -> Number:
    return 0 if a == 0 else int(b / a)


def _whole_rem(b: Number, a: Number) -> Number:
    return 0 if a == 0 else int(math.fmod(b, a))


def _swap(stack: _Stack) -> None:
    stack[-1], stack[-2] = stack[-2], stack[-1]


def _whole_stack(function: Callable[[list[Number]], Number]) -> Callable[[_Stack], None]:
    def apply(stack: _Stack) -> None:
        values = list(stack)
        stack.clear()
        stack.append(function(values))

    return apply


_WORDS: dict[str, Callable[[_Stack], None]] = {
    "add": _binary(lambda b, a: b + a),
    "sub": _binary(lambda b, a: b - a),
    "mult": _binary(lambda b, a: int(b * a)),
    "dmult": _binary(lambda b, a: float(b) * a),
    "div": _binary(_whole_div),
    "ddiv": _binary(lambda b, a: 0.0 if a == 0 else float(b) / a),
    "rem": _binary(_whole_rem),
    "min": _binary(min),
    "max": _binary(max),
    "log": _unary(lambda a: math.log10(a) if a > 0 else math.nan),
    "sqrt": _unary(lambda a: math.sqrt(a) if a >= 0 else math.nan),
    "abs": _unary(lambda a: float(abs(a))),
    "toi": _unary(int),
    "tof": _unary(float),
    "dup": lambda stack: stack.append(stack[-1]),
    "swap": _swap,
    "mean": _whole_stack(lambda v: statistics.fmean(v) if v else 0),
    "variance": _whole_stack(lambda v: statistics.pvariance(v) if len(v) > 1 else 0),
}
_ALIASES = {
    "+": "add",
    "-": "sub",
    "*": "mult",
    "prod": "mult",
    "dprod": "dmult",
    "/": "div",
    "%": "rem",
    "toint": "toi",
    "tofloat": "tof",
    "d": "dup",
    "x": "swap",
}
_TESTS: dict[str, Callable[[Number, Number], bool]] = {
    "gt": lambda b, a: b > a,
    "gteq": lambda b, a: b >= a,
    "lt": lambda b, a: b < a,
    "lteq": lambda b, a: b <= a,
    "eq": lambda b, a: b == a,
}
_TEST_ALIASES = {">": "gt", ">=": "gteq", "<": "lt", "<=": "lteq", "==": "eq", "deq": "eq"}
# the values each word needs on the stack
_POPS = {**dict.fromkeys(_WORDS, 2), "log": 1, "sqrt": 1, "abs": 1, "toi": 1, "tof": 1}
_POPS.update({"dup": 1, "mean": 1, "variance": 1, "set": 2, "out": 1, "test": 2})


class NumOp(Op):
    """num=WORD,WORD,... : a postfix calculator over numbers, run once per row.

    Loads: ``cN`` pushes column N as a number (a null or non-number drops the
    row), ``nX`` pushes the number X. Words (``a`` is popped first, ``b``
    second): ``add``/``+`` b+a, ``sub``/``-`` b-a, ``mult``/``*`` whole b*a,
    ``dmult`` real b*a, ``div``/``/`` whole b/a, ``ddiv`` real b/a, ``rem``/``%``
    (a zero divisor gives 0), ``min``, ``max``, ``log`` (base 10), ``sqrt``,
    ``abs``, ``toi``, ``tof``, ``dup``/``d``, ``swap``/``x``, ``mean`` and
    ``variance`` (of the whole stack); ``set``/``=`` pops a column number and a
    value and sets that column (appends past the end); ``out`` appends the top
    as a new column; ``gt``/``>``, ``gteq``/``>=``, ``lt``/``<``, ``lteq``/``<=``,
    ``eq``/``==`` compare b with a and drop the row when false.

    Example: ``num=n5,c1,rem,n2,set`` sets column 2 to 5 % column 1: rows
    ``A 1`` / ``B 2`` / ``C 3`` become ``A 1 0`` / ``B 2 1`` / ``C 3 2``.
    """

    name = "num"
    aliases = ("math",)
    separator = ","
    arguments = (
        ("c0", "push column 0 (cN: column N)"),
        ("n1", "push the number after n"),
        *((word, "word") for word in sorted(_WORDS)),
        ("set", "set a column: pops column, value"),
        ("out", "append the top as a column"),
        *((word, "keep the row if b compares so with a") for word in _TESTS),
    )

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        self.steps: list[tuple[str, Number | None, int]] = []
        depth = 0
        for word, index in args.split(","):
            kind, number = self._compile(word, index)
            pops = _POPS.get(kind, 0)
            if depth < pops:
                raise args.error(index, f"{word!r} needs {pops} value(s) on the stack")
            depth += _effect(kind, depth)
            step = kind if kind != "test" else "test:" + _test_name(word)
            self.steps.append((step, number, index))

    def _compile(self, word: str, index: int) -> tuple[str, Number | None]:
        if word[:1] == "c" and word[1:].isdigit():
            return "load", int(word[1:])
        if word[:1] == "n" and as_number(word[1:]) is not None:
            return "number", as_number(word[1:])
        name = _ALIASES.get(word, word)
        if name in _WORDS:
            return name, None
        if word in ("set", "=", "s"):
            return "set", None
        if word in ("out", "shiftout"):
            return "out", None
        if _test_name(word):
            return "test", None
        raise self.args.error(index, f"unknown word {word!r}", hint="\\ops num lists the words.")

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Run the program on each row; rows a test rejects are dropped."""
        for row in rows:
            out = self._row(list(row))
            if out is not None:
                yield out

    def _row(self, row: Row) -> Row | None:
        stack: _Stack = []
        for kind, number, _index in self.steps:
            if kind == "load":
                assert isinstance(number, int)
                value = as_number(cell(row, number))
                if value is None:
                    return None
                stack.append(value)
            elif kind == "number":
                assert number is not None
                stack.append(number)
            elif kind == "set":
                column, value = int(stack.pop()), stack.pop()
                set_cell(row, column, value)
            elif kind == "out":
                row.append(stack.pop())
            elif kind.startswith("test:"):
                a, b = stack.pop(), stack.pop()
                if not _TESTS[kind[5:]](b, a):
                    return None
            else:
                _WORDS[kind](stack)
        return row


def _test_name(word: str) -> str:
    name = _TEST_ALIASES.get(word, word)
    if name.startswith("d") and name[1:] in _TESTS:
        name = name[1:]
    return name if name in _TESTS else ""


def _effect(kind: str, depth: int) -> int:
    """How the stack depth changes."""
    if kind in ("load", "number", "dup"):
        return 1
    if kind in ("mean", "variance"):
        return 1 - depth
    if kind in ("log", "sqrt", "abs", "toi", "tof", "swap"):
        return 0
    if kind == "out":
        return -1
    return -2 if kind in ("set", "test") else -1
