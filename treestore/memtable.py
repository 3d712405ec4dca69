"""A tree's changes since its last flush, as columns with a key index.

Each entry is keyed like a run's entries, ``(parent id, name)``, and holds what
the writer added: the node's id, the hits and the child count to add, and (when
an attachment changed) the node's whole new data. The values live in numpy
arrays indexed by an entry's slot, so a bulk visit updates thousands of entries
with one array operation; the key index is a dict from key to slot (finding a
key is one hash lookup, with no per-entry Python objects besides the key).
:meth:`Memtable.columns` sorts the entries into key order with Arrow, ready to
be written as a run.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from treestore.columns import ChildColumns

__all__ = ["ENTRY_BYTES", "Key", "Memtable"]

Key = tuple[int, str]

ENTRY_BYTES = 320
"""The memory one entry takes, measured (tracemalloc, 10-character names): 318 bytes
for the key tuple with its int and name, the dict slot with its int, and the values."""

_VALUES = 4  # node id, hits, child count, parent id
_parent, _name = operator.itemgetter(0), operator.itemgetter(1)


class Memtable:
    """Entries ``(parent id, name) -> (node id, hits, child count, data)``, by slot."""

    def __init__(self) -> None:
        self.index: dict[Key, int] = {}
        self.names: list[str] = []
        self._values = np.zeros((_VALUES, 1024), dtype=np.int64)
        self.data: dict[int, dict[str, Any]] = {}
        """The new data of the entries whose attachments changed, by slot."""

    def __len__(self) -> int:
        return len(self.names)

    def __bool__(self) -> bool:
        return bool(self.names)

    @property
    def ids(self) -> np.ndarray:
        """Each slot's node id (a view: writes go through)."""
        return self._values[0, : len(self.names)]

    @property
    def hits(self) -> np.ndarray:
        """Each slot's added hits (a view: writes go through)."""
        return self._values[1, : len(self.names)]

    @property
    def counts(self) -> np.ndarray:
        """Each slot's added child count (a view: writes go through)."""
        return self._values[2, : len(self.names)]

    def slots(self, keys: Sequence[Key]) -> np.ndarray:
        """The slot of each key, -1 where the memtable lacks it."""
        return np.fromiter(
            map(self.index.get, keys, itertools.repeat(-1)), dtype=np.int64, count=len(keys)
        )

    def add(
        self, keys: Sequence[Key], ids: np.ndarray, hits: np.ndarray, counts: np.ndarray
    ) -> np.ndarray:
        """Add entries for ``keys`` (which it must lack); return their slots."""
        start, size = len(self.names), len(keys)
        stop = start + size
        if stop > self._values.shape[1]:
            grown = np.zeros((_VALUES, max(stop, 2 * self._values.shape[1])), dtype=np.int64)
            grown[:, :start] = self._values[:, :start]
            self._values = grown
        values = self._values
        values[0, start:stop] = ids
        values[1, start:stop] = hits
        values[2, start:stop] = counts
        values[3, start:stop] = np.fromiter(map(_parent, keys), dtype=np.int64, count=size)
        self.names.extend(map(_name, keys))
        self.index.update(zip(keys, range(start, stop), strict=True))
        if len(self.index) != stop:
            raise ValueError("memtable keys added twice")
        return np.arange(start, stop, dtype=np.int64)

    def add_one(self, key: Key, node_id: int, hits: int, count: int) -> int:
        """Add one entry (the memtable must lack ``key``); return its slot."""
        slot = len(self.names)
        if slot == self._values.shape[1]:
            self._values = np.concatenate([self._values, np.zeros_like(self._values)], axis=1)
        self._values[:, slot] = (node_id, hits, count, key[0])
        self.names.append(key[1])
        self.index[key] = slot
        return slot

    def node_id(self, slot: int) -> int:
        """The node id of the entry at ``slot``."""
        return int(self._values[0, slot])

    def bump(self, slot: int, hits: int, count: int) -> None:
        """Add ``hits`` and ``count`` to the entry at ``slot``."""
        values = self._values
        values[1, slot] += hits
        values[2, slot] += count

    def columns(self) -> ChildColumns:
        """The entries in key order (by parent id, then name), with their data when some
        entry has new data."""
        size = len(self.names)
        parents = self._values[3, :size]
        names = pa.array(self.names, pa.string())
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
        values = self._values[:, :size][:, order]
        return ChildColumns(values[3], names.take(order), values[0], values[1], values[2], data)

    def clear(self) -> None:
        """Drop every entry."""
        self.index.clear()
        self.names.clear()
        self.data.clear()
