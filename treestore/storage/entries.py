"""Tree entries as columns: what scans and columnar merges work on.

A :class:`ChildColumns` holds entries in key order (parent id, then name) as
numpy int64 arrays and an Arrow string array, so selecting, merging and
expanding children are array operations; :func:`merge_blocks` merges runs too big to
hold in memory a block of pages at a time.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from treestore.arrays import expand_ranges
from treestore.native import inserted_ints, inserted_strings, merged_parts_order

__all__ = [
    "SMALL_SHARE",
    "ChildColumns",
    "Key",
    "expand_ranges",
    "find_ids",
    "insertion_points",
    "merge_blocks",
    "merge_columns",
    "merge_disjoint",
]

Key = tuple[int, str]
"""A tree entry's key: its parent's node id and its name."""


@dataclass(frozen=True)
class ChildColumns:
    """Tree entries as columns (in key order): parent ids, names, node ids, hits, counts,
    and (when asked for) each entry's data attachments."""

    parents: np.ndarray
    names: pa.Array
    ids: np.ndarray
    hits: np.ndarray
    counts: np.ndarray
    data: list[Any] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def empty(cls) -> ChildColumns:
        """No entries."""
        none = np.zeros(0, dtype=np.int64)
        return cls(none, pa.array([], pa.string()), none, none, none)

    def slice(self, start: int, stop: int) -> ChildColumns:
        """The entries ``start`` to ``stop - 1`` (views, no copy)."""
        return ChildColumns(
            self.parents[start:stop],
            self.names.slice(start, max(0, stop - start)),
            self.ids[start:stop],
            self.hits[start:stop],
            self.counts[start:stop],
            None if self.data is None else self.data[start:stop],
        )

    def count_up_to(self, key: Key) -> int:
        """How many entries have a key at most ``key`` (entries are in key order)."""
        low = int(np.searchsorted(self.parents, key[0], "left"))
        high = int(np.searchsorted(self.parents, key[0], "right"))
        if low == high:
            return low
        names = self.names.slice(low, high - low)
        return low + int(pc.sum(pc.less_equal(names, pa.scalar(key[1], pa.string()))).as_py() or 0)

    def last_key(self) -> Key:
        """The key of the last entry (there must be one)."""
        return (int(self.parents[-1]), self.names[len(self) - 1].as_py())

    def take(self, rows: np.ndarray) -> ChildColumns:
        """The entries at ``rows``."""
        return ChildColumns(
            self.parents[rows],
            self.names.take(rows),
            self.ids[rows],
            self.hits[rows],
            self.counts[rows],
            None if self.data is None else [self.data[i] for i in rows.tolist()],
        )


def merge_columns(parts: list[ChildColumns]) -> ChildColumns:
    """Several runs' columns (oldest first) as one, in key order, with equal keys added up
    (and the newest data kept, when the parts carry data)."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return ChildColumns.empty()
    if len(parts) == 1:
        return parts[0]
    base, later = parts[0], parts[1:]
    if sum(map(len, later)) * SMALL_SHARE <= len(base):
        return _merge_into(base, merge_columns(later))
    return _sort_merge(parts)


def merge_disjoint(
    parts: list[ChildColumns],
    common: np.ndarray,
    hashes: list[np.ndarray],
    rehash: Callable[[ChildColumns], np.ndarray],
) -> list[tuple[ChildColumns, np.ndarray]]:
    """:func:`merge_columns` of parts that share only the children of the ``common``
    parents (a big shard's parts, :mod:`loaders.tree.parts`: every other parent's children
    are in one part), as stretches in key order, each with its keys' hashes
    (:meth:`~treestore.storage.keyfilter.KeyHashes.indexed`): each part cut into stretches
    of one common parent's children and stretches of other parents', the common ones
    merged (their hashes taken anew: ``rehash``), the others views of the parts with their
    ``hashes`` carried: nothing is copied. Parts that share more are merged as
    :func:`merge_columns` merges them (one stretch)."""
    kept = [i for i, p in enumerate(parts) if len(p)]
    parts, hashes = [parts[i] for i in kept], [hashes[i] for i in kept]
    if len(parts) < 2:
        return list(zip(parts, hashes, strict=True))
    stretches: list[tuple[int, int, ChildColumns, np.ndarray | None]] = []
    shared: dict[int, list[ChildColumns]] = {}
    for part, hashed in zip(parts, hashes, strict=True):
        is_common = np.isin(part.parents, common)
        cuts = (
            np.flatnonzero((np.diff(part.parents) != 0) & (is_common[1:] | is_common[:-1])) + 1
        )  # a common parent's children stand alone
        for start, stop in zip([0, *cuts.tolist()], [*cuts.tolist(), len(part)], strict=True):
            piece = part.slice(start, stop)
            if is_common[start]:
                shared.setdefault(int(part.parents[start]), []).append(piece)
            else:
                first, last = int(part.parents[start]), int(part.parents[stop - 1])
                stretches.append((first, last, piece, hashed[start:stop]))
    for parent, pieces in shared.items():
        stretches.append((parent, parent, merge_columns(pieces), None))
    stretches.sort(key=lambda stretch: stretch[0])
    if any(a[1] >= b[0] for a, b in itertools.pairwise(stretches)):
        merged = merge_columns(parts)  # some other parent's children are in two parts
        return [(merged, rehash(merged))]
    return [(p, h if h is not None else rehash(p)) for _, _, p, h in stretches]


SMALL_SHARE = 8
"""Later runs holding at most 1/SMALL_SHARE of the base run's entries are merged into it
in place (by node id, inserting new keys by binary search) instead of sorting everything."""


def _sort_merge(parts: list[ChildColumns]) -> ChildColumns:
    """Merge by ordering every entry by (parent, name, run): each run is in key order, so
    the runs one after another are merged, not sorted
    (:func:`~treestore.native.merged_parts_order`)."""
    names = pa.concat_arrays([p.names for p in parts])
    parents = np.concatenate([p.parents for p in parts])
    order = merged_parts_order(parents, names, [len(p) for p in parts])
    ids = np.concatenate([p.ids for p in parts])[order]
    firsts = np.flatnonzero(np.diff(ids, prepend=ids[0] - 1))
    hits = np.add.reduceat(np.concatenate([p.hits for p in parts])[order], firsts)
    counts = np.add.reduceat(np.concatenate([p.counts for p in parts])[order], firsts)
    rows = order[firsts]  # each merged entry's first row among the runs
    data = None
    if all(p.data is not None for p in parts):
        data = _newest_data([d for p in parts for d in p.data or ()], order, firsts)
    return ChildColumns(
        parents[rows],
        names.take(pa.array(rows)),
        ids[firsts],
        hits,
        counts,
        data,
    )


def _newest_data(data: list[Any], order: np.ndarray, firsts: np.ndarray) -> list[Any]:
    """Per group of equal keys (``order`` sorted, groups starting at ``firsts``), the data of
    its newest entry that has some."""
    present = np.fromiter((d is not None for d in data), dtype=bool, count=len(data))[order]
    if not present.any():
        return [None] * len(firsts)
    newest = np.maximum.reduceat(np.where(present, np.arange(len(order)), -1), firsts)
    return [data[order[i]] if i >= 0 else None for i in newest.tolist()]


def _merge_into(base: ChildColumns, later: ChildColumns) -> ChildColumns:
    """``later`` (key order, keys distinct) merged into the much bigger ``base``."""
    found = _positions(base.ids, later.ids)
    known = found >= 0
    hits, counts = base.hits.copy(), base.counts.copy()
    hits[found[known]] += later.hits[known]
    counts[found[known]] += later.counts[known]
    data = None
    if base.data is not None and later.data is not None:
        data = list(base.data)
        for position, value in zip(
            found[known].tolist(), np.flatnonzero(known).tolist(), strict=True
        ):
            if later.data[value] is not None:
                data[position] = later.data[value]
    new = np.flatnonzero(~known)
    merged = ChildColumns(base.parents, base.names, base.ids, hits, counts, data)
    if not len(new):
        return merged
    added = later.take(new)
    places = insertion_points(base, added.parents, added.names)
    if data is not None:
        order = np.insert(np.arange(len(base)), places, len(base) + np.arange(len(added)))
        both = [*data, *(added.data or [None] * len(added))]
        data = [both[i] for i in order.tolist()]
    parents, ids, hits, counts = _inserted(
        places, (base.parents, added.parents), (base.ids, added.ids), (hits, added.hits),
        (counts, added.counts),
    )  # fmt: skip
    return ChildColumns(
        parents, _inserted_names(base.names, places, added.names), ids, hits, counts, data
    )


def _inserted(places: np.ndarray, *pairs: tuple[np.ndarray, np.ndarray]) -> list[np.ndarray]:
    """For each ``(base, added)`` int column, ``numpy.insert(base, places, added)`` with
    ``places`` ascending: by the compiled kernel from :data:`NATIVE_INSERT` base values
    (0.05 s -> about 0.005 s for the seed's 16 shards' four columns), else numpy's."""
    if len(pairs[0][0]) < NATIVE_INSERT:
        return [np.insert(base, places, added) for base, added in pairs]
    return [inserted_ints(base, places, added) for base, added in pairs]


NATIVE_INSERT = 1 << 14
"""From this many base entries, new entries are inserted by compiled kernels that copy
the runs of base names and numbers between them whole (a delta run merged into a whole
tree of 620k names: 19 ms -> about 3 ms); below it Arrow's concatenation and take, and
``numpy.insert``."""


def _inserted_names(base: pa.Array, places: np.ndarray, added: pa.Array) -> pa.Array:
    """``base`` with ``added`` inserted before ``places`` (``numpy.insert`` on names)."""
    text = base.nbytes + added.nbytes  # a bound on the text (offsets and all)
    fits = pa.types.is_large_string(base.type) or text < 1 << 31  # the type stays
    if len(base) >= NATIVE_INSERT and fits and not base.null_count and not added.null_count:
        return inserted_strings(base, places, added)
    order = np.insert(np.arange(len(base)), places, len(base) + np.arange(len(added)))
    return pa.concat_arrays([base, added]).take(order)


def _positions(ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Where each of ``wanted`` is in ``ids`` (distinct), -1 where absent: through a table
    indexed by id when the ids are dense, else by binary search in the sorted ids (a
    block of a big tree must not allocate a table as long as the tree)."""
    size = int(max(ids.max(), wanted.max())) + 1
    if size <= 4 * (len(ids) + len(wanted)):
        where = np.full(size, -1, dtype=np.int64)
        where[ids] = np.arange(len(ids))
        return where[wanted]
    order = np.argsort(ids, kind="stable")
    at = np.minimum(np.searchsorted(ids[order], wanted), len(ids) - 1)
    return np.where(ids[order][at] == wanted, order[at], -1)


def insertion_points(base: ChildColumns, parents: np.ndarray, names: pa.Array) -> np.ndarray:
    """Where each key ``(parents[i], names[i])`` goes in ``base`` (key order): a binary
    search per key, all keys at once."""
    low = np.searchsorted(base.parents, parents, "left")
    high = np.searchsorted(base.parents, parents, "right")
    while True:
        active = np.flatnonzero(low < high)
        if not len(active):
            return low
        middle = (low[active] + high[active]) // 2
        before = pc.less(base.names.take(middle), names.take(active))
        before = before.to_numpy(zero_copy_only=False)
        low[active] = np.where(before, middle + 1, low[active])
        high[active] = np.where(before, high[active], middle)


def find_ids(base: ChildColumns, parents: np.ndarray, names: pa.Array) -> np.ndarray:
    """The node id of each key ``(parents[i], names[i])`` in ``base``, -1 where absent."""
    places = insertion_points(base, parents, names)
    inside = np.flatnonzero(places < len(base))
    ids = np.full(len(parents), -1, dtype=np.int64)
    if len(inside):
        at = places[inside]
        same = (base.parents[at] == parents[inside]) & pc.equal(
            base.names.take(at), names.take(inside)
        ).to_numpy(zero_copy_only=False)
        ids[inside[same]] = base.ids[at[same]]
    return ids


# Merging runs too big to hold in memory: a streaming merge of column blocks. Each run
# is read as blocks of consecutive pages (RunReader.column_blocks). Every step takes,
# from each run, the entries up to the smallest last key any run still reading has
# buffered, and merges those with merge_columns (array operations). Entries of one key
# are therefore always merged in the same step, and memory holds about one block per run.


def merge_blocks(runs: Iterable[Iterator[ChildColumns]]) -> Iterator[ChildColumns]:
    """Merge runs given as iterators of key-ordered column blocks (oldest run first) into
    key-ordered blocks, equal keys added up and the newest data kept, as
    :func:`merge_columns` does for whole runs."""
    sources: list[Iterator[ChildColumns] | None] = list(runs)
    buffered = [ChildColumns.empty() for _ in sources]
    while True:
        for i, source in enumerate(sources):
            while source is not None and not len(buffered[i]):
                block = next(source, None)
                if block is None:
                    sources[i] = source = None
                else:
                    buffered[i] = block
        if not any(len(b) for b in buffered):
            return
        reading = [b.last_key() for b, s in zip(buffered, sources, strict=True) if s is not None]
        bound = min(reading) if reading else None
        parts = []
        for i, block in enumerate(buffered):
            cut = len(block) if bound is None else block.count_up_to(bound)
            parts.append(block.slice(0, cut))
            buffered[i] = block.slice(cut, len(block))
        yield merge_columns(parts)
