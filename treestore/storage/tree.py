"""One shard's tree, paged: read nodes through the page cache, add to it in a memtable.

A tree is a list of runs (see :mod:`treestore.storage.runs`) plus the next free node id.
Reading (:meth:`ShardTree.child`, :meth:`ShardTree.children`) merges the runs
and reads only the pages that hold the asked-for keys. Writing
(:meth:`ShardTree.visit`) collects changes in an in-memory table; it is flushed
to a new run when it outgrows its budget and at :meth:`ShardTree.commit`, so a
load writes only what it changed: the pages of the runs it did not touch stay
shared with earlier versions. Reads see committed runs only.

A node's children come in UTF-8 byte order of their names (Python compares
``str`` by code point, and UTF-8 preserves code-point order; UTF-16 order, as in
Java, differs beyond U+FFFF).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from treestore.storage.entries import ChildColumns, merge_columns
from treestore.storage.memtable import ENTRY_BYTES as MEMTABLE_ENTRY_BYTES
from treestore.storage.memtable import Memtable
from treestore.storage.pagestore import PageStore
from treestore.storage.runs import (
    PAGE_BYTES,
    Columns,
    Entry,
    Key,
    RunReader,
    cache,
    column_chunks,
    key_hash,
    merge_entries,
    write_run,
)

__all__ = ["ROOT_KEY", "Handle", "Handles", "Node", "ShardState", "ShardTree"]

ROOT_KEY: Key = (-1, "")
"""The key of a tree's internal root (node id 0)."""
ROOT_ID = 0
Handle = tuple[int, Key]
"""What :meth:`ShardTree.visit` takes and returns: a node's id and key."""


@dataclass(frozen=True)
class Handles:
    """Many nodes' handles as columns: their ids and their keys (what
    :meth:`ShardTree.visit_many` takes)."""

    ids: np.ndarray
    keys: list[Key]

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, position: int) -> Handle:
        return (int(self.ids[position]), self.keys[position])


MAX_RUNS = 6
"""More runs than this after a load trigger a compaction (of the newest, smaller runs)."""
_MERGE_ENTRY_BYTES = 128  # measured: columns, sort indices and copies while merging


def columnar_merge_limit() -> int:
    """Compactions of up to this many entries merge whole runs as columns in memory (fast;
    about the page cache's budget); bigger ones stream entry by entry. A load merges
    the runs it spilled at commit only up to this many entries."""
    return max(100_000, cache().budget // _MERGE_ENTRY_BYTES)


def _slices(columns: ChildColumns, size: int = 65536) -> Iterator[Columns]:
    """Merged columns as :func:`write_run` chunks of ``size`` entries."""
    for start in range(0, len(columns), size):
        stop = start + size
        yield (
            columns.parents[start:stop],
            columns.names.slice(start, size),
            columns.ids[start:stop],
            columns.hits[start:stop],
            columns.counts[start:stop],
            None if columns.data is None else columns.data[start:stop],
        )


@dataclass(frozen=True, slots=True)
class Node:
    """A snapshot of one node as stored."""

    key: Key
    id: int
    hits: int
    node_count: int
    data: Any = None

    @property
    def name(self) -> str:
        """The node's name (empty for the internal root)."""
        return self.key[1]

    @classmethod
    def of(cls, entry: Entry) -> Node:
        """The node an entry describes."""
        key, node_id, hits, count, data = entry
        return cls(key, node_id, hits, count, data)


@dataclass(frozen=True)
class ShardState:
    """A shard's tree as a version's manifest records it."""

    runs: tuple[str, ...] = ()
    next_id: int = 1
    nodes: int = 0
    bytes: int = 0
    pending: tuple[str, ...] = ()
    """The files of the shard's pending records (update-only records waiting for their
    node, see :mod:`loaders.tree.pending`)."""
    pending_records: int = 0
    pending_time: int | None = None
    """The largest time the shard's loads have seen in the field pending records wait on
    (their watermark is this minus the element's delay)."""
    pending_tree: str | None = None
    """The fingerprint of the job's tree ``pending_time`` was seen under (another tree
    starts a new watermark)."""

    def to_json(self) -> dict[str, Any]:
        """The manifest form."""
        doc: dict[str, Any] = {
            "runs": list(self.runs),
            "next_id": self.next_id,
            "nodes": self.nodes,
            "bytes": self.bytes,
        }
        if self.pending or self.pending_time is not None:
            doc["pending"] = {
                "files": list(self.pending),
                "records": self.pending_records,
                "time": self.pending_time,
                "tree": self.pending_tree,
            }
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ShardState:
        """Read the manifest form."""
        pending = doc.get("pending") or {}
        return cls(
            tuple(doc["runs"]),
            int(doc["next_id"]),
            int(doc["nodes"]),
            int(doc["bytes"]),
            tuple(pending.get("files", ())),
            int(pending.get("records", 0)),
            pending.get("time"),
            pending.get("tree"),
        )

    def files(self) -> set[str]:
        """Every file of this state but the runs' own: the pending records' files."""
        return set(self.pending)


@dataclass
class WriteStats:
    """What a writer did to its tree."""

    nodes_created: int = 0
    nodes_updated: int = 0  # existing nodes pulled into the memtable (again after a flush),
    # by a visit or to count a new child
    runs_written: list[str] = field(default_factory=list)
    bytes_written: int = 0
    compacted: bool = False


def _memtable_limit() -> int:
    """Entries the memtable may hold: about half the page cache's budget."""
    return max(1000, cache().budget // 2 // MEMTABLE_ENTRY_BYTES)


class ShardTree:
    """A shard's tree over a :class:`PageStore`.

    Args:
        store: where the runs live.
        state: the runs and counters to start from (an empty tree by default).
        shard: the shard number, for messages and run names.
        page_bytes: the target page size of runs this tree writes.
    """

    def __init__(
        self,
        store: PageStore,
        state: ShardState | None = None,
        shard: int = 0,
        page_bytes: int = PAGE_BYTES,
    ) -> None:
        self.store = store
        self.state = state or ShardState()
        self.shard = shard
        self.page_bytes = page_bytes
        self.readers = [RunReader(store, name, shard) for name in self.state.runs]
        self.next_id = self.state.next_id
        self.memtable = Memtable()
        self.memtable_limit = _memtable_limit()
        self.stats = WriteStats()
        self.update_floor = 1 << 62
        """Update-only visits treat nodes with an id at least this as absent (see visit)."""
        self._tag = uuid.uuid4().hex[:12]

    # -- reading -----------------------------------------------------------

    def _merged_get(self, key: Key) -> Entry | None:
        if not self.readers:
            return None
        hashed = key_hash(key)
        found = [e for reader in self.readers if (e := reader.get(key, hashed)) is not None]
        if not found:
            return None
        if len(found) == 1:
            return found[0]
        return next(merge_entries([iter([e]) for e in found]))

    @property
    def root(self) -> Node:
        """The internal root (queries start under it)."""
        entry = self._merged_get(ROOT_KEY)
        return Node.of(entry) if entry else Node(ROOT_KEY, ROOT_ID, 0, 0)

    def child(self, node: Node, name: str) -> Node | None:
        """The child of ``node`` called ``name``, or ``None``."""
        entry = self._merged_get((node.id, name))
        return Node.of(entry) if entry else None

    def children(self, node: Node, start: str = "", stop: str | None = None) -> Iterator[Node]:
        """The children of ``node`` with ``start <= name < stop``, in name order."""
        if node.node_count == 0:  # a leaf: no page needs reading
            return
        low: Key = (node.id, start)
        high: Key = (node.id, stop) if stop is not None else (node.id + 1, "")
        streams = [reader.scan(low, high) for reader in self.readers]
        for entry in merge_entries(streams):
            yield Node.of(entry)

    def children_columns(self, parents: np.ndarray) -> ChildColumns:
        """The children of the nodes with ids ``parents`` (sorted, distinct) as columns, in key
        order (by parent id, then name), merged across runs."""
        return merge_columns([reader.children_columns(parents) for reader in self.readers])

    def all_columns(self) -> ChildColumns:
        """Every entry of the tree (the internal root's too) as columns in key order, merged
        across runs; each run is read whole."""
        return merge_columns([reader.all_columns() for reader in self.readers])

    def walk(self) -> Iterator[tuple[tuple[str, ...], Node]]:
        """Every node but the internal root, depth first in child order, with its path."""
        stack: list[tuple[tuple[str, ...], Iterator[Node]]] = [((), self.children(self.root))]
        while stack:
            path, iterator = stack[-1]
            node = next(iterator, None)
            if node is None:
                stack.pop()
                continue
            yield (*path, node.name), node
            stack.append(((*path, node.name), self.children(node)))

    def count_nodes(self) -> int:
        """The number of nodes, the internal root excluded (counted by scanning)."""
        return sum(1 for _ in self.walk())

    # -- writing -----------------------------------------------------------

    @property
    def root_handle(self) -> Handle:
        """The handle of the internal root, where records start."""
        return (ROOT_ID, ROOT_KEY)

    def visit(
        self, parent: Handle, name: str, create: bool = True, hits: int = 1, once: bool = False
    ) -> Handle | None:
        """Add ``hits`` to ``parent``'s child ``name``, creating it if ``create``.

        Returns the child's handle, or ``None`` if it does not exist and
        ``create`` is false (a child whose id is at least :attr:`update_floor`
        counts as not existing then). With ``once``, only a child this call
        creates is visited (it gets one hit); an existing one returns ``None``.
        """
        memtable = self.memtable
        if len(memtable) >= self.memtable_limit:
            self.flush()
        parent_id, parent_key = parent
        key = (parent_id, name)
        slot = memtable.index.get(key)
        if slot is None:
            stored = self._merged_get(key)
            if stored is None:
                if not create:
                    return None
                node_id = self.next_id
                self.next_id += 1
                self.stats.nodes_created += 1
                slot = memtable.add_one(key, node_id, 0, 0)
                parent_slot = memtable.index.get(parent_key)
                if parent_slot is None:
                    memtable.add_one(parent_key, parent_id, 0, 1)
                    self.stats.nodes_updated += parent_id != ROOT_ID  # not the internal root
                else:
                    memtable.counts[parent_slot] += 1
                if once:
                    hits = min(hits, 1)
            else:
                node_id = stored[1]
                if once or (not create and node_id >= self.update_floor):
                    return None
                slot = memtable.add_one(key, node_id, 0, 0)
                self.stats.nodes_updated += 1
        else:
            node_id = memtable.ids[slot]
            if once or (not create and node_id >= self.update_floor):
                return None
        memtable.hits[slot] += hits
        return (node_id, key)

    def visit_many(
        self,
        parents: Handles,
        picks: np.ndarray,
        names: Sequence[str],
        create: bool = True,
        hits: np.ndarray | None = None,
        once: bool = False,
    ) -> tuple[np.ndarray, list[Key]]:
        """:meth:`visit` of the children ``names[i]`` of the nodes ``parents[picks[i]]``, all
        at once: the same result as one call each, in order. The keys must be distinct.
        Visits of more than half the memtable's limit go in pieces of that size, each
        followed by a flush when the memtable is full, so it holds at most twice its limit.

        Returns each child's node id (-1 where :meth:`visit` returns ``None``) and its key.
        Nodes the memtable lacks are looked up in the runs as columns
        (:meth:`RunReader.find_ids`); the memtable is updated with array operations.
        """
        size = len(names)
        weights = np.ones(size, np.int64) if hits is None else np.asarray(hits, np.int64)
        piece = max(1, self.memtable_limit // 2)
        if size > piece:  # keeps the memtable within twice its limit
            done = [
                self.visit_many(
                    parents,
                    picks[start : start + piece],
                    names[start : start + piece],
                    create,
                    weights[start : start + piece],
                    once,
                )
                for start in range(0, size, piece)
            ]
            return np.concatenate([ids for ids, _ in done]), [k for _, keys in done for k in keys]
        parent_ids = parents.ids[picks]
        keys = list(zip(parent_ids.tolist(), names, strict=True))
        memtable = self.memtable
        slots = memtable.slots(keys)
        in_memtable = slots >= 0
        ids = np.full(size, -1, dtype=np.int64)
        ids[in_memtable] = memtable.ids_at(slots[in_memtable])
        missing = np.flatnonzero(~in_memtable)
        if len(missing):
            ids[missing] = self._stored_ids(
                parent_ids[missing], [names[i] for i in missing.tolist()]
            )
        known = ids >= 0
        if once:
            accepted = ~known if create else np.zeros(size, dtype=bool)
        elif create:
            accepted = np.ones(size, dtype=bool)
        else:
            accepted = known & (ids < self.update_floor)
        fresh = np.flatnonzero(accepted & ~known)
        ids[fresh] = self.next_id + np.arange(len(fresh))
        if once:
            weights = np.minimum(weights, 1)
        bumped = np.flatnonzero(accepted & in_memtable)
        if len(np.unique(slots[bumped])) < len(bumped):
            raise ValueError("visit_many takes distinct (parent, name) keys")
        added = np.flatnonzero(accepted & ~in_memtable)
        try:  # first: it changes nothing when a key repeats
            memtable.add(
                [keys[i] for i in added.tolist()],
                ids[added],
                weights[added],
                np.zeros(len(added), dtype=np.int64),
            )
        except ValueError:
            raise ValueError("visit_many takes distinct (parent, name) keys") from None
        self.next_id += len(fresh)
        memtable.add_hits(slots[bumped], weights[bumped])
        if len(fresh):
            self._count_children(parents, picks[fresh], parent_ids[fresh])
        self.stats.nodes_created += len(fresh)
        self.stats.nodes_updated += len(added) - len(fresh)
        ids[~accepted] = -1
        if len(memtable) >= self.memtable_limit:
            self.flush()
        return ids, keys

    def _count_children(self, parents: Handles, picks: np.ndarray, parent_ids: np.ndarray) -> None:
        """Add one to the child count of ``parents[picks[i]]`` for each ``i`` (ids
        ``parent_ids``)."""
        distinct, first, counts = np.unique(parent_ids, return_index=True, return_counts=True)
        keys = [parents.keys[i] for i in picks[first].tolist()]
        memtable = self.memtable
        slots = memtable.slots(keys)
        have = slots >= 0
        memtable.add_counts(slots[have], counts[have])
        absent = np.flatnonzero(~have)
        memtable.add(
            [keys[i] for i in absent.tolist()],
            distinct[absent],
            np.zeros(len(absent), dtype=np.int64),
            counts[absent],
        )
        self.stats.nodes_updated += int(
            (distinct[absent] != ROOT_ID).sum()
        )  # not the internal root

    def _stored_ids(self, parents: np.ndarray, names: list[str]) -> np.ndarray:
        """The node id each key ``(parents[i], names[i])`` has in the committed runs, -1
        where it has none."""
        ids = np.full(len(names), -1, dtype=np.int64)
        for reader in self.readers:
            pending = np.flatnonzero(ids < 0)
            if not len(pending):
                break
            found = reader.find_ids(parents[pending], [names[i] for i in pending.tolist()])
            ids[pending] = found
        return ids

    def update_data(self, handle: Handle, update: Callable[[dict[str, Any]], None]) -> None:
        """Change the data of a node visited in this load: ``update`` edits its dict in place."""
        node_id, key = handle
        memtable = self.memtable
        slot = memtable.index.get(key)
        if slot is None:  # flushed since it was visited
            slot = memtable.add_one(key, node_id, 0, 0)
        data = memtable.data.get(slot)
        if data is None:
            stored = self._merged_get(key)
            data = memtable.data[slot] = dict(stored[4]) if stored is not None and stored[4] else {}
        update(data)

    def _run_name(self) -> str:
        number = len(self.stats.runs_written)
        return f"trees/shard-{self.shard:04d}/{self._tag}-{number:03d}"

    def _write(self, chunks: Iterable[Columns], expected: int) -> str:
        name = self._run_name()
        written = write_run(self.store, name, chunks, self.page_bytes, expected)
        self.stats.runs_written.append(name)
        self.stats.bytes_written += written.bytes
        return name

    def flush(self) -> None:
        """Write the memtable as a new (delta) run."""
        if not self.memtable:
            return
        columns = self.memtable.columns()
        name = self._write(_slices(columns), len(columns))
        self.memtable.clear()
        self.readers.append(RunReader(self.store, name, self.shard))
        if len(self.readers) > 2 * MAX_RUNS:  # a big load: keep lookups to a few runs
            self.compact(deltas_only=len(self.state.runs) > 0)

    def compact(self, deltas_only: bool = False, newest: int | None = None) -> None:
        """Merge runs into one: every run, every run but the base (``deltas_only``), or the
        ``newest`` runs."""
        if newest is not None:
            keep = self.readers[: len(self.readers) - newest]
        else:
            keep = self.readers[:1] if deltas_only and len(self.readers) > 1 else []
        merging = self.readers[len(keep) :]
        if len(merging) < 2:
            return
        expected = sum(r.entries for r in merging)
        if expected <= columnar_merge_limit():
            columns = merge_columns([r.all_columns(with_data=True) for r in merging])
            name = self._write(_slices(columns), expected)
        else:
            merged = merge_entries([r.scan(ROOT_KEY) for r in merging])
            name = self._write(column_chunks(merged), expected)
        self.readers = [*keep, RunReader(self.store, name, self.shard)]
        self.stats.compacted = True

    def commit(self) -> ShardState:
        """Flush, compact, and return the tree's new state.

        The runs this writer wrote (its memtable's flushes) become one, when they
        hold at most :func:`columnar_merge_limit` entries. Then, if
        there are more than :data:`MAX_RUNS`, compaction is size-tiered: it
        merges the longest run of newest runs that together are smaller than the
        run before them (small deltas of later loads, without rewriting the big
        runs of earlier ones), or every run when no such group exists.
        """
        self.flush()
        written = set(self.stats.runs_written)
        own = [reader for reader in self.readers if reader.name in written]
        if len(own) > 1 and sum(r.entries for r in own) <= columnar_merge_limit():
            # the flushes of one load overlap: reads would merge them every time
            self.compact(newest=len(own))
        if len(self.readers) > MAX_RUNS:
            sizes = [r.size_bytes for r in self.readers]
            newest = max(
                (n for n in range(2, len(sizes)) if sum(sizes[-n:]) < sizes[-n - 1]),
                default=len(sizes),
            )
            self.compact(newest=newest)
        self.state = ShardState(
            runs=tuple(r.name for r in self.readers),
            next_id=self.next_id,
            nodes=self.state.nodes + self.stats.nodes_created,
            bytes=sum(r.size_bytes for r in self.readers),
        )
        return self.state

    def check(self) -> int:
        """Read and verify every page of every run; return the number of entries read."""
        return sum(reader.check() for reader in self.readers)


def build_tree(
    store: PageStore, paths: Sequence[Sequence[str]], shard: int = 0, **kwargs: Any
) -> ShardTree:
    """A committed tree holding ``paths`` (each visited once); for tests and examples.

    >>> from treestore.storage.pagestore import MemoryPageStore
    >>> tree = build_tree(MemoryPageStore(), [["root", "b"], ["root", "a"]])
    >>> [(n.name, n.hits) for n in tree.children(tree.child(tree.root, "root"))]
    [('a', 1), ('b', 1)]
    """
    tree = ShardTree(store, shard=shard, **kwargs)
    for path in paths:
        handle: Handle | None = tree.root_handle
        for name in path:
            assert handle is not None
            handle = tree.visit(handle, name)
    state = tree.commit()
    return ShardTree(store, state, shard=shard, **kwargs)
