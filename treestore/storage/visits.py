"""Writing to one shard's tree: visits that add hits and nodes to its memtable.

A visit adds hits to a parent's child of a given name, creating it if the visit
may. Whether a visit goes ahead is one rule (:func:`accepts`), for single visits
(:meth:`TreeWriter.visit`) and many at once (:meth:`TreeWriter.visit_many`):

- a creating visit always does (creating the node if it is missing);
- an update-only visit (``create=False``) only reaches a node that exists, and was
  created before ``created_before`` (a node id: nodes made since count as missing);
- a ``once`` visit only reaches the node it creates, with one hit.

Changes collect in the memtable (:mod:`treestore.storage.memtable`); reads of the
tree (:class:`~treestore.storage.reading.TreeReader`) see committed runs only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from treestore import native
from treestore.storage.entries import Key
from treestore.storage.keyfilter import KeyHashes
from treestore.storage.memtable import ENTRY_BYTES as MEMTABLE_ENTRY_BYTES
from treestore.storage.memtable import Memtable
from treestore.storage.page_cache import cache
from treestore.storage.pagestore import PageStore
from treestore.storage.reading import ROOT_ID, ROOT_KEY, TreeReader
from treestore.storage.state import ShardState, WriteStats

__all__ = [
    "ANY_AGE",
    "Handle",
    "Handles",
    "TreeWriter",
    "accepts",
    "counted_hits",
    "memtable_limit",
]

Handle = tuple[int, Key]
"""What :meth:`TreeWriter.visit` takes and returns: a node's id and key."""
ANY_AGE = 1 << 62
"""``created_before`` that lets update-only visits reach every node."""

_Ids = TypeVar("_Ids", int, np.ndarray)


@dataclass(frozen=True)
class Handles:
    """Many nodes' handles as columns: their ids and their keys, ``(parents[i], names[i])``
    (what :meth:`TreeWriter.visit_many` takes)."""

    ids: np.ndarray
    parents: np.ndarray
    """Each node's parent id (the first part of its key)."""
    names: pa.Array
    """Each node's name (a string array)."""

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, position: int) -> Handle:
        key = (int(self.parents[position]), self.names[position].as_py())
        return (int(self.ids[position]), key)

    @classmethod
    def of(cls, handles: Sequence[Handle]) -> Handles:
        """Handles from ``(id, key)`` pairs."""
        return cls(
            np.array([h[0] for h in handles], dtype=np.int64),
            np.array([h[1][0] for h in handles], dtype=np.int64),
            pa.array([h[1][1] for h in handles], pa.string()),
        )

    def take(self, positions: np.ndarray) -> Handles:
        """The handles at ``positions``."""
        return Handles(self.ids[positions], self.parents[positions], self.names.take(positions))

    def keys(self, positions: np.ndarray) -> KeyHashes:
        """The keys of the handles at ``positions``."""
        return KeyHashes(self.parents[positions], self.names.take(positions))

    @staticmethod
    def concat(parts: Sequence[Handles]) -> Handles:
        """The handles of ``parts``, one after another."""
        return Handles(
            np.concatenate([p.ids for p in parts]),
            np.concatenate([p.parents for p in parts]),
            pa.concat_arrays([p.names for p in parts]),
        )


def accepts(stored: _Ids, create: bool, once: bool, created_before: int) -> Any:
    """Whether a visit goes ahead, given the id its node has (-1: none yet); elementwise
    for an array of ids.

    >>> [accepts(i, create=False, once=False, created_before=5) for i in (-1, 3, 7)]
    [False, True, False]
    >>> accepts(np.array([-1, 3]), create=True, once=True, created_before=5).tolist()
    [True, False]
    """
    if once:
        return (stored < 0) & create
    return ((stored >= 0) & (stored < created_before)) | create


def counted_hits(hits: _Ids, once: bool) -> _Ids:
    """The hits an accepted visit adds: a ``once`` visit adds at most one."""
    return np.minimum(hits, 1) if once else hits  # type: ignore[return-value]


def memtable_limit() -> int:
    """Entries a memtable made now may hold: half the page cache's budget, plus what the
    cache lends memtables at the moment (:meth:`~treestore.storage.page_cache.PageCache.lend`:
    a load's task lends half the cache's, so its memtables hold the whole budget), at
    :data:`~treestore.storage.memtable.ENTRY_BYTES` each.

    A load's hot nodes (the upper levels its records pass through: at 10x the seed's rows,
    about 1.1M a shard) come back into the memtable after every flush, as changes to
    add; a memtable not much bigger than them spills mostly those, again and again, and
    looks them up in the runs again after each spill. At 10x the seed's rows a shard took
    22.8 s to apply its records with half the budget (1M entries; 2.5x its tree's bytes
    written) and 17.1-18.3 s with the whole (1.1x written, no merge during the load)."""
    cache_now = cache()
    return max(1000, (cache_now.budget // 2 + cache_now.lent) // MEMTABLE_ENTRY_BYTES)


class TreeWriter(TreeReader):
    """A tree's reads plus visits into a memtable; :meth:`flush` is the subclass's.

    Args:
        pages: where the runs live.
        state: the runs and counters to start from.
        shard: the shard number, for messages and run names.
        owner: the store's identity, if it has one (see :class:`TreeReader`).
    """

    def __init__(
        self, pages: PageStore, state: ShardState, shard: int = 0, owner: str | None = None
    ) -> None:
        super().__init__(pages, state.runs, shard, state.run_sums, owner)
        self.next_id = state.next_id
        self.memtable = Memtable()
        self.memtable_limit = memtable_limit()
        self.sealed_entries = 0
        """The memtable's budget that entries sealed but not yet written take (in entries:
        see :meth:`~treestore.storage.tree.ShardTree.end_part`)."""
        self.stats = WriteStats()

    def _memtable_full(self) -> bool:
        """Whether the memtable, with the entries sealed but not yet written, has reached
        its budget (the next visit flushes first)."""
        return len(self.memtable) + self.sealed_entries >= self.memtable_limit

    def flush(self) -> None:
        """Write the memtable as a new run (see :class:`~treestore.storage.tree.ShardTree`)."""
        raise NotImplementedError

    @property
    def root_handle(self) -> Handle:
        """The handle of the internal root, where records start."""
        return (ROOT_ID, ROOT_KEY)

    def visit(
        self,
        parent: Handle,
        name: str,
        create: bool = True,
        hits: int = 1,
        once: bool = False,
        created_before: int = ANY_AGE,
    ) -> Handle | None:
        """Add ``hits`` to ``parent``'s child ``name`` if :func:`accepts` lets the visit go
        ahead, creating the child if it is missing.

        Returns the child's handle, or ``None`` when the visit does not go ahead.
        """
        memtable = self.memtable
        if self._memtable_full():
            self.flush()
        parent_id, parent_key = parent
        key = (parent_id, name)
        slot = memtable.slot(key)
        if slot is not None:
            node_id = memtable.ids[slot]
        else:
            stored = self.entry(key)
            node_id = -1 if stored is None else stored[1]
        if not accepts(node_id, create, once, created_before):
            return None
        if node_id < 0:
            node_id = self.next_id
            self.next_id += 1
            self.stats.nodes_created += 1
            slot = memtable.add_one(key, node_id, 0, 0)
            parent_slot = memtable.slot(parent_key)
            if parent_slot is None:
                memtable.add_one(parent_key, parent_id, 0, 1)
                self.stats.nodes_updated += parent_id != ROOT_ID  # not the internal root
            else:
                memtable.counts[parent_slot] += 1
        elif slot is None:
            slot = memtable.add_one(key, node_id, 0, 0)
            self.stats.nodes_updated += 1
        memtable.hits[slot] += counted_hits(hits, once)
        return (node_id, key)

    def find_many(
        self, parents: Handles, picks: np.ndarray, names: Sequence[str] | pa.Array
    ) -> np.ndarray:
        """The node ids of the children ``names[i]`` of ``parents[picks[i]]`` (-1 where there
        is none), changing nothing: the memtable's, else the runs'."""
        keys = KeyHashes(parents.ids[picks], names)
        return self._ids_of(keys, self.memtable.slots(keys))

    def _ids_of(self, keys: KeyHashes, slots: np.ndarray) -> np.ndarray:
        """The ids of the nodes ``keys`` whose memtable slots are ``slots`` (-1: not in the
        memtable, so looked up in the runs)."""
        in_memtable = slots >= 0
        ids = np.full(len(keys), -1, dtype=np.int64)
        ids[in_memtable] = self.memtable.ids_at(slots[in_memtable])
        missing = np.flatnonzero(~in_memtable)
        if len(missing):
            ids[missing] = self.stored_ids(keys.take(missing))
        return ids

    def visit_many(
        self,
        parents: Handles,
        picks: np.ndarray,
        names: Sequence[str] | pa.Array,
        create: bool = True,
        hits: np.ndarray | None = None,
        once: bool = False,
        created_before: int = ANY_AGE,
        known: np.ndarray | None = None,
    ) -> np.ndarray:
        """:meth:`visit` of the children ``names[i]`` of the nodes ``parents[picks[i]]``, all
        at once: the same result as one call each, in order. The keys must be distinct.
        Visits of more than half the memtable's limit go in pieces of that size, each
        followed by a flush when the memtable is full, so it holds at most twice its limit.

        Returns each child's node id (-1 where :meth:`visit` returns ``None``); its key is
        ``(parents.ids[picks[i]], names[i])``. Nodes the memtable lacks are looked up in the
        runs as columns (:meth:`~treestore.storage.reading.TreeReader.stored_ids`), unless
        ``known`` gives every child's id already (as :meth:`find_many` found them, nothing
        changed since); the memtable is found and updated with array operations. Visits
        that go in pieces look their nodes up once, before the first piece: a piece
        cannot make a node of a later one, and the flushes between them change no id.
        """
        keys = KeyHashes(parents.ids[picks], names)
        size = len(keys)
        weights = np.ones(size, np.int64) if hits is None else np.asarray(hits, np.int64)
        piece = max(1, self.memtable_limit // 2)
        if size > piece:  # keeps the memtable within twice its limit
            names = keys.arrow_names()
            if known is None:  # looked up once for all the pieces (the keys are distinct)
                known = self._ids_of(keys, self.memtable.slots(keys))
            return np.concatenate(
                [
                    self.visit_many(
                        parents,
                        picks[start : start + piece],
                        names.slice(start, piece),
                        create,
                        weights[start : start + piece],
                        once,
                        created_before,
                        None if known is None else known[start : start + piece],
                    )
                    for start in range(0, size, piece)
                ]
            )
        memtable = self.memtable
        slots = memtable.slots(keys)
        in_memtable = slots >= 0
        ids = np.array(known, dtype=np.int64) if known is not None else self._ids_of(keys, slots)
        if known is not None and (in_memtable & (ids < 0)).any():  # made by an earlier piece
            raise ValueError("visit_many takes distinct (parent, name) keys")
        accepted = np.asarray(accepts(ids, create, once, created_before), dtype=bool)
        fresh = np.flatnonzero(accepted & (ids < 0))
        ids[fresh] = self.next_id + np.arange(len(fresh))
        weights = counted_hits(weights, once)
        bumped = np.flatnonzero(accepted & in_memtable)
        if native.repeats(slots[bumped]):
            raise ValueError("visit_many takes distinct (parent, name) keys")
        added = np.flatnonzero(accepted & ~in_memtable)
        try:  # first: it changes nothing when a key repeats
            memtable.add(
                keys.take(added), ids[added], weights[added], np.zeros(len(added), dtype=np.int64)
            )
        except ValueError:
            raise ValueError("visit_many takes distinct (parent, name) keys") from None
        self.next_id += len(fresh)
        memtable.add_hits(slots[bumped], weights[bumped])
        if len(fresh):
            self._count_children(parents, picks[fresh])
        self.stats.nodes_created += len(fresh)
        self.stats.nodes_updated += len(added) - len(fresh)
        ids[~accepted] = -1
        if self._memtable_full():
            self.flush()
        return ids

    def _count_children(self, parents: Handles, picks: np.ndarray) -> None:
        """Add one to the child count of ``parents[picks[i]]`` for each ``i``."""
        distinct, first, inverse = native.first_inverse_groups(parents.ids[picks])
        counts = np.bincount(inverse, minlength=len(distinct))
        keys = parents.keys(picks[first])
        memtable = self.memtable
        slots = memtable.slots(keys)
        have = slots >= 0
        memtable.add_counts(slots[have], counts[have])
        absent = np.flatnonzero(~have)
        memtable.add(
            keys.take(absent),
            distinct[absent],
            np.zeros(len(absent), dtype=np.int64),
            counts[absent],
        )
        not_root = distinct[absent] != ROOT_ID  # the internal root is not counted as updated
        self.stats.nodes_updated += int(not_root.sum())

    def update_data(self, handle: Handle, update: Callable[[dict[str, Any]], None]) -> None:
        """Change the data of a node visited in this load: ``update`` edits its dict in place."""
        node_id, key = handle
        memtable = self.memtable
        slot = memtable.slot(key)
        if slot is None:  # flushed since it was visited
            slot = memtable.add_one(key, node_id, 0, 0)
        data = memtable.data.get(slot)
        if data is None:
            stored = self.entry(key)
            data = memtable.data[slot] = dict(stored[4]) if stored is not None and stored[4] else {}
        update(data)
