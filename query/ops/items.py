"""``J``'s items (merge's and gather's distinct comma-separated items) as codes: each
chunk's items as dictionary codes with a count per row, and per group its distinct
items sorted as text, handed on coded (see :mod:`query.ops.columns`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from query.ops.columns import plain, unified_chunks, view_sizes
from treestore.arrays import distinct_of_sorted, map_in_threads, pooled_empty, thread_count
from treestore.native import grouped_distinct_ranks, grouped_distinct_text

__all__ = ["Items", "distinct_items", "distinct_items_of"]

NATIVE_ITEMS = 1 << 16
"""From this many items, ``J`` folds through the compiled kernel (below it numpy's pairs
cost little, and a small query imports no numba)."""


@dataclass(frozen=True)
class Items:
    """One chunk of a column as ``J`` reads it: its non-empty comma-separated items as
    dictionary codes (of text), in row order, and how many items each row holds."""

    codes: pa.DictionaryArray
    count: int
    """The chunk's rows."""
    counts: np.ndarray | None
    """Per row of the chunk, its number of items; None when each row holds one."""
    firsts: np.ndarray | None = None
    """When the rows view stretches of ``codes`` (``cross``'s lists): each row's first
    code (its stretch is ``counts`` long); None when ``codes`` are the items in row
    order."""

    @property
    def items(self) -> int:
        """How many items the chunk's rows hold in all."""
        if self.firsts is None or self.counts is None:
            return len(self.codes)
        return int(self.counts.sum())

    def pairs_into(
        self, into: np.ndarray, owners: np.ndarray, width: int, code_ranks: np.ndarray
    ) -> None:
        """Write each item's pair number, ``its row's owner * width + its rank``, into
        ``into`` (in no particular order), given each row's owner and each of
        ``codes``' ranks. Rows that view stretches of the codes are taken by their
        number of items: each such class is one 2-D take, nothing repeated."""
        counts, firsts = self.counts, self.firsts
        if firsts is None:
            np.multiply(owners if counts is None else np.repeat(owners, counts), width, out=into)
            into += code_ranks
            return
        assert counts is not None
        at = 0
        for size, rows in _rows_by_size(counts):
            block = into[at : at + len(rows) * size].reshape(len(rows), size)
            np.take(
                code_ranks, firsts[rows][:, None] + np.arange(size, dtype=firsts.dtype), out=block
            )
            block += (owners[rows] * width)[:, None]
            at += len(rows) * size

    @classmethod
    def of(cls, values: pa.Array) -> Items:
        """Split ``values`` at commas, drop empty items, encode the rest. Coded columns
        are read as they are: ``J``'s lists of items, and dictionary-coded text whose
        dictionary holds no comma and no empty text (only the dictionary is looked at)."""
        if isinstance(values, pa.ListArray) and pa.types.is_dictionary(values.type.value_type):
            lengths = pc.fill_null(pc.list_value_length(values), 0)
            codes = _text_codes(values.flatten())
            return cls(codes, len(values), lengths.to_numpy(zero_copy_only=False))
        if isinstance(values, pa.ListViewArray) and pa.types.is_dictionary(values.type.value_type):
            if _single_items(values.values.dictionary) and not values.values.null_count:
                firsts = values.offsets.to_numpy()
                return cls(_text_codes(values.values), len(values), view_sizes(values), firsts)
            values = plain(values)
        if isinstance(values, pa.DictionaryArray):
            if _single_items(values.dictionary):
                if not values.null_count:
                    return cls(_text_codes(values), len(values), None)
                present = pc.is_valid(values)
                codes = _text_codes(values.filter(present))
                return cls(
                    codes, len(values), present.to_numpy(zero_copy_only=False).astype(np.int64)
                )
            values = plain(values)
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
        counts = np.bincount(rows, minlength=len(values)) if len(rows) else np.zeros(len(values))
        return cls(pc.dictionary_encode(text), len(values), counts.astype(np.int64))


_FEW_SIZES = 64
"""Up to this many list sizes, the rows of each size are found by one pass over the
sizes; past it, by one stable sort."""


def _rows_by_size(sizes: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """Each size above 0 that ``sizes`` holds, with the rows that have it: found by one
    pass each when there are few sizes (lists of a few items), else by one sort."""
    per_size = np.bincount(sizes)
    present = (np.flatnonzero(per_size[1:]) + 1).tolist()
    if len(present) <= _FEW_SIZES:
        for size in present:
            yield size, np.flatnonzero(sizes == size)
        return
    order = np.argsort(sizes, kind="stable")
    ends = np.cumsum(per_size)
    for size in present:
        yield size, order[ends[size - 1] : ends[size]]


def _single_items(dictionary: pa.Array) -> bool:
    """Whether each value of ``dictionary`` is one item (no comma, not empty)."""
    words = dictionary.cast(pa.string())
    return not len(words) or not (
        pc.any(pc.or_(pc.match_substring(words, ","), pc.equal(words, ""))).as_py()
    )


def _text_codes(codes: pa.DictionaryArray) -> pa.DictionaryArray:
    """Dictionary codes of text with int32 codes (what :class:`Items` holds)."""
    wanted = pa.dictionary(pa.int32(), pa.string())
    return codes if codes.type == wanted else codes.cast(wanted)


def distinct_items(values: pa.Array, group: np.ndarray, groups: int) -> pa.Array:
    """Per group, the distinct non-empty comma-separated items of its values, sorted as
    text and joined by ``,``; null for a group without any (merge's ``J``)."""
    return distinct_items_of([Items.of(values)], group, groups, as_text=True)


def distinct_items_of(
    parts: list[Items],
    group: np.ndarray,
    groups: int,
    native_from: int | None = None,
    as_text: bool = False,
) -> pa.Array:
    """:func:`distinct_items` of a column whose consecutive chunks gave ``parts``
    (``group`` numbers the rows of all the chunks), coded: per group a list of its items
    as dictionary codes (null for a group without any); :func:`plain` joins them.

    Each (group, item) pair is one number, ``group * width + the item's rank in text
    order``, in int32 when that fits (half the memory traffic). Where a table of one
    byte per possible pair is small enough (:data:`MARKS_PER_PAIR`), each pair is
    marked in it and the marks are read out in order; else one numpy sort orders every
    group's items, the repeats are dropped in place, and each group's stretch is found
    by binary search. Over :data:`~treestore.arrays.THREADED_SIZE` items, the pairs are
    made, marked and the groups' lists put together in threads, a range of parts, of
    pairs or of groups each.

    From ``native_from`` items on (default :data:`NATIVE_ITEMS`), where a bitset per
    group is as small as the marks' table would have to be (:data:`MARKS_PER_PAIR`, with
    a bit per possible pair instead of a byte), no pairs are made: a compiled kernel sets
    each group's items as bits of its bitset, the rows read in order, and reads the bits
    out in order, the rows taken a block of groups at a time
    (:func:`~treestore.native.grouped_distinct_ranks`): 30M items of 200k groups (the
    seed's answer) in 0.1 s against 0.7 s for the pairs.

    With ``as_text``, the lists come joined as text (what :func:`plain` makes of them);
    on the compiled path the bits are read out straight into the text
    (:func:`~treestore.native.grouped_distinct_text`): the seed's answer's 30M items and
    120 MB of text in about 0.24 s against 0.31-0.57 s for the lists, then the text."""
    unified = unified_chunks([p.codes for p in parts], pa.dictionary(pa.int32(), pa.string()))
    dictionary = unified.chunk(0).dictionary if unified.num_chunks else pa.array([], pa.string())
    ordered = pc.array_sort_indices(dictionary).to_numpy()
    width = max(1, len(ordered))
    kind = np.int32 if groups * width < 1 << 31 else np.int64
    rank = np.empty(width, dtype=kind)
    rank[ordered] = np.arange(len(ordered), dtype=kind)
    sorted_words = dictionary.take(pa.array(ordered))
    total = sum(part.items for part in parts)
    bitsets = groups * (width // 64 + 1) * 8  # the kernel's bytes: a bitset per group
    if total >= (NATIVE_ITEMS if native_from is None else native_from) and bitsets <= min(
        MARKS_PER_PAIR * total, MARKS_MOST
    ):
        stretches = _rows_compiled(parts, unified, rank)
        threads = thread_count(total)
        if as_text:
            return grouped_distinct_text(group, *stretches, groups, sorted_words, threads)
        items, bounds = grouped_distinct_ranks(group, *stretches, groups, threads)
        return _coded_lists(items, bounds, sorted_words)
    group = group.astype(kind, copy=False)
    sizes = [part.items for part in parts]
    pairs = pooled_empty(sum(sizes), kind)
    pieces = thread_count(len(pairs))
    places = np.cumsum([0, *sizes])
    rows = np.cumsum([0, *(part.count for part in parts)])

    def fill(chosen: range) -> None:
        for i in chosen:
            code_ranks = rank[unified.chunk(i).indices.to_numpy(zero_copy_only=False)]
            owners = group[rows[i] : rows[i + 1]]
            parts[i].pairs_into(pairs[places[i] : places[i + 1]], owners, width, code_ranks)

    map_in_threads(fill, _split(range(len(parts)), sizes, pieces))
    cuts = np.linspace(0, groups, pieces + 1).astype(np.int64)
    if groups * width <= min(MARKS_PER_PAIR * len(pairs), MARKS_MOST):
        lists = _lists_by_marks(pairs, groups, width, cuts)
    else:
        lists = _lists_by_sort(pairs, width, cuts)
    made = map_in_threads(lambda piece: _coded_lists(*lists(piece), sorted_words), range(pieces))
    coded = made[0] if len(made) == 1 else pa.concat_arrays(made)
    return plain(coded) if as_text else coded


def _rows_compiled(
    parts: list[Items], unified: pa.ChunkedArray, rank: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every part's rows for the compiled kernels: each row's first item and number of
    items in one array of ranks (rows that hold their own items view consecutive
    stretches), and that array."""
    rows = sum(part.count for part in parts)
    total = sum(part.items for part in parts)
    codes = sum(len(unified.chunk(i)) for i in range(len(parts)))  # what firsts index
    kind = np.int32 if max(total, rows, codes) < 1 << 31 else np.int64
    ranks, firsts, sizes = [], pooled_empty(rows, kind), pooled_empty(rows, kind)
    base = at = 0
    for i, part in enumerate(parts):
        ranks.append(rank[unified.chunk(i).indices.to_numpy(zero_copy_only=False)])
        end = at + part.count
        if part.counts is None:
            sizes[at:end] = 1
        else:
            sizes[at:end] = part.counts
        if part.firsts is not None:
            np.add(part.firsts, base, out=firsts[at:end], casting="unsafe")
        else:  # consecutive stretches: each row's first is the sizes before it
            np.cumsum(sizes[at:end], out=firsts[at:end])
            firsts[at:end] -= sizes[at:end] - base
        base += len(ranks[-1])
        at = end
    return firsts, sizes, np.concatenate(ranks)


MARKS_PER_PAIR = 16
"""Pairs are marked in a table of one byte per (group, item) when it is at most this
many bytes per pair (and :data:`MARKS_MOST` in all); sorted otherwise."""
MARKS_MOST = 1 << 30


def _lists_by_sort(
    pairs: np.ndarray, width: int, cuts: np.ndarray
) -> Callable[[int], tuple[np.ndarray, np.ndarray]]:
    """Sort the pairs; per range of groups ``cuts[piece]`` to ``cuts[piece + 1]``, its
    distinct items (ranks) and each group's start among them (and the end)."""
    pairs.sort()
    ends = np.searchsorted(pairs, cuts * width)

    def lists(piece: int) -> tuple[np.ndarray, np.ndarray]:
        first, last = int(cuts[piece]), int(cuts[piece + 1])
        kept = distinct_of_sorted(pairs[ends[piece] : ends[piece + 1]])
        bounds = np.searchsorted(kept, np.arange(first, last + 1, dtype=np.int64) * width)
        return np.remainder(kept, width, out=kept), bounds  # each pair's item, by its rank

    return lists


def _lists_by_marks(
    pairs: np.ndarray, groups: int, width: int, cuts: np.ndarray
) -> Callable[[int], tuple[np.ndarray, np.ndarray]]:
    """Mark each pair in a table of ``groups`` x ``width`` bytes (no sort: the marks come
    out in order); per range of groups ``cuts[piece]`` to ``cuts[piece + 1]``, its
    distinct items and each group's start among them. The table is read a band of groups
    at a time."""
    marks = pooled_empty(groups * width, np.bool_)
    marks.fill(False)
    spans = np.linspace(0, len(pairs), len(cuts)).astype(np.int64)

    def mark(piece: int) -> None:  # several threads may mark one byte: all write True
        marks[pairs[spans[piece] : spans[piece + 1]]] = True

    map_in_threads(mark, range(len(cuts) - 1))
    table = marks.reshape(groups, width)
    band = max(1, _BAND_BYTES // width)

    def lists(piece: int) -> tuple[np.ndarray, np.ndarray]:
        first, last = int(cuts[piece]), int(cuts[piece + 1])
        items, counts = [], []
        for start in range(first, last, band):
            rows = table[start : min(start + band, last)]
            counts.append(np.count_nonzero(rows, axis=1))
            items.append((np.flatnonzero(rows) % width).astype(np.int32))
        bounds = np.concatenate([[0], np.cumsum(np.concatenate(counts or [[]]))])
        return np.concatenate(items or [np.zeros(0, np.int32)]), bounds.astype(np.int64)

    return lists


_BAND_BYTES = 1 << 22


def _coded_lists(items: np.ndarray, bounds: np.ndarray, words: pa.Array) -> pa.ListArray:
    """Lists of ``items`` (ranks into ``words``), group i's from ``bounds[i]`` to
    ``bounds[i + 1]``; null for a group without any."""
    coded = pa.DictionaryArray.from_arrays(pa.array(items.astype(np.int32, copy=False)), words)
    return pa.ListArray.from_arrays(
        pa.array(bounds.astype(np.int32)), coded, mask=pa.array(np.diff(bounds) == 0)
    )


def _split(indices: range, sizes: list[int], pieces: int) -> list[range]:
    """``indices`` cut into at most ``pieces`` consecutive ranges of about equal total size."""
    if pieces <= 1 or len(indices) <= 1:
        return [indices]
    ends = np.searchsorted(np.cumsum(sizes), np.linspace(0, sum(sizes), pieces + 1)[1:-1])
    bounds = [0, *sorted({int(e) + 1 for e in ends if int(e) + 1 < len(indices)}), len(indices)]
    return [indices[a:b] for a, b in itertools.pairwise(bounds)]
