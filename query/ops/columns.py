"""Rows as typed Arrow columns, for ops that run on whole chunks instead of row by row.

A chunk is ``(rows, columns)``: its row count and one Arrow array per column.
The column engine gives every column a static type, known before any row
exists: ``"str"`` (names, joined values) or ``"int"`` (hits, node counts), each
possibly null, or ``"null"`` (a column past the rows' end). An op that can work
on chunks says so by returning its output types from ``column_types``; ops
after the first one that cannot run on rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from treestore.arrays import distinct_sorted, unique_first_inverse

__all__ = [
    "ARROW_FOLDS",
    "ARROW_TYPES",
    "Chunk",
    "ColumnType",
    "Items",
    "as_text_column",
    "column_at",
    "distinct_items",
    "distinct_items_of",
    "encode_key",
    "first_seen_groups",
    "fold_groups",
    "group_starts",
    "join_groups",
    "rows_of",
    "whole_runs",
]

Chunk = tuple[int, list[pa.Array]]
ColumnType = str
ARROW_TYPES: dict[ColumnType, pa.DataType] = {
    "str": pa.string(),
    "int": pa.int64(),
    "null": pa.null(),
}


def rows_of(chunks: Iterator[Chunk]) -> Iterator[list[Any]]:
    """The chunks' rows, as lists (what row ops take)."""
    for count, columns in chunks:
        if not columns:
            for _ in range(count):
                yield []
            continue
        yield from map(list, zip(*(c.to_pylist() for c in columns), strict=True))


def column_at(columns: list[pa.Array], index: int, rows: int) -> pa.Array:
    """Column ``index`` of a chunk, or nulls when the chunk's rows are narrower."""
    return columns[index] if index < len(columns) else pa.nulls(rows)


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
        if key.type == pa.null():
            continue  # every value null: one run
        before, after = key.slice(0, rows - 1), key.slice(1)
        changed = pc.fill_null(pc.not_equal(after, before), False).to_numpy(zero_copy_only=False)
        nulls = pc.is_null(after).to_numpy(zero_copy_only=False) != pc.is_null(before).to_numpy(
            zero_copy_only=False
        )
        differs[1:] |= changed | nulls
    return np.flatnonzero(differs)


def whole_runs(
    chunks: Iterator[Chunk], keys_of: Callable[[list[pa.Array], int], list[pa.Array]]
) -> Iterator[tuple[int, list[pa.Array], np.ndarray]]:
    """The chunks regrouped so that no run of rows with equal keys (``keys_of(columns,
    rows)``) is split: ``(rows, columns, starts)`` blocks, ``starts`` where each run
    begins. A chunk's last run waits for the next chunk; a run that spans many chunks
    is put together once, when it ends (not copied again for every chunk)."""
    held: list[Chunk] = []  # the pieces of the open run
    held_rows = 0
    for rows, columns in chunks:
        if not rows:
            continue
        starts = group_starts(keys_of(columns, rows), rows)
        if held and not _continues(held[-1], (rows, columns), keys_of):
            new_runs = starts  # the chunk's first row closes the held run
        else:
            new_runs = starts[1:]
        if not len(new_runs):  # the whole chunk goes on with the open run
            held.append((rows, columns))
            held_rows += rows
            continue
        last = int(new_runs[-1])
        pieces = [*held, (last, [c.slice(0, last) for c in columns])]
        block = [pa.concat_arrays([cs[i] for _, cs in pieces]) for i in range(len(columns))]
        yield held_rows + last, block, np.concatenate([[0], new_runs[:-1] + held_rows])
        held, held_rows = [(rows - last, [c.slice(last) for c in columns])], rows - last
    if held_rows:
        width = len(held[0][1])
        block = [pa.concat_arrays([cs[i] for _, cs in held]) for i in range(width)]
        yield held_rows, block, np.zeros(1, dtype=np.int64)


def _continues(
    before: Chunk, after: Chunk, keys_of: Callable[[list[pa.Array], int], list[pa.Array]]
) -> bool:
    """Whether ``after``'s first row has the keys of ``before``'s last row."""
    rows, columns = before
    pair = [
        pa.concat_arrays([a.slice(rows - 1, 1), b.slice(0, 1)])
        for a, b in zip(columns, after[1], strict=True)
    ]
    return len(group_starts(keys_of(pair, 2), 2)) == 1


def join_groups(values: pa.Array, starts: np.ndarray) -> pa.Array:
    """Per group (rows ``starts[k]`` up to the next start), its non-null values joined by
    ``,``; null for a group without any."""
    text = values.cast(pa.string())
    present = pc.is_valid(text).to_numpy(zero_copy_only=False)
    counts = np.add.reduceat(present.astype(np.int64), starts) if len(starts) else starts
    offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
    joined = pc.binary_join(pa.ListArray.from_arrays(offsets, text.filter(pa.array(present))), ",")
    return pc.if_else(pa.array(counts > 0), joined, pa.scalar(None, pa.string()))


def encode_key(key: pa.Array) -> pa.DictionaryArray:
    """One chunk of a key column as dictionary codes in the order values first appear
    (nulls stay null): what :func:`first_seen_groups` takes, computed as chunks arrive."""
    if key.type == pa.null():
        return pa.DictionaryArray.from_arrays(
            pa.nulls(len(key), pa.int32()), pa.array([], pa.string())
        )
    return pc.dictionary_encode(key)


def first_seen_groups(
    keys: list[list[pa.DictionaryArray]], rows: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each of ``rows`` rows' group (rows with equal keys; all rows when there is no key),
    numbered in the order groups first appear, and the first row of each group; ``keys``
    holds each key column's chunks as :func:`encode_key` gave them."""
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    combined = np.zeros(rows, dtype=np.int64)
    for chunks in keys:
        unified = pa.chunked_array(chunks).unify_dictionaries()
        size = len(unified.chunk(0).dictionary) if unified.num_chunks else 0
        codes = np.concatenate(
            [pc.fill_null(c.indices, size).to_numpy(zero_copy_only=False) for c in unified.chunks]
        ).astype(np.int64)  # a null key is one more value, coded past the others
        if int(combined.max()) * (size + 1) + size >= 1 << 62:  # would overflow: renumber
            combined = unique_first_inverse(combined)[2]
        combined = combined * (size + 1) + codes
    if len(keys) <= 1:  # codes below the dictionary's size + 1: no sort needed
        first = np.full(int(combined.max()) + 1, rows, dtype=np.int64)
        np.minimum.at(first, combined, np.arange(rows))
        seen = np.flatnonzero(first < rows)
        order = seen[np.argsort(first[seen], kind="stable")]
        rank = np.empty(len(first), dtype=np.int64)
        rank[order] = np.arange(len(order))
        return rank[combined], first[order]
    _, first, inverse = np.unique(combined, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[inverse], first[order]


@dataclass(frozen=True)
class Items:
    """One chunk of a column as ``J`` reads it: its non-empty comma-separated items as
    dictionary codes, and the row (in the chunk) each item came from."""

    codes: pa.DictionaryArray
    rows: np.ndarray
    count: int
    """The chunk's rows."""

    @classmethod
    def of(cls, values: pa.Array) -> Items:
        """Split ``values`` at commas, drop empty items, encode the rest."""
        text = values.cast(pa.string())
        if len(text) and pc.any(pc.match_substring(text, ",")).as_py():
            lists = pc.split_pattern(text, ",")
            rows = pc.list_parent_indices(lists).to_numpy()
            text = pc.list_flatten(lists)
        else:
            rows = np.arange(len(text))
        present = pc.fill_null(pc.not_equal(text, ""), False).to_numpy(zero_copy_only=False)
        if not present.all():
            text, rows = text.filter(pa.array(present)), rows[present]
        return cls(pc.dictionary_encode(text), rows, len(values))


def distinct_items(values: pa.Array, group: np.ndarray, groups: int) -> pa.Array:
    """Per group, the distinct non-empty comma-separated items of its values, sorted as
    text and joined by ``,``; null for a group without any (merge's and gather's ``J``)."""
    return distinct_items_of([Items.of(values)], group, groups)


def distinct_items_of(parts: list[Items], group: np.ndarray, groups: int) -> pa.Array:
    """:func:`distinct_items` of a column whose consecutive chunks gave ``parts``
    (``group`` numbers the rows of all the chunks).

    Each (group, item) pair is one number, ``group * width + the item's rank in text
    order``, in int32 when that fits (half the memory traffic); one numpy sort drops the
    repeats and orders every group's items, and each group's stretch is found by binary
    search, with no division per pair."""
    unified = pa.chunked_array([p.codes for p in parts], parts[0].codes.type)
    unified = unified.unify_dictionaries()
    dictionary = unified.chunk(0).dictionary if unified.num_chunks else pa.array([], pa.string())
    ordered = pc.array_sort_indices(dictionary).to_numpy()
    width = max(1, len(ordered))
    kind = np.int32 if groups * width < 1 << 31 else np.int64
    rank = np.empty(width, dtype=kind)
    rank[ordered] = np.arange(len(ordered), dtype=kind)
    group = group.astype(kind, copy=False)
    pieces = []
    start = 0
    for part, chunk in zip(parts, unified.chunks, strict=True):
        owners = group[part.rows + start] if len(part.rows) else group[:0]
        codes = chunk.indices.to_numpy(zero_copy_only=False)
        pieces.append(owners * width + rank[codes])
        start += part.count
    pairs = distinct_sorted(np.concatenate(pieces) if pieces else np.zeros(0, kind))
    bounds = np.searchsorted(pairs, np.arange(groups + 1, dtype=np.int64) * width)
    counts = np.diff(bounds)
    items = pairs - np.repeat(np.arange(groups, dtype=kind) * width, counts)
    offsets = pa.array(bounds.astype(np.int32))
    texts = dictionary.take(pa.array(ordered)).take(pa.array(items))
    joined = pc.binary_join(pa.ListArray.from_arrays(offsets, texts), ",")
    return pc.if_else(pa.array(counts > 0), joined, pa.scalar(None, pa.string()))


ARROW_FOLDS = {"s": "sum", "m": "min", "M": "max", "c": "count_distinct"}
"""merge's and gather's letters that Arrow's grouped aggregation computes as the rows do
(``s``, ``m``, ``M`` on whole numbers only)."""


def fold_groups(values: pa.Array, group: np.ndarray, groups: int, fold: str) -> pa.Array:
    """Arrow's grouped ``fold`` of ``values`` by ``group`` (0 to ``groups`` - 1), nulls
    skipped: null where a group has no value (``count_distinct``: 0)."""
    if values.type == pa.null():
        if fold == "count_distinct":
            return pa.array(np.zeros(groups, dtype=np.int64))
        return pa.nulls(groups, pa.int64())
    table = pa.table({"g": pa.array(group), "v": values})
    folded = table.group_by("g", use_threads=False).aggregate([("v", fold)])
    position = np.full(groups, -1, dtype=np.int64)
    position[folded.column("g").to_numpy()] = np.arange(folded.num_rows)
    return folded.column(f"v_{fold}").combine_chunks().take(pa.array(position))
