"""``num`` (alias ``math``): a postfix (RPN) calculator over numbers, run once per row."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Iterator

from query.ops.base import (
    MOST_COLUMNS,
    Op,
    OpArgs,
    Row,
    as_number,
    cell,
    to_long,
    whole_argument,
)

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


def _long(number: Number) -> Number:
    """A whole result wrapped into Java's ``long`` (64 bits, as Hydra's sums overflow); a
    real one as it is."""
    if isinstance(number, float):
        return number
    return (number + 2**63) % 2**64 - 2**63


def _whole_div(b: Number, a: Number) -> Number:
    """Java's long division: both sides truncated to whole numbers, the quotient toward 0."""
    whole_b, whole_a = to_long(b), to_long(a)
    if whole_a == 0:
        return 0
    quotient = abs(whole_b) // abs(whole_a)
    return quotient if (whole_b < 0) == (whole_a < 0) else -quotient


def _whole_rem(b: Number, a: Number) -> Number:
    """Java's long remainder: the sign follows the dividend."""
    whole_b, whole_a = to_long(b), to_long(a)
    if whole_a == 0:
        return 0
    return whole_b - whole_a * _whole_div(whole_b, whole_a)


def _log10(a: Number) -> float:
    if a > 0:
        return math.log10(a)
    return -math.inf if a == 0 else math.nan


def _smaller_first_on_tie(b: Number, a: Number) -> Number:
    """Hydra's ``maxif``: pushes the top value ``a`` unless ``b`` is smaller."""
    return a if min(a, b) == a else b


def _larger_first_on_tie(b: Number, a: Number) -> Number:
    """Hydra's ``minif``: pushes the top value ``a`` unless ``b`` is larger."""
    return a if max(a, b) == a else b


def _swap(stack: _Stack) -> None:
    stack[-1], stack[-2] = stack[-2], stack[-1]


def _whole_stack(function: Callable[[list[Number]], Number]) -> Callable[[_Stack], None]:
    def apply(stack: _Stack) -> None:
        values = list(stack)
        stack.clear()
        stack.append(function(values))

    return apply


_WORDS: dict[str, Callable[[_Stack], None]] = {
    "add": _binary(lambda b, a: _long(b + a)),
    "sub": _binary(lambda b, a: _long(b - a)),
    "mult": _binary(lambda b, a: _long(to_long(b) * to_long(a))),
    "dmult": _binary(lambda b, a: float(b) * a),
    "div": _binary(_whole_div),
    "ddiv": _binary(lambda b, a: 0 if a == 0 else float(b) / a),
    "rem": _binary(_whole_rem),
    "min": _binary(min),
    "max": _binary(max),
    "maxif": _binary(_smaller_first_on_tie),
    "minif": _binary(_larger_first_on_tie),
    "log": _unary(_log10),
    "sqrt": _unary(lambda a: math.sqrt(a) if a >= 0 else math.nan),
    "abs": _unary(lambda a: float(abs(a))),
    "toi": _unary(to_long),
    "tof": _unary(float),
    "dup": lambda stack: stack.append(stack[-1]),
    "swap": _swap,
    "mean": _whole_stack(lambda v: statistics.fmean(v) if v else 0.0),
    "variance": _whole_stack(lambda v: float(statistics.pvariance(v)) if len(v) > 1 else 0.0),
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
"""Plain tests compare whole numbers (truncated, as Hydra's ``asLong``); ``d`` forms reals."""
_TEST_ALIASES = {
    ">": "gt",
    ">=": "gteq",
    "<": "lt",
    "<=": "lteq",
    ">>": "dgt",
    ">>=": "dgteq",
    "<<": "dlt",
    "<<=": "dlteq",
    "==": "deq",
}
# the values each word needs on the stack
_POPS = {**dict.fromkeys(_WORDS, 2), "log": 1, "sqrt": 1, "abs": 1, "toi": 1, "tof": 1}
_POPS.update({"dup": 1, "mean": 1, "variance": 1, "set": 2, "out": 1, "test": 2})


class NumOp(Op):
    """num=WORD,WORD,... : a postfix calculator over numbers, run once per row.

    Loads: ``cN`` pushes column N as a number (a null or non-number drops the
    row; ``c1:2`` pushes columns 1 and 2), ``nX`` and ``vX`` push the number X
    (``v-1``; ``n1:2`` pushes 1 and 2). ``diverr`` anywhere makes a whole
    division by zero an error and a real one infinite, as in Java. Words (``a`` is popped
    first, ``b`` second): ``add``/``+`` b+a, ``sub``/``-`` b-a, ``mult``/``*``
    whole b*a, ``dmult`` real b*a, ``div``/``/`` whole b/a (toward 0), ``ddiv``
    real b/a, ``rem``/``%`` (a zero divisor gives 0), ``min``, ``max``,
    ``maxif`` and ``minif`` (as Hydra's code does, against its Javadoc: ``maxif``
    pushes the smaller of a and b, ``minif`` the larger), ``log`` (base 10),
    ``sqrt``, ``abs``, ``toi``, ``tof``, ``dup``/``d``, ``swap``/``x``, ``mean`` and
    ``variance`` (of the whole stack); ``set``/``=``/``s`` pops a column number
    and a value and sets that column (a column below 0 or past the row's width
    appends); ``out`` appends the top as a new column; ``gt``/``>``,
    ``gteq``/``>=``, ``lt``/``<``, ``lteq``/``<=``, ``eq`` compare b with a as whole
    numbers and drop the row when false; ``dgt``/``>>``, ``dgteq``/``>>=``,
    ``dlt``/``<<``, ``dlteq``/``<<=``, ``deq``/``==`` compare as real numbers.

    Example: ``num=n5,c1,rem,n2,set`` sets column 2 to 5 % column 1: rows
    ``A 1`` / ``B 2`` / ``C 3`` become ``A 1 0`` / ``B 2 1`` / ``C 3 2``.
    """

    name = "num"
    keeps_columns = True
    aliases = ("math",)
    separator = ","
    arguments = (
        ("c0", "push column 0 (cN: column N)"),
        ("n1", "push the number after n"),
        ("v-1", "push the number after v"),
        *((word, "word") for word in sorted(_WORDS)),
        ("set", "set a column: pops column, value"),
        ("out", "append the top as a column"),
        *((word, "keep the row if b compares so with a") for word in _TESTS),
    )

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        self.steps: list[tuple[str, Number | None, int]] = []
        depth = 0
        self.division_errors = False
        pieces = [(piece, index) for word, index in args.split(",") for piece in _expand(word)]
        for word, index in pieces:
            if word == "diverr":
                self.division_errors = True
                continue
            kind, number = self._compile(word, index)
            pops = _POPS.get(kind, 0)
            if depth < pops:
                raise args.error(index, f"{word!r} needs {pops} value(s) on the stack")
            depth += _effect(kind, depth)
            step = kind if kind != "test" else "test:" + _test_name(word)
            self.steps.append((step, number, index))

    def _compile(self, word: str, index: int) -> tuple[str, Number | None]:
        if word[:1] == "c" and word[1:].isascii() and word[1:].isdigit():
            return "load", whole_argument(
                self.args, word[1:], index + 1, "a column number", MOST_COLUMNS - 1
            )
        if word[:1] == "n" and as_number(word[1:]) is not None:
            return "number", as_number(word[1:])
        name = _ALIASES.get(word, word)
        if name in _WORDS:
            return name, None
        if word[:1] == "v":
            value = as_number(word[1:])
            if value is None:
                raise self.args.error(
                    index, f"{word!r}: v must be followed by a number", "Write v2 or v-1."
                )
            return "number", value
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
        width = len(row)
        for kind, number, index in self.steps:
            if kind == "load":
                assert isinstance(number, int)
                if number >= width:
                    self.warn(
                        index,
                        f"column {number} is past the row ({width} columns): the row is dropped",
                        hint="Column numbers start at 0; nX pushes the number X.",
                    )
                value = as_number(cell(row, number))
                if value is None:
                    return None
                stack.append(value)
            elif kind == "number":
                assert number is not None
                stack.append(number)
            elif kind == "set":
                column, value = to_long(stack.pop()), stack.pop()
                if 0 <= column < width:
                    row[column] = value
                else:  # below 0 or past the row's width on arrival: appended, as in Hydra
                    row.append(value)
            elif kind == "out":
                row.append(stack.pop())
            elif kind.startswith("test:"):
                a, b = stack.pop(), stack.pop()
                name = kind[5:]
                if name.startswith("d"):
                    passed = _TESTS[name[1:]](float(b), float(a))
                else:
                    passed = _TESTS[name](to_long(b), to_long(a))
                if not passed:
                    return None
            elif self.division_errors and kind in _DIVISIONS and stack[-1] == 0:
                self._divide_by_zero(kind, index, stack)
            else:
                _WORDS[kind](stack)
        return row

    def _divide_by_zero(self, kind: str, index: int, stack: _Stack) -> None:
        """With ``diverr``: whole division by zero is an error, real division gives inf or NaN."""
        if kind != "ddiv":
            raise self.args.error(index, f"{kind}: division by zero", hint="Drop diverr to get 0.")
        stack.pop()
        dividend = stack.pop()
        stack.append(math.copysign(math.inf, dividend) if dividend else math.nan)


_DIVISIONS = ("div", "rem", "ddiv")


def _expand(word: str) -> list[str]:
    """``c1:2`` is ``c1``, ``c2``; ``n1:2.5`` is ``n1``, ``n2.5`` (as Hydra reads them)."""
    if word[:1] in ("c", "n") and ":" in word:
        return [word[0] + part for part in word[1:].split(":")]
    return [word]


def _test_name(word: str) -> str:
    """The test a word names (``gt``, or ``dgt`` for the real-number form), or ''."""
    name = _TEST_ALIASES.get(word, word)
    base = name[1:] if name.startswith("d") else name
    return name if base in _TESTS else ""


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
