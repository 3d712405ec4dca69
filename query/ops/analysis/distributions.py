"""Distributions of a column: ``ftable``, ``histo2`` and ``distribution``."""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Iterable, Iterator

from query.ops.base import (
    Op,
    OpArgs,
    Row,
    Value,
    as_number,
    as_text,
    cell,
    column_number,
    to_long,
    whole_argument,
)

__all__ = ["DistributionOp", "FrequencyTable", "FrequencyTableOp", "HistogramOp"]


def _whole(value: Value) -> int:
    number = as_number(value)
    return 0 if number is None else to_long(number)


def _java_round(value: float) -> int:
    """Java's ``Math.round``: halves go up."""
    return math.floor(value + 0.5)


class FrequencyTable:
    """Counts of whole values, asked for the value nearest a percentile (Hydra's FTable)."""

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.total = 0

    def update(self, value: int, frequency: int) -> None:
        """Count ``value`` ``frequency`` more times."""
        self.counts[value] = self.counts.get(value, 0) + frequency
        self.total += frequency

    def nearest_percentile(self, fraction: float) -> int:
        """The smallest value whose running count reaches ``fraction`` of the total (-1: none)."""
        target = max(0, _java_round(fraction * self.total))
        running = 0
        for value in sorted(self.counts):
            running += self.counts[value]
            if running >= target:
                return value
        return -1


class FrequencyTableOp(Op):
    """ftable=KEYS:VALUE,FREQ:P1,P2,... : percentiles of a frequency table per key.

    Rows are read as a value (column VALUE) seen FREQ times (both whole numbers);
    adjacent rows with equal KEYS cells form one table. Each table gives one row:
    its first row without the VALUE and FREQ columns, then for each P the value
    at that percentile (``total`` there: the total frequency). As in Hydra, a
    null key cell never equals anything.
    Example: ``ftable=0,1:2,3:0.5,0.75`` on ``q w 1 1`` / ``q w 2 20`` /
    ``C D 3 30`` / ``C D 20 1`` gives ``q w 2 2`` / ``C D 3 3``.
    """

    name = "ftable"
    table = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        parts = args.text.split(":")
        if len(parts) != 3:
            raise args.error(
                0, "expected KEYS:VALUE,FREQ:P1,...", hint="For example ftable=0:1,2:0.5."
            )
        starts = [0, len(parts[0]) + 1, len(parts[0]) + len(parts[1]) + 2]
        self.keys = [column_number(args, k, starts[0]) for k in parts[0].split(",") if k]
        value_freq = parts[1].split(",")
        if len(value_freq) != 2:
            raise args.error(starts[1], "expected VALUE,FREQ: two column numbers")
        self.value, self.frequency = (column_number(args, c, starts[1]) for c in value_freq)
        self.outputs: list[float | None] = []
        for word in parts[2].split(","):
            number = as_number(word) if word != "total" else None
            if word != "total" and (number is None or not math.isfinite(number)):
                raise args.error(starts[2], f"{word!r} is neither a fraction nor 'total'")
            self.outputs.append(None if word == "total" else float(number or 0))
        self.outputs.sort(key=lambda p: p is not None)  # the total comes first, as in Hydra

    def _same_key(self, a: Row, b: Row) -> bool:
        return all(
            cell(a, k) is not None and as_text(cell(a, k)) == as_text(cell(b, k)) for k in self.keys
        ) and all(cell(b, k) is not None for k in self.keys)

    def _summary(self, row: Row, table: FrequencyTable) -> Row:
        dropped = {self.value, self.frequency}
        out = [v for i, v in enumerate(row) if i not in dropped]
        for fraction in self.outputs:
            out.append(table.total if fraction is None else table.nearest_percentile(fraction))
        return out

    def _count(self, table: FrequencyTable, row: Row) -> None:
        table.update(_whole(cell(row, self.value)), _whole(cell(row, self.frequency)))

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """One row per run of equal keys."""
        table_rows = [list(row) for row in rows]
        if not table_rows:
            return
        on_deck = table_rows[0]
        table = FrequencyTable()
        for index, row in enumerate(table_rows):
            last = index == len(table_rows) - 1
            same = self._same_key(on_deck, row)
            if same:
                self._count(table, row)
            if same and not last:
                continue
            yield self._summary(on_deck, table)
            if on_deck is not row:
                table = FrequencyTable()
                self._count(table, row)
            on_deck = row
            if last and not same:
                yield self._summary(on_deck, table)


class HistogramOp(Op):
    """histo2=C[:F],B1,B2,... : count column C's values into buckets bounded by B1, B2...

    The boundaries (at least two) are sorted; a value falls into the bucket of
    the largest boundary not above it, values below B1 into a first bucket whose
    bound is the smallest 32-bit integer (or ``-Infinity`` when a boundary has a
    ``.``, which makes the buckets real-numbered). With ``:F`` each row counts
    column F times. Gives one row per bucket: its lower bound and its count;
    rows without a number in C are not counted.
    Example: ``histo2=1,2,4`` over 1, 2, 3, 4, 5 gives ``-2147483648 1`` /
    ``2 2`` / ``4 2``.
    """

    name = "histo2"
    table = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        columns, comma, bounds = args.text.partition(",")
        if not comma:
            raise args.error(len(columns), "expected C,B1,B2,...", hint="For example histo2=1,2,4.")
        column, colon, frequency = columns.partition(":")
        self.column = column_number(args, column, 0)
        self.frequency = column_number(args, frequency, len(column) + 1) if colon else None
        self.real = "." in bounds
        values = []
        for word in bounds.split(","):
            number = as_number(word)
            if number is None or not math.isfinite(number):
                raise args.error(len(columns) + 1, f"{word!r} is not a finite number")
            values.append(float(number) if self.real else to_long(number))
        if len(values) < 2:
            raise args.error(len(columns) + 1, "at least two boundaries are needed")
        lowest: int | float = -math.inf if self.real else -(2**31)
        self.bounds: list[int | float] = [lowest, *sorted(values)]

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """The buckets, after all the rows."""
        counts = [0] * len(self.bounds)
        for row in rows:
            number = as_number(cell(row, self.column))
            if number is None:
                continue
            target = float(number) if self.real else to_long(number)
            step = 1 if self.frequency is None else _whole(cell(row, self.frequency))
            counts[max(0, bisect.bisect_right(self.bounds, target) - 1)] += step
        for bound, count in zip(self.bounds, counts, strict=True):
            yield [bound, count]


_PERCENTILES = (
    (".5", 0.5),
    (".75", 0.75),
    (".95", 0.95),
    (".98", 0.98),
    (".99", 0.99),
    (".999", 0.999),
)


class DistributionOp(Op):
    """distribution=C[,SIZE] : percentiles of column C's whole numbers.

    Keeps a uniform sample of at most SIZE values (default 1028; past that a
    reservoir sample, drawn with a fixed seed so answers repeat) and gives six
    rows: ``.5``, ``.75``, ``.95``, ``.98``, ``.99`` and ``.999`` with the value
    there, interpolated between neighbours as Hydra's metrics library does.
    Example: ``distribution=1,5`` over 0, 1, 2, 3, 4 gives ``.5 2.0`` /
    ``.75 3.5`` / ``.95 4.0`` / ``.98 4.0`` / ``.99 4.0`` / ``.999 4.0``.
    """

    name = "distribution"
    table = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        column, comma, size = args.text.partition(",")
        self.column = column_number(args, column, 0)
        self.size = (
            whole_argument(args, size, len(column) + 1, "the sample size") if comma else 1028
        )
        if self.size < 1:
            raise args.error(len(column) + 1, "the sample size must be at least 1")

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """The six percentile rows, after all the rows."""
        sample: list[int] = []
        draw = random.Random(0)
        for seen, row in enumerate(rows):
            value = _whole(cell(row, self.column))
            if len(sample) < self.size:
                sample.append(value)
            else:
                slot = draw.randrange(seen + 1)
                if slot < self.size:
                    sample[slot] = value
        sample.sort()
        for label, quantile in _PERCENTILES:
            yield [label, _quantile(sample, quantile)]


def _quantile(values: list[int], quantile: float) -> float:
    """The value at ``quantile``, interpolated between the two nearest sorted values."""
    if not values:
        return 0.0
    position = quantile * (len(values) + 1)
    if position < 1:
        return float(values[0])
    if position >= len(values):
        return float(values[-1])
    lower, upper = values[int(position) - 1], values[int(position)]
    return lower + (position - math.floor(position)) * (upper - lower)
