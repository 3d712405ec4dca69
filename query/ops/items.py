"""``J``'s items (merge's and gather's distinct comma-separated items) as codes: each
chunk's items as dictionary codes with a count per row, and per group its distinct
items sorted as text, handed on coded (see :mod:`query.ops.columns`)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from query.ops.columns import plain
from treestore.arrays import distinct_of_sorted, map_in_threads, pooled_empty, thread_count

__all__ = ["Items", "distinct_items", "distinct_items_of"]


@dataclass(frozen=True)
class Items:
    """One chunk of a column as ``J`` reads it: its non-empty comma-separated items as
    dictionary codes (of text), in row order, and how many items each row holds."""

    codes: pa.DictionaryArray
    counts: np.ndarray
    """Per row of the chunk, its number of items."""

    @property
    def count(self) -> int:
        """The chunk's rows."""
        return len(self.counts)

    @classmethod
    def of(cls, values: pa.Array) -> Items:
        """Split ``values`` at commas, drop empty items, encode the rest. Coded columns
        are read as they are: ``J``'s lists of items, and dictionary-coded text whose
        dictionary holds no comma and no empty text (only the dictionary is looked at)."""
        if isinstance(values, pa.ListArray) and pa.types.is_dictionary(values.type.value_type):
            lengths = pc.fill_null(pc.list_value_length(values), 0)
            codes = _text_codes(values.flatten())
            return cls(codes, lengths.to_numpy(zero_copy_only=False))
        if isinstance(values, pa.DictionaryArray):
            words = values.dictionary.cast(pa.string())
            if (
                not len(words)
                or not pc.any(pc.or_(pc.match_substring(words, ","), pc.equal(words, ""))).as_py()
            ):
                present = pc.is_valid(values)
                codes = _text_codes(values.filter(present) if values.null_count else values)
                return cls(codes, present.to_numpy(zero_copy_only=False).astype(np.int64))
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
        return cls(pc.dictionary_encode(text), counts.astype(np.int64))


def _text_codes(codes: pa.DictionaryArray) -> pa.DictionaryArray:
    """Dictionary codes of text with int32 codes (what :class:`Items` holds)."""
    wanted = pa.dictionary(pa.int32(), pa.string())
    return codes if codes.type == wanted else codes.cast(wanted)


def distinct_items(values: pa.Array, group: np.ndarray, groups: int) -> pa.Array:
    """Per group, the distinct non-empty comma-separated items of its values, sorted as
    text and joined by ``,``; null for a group without any (merge's ``J``)."""
    return plain(distinct_items_of([Items.of(values)], group, groups))


def distinct_items_of(parts: list[Items], group: np.ndarray, groups: int) -> pa.Array:
    """:func:`distinct_items` of a column whose consecutive chunks gave ``parts``
    (``group`` numbers the rows of all the chunks), coded: per group a list of its items
    as dictionary codes (null for a group without any); :func:`plain` joins them.

    Each (group, item) pair is one number, ``group * width + the item's rank in text
    order``, in int32 when that fits (half the memory traffic); one numpy sort orders
    every group's items, the repeats are dropped in place, and each group's stretch is
    found by binary search. Over :data:`~treestore.arrays.THREADED_SIZE` items, the
    pairs are made and the groups' lists put together in threads, a range of parts or
    of groups each."""
    unified = pa.chunked_array([p.codes for p in parts], pa.dictionary(pa.int32(), pa.string()))
    unified = unified.unify_dictionaries()
    dictionary = unified.chunk(0).dictionary if unified.num_chunks else pa.array([], pa.string())
    ordered = pc.array_sort_indices(dictionary).to_numpy()
    width = max(1, len(ordered))
    kind = np.int32 if groups * width < 1 << 31 else np.int64
    rank = np.empty(width, dtype=kind)
    rank[ordered] = np.arange(len(ordered), dtype=kind)
    group = group.astype(kind, copy=False)
    sizes = [len(part.codes) for part in parts]
    pairs = pooled_empty(sum(sizes), kind)
    pieces = thread_count(len(pairs))
    places = np.cumsum([0, *sizes])
    rows = np.cumsum([0, *(part.count for part in parts)])

    def fill(chosen: range) -> None:
        for i in chosen:
            into = pairs[places[i] : places[i + 1]]
            owners = np.repeat(group[rows[i] : rows[i + 1]], parts[i].counts)
            np.multiply(owners, width, out=into)
            into += rank[unified.chunk(i).indices.to_numpy(zero_copy_only=False)]

    map_in_threads(fill, _split(range(len(parts)), sizes, pieces))
    pairs.sort()
    cuts = np.linspace(0, groups, pieces + 1).astype(np.int64)
    ends = np.searchsorted(pairs, cuts * width)
    sorted_words = dictionary.take(pa.array(ordered))

    def lists(piece: int) -> pa.ListArray:
        first, last = int(cuts[piece]), int(cuts[piece + 1])
        kept = distinct_of_sorted(pairs[ends[piece] : ends[piece + 1]])
        bounds = np.searchsorted(kept, np.arange(first, last + 1, dtype=np.int64) * width)
        items = np.remainder(kept, width, out=kept)  # each pair's item, by its rank
        coded = pa.DictionaryArray.from_arrays(
            pa.array(items.astype(np.int32, copy=False)), sorted_words
        )
        return pa.ListArray.from_arrays(
            pa.array(bounds.astype(np.int32)), coded, mask=pa.array(np.diff(bounds) == 0)
        )

    made = map_in_threads(lists, range(pieces))
    return made[0] if len(made) == 1 else pa.concat_arrays(made)


def _split(indices: range, sizes: list[int], pieces: int) -> list[range]:
    """``indices`` cut into at most ``pieces`` consecutive ranges of about equal total size."""
    if pieces <= 1 or len(indices) <= 1:
        return [indices]
    ends = np.searchsorted(np.cumsum(sizes), np.linspace(0, sum(sizes), pieces + 1)[1:-1])
    bounds = [0, *sorted({int(e) + 1 for e in ends if int(e) + 1 < len(indices)}), len(indices)]
    return [indices[a:b] for a, b in itertools.pairwise(bounds)]
