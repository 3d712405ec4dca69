"""Running aggregates: ``sum``, ``min``, ``max``, ``avg`` and ``delta`` down the rows."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from query.ops.base import (
    Op,
    OpArgs,
    Row,
    Value,
    as_number,
    cell,
    column_number,
    to_long,
    with_table_width,
)

__all__ = ["AvgOp", "DeltaOp", "MaxOp", "MinOp", "RollOp", "SumOp"]


class RollOp(Op):
    """Base of the running ops: ``NAME=[i|f][s|S]COLS[:KEYS]``.

    ``i`` whole numbers (default) or ``f`` real numbers; ``s`` writes the
    result over the column, ``S`` passes the rows unchanged and adds one
    summary row at the end (the final values in the columns); by default the
    result is appended as a new column, after the table's width (short rows are
    padded with nulls, as in Hydra's shared row format; so these ops read their
    whole input first). KEYS are columns whose change (between
    adjacent rows) restarts the state. A null counts as nothing for ``sum``
    and is skipped by the others.
    """

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        text = args.text
        start = 0
        self.real = False
        if text[:1] in ("i", "f"):
            self.real, start = text[0] == "f", 1
        self.mode = ""
        if text[start : start + 1] in ("s", "S"):
            self.mode, start = text[start], start + 1
        columns, _, keys = text[start:].partition(":")
        if not columns:
            raise args.error(start, f"expected the columns, e.g. {self.name}=2,3")
        self.columns = [column_number(args, c, start) for c in columns.split(",")]
        self.keys = [column_number(args, k, start) for k in keys.split(",")] if keys else []

    def _number(self, value: Value) -> int | float | None:
        number = as_number(value)
        if number is None:
            return None
        return float(number) if self.real else to_long(number)

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """The rows with their running values."""
        state: list[int | float | None] = [None] * len(self.columns)
        count = [0] * len(self.columns)
        current: tuple[Value, ...] | None = None
        width = 0
        if not self.mode:
            rows, width = with_table_width(rows)
        seen = False
        for row in rows:
            seen = True
            key = tuple(cell(row, k) for k in self.keys)
            if key != current:
                state, count, current = [None] * len(self.columns), [0] * len(self.columns), key
            out = list(row)
            results: list[Value] = []
            for i, column in enumerate(self.columns):
                value = self._number(cell(row, column))
                held = state[i]
                if value is not None:
                    count[i] += 1
                    state[i] = value if held is None else self.fold(held, value, count[i])
                results.append(self.result(state[i], value, count[i], held))
            if self.mode == "s":
                for column, result in zip(self.columns, results, strict=True):
                    out += [None] * max(0, column + 1 - len(out))
                    out[column] = result
            elif not self.mode:
                out += [None] * (width - len(out)) + results
            yield out
        if self.mode == "S" and seen:
            width = max(self.columns) + 1
            summary: Row = [None] * width
            for column, value, n in zip(self.columns, state, count, strict=True):
                summary[column] = self.result(value, None, n, value)
            yield summary

    def fold(self, state: int | float, value: int | float, count: int) -> int | float:
        """The state after ``value`` (the ``count``-th non-null value)."""
        raise NotImplementedError

    def result(
        self, state: int | float | None, value: int | float | None, count: int, before: Any
    ) -> Value:
        """What a row shows: from the state after its value (``before``: the state before)."""
        return state


class SumOp(RollOp):
    """sum=[i|f][s|S]COLS[:KEYS] : running sum of each column (restarting when KEYS change).

    Example: ``sum=1`` on ``a 1`` / ``b 2`` / ``c 3`` appends 1, 3, 6.
    """

    name = "sum"
    keeps_columns = True

    def fold(self, state: int | float, value: int | float, count: int) -> int | float:
        """Add."""
        return state + value

    def result(
        self, state: int | float | None, value: int | float | None, count: int, before: Any
    ) -> Value:
        """A sum of nothing is 0."""
        return 0 if state is None else state


class MinOp(RollOp):
    """min=[i|f][s|S]COLS[:KEYS] : running minimum of each column.

    Example: ``min=1`` on ``a 3`` / ``b 1`` / ``c 2`` appends 3, 1, 1.
    """

    name = "min"
    keeps_columns = True

    def fold(self, state: int | float, value: int | float, count: int) -> int | float:
        """The smaller."""
        return min(state, value)


class MaxOp(RollOp):
    """max=[i|f][s|S]COLS[:KEYS] : running maximum of each column.

    Example: ``max=1`` on ``a 1`` / ``b 3`` / ``c 2`` appends 1, 3, 3.
    """

    name = "max"
    keeps_columns = True

    def fold(self, state: int | float, value: int | float, count: int) -> int | float:
        """The larger."""
        return max(state, value)


class AvgOp(RollOp):
    """avg=[i|f][s|S]COLS[:KEYS] : running average of each column (its non-null values).

    The average restarts with the key (Hydra's kept counting across keys).
    Example: ``avg=f1`` on ``a 1`` / ``b 2`` / ``c 6`` appends 1.0, 1.5, 3.0.
    """

    name = "avg"
    keeps_columns = True

    def fold(self, state: int | float, value: int | float, count: int) -> int | float:
        """Keep the sum; :meth:`result` divides."""
        return state + value

    def result(
        self, state: int | float | None, value: int | float | None, count: int, before: Any
    ) -> Value:
        """Sum / count (whole-number division for ``i``)."""
        if state is None or not count:
            return None
        if self.real:
            return state / count
        quotient = abs(to_long(state)) // count  # Java's long division: toward 0
        return quotient if state >= 0 else -quotient


class DeltaOp(RollOp):
    """delta=[i|f][s|S]COLS[:KEYS] : each value minus the previous one (the first: itself).

    Example: ``delta=1`` on ``a 1`` / ``b 4`` / ``c 6`` appends 1, 3, 2.
    """

    name = "delta"
    keeps_columns = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        if self.mode == "S":
            raise args.error(args.text.index("S"), "delta has no summary row; use s or nothing")

    def fold(self, state: int | float, value: int | float, count: int) -> int | float:
        """Remember the value; :meth:`result` subtracts."""
        return value

    def result(
        self, state: int | float | None, value: int | float | None, count: int, before: Any
    ) -> Value:
        """The value minus the one before it (the first value itself; null for a null)."""
        if value is None:
            return None
        return value if before is None else value - before
