"""Rows as typed Arrow columns, for ops that run on whole chunks instead of row by row.

A chunk is ``(rows, columns)``: its row count and one Arrow array per column.
The column engine gives every column a static type, known before any row
exists: ``"str"`` (names, joined values) or ``"int"`` (hits, node counts), each
possibly null, or ``"null"`` (a column past the rows' end). An op that can work
on chunks says so by returning its output types from ``column_types``; ops
after the first one that cannot run on rows.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "ARROW_TYPES",
    "Chunk",
    "ColumnType",
    "as_text_column",
    "group_starts",
    "join_groups",
    "rows_of",
]

Chunk = tuple[int, list[pa.Array]]
ColumnType = str
ARROW_TYPES: dict[ColumnType, pa.DataType] = {
    "str": pa.string(),
    "int": pa.int64(),
    "null": pa.null(),
}


def rows_of(chunks: Iterator[Chunk]) -> Iterator[list[object]]:
    """The chunks' rows, as lists (what row ops take)."""
    for count, columns in chunks:
        if not columns:
            for _ in range(count):
                yield []
            continue
        yield from map(list, zip(*(c.to_pylist() for c in columns), strict=True))


def as_text_column(value: pa.Array | str | None, rows: int) -> pa.Array | str:
    """A value as the ops see it in string context: text, with null as the empty string."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if value.type == pa.null():
        return ""
    return pc.fill_null(value.cast(pa.string()), "")


def group_starts(keys: list[pa.Array], rows: int) -> np.ndarray:
    """Where each run of rows with equal ``keys`` starts (null equals null)."""
    differs = np.zeros(rows, dtype=bool)
    if rows:
        differs[0] = True
    if rows < 2:
        return np.flatnonzero(differs)
    for key in keys:
        before, after = key.slice(0, rows - 1), key.slice(1)
        changed = pc.fill_null(pc.not_equal(after, before), False).to_numpy(zero_copy_only=False)
        nulls = pc.is_null(after).to_numpy(zero_copy_only=False) != pc.is_null(before).to_numpy(
            zero_copy_only=False
        )
        differs[1:] |= changed | nulls
    return np.flatnonzero(differs)


def join_groups(values: pa.Array, starts: np.ndarray) -> pa.Array:
    """Per group (rows ``starts[k]`` up to the next start), its non-null values joined by
    ``,``; null for a group without any."""
    text = values.cast(pa.string())
    present = pc.is_valid(text).to_numpy(zero_copy_only=False)
    counts = np.add.reduceat(present.astype(np.int64), starts) if len(starts) else starts
    offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
    joined = pc.binary_join(pa.ListArray.from_arrays(offsets, text.filter(pa.array(present))), ",")
    return pc.if_else(pa.array(counts > 0), joined, pa.scalar(None, pa.string()))
