"""Rows as typed Arrow columns, for ops that run on whole chunks instead of row by row.

A chunk is ``(rows, columns)``: its row count and one Arrow array per column.
The column engine gives every column a static type, known before any row
exists: ``"str"`` (names, joined values) or ``"int"`` (hits, node counts), each
possibly null, or ``"null"`` (a column past the rows' end). An op that can work
on chunks says so by returning its output types from ``column_types``; ops
after the first one that cannot run on rows.

Between the ops that take them (``takes_coded``), a column may travel *coded*:
text as a dictionary array (each distinct value once, rows as small codes:
``cross``'s pairs), or ``J``'s distinct items as a list of dictionary codes per
row (``gather``'s), so that a next ``gather`` neither takes strings nor splits
joined text. :func:`plain` turns a coded column into the one it stands for;
:func:`run_on_columns` gives every other op plain columns, and rows, batches
and results leave plain.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from query.ops.chain import chain
from treestore.arrays import expand_ranges, map_in_threads, thread_count, unique_first_inverse

if TYPE_CHECKING:
    from query.ops.base import Op

__all__ = [
    "ARROW_FOLDS",
    "ARROW_TYPES",
    "Chunk",
    "ColumnType",
    "as_text_column",
    "column_at",
    "encode_key",
    "first_seen_groups",
    "fold_groups",
    "group_starts",
    "join_groups",
    "plain",
    "plain_columns",
    "result_arrow_type",
    "rows_of",
    "run_on_columns",
    "unified_chunks",
    "unify_codes",
    "view_sizes",
    "whole_runs",
]

Chunk = tuple[int, list[pa.Array]]
ColumnType = str
ARROW_TYPES: dict[ColumnType, pa.DataType] = {
    "str": pa.string(),
    "int": pa.int64(),
    "null": pa.null(),
}


def result_arrow_type(kind: ColumnType) -> pa.DataType:
    """The type a result's column of ``kind`` is written with (a file, a DataFrame): a
    column of nulls as text, the others as :data:`ARROW_TYPES` says."""
    return pa.string() if kind == "null" else ARROW_TYPES[kind]


def plain(column: pa.Array) -> pa.Array:
    """A coded column as the column it stands for: a dictionary array's values, a list (or
    a list view) of items joined by ``,`` (null for no items); any other column as it is."""
    if isinstance(column, pa.DictionaryArray):
        return column.cast(column.type.value_type)
    if isinstance(column, pa.ListViewArray):
        column = _as_list(column)
    if isinstance(column, pa.ListArray):
        pieces = thread_count(len(column.values))
        bounds = np.linspace(0, len(column), pieces + 1).astype(np.int64)
        slices = [column.slice(a, b - a) for a, b in itertools.pairwise(bounds.tolist())]
        joined = map_in_threads(_joined_items, slices)
        return joined[0] if len(joined) == 1 else pa.concat_arrays(joined)
    return column


def view_sizes(view: pa.ListViewArray) -> np.ndarray:
    """How many items each row of a list view holds (0 for a null row)."""
    return pc.fill_null(pc.list_value_length(view), 0).to_numpy()


def _as_list(view: pa.ListViewArray) -> pa.ListArray:
    """A list view as a list array: each row's items copied out in row order."""
    sizes = view_sizes(view)
    items = view.values.take(pa.array(expand_ranges(view.offsets.to_numpy(), sizes)))
    bounds = pa.array(np.concatenate([[0], np.cumsum(sizes)]), pa.int32())
    return pa.ListArray.from_arrays(bounds, items, mask=view.is_null() if view.null_count else None)


def _joined_items(items: pa.ListArray) -> pa.Array:
    """Each row's items joined by ``,`` (null for a null row)."""
    values = items.values
    if (
        isinstance(values, pa.DictionaryArray)
        and pa.types.is_string(values.dictionary.type)
        and not values.null_count
        and not values.dictionary.null_count
    ):
        return _joined_codes(items, values)
    return pc.binary_join(items.cast(pa.list_(pa.string())), ",")


def _joined_codes(items: pa.ListArray, values: pa.DictionaryArray) -> pa.Array:
    """:func:`_joined_items` of lists of dictionary codes, in one take: each item is taken
    as its word and a comma, except each row's last item, taken as its word alone, so
    the taken text is every row's joined text one after the other; the rows are cut
    out of it by the item offsets (no list of texts is made, no second copy)."""
    words = values.dictionary
    bounds = items.offsets.to_numpy()
    first = int(bounds[0])
    wide = np.int32 if 2 * len(words) < 1 << 31 else np.int64
    codes = values.indices.to_numpy()[first : int(bounds[-1])].astype(wide)
    ends = bounds[1:] - first
    filled = ends > bounds[:-1] - first
    codes[ends[filled] - 1] += len(words)
    both = pa.concat_arrays([pc.binary_join_element_wise(words, "", ","), words])
    longest = int(pc.max(pc.binary_length(words)).as_py() or 0) + 1
    if longest * len(codes) >= 1 << 31:
        both = both.cast(pa.large_string())
    taken = both.take(pa.array(codes))
    kind = np.int64 if pa.types.is_large_string(taken.type) else np.int32
    at = np.frombuffer(taken.buffers()[1], kind, len(taken) + 1, taken.offset * kind().itemsize)
    valid = items.is_valid().buffers()[1] if items.null_count else None  # a new array: offset 0
    return pa.Array.from_buffers(
        taken.type,
        len(items),
        [valid, pa.py_buffer(at[bounds - first]), taken.buffers()[2]],
        items.null_count,
    )


def plain_columns(columns: Iterable[pa.Array]) -> list[pa.Array]:
    """:func:`plain` of every column."""
    return [plain(column) for column in columns]


def run_on_columns(
    ops: Iterable[Op], chunks: Iterator[Chunk], plain_output: bool = False
) -> Iterator[Chunk]:
    """``ops`` run one after the other on ``chunks`` (any number of them, see
    :func:`query.ops.chain.chain`); an op that does not take coded columns is given plain
    ones. The chunks that come out may be coded; with ``plain_output`` (for a reader that
    makes them plain anyway), the last op may give plain columns where it makes them more
    cheaply than coded ones (:attr:`~query.ops.base.Op.gives_plain`)."""
    ops = list(ops)
    stages = [partial(_run_columns, op) for op in ops]
    if plain_output and ops and ops[-1].gives_plain:
        stages[-1] = partial(_run_columns, ops[-1], plain_output=True)
    return chain(stages, chunks)


def _run_columns(op: Op, chunks: Iterator[Chunk], plain_output: bool = False) -> Iterator[Chunk]:
    if not op.takes_coded:
        chunks = ((count, plain_columns(columns)) for count, columns in chunks)
    if plain_output:
        return op.run_columns(chunks, plain_output=True)  # type: ignore[call-arg,no-any-return]
    return op.run_columns(chunks)  # type: ignore[no-any-return]


def rows_of(chunks: Iterator[Chunk]) -> Iterator[list[Any]]:
    """The chunks' rows, as lists (what row ops take)."""
    for count, columns in chunks:
        if not columns:
            for _ in range(count):
                yield []
            continue
        yield from map(list, zip(*(plain(c).to_pylist() for c in columns), strict=True))


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
        if isinstance(key, pa.DictionaryArray):
            key = key.indices  # coded: each value one code, within one array
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
    pair = [  # as text: two coded chunks need not share a dictionary
        pa.concat_arrays([plain(a.slice(rows - 1, 1)), plain(b.slice(0, 1))])
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
    if isinstance(key, pa.DictionaryArray):
        return key  # coded already (its codes need not follow first appearance)
    return pc.dictionary_encode(plain(key))


def unify_codes(chunks: list[pa.DictionaryArray]) -> pa.ChunkedArray:
    """A key column's chunks as :func:`encode_key` gave them, under one dictionary."""
    return unified_chunks(chunks, chunks[0].type if chunks else None)


def unified_chunks(chunks: list[pa.DictionaryArray], kind: pa.DataType | None) -> pa.ChunkedArray:
    """``chunks`` under one dictionary: the first chunk's values, then each later chunk's
    new values in its dictionary's order (so codes keep the order values first appear
    in, where each chunk's do). Over :data:`~treestore.arrays.THREADED_SIZE` / 4
    dictionary values, each half of the chunks is unified in its own thread, then the
    second half's codes are moved onto the union of the two."""
    sizes = [len(chunk.dictionary) for chunk in chunks]
    if kind is None or len(chunks) < 2 or thread_count(4 * sum(sizes)) < 2:
        return pa.chunked_array(chunks, kind).unify_dictionaries()
    middle = min(
        max(int(np.searchsorted(np.cumsum(sizes), sum(sizes) / 2)) + 1, 1), len(chunks) - 1
    )
    front, back = map_in_threads(
        lambda part: pa.chunked_array(part, kind).unify_dictionaries(),
        [chunks[:middle], chunks[middle:]],
    )
    both = pa.chunked_array(
        [_every_code(front.chunk(0).dictionary, kind), _every_code(back.chunk(0).dictionary, kind)],
        kind,
    ).unify_dictionaries()
    dictionary = both.chunk(1).dictionary
    moved = both.chunk(1).indices  # each code of the second half's union, in the union of both
    return pa.chunked_array(
        [pa.DictionaryArray.from_arrays(c.indices, dictionary) for c in front.chunks]
        + [
            pa.DictionaryArray.from_arrays(pc.take(moved, c.indices), dictionary)
            for c in back.chunks
        ],
        kind,
    )


def _every_code(dictionary: pa.Array, kind: pa.DictionaryType) -> pa.DictionaryArray:
    """Every value of ``dictionary`` once, in its order, as a dictionary array."""
    return pa.DictionaryArray.from_arrays(
        pa.array(np.arange(len(dictionary)), kind.index_type), dictionary
    )


def first_seen_groups(keys: list[pa.ChunkedArray], rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Each of ``rows`` rows' group (rows with equal keys; all rows when there is no key),
    numbered in the order groups first appear, and the first row of each group; ``keys``
    holds each key column's codes as :func:`unify_codes` gave them. One key column
    whose codes already come in first-seen order is its own numbering (no sort)."""
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if len(keys) == 1 and not keys[0].null_count:
        codes = np.concatenate([c.indices.to_numpy() for c in keys[0].chunks])
        first = first_rows_if_in_order(codes)
        if first is not None:
            return codes, first
    combined = np.zeros(rows, dtype=np.int64)
    for unified in keys:
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


def first_rows_if_in_order(codes: np.ndarray) -> np.ndarray | None:
    """If ``codes`` number their values in the order they first appear (the first row
    has code 0 and each row's code is at most one past every code before it), each
    code's first row; else None. What the dictionaries of ``dictionary_encode`` and
    of their unification give, checked in one pass, block by block (no sort)."""
    if not len(codes) or codes[0] != 0:
        return None
    found = []
    highest = -1
    for start in range(0, len(codes), _BLOCK):
        block = codes[start : start + _BLOCK]
        running = np.maximum.accumulate(block)
        np.maximum(running, highest, out=running)
        before = np.empty_like(running)
        before[0] = highest
        before[1:] = running[:-1]
        before += 1
        if (block > before).any():
            return None
        found.append(np.flatnonzero(block == before) + start)
        highest = int(running[-1])
    return np.concatenate(found)


_BLOCK = 1 << 20


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
