"""A tree's changes since its last flush, as columns with a key index.

Each entry is keyed like a run's entries, ``(parent id, name)``, and holds what
the writer added: the node's id, the hits and the child count to add, and (when
an attachment changed) the node's whole new data. Every part of an entry lives in
a column indexed by the entry's slot: the parent ids and the values in int64
columns, the names in Arrow string chunks, so a bulk visit finds, adds and updates
thousands of entries with array operations and no Python object per key. The key
index (:class:`KeyIndex`, below) finds slots by the keys' 64-bit hashes
(:meth:`~treestore.storage.keyfilter.KeyHashes.indexed`, the hash the runs' key
filters are built from too), each match confirmed on the parent id and the name.
:meth:`Memtable.columns` sorts the entries into key order with Arrow, ready to
be written as a run.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from treestore import native
from treestore.storage.entries import ChildColumns, Key
from treestore.storage.keyfilter import KeyHashes, index_key

__all__ = ["ENTRY_BYTES", "KeyIndex", "Memtable"]


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
        self.kept = 0
        """The entries kept through the last flush (:meth:`clear`): slots below this. They
        hold nothing to add until a visit changes them; a flush writes only those."""

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

        return self.index.find(keys.indexed(), same)

    def slot(self, key: Key) -> int | None:
        """The slot of one key, None where the memtable lacks it (no array is rebuilt)."""
        found = self._unindexed.get(key)
        if found is not None or not self.index.size:
            return found
        parents = self.parents
        found = self.index.find_one(
            index_key(key), lambda slot: parents[slot] == key[0] and self._name(slot) == key[1]
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

    def keys(self) -> KeyHashes:
        """Every entry's key, by slot, with the hashes the key index holds (a run's filter
        of the entries takes them as they are)."""
        self._index_singles()
        parents = np.frombuffer(self.parents, dtype=np.int64).copy()
        return KeyHashes(parents, self.names(), indexed=self.index.hashes())

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
        self._index_singles()
        start = self.index.size
        new, other = self.index.insert(keys.indexed())
        if len(new) and self._repeats(keys, new - start, other):
            self.index.forget_from(start)
            raise ValueError("memtable keys added twice")
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

    def _repeats(self, keys: KeyHashes, positions: np.ndarray, others: np.ndarray) -> bool:
        """Whether the key at ``positions[i]`` of ``keys`` (being added from slot
        ``len(self)`` on) is the key of slot ``others[i]`` (one of the batch, or one held).
        Equal hashes of different keys are rare, so the pairs are compared one by one."""
        start, names = len(self), keys.arrow_names()

        def key(slot: int) -> Key:
            if slot >= start:
                return int(keys.parents[slot - start]), names[slot - start].as_py()
            return self.parents[slot], self._name(slot)

        return any(
            key(start + p) == key(o)
            for p, o in zip(positions.tolist(), others.tolist(), strict=True)
        )

    def _index_singles(self) -> None:
        """Give the key index the keys added one at a time since the last bulk call."""
        if self._unindexed:
            keys = list(self._unindexed)  # in slot order: the slots after the indexed ones
            parents = np.fromiter((k[0] for k in keys), dtype=np.int64, count=len(keys))
            self.index.insert(KeyHashes(parents, [k[1] for k in keys]).indexed())
            self._unindexed.clear()

    def changed_slots(self) -> np.ndarray | None:
        """The slots of the entries a flush writes (``None``: every one): all but the kept
        entries (:attr:`kept`) no visit has changed since."""
        if not self.kept:
            return None
        kept = slice(0, self.kept)
        changed = (np.frombuffer(self.hits, dtype=np.int64)[kept] != 0) | (
            np.frombuffer(self.counts, dtype=np.int64)[kept] != 0
        )
        changed[[slot for slot in self.data if slot < self.kept]] = True
        return np.concatenate(
            [np.flatnonzero(changed), np.arange(self.kept, len(self), dtype=np.int64)]
        )

    def inner_slots(self, most: int) -> np.ndarray:
        """The slots of the entries that are the parent of another entry (the nodes records
        passed through, which the next records pass through again), at most ``most`` of
        them, earliest first."""
        ids = np.frombuffer(self.ids, dtype=np.int64)
        parents = np.frombuffer(self.parents, dtype=np.int64)
        return np.flatnonzero(native.members(ids, parents))[:most]

    def columns(self, slots: np.ndarray | None = None) -> ChildColumns:
        """The entries (those at ``slots``; default all) in key order (by parent id, then
        name), with their data when some entry has new data."""
        return self._columns(slots)[0]

    def columns_and_hashes(
        self, slots: np.ndarray | None = None
    ) -> tuple[ChildColumns, np.ndarray]:
        """:meth:`columns`, and the hashes the key index holds of those entries, in their
        order (a run's filter of them takes them as they are)."""
        columns, order = self._columns(slots)
        self._index_singles()
        return columns, self.index.hashes()[order]

    def _columns(self, slots: np.ndarray | None) -> tuple[ChildColumns, np.ndarray]:
        """:meth:`columns`, and the slots of its entries."""
        names = self.names()
        parents = np.frombuffer(self.parents, dtype=np.int64)
        if slots is not None:
            names, parents = names.take(pa.array(slots)), parents[slots]
        order, parents, names = native.key_order(parents, names)
        if slots is not None:
            order = slots[order]  # the sorted entries' slots
        data = None
        if self.data:
            by_slot: list[Any] = [None] * len(self)
            for slot, value in self.data.items():
                by_slot[slot] = value
            data = [by_slot[slot] for slot in order.tolist()]
        ids, hits, counts = (
            np.frombuffer(column, dtype=np.int64)[order]
            for column in (self.ids, self.hits, self.counts)
        )
        return ChildColumns(parents, names, ids, hits, counts, data), order

    def clear(self, keep: np.ndarray | None = None) -> None:
        """Drop every entry, but keep those at slots ``keep`` (their keys and ids, nothing to
        add: they are written again only if a visit changes them), so that visits find
        them here and not in the runs."""
        kept = None
        if keep is not None and len(keep):
            self._index_singles()
            kept = (
                KeyHashes(
                    np.frombuffer(self.parents, dtype=np.int64)[keep],
                    self.names().take(pa.array(keep)),
                    indexed=self.index.hashes()[keep],
                ),
                np.frombuffer(self.ids, dtype=np.int64)[keep],
            )
        self.index.clear()
        self._chunks, self._single = [], []
        self._unindexed.clear()
        self.data.clear()
        self.parents, self.ids, self.hits, self.counts = (array("q") for _ in range(4))
        self.kept = 0
        if kept is not None:
            keys, ids = kept
            zeros = np.zeros(len(ids), dtype=np.int64)
            self.add(keys, ids, zeros, zeros)
            self.kept = len(ids)


_EMPTY = -1
_FIRST_CAPACITY = 1024

Same = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""``same(positions, slots)``: whether the key at ``positions[i]`` of a lookup is the key
held at ``slots[i]`` (called only where their hashes are equal)."""


class KeyIndex:
    """Slots ``0, 1, 2, ...`` given in insertion order to keys, found by their 64-bit hashes.

    An open-addressing hash table (linear probing, at most half full) in numpy. A lookup
    or an insert of a whole batch runs in rounds: every key still probing looks at its
    next position at once, so the Python work is per round, not per key (most keys
    settle in the first round). Equal hashes do not make equal keys: a lookup confirms
    each hash match with the caller's exact comparison and probes on past a different key.

    >>> index = KeyIndex()
    >>> _ = index.insert(np.array([7, 7 + 1024, 3], dtype=np.uint64))  # 7, 7 + 1024 collide
    >>> same = lambda positions, slots: np.ones(len(slots), dtype=bool)
    >>> index.find(np.array([7 + 1024, 5, 3], dtype=np.uint64), same).tolist()
    [1, -1, 2]
    >>> [pair.tolist() for pair in index.insert(np.array([3], dtype=np.uint64))]  # hash met
    [[3], [2]]
    """

    def __init__(self) -> None:
        self._table = np.full(_FIRST_CAPACITY, _EMPTY, dtype=np.int64)
        self._hashes = np.empty(_FIRST_CAPACITY // 2, dtype=np.uint64)
        self.size = 0
        """The number of keys held (the next slot to give)."""

    def __len__(self) -> int:
        return self.size

    def find(self, hashes: np.ndarray, same: Same) -> np.ndarray:
        """The slot of each key whose hash is ``hashes[i]`` (-1 where none is held)."""
        slots = np.full(len(hashes), _EMPTY, dtype=np.int64)
        if len(hashes) < native.NATIVE_FROM:
            places = (hashes & np.uint64(len(self._table) - 1)).astype(np.int64)
            return self._find_rounds(hashes, same, slots, np.arange(len(hashes)), places)
        # compiled: each key's first slot of an equal hash, confirmed on the keys at once
        found, after = native.kernels().probe_first(self._table, self._hashes, hashes)
        matched = np.flatnonzero(found >= 0)
        confirmed = np.zeros(len(matched), dtype=bool)
        if len(matched):
            confirmed = same(matched, found[matched])
        slots[matched[confirmed]] = found[matched[confirmed]]
        other = matched[~confirmed]  # equal hashes of different keys: probe on past them
        if len(other):
            self._find_rounds(hashes, same, slots, other, after[other])
        return slots

    def _find_rounds(
        self,
        hashes: np.ndarray,
        same: Same,
        slots: np.ndarray,
        probing: np.ndarray,
        places: np.ndarray,
    ) -> np.ndarray:
        """:meth:`find` of the keys ``probing``, each from its position in ``places``, in
        numpy rounds; their slots go into ``slots``."""
        table, held, mask = self._table, self._hashes, len(self._table) - 1
        while len(probing):
            found = table[places]
            occupied = found >= 0
            probing, places, found = probing[occupied], places[occupied], found[occupied]
            matched = np.flatnonzero(held[found] == hashes[probing])
            if len(matched):
                confirmed = matched[same(probing[matched], found[matched])]
                slots[probing[confirmed]] = found[confirmed]
                going = np.ones(len(probing), dtype=bool)
                going[confirmed] = False
                probing, places = probing[going], places[going]
            places = (places + 1) & mask
        return slots

    def find_one(self, hashed: int, same: Callable[[int], bool]) -> int:
        """:meth:`find` of one key (``same(slot)``: whether it is the key at ``slot``)."""
        table, held, mask = self._table, self._hashes, len(self._table) - 1
        place = hashed & mask
        while (found := int(table[place])) >= 0:
            if int(held[found]) == hashed and same(found):
                return found
            place = (place + 1) & mask
        return _EMPTY

    def insert(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Give the next slots, in order, to keys with these hashes (keys not held yet).

        Returns the pairs of slots ``(new, other)`` whose hashes are equal, met as the
        new keys were placed: two keys of the batch that are the same always meet (they
        probe the same positions in step), so the caller confirms these pairs on the keys
        and calls :meth:`forget_from` to undo a batch that repeats a key."""
        size = self.size + len(hashes)
        if 2 * size > len(self._table):
            self._grow(size)
        self._hashes[self.size : size] = hashes
        met = self._place(hashes, np.arange(self.size, size, dtype=np.int64))
        self.size = size
        return met

    def forget_from(self, slot: int) -> None:
        """Forget the keys of slots ``slot`` and up (the latest inserted: no older key
        probed past them)."""
        self._table[self._table >= slot] = _EMPTY
        self.size = slot

    def hashes(self) -> np.ndarray:
        """The hashes of the keys held, by slot."""
        return self._hashes[: self.size].copy()

    def clear(self) -> None:
        """Forget every key (the table keeps its size: a memtable fills up again)."""
        self._table.fill(_EMPTY)
        self.size = 0

    def _place(self, hashes: np.ndarray, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Write ``slots`` into empty positions, each from its hash's home on. Returns the
        pairs ``(slot, other)`` of equal hashes met."""
        if len(slots) >= native.NATIVE_FROM:
            room = len(slots) + 16
            met_new, met_other = np.empty(room, np.int64), np.empty(room, np.int64)
            met = native.kernels().place_slots(
                self._table, self._hashes, hashes, slots, met_new, met_other
            )
            if met <= room:
                return met_new[:met], met_other[:met]
            # more equal hashes than expected (a batch repeating keys): placed again in
            # rounds, which keep every pair (the slots placed are the newest ones)
            self._table[self._table >= int(slots.min())] = _EMPTY
        return self._place_rounds(hashes, slots)

    def _place_rounds(self, hashes: np.ndarray, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_place` in numpy rounds: of the slots that probe the same empty position
        at once, one lands (read back to see which); the others probe on."""
        table, held, mask = self._table, self._hashes, np.uint64(len(self._table) - 1)
        places = (hashes & mask).astype(np.int64)
        met: list[tuple[np.ndarray, np.ndarray]] = []
        while len(slots):
            empty = table[places] == _EMPTY
            table[places[empty]] = slots[empty]
            there = table[places]
            going = there != slots
            slots, places, there = slots[going], places[going], there[going]
            equal = held[there] == held[slots]
            if equal.any():
                met.append((slots[equal], there[equal]))
            places = (places + 1) & int(mask)
        if not met:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate([m[0] for m in met]), np.concatenate([m[1] for m in met])

    def _grow(self, size: int) -> None:
        """Room for ``size`` keys at most half the table: the held keys placed anew."""
        capacity = len(self._table)
        while 2 * size > capacity:
            capacity *= 2
        hashes = np.empty(capacity // 2, dtype=np.uint64)
        hashes[: self.size] = self._hashes[: self.size]
        self._table = np.full(capacity, _EMPTY, dtype=np.int64)
        self._hashes = hashes
        self._place(hashes[: self.size], np.arange(self.size, dtype=np.int64))
