"""One load of one shard's tree, phase by phase: its records, then its pending records.

A load task holds one :class:`ShardLoad` per shard it serves. Its phases, in order:

1. the load's records in their order (sources in job order, files in path order,
   lines in file order): :meth:`ShardLoad.apply` for each part of them, in order
   (an update-only element reaches every node an earlier record made); a big shard's
   records are held and built in parts as the phase ends (see :mod:`loaders.tree.parts`);
2. :meth:`ShardLoad.finish`, once: the pending records of earlier loads and those
   kept in this one are retried against the tree every source has changed; the
   waiting ones past the watermark expire; the rest are stored, and the tree is
   committed with them as its ``pending`` side files (see :mod:`loaders.tree.pending`).

The state each phase needs is this object's own; nothing is set on the tree or the
builder.
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

from loaders.tree.builder import ApplyStats, TreeBuilder
from loaders.tree.parts import HeldParts, shared_keys, split_of
from loaders.tree.pending import (
    SIDE_NAME,
    PendingCounts,
    PendingRecords,
    PendingState,
    latest_time,
    read_pending,
)
from treestore.storage.memtable import ENTRY_BYTES as MEMTABLE_ENTRY_BYTES
from treestore.storage.pagestore import PageStore
from treestore.storage.tree import ShardState, ShardTree
from treestore.store.layout import tree_folder

__all__ = ["ShardLoad"]


class ShardLoad:
    """One load's work on one shard's tree.

    Args:
        builder: the job's tree.
        pages: the store's pages.
        shard: the shard number.
        state: the shard's state in the version the load starts from (``None``: empty).
        owner: the store's identity, which the runs carry (None: the store has none).
        parts: how many parts the shard's records are built in (see
            :mod:`loaders.tree.parts`; 1, or a job whose records cannot be split: whole).
        held_bytes: how many bytes of the records built in parts are held in memory until
            they are built (the rest in local files); default half the memtable's budget.
    """

    def __init__(
        self,
        builder: TreeBuilder,
        pages: PageStore,
        shard: int,
        state: ShardState | None,
        owner: str | None = None,
        parts: int = 1,
        held_bytes: int | None = None,
    ) -> None:
        self.builder, self.pages, self.shard = builder, pages, shard
        self.tree = ShardTree(pages, state, shard=shard, folder=tree_folder(shard), owner=owner)
        self.stats = ApplyStats()
        self.pending = PendingRecords()
        """The shard's pending records in this load (kept, still waiting, expired)."""
        self.waiting = 0
        """The records left waiting after :meth:`finish` (summed weights)."""
        self._earlier = PendingState.of(state)
        self._latest: int | None = None  # the largest time this load saw (pending elements')
        self.by_source: dict[int, Counter[str]] = {}
        """What the records of each source (by number) did: ``applied``, ``missed_updates``
        and ``pending`` (kept for later loads)."""
        split = split_of(builder.elements) if parts > 1 else None
        self.parts = parts if split is not None else 1
        """How many parts this load built the shard's records in (1: whole)."""
        self._held = None
        if split is not None:
            if held_bytes is None:  # half what the memtable may hold (empty while they are)
                held_bytes = self.tree.memtable_limit * MEMTABLE_ENTRY_BYTES // 2
            self._held = HeldParts(split, parts, memory_bytes=held_bytes)

    def apply(self, table: pa.Table, source: int = 0) -> None:
        """Apply the next records, of ``source`` (its number), in their order (columns
        :attr:`TreeBuilder.fields`); a shard built in parts holds them until
        :meth:`apply_held`."""
        time_field = self.builder.pending_time
        if time_field is not None:
            self._latest = _later(self._latest, latest_time(table.column(time_field)))
        held = self._held
        if held is not None and held.takes(table):
            held.hold(table, source)
            return
        if held is not None:  # a list in the split field: the rest is built whole
            self.apply_held()  # the records held come first,
            self.tree.flush()  # and the records that follow find their nodes
            self._held = None
        self._apply_now(table, source)

    def _apply_now(self, table: pa.Table, source: int) -> None:
        stats = self.stats
        missed, kept = stats.missed_updates, stats.pending_buffered
        self.builder.apply_table(self.tree, table, None, stats, pending=self.pending)
        counts = self.by_source.setdefault(source, Counter())
        counts["applied"] += table.num_rows
        counts["missed_updates"] += stats.missed_updates - missed
        counts["pending"] += stats.pending_buffered - kept

    def apply_held(self) -> None:
        """Build the records held so far, part after part (the tree's memtable emptied
        between parts, so that each part's structures are small)."""
        held = self._held
        if held is None or not held.rows:
            return
        try:
            for part in held.parts_in_order():
                for table, source in part:
                    self._apply_now(table, source)
                self.tree.end_part(shared_keys(self.tree, held.split))
        finally:
            held.close()

    def close(self) -> None:
        """Let go of the records held and not built (a failed load's)."""
        if self._held is not None:
            self._held.close()

    def finish(self) -> ShardState:
        """Build the records held (:meth:`apply_held`), retry, expire and store the pending
        records, commit the tree; the shard's new state (its pending records as side
        files)."""
        self.apply_held()
        builder, stats, tree, pending = self.builder, self.stats, self.tree, self.pending
        kept_now = pending.take_waiting()
        if kept_now or self._earlier.files:
            tree.flush()  # the retries find the nodes of every part
        after_sources = tree.next_id  # every node of this load is visible to the retries
        for name in self._earlier.files:
            waiting, fingerprint = read_pending(tree.read_side_table(name))
            builder.retry_pending(
                tree, waiting, fingerprint, stats, created_before=after_sources, pending=pending
            )
        for table in kept_now:  # kept in this load: a later source may have made the node
            builder.retry_pending(
                tree, table, builder.fingerprint, stats, costs_load=False,
                created_before=after_sources, pending=pending,
            )  # fmt: skip
        same_tree = self._earlier.tree == builder.fingerprint
        latest = _later(self._earlier.time if same_tree else None, self._latest)
        if builder.pending_time is not None:
            stats.pending_expired += pending.expire_late(
                builder.pending_time,
                builder.pending_delays,
                latest,
                builder.time_only,
                builder.fields,
            )
        names, self.waiting = pending.store(self.pages, self.shard, builder.fingerprint)
        kept = PendingState(
            names, self.waiting, latest, builder.fingerprint if latest is not None else None
        )
        return tree.commit(side={SIDE_NAME: kept.side_files()})

    def pending_counts(self) -> PendingCounts:
        """The shard's pending records in this load (after :meth:`finish`)."""
        stats = self.stats
        return PendingCounts(
            stats.pending_buffered, stats.pending_applied, stats.pending_expired, self.waiting
        )

    def write_expired(self, folder: str) -> str | None:
        """Write the records that expired in this load (after :meth:`finish`) as one
        Parquet file under ``folder`` in the store (the driver merges the shards' files into
        the version's one); its name (None if none expired)."""
        name = f"{folder}/shard-{self.shard:05d}.parquet"
        return name if self.pending.write_expired(self.pages, name) else None


def _later(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)
