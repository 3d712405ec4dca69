"""Slots by 64-bit key hash, many keys at a time: the memtable's key index.

An open-addressing hash table (linear probing, at most half full) from a key's
64-bit hash (:meth:`treestore.storage.keyfilter.KeyHashes.folded`) to the slot the
key was given, in numpy. A lookup or an insert of a whole batch runs in rounds: every
key still probing looks at its next position at once, so the Python work is per
round, not per key (a batch at half load settles in a few dozen rounds, most keys in
the first). Equal hashes do not make equal keys: a lookup confirms each hash match
with the caller's exact comparison and probes on past a different key.

>>> index = KeyIndex()
>>> index.insert(np.array([7, 7 + 1024, 3], dtype=np.uint64))  # 7 and 7 + 1024 collide
>>> same = lambda positions, slots: np.ones(len(slots), dtype=bool)
>>> index.find(np.array([7 + 1024, 5, 3], dtype=np.uint64), same).tolist()
[1, -1, 2]
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["KeyIndex"]

_EMPTY = -1
_FIRST_CAPACITY = 1024

Same = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""``same(positions, slots)``: whether the key at ``positions[i]`` of a lookup is the key
held at ``slots[i]`` (called only where their hashes are equal)."""


class KeyIndex:
    """Slots ``0, 1, 2, ...`` given in insertion order to keys, found by their hashes."""

    def __init__(self) -> None:
        self._table = np.full(_FIRST_CAPACITY, _EMPTY, dtype=np.int64)
        self._hashes = np.empty(_FIRST_CAPACITY // 2, dtype=np.uint64)
        self.size = 0
        """The number of keys held (the next slot to give)."""

    def __len__(self) -> int:
        return self.size

    def find(self, hashes: np.ndarray, same: Same) -> np.ndarray:
        """The slot of each key whose hash is ``hashes[i]`` (-1 where none is held)."""
        table, held, mask = self._table, self._hashes, np.uint64(len(self._table) - 1)
        slots = np.full(len(hashes), _EMPTY, dtype=np.int64)
        probing = np.arange(len(hashes))
        places = (hashes & mask).astype(np.int64)
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
            places = (places + 1) & int(mask)
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

    def insert(self, hashes: np.ndarray) -> None:
        """Give the next slots, in order, to keys with these hashes (keys not held yet)."""
        size = self.size + len(hashes)
        if 2 * size > len(self._table):
            self._grow(size)
        self._hashes[self.size : size] = hashes
        self._place(hashes, np.arange(self.size, size, dtype=np.int64))
        self.size = size

    def insert_one(self, hashed: int) -> int:
        """:meth:`insert` of one key; returns its slot."""
        slot = self.size
        if 2 * (slot + 1) > len(self._table):
            self._grow(slot + 1)
        table, mask = self._table, len(self._table) - 1
        place = hashed & mask
        while table[place] >= 0:
            place = (place + 1) & mask
        table[place] = slot
        self._hashes[slot] = hashed
        self.size = slot + 1
        return slot

    def clear(self) -> None:
        """Forget every key."""
        self.__init__()  # type: ignore[misc]

    def _place(self, hashes: np.ndarray, slots: np.ndarray) -> None:
        """Write ``slots`` into empty positions, each from its hash's home on. Of the slots
        that probe the same empty position at once, one lands (read back to see which);
        the others probe on."""
        table, mask = self._table, np.uint64(len(self._table) - 1)
        places = (hashes & mask).astype(np.int64)
        while len(slots):
            empty = table[places] == _EMPTY
            table[places[empty]] = slots[empty]
            landed = empty & (table[places] == slots)
            slots, places = slots[~landed], (places[~landed] + 1) & int(mask)

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
