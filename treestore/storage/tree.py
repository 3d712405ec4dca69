"""One shard's tree, paged: read nodes through the page cache, add to it in a memtable.

:class:`ShardTree` is the tree a load writes and a query reads. Its parts live in
their own modules: reading (:mod:`treestore.storage.reading`: lookups, children,
scans, merged across runs), writing (:mod:`treestore.storage.visits`: visits into
the memtable, and the one rule of which visits go ahead), when runs are merged
(:mod:`treestore.storage.compaction`), and what a version records of the tree
(:mod:`treestore.storage.state`). This module flushes, compacts and commits.

The memtable is flushed to a new run when it outgrows its budget and at
:meth:`ShardTree.commit`, so a load writes only what it changed: the pages of the
runs it did not touch stay shared with earlier versions. Reads see committed runs
only.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa

from treestore.errors import CorruptPageError, StoreError
from treestore.storage.compaction import (
    MAX_RUNS,
    after_flush,
    columnar_merge_limit,
    own_runs_at_commit,
    size_tiered,
)
from treestore.storage.entries import ChildColumns, merge_blocks, merge_columns, merge_disjoint
from treestore.storage.keyfilter import KeyFilter, KeyHashes
from treestore.storage.memtable import ENTRY_BYTES as MEMTABLE_ENTRY_BYTES
from treestore.storage.pagestore import PageStore
from treestore.storage.reading import ROOT_ID, ROOT_KEY, Node
from treestore.storage.runs import (
    PAGE_BYTES,
    Columns,
    RunReader,
    RunSum,
    write_run,
)
from treestore.storage.state import FileSum, ShardState, SideFiles, WriteStats
from treestore.storage.visits import ANY_AGE, Handle, Handles, TreeWriter

__all__ = [
    "ANY_AGE",
    "MAX_RUNS",
    "ROOT_KEY",
    "Handle",
    "Handles",
    "Node",
    "ShardState",
    "ShardTree",
    "SideFiles",
    "WriteStats",
    "build_tree",
]


_SEALED_BYTES = 48
"""A sealed entry's bytes (its id, parent, hits, count, and name with its offset): sealed
parts count against the memtable's budget at this size."""


def _indexed(columns: ChildColumns) -> np.ndarray:
    """The hashes of ``columns``' keys as the memtable's key index holds them."""
    return KeyHashes(columns.parents, columns.names).indexed()


def _with_data(parts: list[ChildColumns]) -> list[ChildColumns]:
    """``parts`` with data on every one when some have data (merging keeps data only then)."""
    if all(p.data is None for p in parts):
        return parts
    return [p if p.data is not None else replace(p, data=[None] * len(p)) for p in parts]


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


class ShardTree(TreeWriter):
    """A shard's tree over a :class:`PageStore`: read it, visit it, commit it.

    Args:
        pages: where the runs live.
        state: the runs and counters to start from (an empty tree by default).
        shard: the shard number, for messages and run names.
        page_bytes: the target page size of runs this tree writes.
        folder: the folder this tree writes its runs in. A store names it (its layout,
            :mod:`treestore.store.layout`, gives each shard's); a bare page store's
            trees write in ``shard-NNNN`` by default.
        owner: the store's identity, if it has one: the runs this tree writes carry it with
            the shard number, and runs that say they belong to another store or shard are
            refused (see :mod:`treestore.storage.runs`).
    """

    def __init__(
        self,
        pages: PageStore,
        state: ShardState | None = None,
        shard: int = 0,
        page_bytes: int = PAGE_BYTES,
        folder: str | None = None,
        owner: str | None = None,
    ) -> None:
        self.state = state or ShardState()
        super().__init__(pages, self.state, shard, owner)
        self.page_bytes = page_bytes
        self.folder = f"shard-{shard:04d}" if folder is None else folder
        self._tag = uuid.uuid4().hex[:12]
        self._sums: dict[str, RunSum] = dict(self.state.run_sums)  # of runs kept and written
        self._sealed: list[tuple[ChildColumns, np.ndarray]] = []
        """Parts' entries in key order, with their keys' hashes: not yet written."""
        self._shared = np.array([ROOT_KEY[0], ROOT_ID], dtype=np.int64)
        """The ids of the nodes parts share (:meth:`end_part`), the internal root's parent
        and itself among them: only their children are in more than one part."""

    def _run_name(self) -> str:
        number = len(self.stats.runs_written)
        return f"{self.folder}/{self._tag}-{number:03d}"

    def _write(
        self, chunks: Iterable[Columns], expected: int, keys: KeyFilter | None = None
    ) -> str:
        name = self._run_name()
        written = write_run(
            self.pages,
            name,
            chunks,
            self.page_bytes,
            expected,
            keys,
            shard=self.shard,
            owner=self.owner,
        )
        self._sums[name] = written.sum
        self.stats.runs_written.append(name)
        self.stats.bytes_written += written.bytes
        return name

    def flush(self) -> None:
        """Write the memtable's changes, with the parts sealed so far (:meth:`end_part`), as
        a new (delta) run; the memtable keeps the nodes records passed through (see
        :meth:`Memtable.clear`), up to half its limit."""
        memtable = self.memtable
        slots = memtable.changed_slots()
        changed = bool(memtable) and (slots is None or len(slots) > 0)
        if not changed and not self._sealed:
            return
        if self._sealed:
            parts = [*self._sealed, memtable.columns_and_hashes(slots)] if changed else self._sealed
            stretches = merge_disjoint(
                _with_data([c for c, _ in parts]), self._shared, [h for _, h in parts], _indexed
            )
        else:  # the hashes the memtable's key index holds, in the entries' order
            stretches = [memtable.columns_and_hashes(slots)]
        self._sealed, self.sealed_entries = [], 0
        entries = sum(len(columns) for columns, _ in stretches)
        keys = KeyFilter.sized(entries)
        for columns, indexed in stretches:
            keys.add(KeyHashes(columns.parents, columns.names, indexed=indexed))
        chunks = (chunk for columns, _ in stretches for chunk in _slices(columns))
        name = self._write(chunks, entries, keys)
        memtable.clear(keep=memtable.inner_slots(self.memtable_limit // 2))
        self.readers.append(RunReader(self.pages, name, self.shard, owner=self.owner))
        while newest := after_flush(self._own_entries()):
            self.compact(newest=newest)

    def end_part(self, shared: KeyHashes) -> None:
        """Seal the memtable's changes (kept in memory, written with the next flush) and
        empty it but for the ``shared`` nodes, those the next records visit too: the
        records that follow (a big shard's next part, see :mod:`loaders.tree.parts`)
        visit no other node of these, so they need not find them."""
        memtable = self.memtable
        slots = memtable.changed_slots()
        if memtable and (slots is None or len(slots)):
            columns, hashes = memtable.columns_and_hashes(slots)
            self._sealed.append((columns, hashes))
            self.sealed_entries += len(columns) * _SEALED_BYTES // MEMTABLE_ENTRY_BYTES
        found = np.sort(memtable.slots(shared))
        found = found[found >= 0]
        self._shared = np.union1d(self._shared, memtable.ids_at(found))
        memtable.clear(keep=found)

    def _own_entries(self) -> list[int]:
        """The entries of the newest runs, those this tree wrote (oldest first)."""
        written = set(self.stats.runs_written)
        own = len(self.readers)
        while own and self.readers[own - 1].name in written:
            own -= 1
        return [reader.entries for reader in self.readers[own:]]

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
        else:  # block by block, in bounded memory
            blocks = merge_blocks([r.column_blocks(with_data=True) for r in merging])
            name = self._write((c for block in blocks for c in _slices(block)), expected)
        self.readers = [*keep, RunReader(self.pages, name, self.shard, owner=self.owner)]
        self.stats.compacted = True

    def commit(self, side: Mapping[str, SideFiles | None] | None = None) -> ShardState:
        """Flush, compact (see :mod:`treestore.storage.compaction`), and return the tree's
        new state.

        The side files of the state the tree started from are carried into the new one;
        ``side`` replaces groups by name (``None`` drops a group).
        """
        self.flush()
        self.compact(newest=own_runs_at_commit(self._own_entries(), columnar_merge_limit()))
        self.compact(newest=size_tiered([r.size_bytes for r in self.readers]))
        groups = {**self.state.side, **(side or {})}
        kept = {name: group for name, group in groups.items() if group is not None}
        self.state = ShardState(
            runs=tuple(r.name for r in self.readers),
            next_id=self.next_id,
            nodes=self.state.nodes + self.stats.nodes_created,
            bytes=sum(r.size_bytes for r in self.readers),
            side=kept,
            run_sums={r.name: self._sums[r.name] for r in self.readers if r.name in self._sums},
            side_sums=self._side_sums(kept),
        )
        return self.state

    def read_side_table(self, name: str) -> pa.Table:
        """The side file ``name`` of the state the tree started from (an Arrow table), its
        size and checksum verified against what the version's manifest records
        (:class:`~treestore.errors.CorruptPageError` if they differ)."""
        data = self.pages.read(name)
        expected = self.state.side_sums.get(name)
        if expected is not None and FileSum.of(data) != expected:
            raise CorruptPageError(
                f"Shard {self.shard}: the side file {self.pages.location}/{name} is not what the "
                "version's manifest records (it was changed or damaged); run 'treestore check' "
                "on the store."
            )
        return pa.ipc.open_stream(pa.BufferReader(data)).read_all()

    def _side_sums(self, groups: Mapping[str, SideFiles]) -> dict[str, FileSum]:
        """The sums of the side files in ``groups``: carried for the files the tree started
        with, taken for new ones (read back once: side files are small)."""
        carried, before = self.state.side_sums, self.state.side_files()
        sums = {}
        for name in sorted({n for group in groups.values() for n in group.files}):
            if name in carried:
                sums[name] = carried[name]
            elif name not in before:  # a file written before sums were kept stays without
                with contextlib.suppress(StoreError):  # missing: check names it
                    sums[name] = FileSum.of(self.pages.read(name))
        return sums


def build_tree(
    pages: PageStore, paths: Sequence[Sequence[str]], shard: int = 0, **kwargs: Any
) -> ShardTree:
    """A committed tree holding ``paths`` (each visited once); for tests and examples.

    >>> from treestore.storage.pagestore import MemoryPageStore
    >>> tree = build_tree(MemoryPageStore(), [["root", "b"], ["root", "a"]])
    >>> [(n.name, n.hits) for n in tree.children(tree.child(tree.root, "root"))]
    [('a', 1), ('b', 1)]
    """
    tree = ShardTree(pages, shard=shard, **kwargs)
    for path in paths:
        handle: Handle | None = tree.root_handle
        for name in path:
            assert handle is not None
            handle = tree.visit(handle, name)
    state = tree.commit()
    return ShardTree(pages, state, shard=shard, **kwargs)
