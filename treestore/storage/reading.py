"""Reading one shard's tree: lookups, children and scans merged across its runs.

A tree is a list of runs (see :mod:`treestore.storage.runs`), newest last. A read
merges the runs and reads only the pages that hold the asked-for keys. A node's
children come in UTF-8 byte order of their names (Python compares ``str`` by code
point, and UTF-8 preserves code-point order; UTF-16 order, as in Java, differs beyond
U+FFFF).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from treestore.storage.entries import ChildColumns, Key, merge_columns
from treestore.storage.keyfilter import KeyHashes
from treestore.storage.pagestore import PageStore
from treestore.storage.runs import Entry, RunReader, RunSum, merge_entries

__all__ = ["ROOT_ID", "ROOT_KEY", "Node", "TreeReader"]

ROOT_KEY: Key = (-1, "")
"""The key of a tree's internal root (node id 0)."""
ROOT_ID = 0
"""The node id of a tree's internal root."""


@dataclass(frozen=True, slots=True)
class Node:
    """A snapshot of one node as stored."""

    key: Key
    id: int
    hits: int
    child_count: int
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


class TreeReader:
    """Reads a shard's tree from its runs (committed ones only).

    Args:
        pages: where the runs live.
        runs: the runs' names, oldest first.
        shard: the shard number, for messages.
        sums: what the version's manifest records of the runs (checked as each is opened).
        owner: the store's identity, if it has one: a run that says it belongs to another
            store (or to another shard) is refused as it is opened.
    """

    def __init__(
        self,
        pages: PageStore,
        runs: Sequence[str],
        shard: int = 0,
        sums: Mapping[str, RunSum] | None = None,
        owner: str | None = None,
    ) -> None:
        self.pages = pages
        self.shard = shard
        self.owner = owner
        sums = sums or {}
        self.readers = [RunReader(pages, name, shard, sums.get(name), owner) for name in runs]

    def entry(self, key: Key) -> Entry | None:
        """The stored entry of ``key``, merged across runs, or ``None``."""
        if not self.readers:
            return None
        found = [e for reader in self.readers if (e := reader.get(key)) is not None]
        if not found:
            return None
        if len(found) == 1:
            return found[0]
        return next(merge_entries([iter([e]) for e in found]))

    @property
    def root(self) -> Node:
        """The internal root (queries start under it)."""
        entry = self.entry(ROOT_KEY)
        return Node.of(entry) if entry else Node(ROOT_KEY, ROOT_ID, 0, 0)

    def child(self, node: Node, name: str) -> Node | None:
        """The child of ``node`` called ``name``, or ``None``."""
        entry = self.entry((node.id, name))
        return Node.of(entry) if entry else None

    def children(self, node: Node, start: str = "", stop: str | None = None) -> Iterator[Node]:
        """The children of ``node`` with ``start <= name < stop``, in name order."""
        if node.child_count == 0:  # a leaf: no page needs reading
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

    def stored_ids(self, hashes: KeyHashes) -> np.ndarray:
        """The node id each of the keys ``hashes`` has in the runs, -1 where it has none
        (looked up as columns, :meth:`RunReader.find_ids`; hashed once for every run)."""
        ids = np.full(len(hashes), -1, dtype=np.int64)
        if not self.readers:
            return ids
        for reader in self.readers:
            unfound = np.flatnonzero(ids < 0)
            if not len(unfound):
                break
            among = None if len(unfound) == len(ids) else unfound
            ids[unfound] = reader.find_ids(hashes, among)[unfound]
        return ids

    def check(self) -> int:
        """Read and verify every page of every run; return the number of entries read."""
        return sum(reader.check() for reader in self.readers)
