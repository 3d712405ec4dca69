"""A tree's changes since its last flush, as columns with a key index.

Each entry is keyed like a run's entries, ``(parent id, name)``, and holds what
the writer added: the node's id, the hits and the child count to add, and (when
an attachment changed) the node's whole new data. Every part of an entry lives in
a column indexed by the entry's slot: the parent ids and the values in int64
columns, the names in Arrow string chunks, so a bulk visit finds, adds and updates
thousands of entries with array operations and no Python object per key. The key
index (:class:`~treestore.storage.key_index.KeyIndex`) finds slots by the keys'
64-bit hashes (:meth:`~treestore.storage.keyfilter.KeyHashes.folded`, the hash the
runs' key filters are built from), each match confirmed on the parent id and the name.
:meth:`Memtable.columns` sorts the entries into key order with Arrow, ready to
be written as a run.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from treestore.storage.entries import ChildColumns, Key
from treestore.storage.key_index import KeyIndex
from treestore.storage.keyfilter import KeyHashes, fold_key

__all__ = ["ENTRY_BYTES", "Memtable"]


ENTRY_BYTES = 128
"""The memory one entry takes, measured at 1M entries with 10-character names
(tracemalloc for numpy, Arrow's pool for the names): 74 bytes held (the int64 columns,
the name, the key index at most half full), and 46 more while :meth:`Memtable.columns`
sorts them for a flush."""


class Memtable:
    """Entries ``(parent id, name) -> (node id, hits, child count, data)``, by slot.

    The int64 columns are ``array('q')``: one entry at a time is a plain list-like
    update, and many at once go through a numpy view of the column's buffer. Views
    live only inside this class's methods (a column cannot grow while one exists).
    """

    def __init__(self) -> None:
        self.index = KeyIndex()
        self.parents, self.ids, self.hits, self.counts = (array("q") for _ in range(4))
        self._chunks: list[pa.Array] = []  # the names, slot order, in the chunks added
        self._single: list[str] = []  # names added one at a time, after the chunks
        self._unindexed: dict[Key, int] = {}
        """Keys added one at a time since the last bulk call, by slot (the last slots): the
        key index takes them, hashed as arrays, when a bulk call comes."""
        self.data: dict[int, dict[str, Any]] = {}
        """The new data of the entries whose attachments changed, by slot."""

    def __len__(self) -> int:
        return len(self.parents)

    def __bool__(self) -> bool:
        return len(self.parents) > 0

    def names(self) -> pa.Array:
        """Every entry's name, by slot (one string array)."""
        if self._single:
            self._chunks.append(pa.array(self._single, pa.string()))
            self._single = []
        if len(self._chunks) != 1:
            self._chunks = [pa.concat_arrays(self._chunks or [pa.array([], pa.string())])]
        return self._chunks[0]

    def slots(self, keys: KeyHashes) -> np.ndarray:
        """The slot of each key, -1 where the memtable lacks it."""
        if not self or not len(keys):
            return np.full(len(keys), -1, dtype=np.int64)
        self._index_singles()
        parents = np.frombuffer(self.parents, dtype=np.int64)
        names, wanted = self.names(), keys.arrow_names()

        def same(positions: np.ndarray, slots: np.ndarray) -> np.ndarray:
            equal = parents[slots] == keys.parents[positions]
            if equal.any():
                named = pc.equal(names.take(pa.array(slots)), wanted.take(pa.array(positions)))
                equal &= named.to_numpy(zero_copy_only=False)
            return equal

        return self.index.find(keys.folded(), same)

    def slot(self, key: Key) -> int | None:
        """The slot of one key, None where the memtable lacks it (no array is rebuilt)."""
        found = self._unindexed.get(key)
        if found is not None or not self.index.size:
            return found
        parents = self.parents
        found = self.index.find_one(
            fold_key(key), lambda slot: parents[slot] == key[0] and self._name(slot) == key[1]
        )
        return None if found < 0 else found

    def _name(self, slot: int) -> str:
        """The name of the entry at ``slot``."""
        singles_from = len(self) - len(self._single)
        if slot >= singles_from:
            return self._single[slot - singles_from]
        for chunk in self._chunks:
            if slot < len(chunk):
                return str(chunk[slot].as_py())
            slot -= len(chunk)
        raise IndexError(slot)

    def ids_at(self, slots: np.ndarray) -> np.ndarray:
        """The node ids of the entries at ``slots``."""
        return np.frombuffer(self.ids, dtype=np.int64)[slots]

    def add_hits(self, slots: np.ndarray, hits: np.ndarray) -> None:
        """Add ``hits[i]`` to the entry at ``slots[i]`` (slots distinct)."""
        np.frombuffer(self.hits, dtype=np.int64)[slots] += hits

    def add_counts(self, slots: np.ndarray, counts: np.ndarray) -> None:
        """Add ``counts[i]`` to the child count of the entry at ``slots[i]`` (slots distinct)."""
        np.frombuffer(self.counts, dtype=np.int64)[slots] += counts

    def add(self, keys: KeyHashes, ids: np.ndarray, hits: np.ndarray, counts: np.ndarray) -> None:
        """Add entries for ``keys`` (which it must lack), in order; a key given twice raises
        ``ValueError`` and changes nothing."""
        if not len(keys):
            return
        hashes = keys.folded()
        if _repeats(keys, hashes):
            raise ValueError("memtable keys added twice")
        self._index_singles()
        self.index.insert(hashes)
        for column, values in (
            (self.parents, keys.parents),
            (self.ids, ids),
            (self.hits, hits),
            (self.counts, counts),
        ):
            column.frombytes(np.ascontiguousarray(values, dtype=np.int64).tobytes())
        if self._single:
            self.names()
        self._chunks.append(keys.arrow_names())

    def add_one(self, key: Key, node_id: int, hits: int, count: int) -> int:
        """Add one entry (the memtable must lack ``key``); return its slot."""
        slot = len(self.parents)
        self._unindexed[key] = slot
        self.parents.append(key[0])
        self.ids.append(node_id)
        self.hits.append(hits)
        self.counts.append(count)
        self._single.append(key[1])
        return slot

    def _index_singles(self) -> None:
        """Give the key index the keys added one at a time since the last bulk call."""
        if self._unindexed:
            keys = list(self._unindexed)  # in slot order: the slots after the indexed ones
            parents = np.fromiter((k[0] for k in keys), dtype=np.int64, count=len(keys))
            self.index.insert(KeyHashes(parents, [k[1] for k in keys]).folded())
            self._unindexed.clear()

    def columns(self) -> ChildColumns:
        """The entries in key order (by parent id, then name), with their data when some
        entry has new data."""
        size = len(self)
        names = self.names()
        parents = np.frombuffer(self.parents, dtype=np.int64)
        order = pc.sort_indices(
            pa.table({"parent": parents, "name": names}),
            [("parent", "ascending"), ("name", "ascending")],
        ).to_numpy()
        data = None
        if self.data:
            by_slot: list[Any] = [None] * size
            for slot, value in self.data.items():
                by_slot[slot] = value
            data = [by_slot[slot] for slot in order.tolist()]
        ids, hits, counts = (
            np.frombuffer(column, dtype=np.int64)[order]
            for column in (self.ids, self.hits, self.counts)
        )
        return ChildColumns(parents[order], names.take(order), ids, hits, counts, data)

    def clear(self) -> None:
        """Drop every entry."""
        self.index.clear()
        self._chunks, self._single = [], []
        self._unindexed.clear()
        self.data.clear()
        self.parents, self.ids, self.hits, self.counts = (array("q") for _ in range(4))


def _repeats(keys: KeyHashes, hashes: np.ndarray) -> bool:
    """Whether some key comes twice among ``keys``: equal hashes (rare but for repeated
    keys) are confirmed on the keys themselves."""
    ordered = np.sort(hashes)
    twins = ordered[1:][ordered[1:] == ordered[:-1]]
    if not len(twins):
        return False
    positions = np.flatnonzero(np.isin(hashes, twins)).tolist()
    names = keys.arrow_names().take(pa.array(positions)).to_pylist()
    held = set(zip(keys.parents[positions].tolist(), names, strict=True))
    return len(held) < len(positions)
