"""Table ops: they read all their input before their first output row.

``sort`` on rows holds at most :data:`SORT_BUDGET_ROWS` rows in memory: past that it
writes sorted runs to temporary files and merges them. On column chunks (text columns
sorted as text, whole-number columns as numbers) it sorts the Arrow columns in memory,
which hold a row in a few bytes per value, with no budget.
"""

from __future__ import annotations

import heapq
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgpack
import pyarrow as pa
import pyarrow.compute as pc

from query.ops.base import (
    LARGEST_WHOLE,
    Op,
    OpArgs,
    Row,
    Value,
    as_number,
    as_text,
    cell,
    column_number,
    set_cell,
    whole_argument,
)
from query.ops.columns import Chunk
from treestore.settings import env_number

__all__ = [
    "SORT_BUDGET_ROWS",
    "MedianOp",
    "PercentRankOp",
    "RangeOp",
    "ReverseOp",
    "RmSingOp",
    "SortOp",
    "TransOp",
]

SORT_BUDGET_ROWS: int | None = None
"""Rows ``sort`` holds in memory (``None``: ``TREESTORE_SORT_ROWS``, default 200,000)."""
"""Rows a sort keeps in memory before it spills sorted runs to disk."""


class _Descending:
    """Inverts the order of a key part (for descending columns of any type)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: _Descending) -> bool:
        return bool(other.value < self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and self.value == other.value

    __hash__ = None  # type: ignore[assignment]


class SortOp(Op):
    """sort=COLS[:TYPES[:DIRS]] : sort rows by columns (default 0); spills to disk when large.

    COLS are comma-separated column numbers. TYPES has one letter per column:
    ``s`` text (default), ``n``/``i``/``l`` whole number, ``d``/``f`` real
    number; DIRS one letter per column: ``a`` ascending (default), ``d``
    descending. A short TYPES or DIRS repeats its first letter. Nulls (and
    non-numbers in number columns) sort last ascending, first descending.
    Equal rows keep their input order.

    Example: ``sort=0,1,2:nsn:add`` orders ``0 A 3`` / ``1 A 1`` / ``1 B 2`` /
    ``0 A 5`` as ``0 A 5`` / ``0 A 3`` / ``1 B 2`` / ``1 A 1``.
    """

    name = "sort"
    keeps_columns = True
    aliases = ("dsort",)
    table = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        parts = args.text.split(":") if args.text else ["0"]
        if len(parts) > 3:
            raise args.error(0, "expected COLS[:TYPES[:DIRS]]")
        self.columns = [column_number(args, text, index) for text, index in _split(parts[0])]
        count = len(self.columns)
        types = parts[1] if len(parts) > 1 and parts[1] else "s"
        dirs = parts[2] if len(parts) > 2 and parts[2] else "a"
        self.types = (types + types[0] * count)[:count]
        self.descending = [d == "d" for d in (dirs + dirs[0] * count)[:count]]
        self._check_letters(parts)
        self.budget = SORT_BUDGET_ROWS or int(
            env_number("TREESTORE_SORT_ROWS", 200_000, whole=True)
        )

    def _check_letters(self, parts: list[str]) -> None:
        """Hydra sorts an unknown type as text and an unknown direction ascending: warn."""
        start = len(parts[0]) + 1
        for position, letter in enumerate(parts[1] if len(parts) > 1 else ""):
            if letter not in "snildf":
                self.warn(
                    start + position,
                    f"unknown sort type {letter!r}: the column sorts as text",
                    hint="Types: s text, n/i/l whole numbers, d/f real numbers.",
                )
        start += len(parts[1]) + 1 if len(parts) > 1 else 0
        for position, letter in enumerate(parts[2] if len(parts) > 2 else ""):
            if letter not in "ad":
                self.warn(
                    start + position,
                    f"unknown sort direction {letter!r}: the column sorts ascending",
                    hint="Directions: a ascending, d descending.",
                )

    def _key(self, row: Row) -> tuple[Any, ...]:
        parts: list[Any] = []
        for column, kind, down in zip(self.columns, self.types, self.descending, strict=True):
            if column >= len(row):
                self.warn(
                    0,
                    f"column {column} is past the row ({len(row)} columns): it sorts as null",
                    hint="Column numbers start at 0.",
                )
            value = cell(row, column)
            if kind in "nildf":
                value = as_number(value)
            else:
                value = None if value is None else as_text(value)
            part = (1, 0) if value is None else (0, value)  # nulls after everything
            parts.append(_Descending(part) if down else part)
        return tuple(parts)

    def column_types(self, types: list[str]) -> list[str] | None:
        """Columns when every sorted column is text sorted as text or whole numbers sorted
        as numbers; rows otherwise."""
        for column, kind in zip(self.columns, self.types, strict=True):
            have = types[column] if column < len(types) else None
            if not ((have == "str" and kind == "s") or (have == "int" and kind in "nil")):
                return None
        return types

    def run_columns(self, chunks: Iterator[Chunk]) -> Iterator[Chunk]:
        """Read every chunk, then one stable Arrow sort (nulls last ascending, first
        descending, as on rows)."""
        parts = [chunk for chunk in chunks if chunk[0]]
        if not parts:
            return
        width = len(parts[0][1])
        table = pa.table(
            [pa.chunked_array([cs[i] for _, cs in parts]) for i in range(width)],
            names=[f"c{i}" for i in range(width)],
        )
        keys = [
            (f"c{c}", "descending", "at_start") if down else (f"c{c}", "ascending", "at_end")
            for c, down in zip(self.columns, self.descending, strict=True)
        ]
        order = pc.sort_indices(table, keys)
        sorted_table = table.take(order).combine_chunks()
        yield sorted_table.num_rows, [column.chunk(0) for column in sorted_table.columns]

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Sort; past the memory budget, merge sorted runs from disk."""
        chunk: list[tuple[tuple[Any, ...], int, Row]] = []
        spilled: list[Any] = []
        try:
            for order, row in enumerate(rows):
                chunk.append((self._key(row), order, row))
                if len(chunk) >= self.budget:
                    spilled.append(_spill(sorted(chunk, key=_first_two)))
                    chunk = []
            chunk.sort(key=_first_two)
            if not spilled:
                for _key, _order, row in chunk:
                    yield row
                return
            streams = [_read_run(handle, self._key) for handle in spilled]
            streams.append(iter(chunk))
            for _key, _order, row in heapq.merge(*streams, key=_first_two):
                yield row
        finally:
            for handle in spilled:
                handle.close()


def _first_two(item: tuple[tuple[Any, ...], int, Row]) -> tuple[tuple[Any, ...], int]:
    return item[0], item[1]


def _spill(items: list[tuple[tuple[Any, ...], int, Row]]) -> Any:
    """Write a sorted run of (order, row) pairs to a temporary file; return it rewound."""
    # the file outlives this function: the sort closes it when its merge is done
    handle = tempfile.TemporaryFile(prefix="treestore-sort-")  # noqa: SIM115
    packer = msgpack.Packer()
    for _key, order, row in items:
        handle.write(packer.pack((order, row)))
    handle.seek(0)
    return handle


def _read_run(
    handle: Any, key: Callable[[Row], tuple[Any, ...]]
) -> Iterator[tuple[tuple[Any, ...], int, Row]]:
    for order, row in msgpack.Unpacker(handle, use_list=True):
        yield key(row), order, row


def _split(text: str) -> list[tuple[str, int]]:
    pieces, start = [], 0
    for part in text.split(","):
        pieces.append((part, start))
        start += len(part) + 1
    return pieces


class ReverseOp(Op):
    """reverse : the rows in reverse order.

    Example: ``a`` / ``b`` / ``c`` becomes ``c`` / ``b`` / ``a``.
    """

    name = "reverse"
    keeps_columns = True
    table = True

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Reverse."""
        yield from reversed(list(rows))


class RangeOp(Op):
    """range=B[,E] : rows B up to (not including) E; negative values count from the end.

    E defaults to the end; E <= 0 counts back from the end. Examples:
    ``range=2`` drops the first 2 rows, ``range=-3`` keeps the last 3,
    ``range=0,-1`` drops the last row.
    """

    name = "range"
    keeps_columns = True
    table = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        parts = args.split(",")
        if not 1 <= len(parts) <= 2:
            raise args.error(0, "expected B or B,E")
        numbers = [
            whole_argument(args, text, index, "a row number", smallest=-LARGEST_WHOLE)
            for text, index in parts
        ]
        self.begin = numbers[0]
        self.end = numbers[1] if len(numbers) > 1 else 0

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """The window of rows."""
        table = list(rows)
        size = len(table)
        begin = max(0, size + self.begin) if self.begin < 0 else self.begin
        end = size + self.end if self.end <= 0 else self.end
        if end < begin:
            begin, end = end, begin
        yield from table[begin : min(end, size)]


class MedianOp(Op):
    """median : the middle row (index size/2) in the current order; sort first for a median.

    Example: ``sort=1:n;median`` gives the row with the median of column 1.
    """

    name = "median"
    keeps_columns = True
    table = True

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """The middle row (nothing for no rows)."""
        table = list(rows)
        if table:
            yield table[len(table) // 2]


class TransOp(Op):
    """trans : transpose: output row i is input column i (short rows leave nulls).

    Example: ``a 1`` / ``b 2`` becomes ``a b`` / ``1 2``.
    """

    name = "trans"
    aliases = ("t",)
    table = True

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Transpose."""
        table = list(rows)
        width = max((len(r) for r in table), default=0)
        for column in range(width):
            yield [cell(row, column) for row in table]


class PercentRankOp(Op):
    """percentrank=IN:OUT : column OUT gets the percentile rank of column IN's number.

    rank = (1 + the index of the value's first occurrence in ascending order) /
    the row count, so ties share the lowest rank. Rows whose IN is not a
    number are dropped. Example: ``a 8`` / ``b 1`` / ``c 7`` / ``d 2`` with
    ``percentrank=1:2`` get 1.0, 0.25, 0.75, 0.5.
    """

    name = "percentrank"
    keeps_columns = True
    table = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        source, colon, target = args.text.partition(":")
        if not colon:
            raise args.error(len(source), "expected IN:OUT")
        self.source = column_number(args, source, 0)
        self.target = column_number(args, target, len(source) + 1)

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Rank."""
        table = [
            (row, number)
            for row in rows
            if (number := as_number(cell(row, self.source))) is not None
        ]
        ordered = sorted(number for _, number in table)
        first: dict[int | float, int] = {}
        for index, number in enumerate(ordered):
            first.setdefault(number, index)
        for row, number in table:
            yield set_cell(list(row), self.target, (1 + first[number]) / len(table))


class RmSingOp(Op):
    """rmsing[=KEY:VAL] : drop runs of adjacent rows with one key whose VAL never differs.

    Defaults 0:1. Example: ``a 1`` / ``a 2`` / ``b 1`` / ``b 1`` / ``c 3`` keeps
    ``a 1`` / ``a 2``.
    """

    name = "rmsing"
    keeps_columns = True
    table = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        key, _, value = (args.text or "0:1").partition(":")
        self.key = column_number(args, key, 0)
        self.value = column_number(args, value or "1", len(key) + 1)

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Keep runs with more than one distinct value."""
        run: list[Row] = []
        current: Value = object()  # type: ignore[assignment]
        for row in [*rows, None]:
            key = None if row is None else (cell(row, self.key))
            if row is None or key != current:
                values = {as_text(cell(r, self.value)) for r in run}
                if len(values) > 1:
                    yield from run
                run, current = [], key
            if row is not None:
                run.append(row)
