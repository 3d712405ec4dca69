"""A tree's changes since its last flush, as columns with a key index.

Each entry is keyed like a run's entries, ``(parent id, name)``, and holds what
the writer added: the node's id, the hits and the child count to add, and (when
an attachment changed) the node's whole new data. The values live in int64
columns indexed by an entry's slot, so a bulk visit updates thousands of entries
with one numpy operation; the key index is a dict from key to slot (finding a
key is one hash lookup).
:meth:`Memtable.columns` sorts the entries into key order with Arrow, ready to
be written as a run.
"""

from __future__ import annotations

import itertools
import operator
from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from treestore.storage.entries import ChildColumns, Key

__all__ = ["ENTRY_BYTES", "Memtable"]


ENTRY_BYTES = 320
"""The memory one entry takes, measured (tracemalloc, 10-character names): 318 bytes
for the key tuple with its int and name, the dict slot with its int, and the values."""

_parent, _name = operator.itemgetter(0), operator.itemgetter(1)


class Memtable:
    """Entries ``(parent id, name) -> (node id, hits, child count, data)``, by slot.

    The values are ``array('q')`` columns: one entry at a time is a plain list-like
    update, and many at once go through a numpy view of the column's buffer. Views
    live only inside this class's methods (a column cannot grow while one exists).
    """

    def __init__(self) -> None:
        self.index: dict[Key, int] = {}
        self.names: list[str] = []
        self.parents, self.ids, self.hits, self.counts = (array("q") for _ in range(4))
        self.data: dict[int, dict[str, Any]] = {}
        """The new data of the entries whose attachments changed, by slot."""

    def __len__(self) -> int:
        return len(self.names)

    def __bool__(self) -> bool:
        return bool(self.names)

    def slots(self, keys: Sequence[Key]) -> np.ndarray:
        """The slot of each key, -1 where the memtable lacks it."""
        return np.fromiter(
            map(self.index.get, keys, itertools.repeat(-1)), dtype=np.int64, count=len(keys)
        )

    def ids_at(self, slots: np.ndarray) -> np.ndarray:
        """The node ids of the entries at ``slots``."""
        return np.frombuffer(self.ids, dtype=np.int64)[slots]

    def add_hits(self, slots: np.ndarray, hits: np.ndarray) -> None:
        """Add ``hits[i]`` to the entry at ``slots[i]`` (slots distinct)."""
        np.frombuffer(self.hits, dtype=np.int64)[slots] += hits

    def add_counts(self, slots: np.ndarray, counts: np.ndarray) -> None:
        """Add ``counts[i]`` to the child count of the entry at ``slots[i]`` (slots distinct)."""
        np.frombuffer(self.counts, dtype=np.int64)[slots] += counts

    def add(
        self, keys: Sequence[Key], ids: np.ndarray, hits: np.ndarray, counts: np.ndarray
    ) -> None:
        """Add entries for ``keys`` (which it must lack); a key given twice raises
        ``ValueError`` and changes nothing."""
        start, size = len(self.names), len(keys)
        index = self.index
        index.update(zip(keys, range(start, start + size), strict=True))
        if len(index) != start + size:  # a key repeated: undo, change nothing
            for key in keys:
                index.pop(key, None)
            raise ValueError("memtable keys added twice")
        self.parents.frombytes(
            np.fromiter(map(_parent, keys), dtype=np.int64, count=size).tobytes()
        )
        for column, values in ((self.ids, ids), (self.hits, hits), (self.counts, counts)):
            column.frombytes(np.asarray(values, dtype=np.int64).tobytes())
        self.names.extend(map(_name, keys))

    def add_one(self, key: Key, node_id: int, hits: int, count: int) -> int:
        """Add one entry (the memtable must lack ``key``); return its slot."""
        slot = len(self.names)
        self.parents.append(key[0])
        self.ids.append(node_id)
        self.hits.append(hits)
        self.counts.append(count)
        self.names.append(key[1])
        self.index[key] = slot
        return slot

    def columns(self) -> ChildColumns:
        """The entries in key order (by parent id, then name), with their data when some
        entry has new data."""
        size = len(self.names)
        names = pa.array(self.names, pa.string())
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
        self.names.clear()
        self.data.clear()
        self.parents, self.ids, self.hits, self.counts = (array("q") for _ in range(4))
