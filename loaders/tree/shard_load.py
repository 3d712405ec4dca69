"""One load of one shard's tree, phase by phase: its records, then its pending records.

A load task holds one :class:`ShardLoad` per shard it serves. Its phases, in order:

1. the load's records in their order (sources in job order, files in path order,
   lines in file order): :meth:`ShardLoad.apply` for each part of them, in order
   (an update-only element reaches every node an earlier record made);
2. :meth:`ShardLoad.finish`, once: the pending records of earlier loads and those
   kept in this one are retried against the tree every source has changed; the
   waiting ones past the watermark expire; the rest are stored, and the tree is
   committed with them as its ``pending`` side files (see :mod:`loaders.tree.pending`).

The state each phase needs is this object's own; nothing is set on the tree or the
builder.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from loaders.tree.builder import ApplyStats, TreeBuilder
from loaders.tree.pending import (
    ELEMENT,
    SIDE_NAME,
    WEIGHT,
    PendingState,
    expired_rows,
    latest_time,
    past_watermark,
    read_pending,
    write_pending,
)
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
    """

    def __init__(
        self, builder: TreeBuilder, pages: PageStore, shard: int, state: ShardState | None
    ) -> None:
        self.builder, self.pages, self.shard = builder, pages, shard
        self.tree = ShardTree(pages, state, shard=shard, folder=tree_folder(shard))
        self.stats = ApplyStats()
        self.waiting = 0
        """The records left waiting after :meth:`finish` (summed weights)."""
        self._earlier = PendingState.of(state)
        self._latest: int | None = None  # the largest time this load saw (pending elements')

    def apply(self, table: pa.Table) -> None:
        """Apply the next records, in their order (columns :attr:`TreeBuilder.fields`)."""
        time_field = self.builder.pending_time
        if time_field is not None:
            self._latest = _later(self._latest, latest_time(table.column(time_field)))
        self.builder.apply_table(self.tree, table, None, self.stats)

    def finish(self) -> ShardState:
        """Retry, expire and store the pending records, commit the tree; the shard's new
        state (its pending records as side files)."""
        builder, stats, tree = self.builder, self.stats, self.tree
        kept_now, stats.pending = stats.pending, []
        after_sources = tree.next_id  # every node of this load is visible to the retries
        for name in self._earlier.files:
            waiting, fingerprint = read_pending(tree.read_side_table(name))
            builder.retry_pending(tree, waiting, fingerprint, stats, created_before=after_sources)
        for table in kept_now:  # kept in this load: a later source may have made the node
            builder.retry_pending(
                tree,
                table,
                builder.fingerprint,
                stats,
                costs_load=False,
                created_before=after_sources,
            )
        same_tree = self._earlier.tree == builder.fingerprint
        latest = _later(self._earlier.time if same_tree else None, self._latest)
        if builder.pending_time is not None:
            self._expire_late(latest)
        names, self.waiting = write_pending(
            self.pages, self.shard, stats.pending, builder.fingerprint
        )
        pending = PendingState(
            names, self.waiting, latest, builder.fingerprint if latest is not None else None
        )
        return tree.commit(side={SIDE_NAME: pending.side_files()})

    def write_expired(self, folder: str) -> tuple[str | None, int]:
        """Write the records that expired in this load (after :meth:`finish`) as one
        Parquet file under ``folder`` in the store (the driver merges the shards' files into
        the version's one); its name (None if none expired) and how many records it holds
        (by weight)."""
        tables = [t for t in self.stats.expired if t.num_rows]
        if not tables:
            return None, 0
        table = pa.concat_tables(tables, promote_options="permissive")
        import pyarrow.parquet as pq

        name = f"{folder}/shard-{self.shard:05d}.parquet"
        with self.pages.writer(name) as out:  # a retried task writes the same name again
            pq.write_table(table, out)
        return name, int(pc.sum(table.column("weight")).as_py())

    def _expire_late(self, latest: int | None) -> None:
        """Drop the waiting records that the watermark (``latest`` minus their element's
        delay) has passed, and those of elements that wait only on it which have no time;
        they are counted as expired."""
        builder, stats = self.builder, self.stats
        assert builder.pending_time is not None
        kept = []
        for table in stats.pending:
            late = past_watermark(
                table, builder.pending_time, builder.pending_delays, latest, builder.time_only
            )
            stats.pending_expired += int(table.column(WEIGHT).to_numpy()[late].sum())
            if late.any():
                gone = table.filter(pa.array(late))
                stats.expired.extend(
                    expired_rows(
                        gone.filter(pc.equal(gone.column(ELEMENT), place)),
                        builder.fields,
                        "the watermark passed it",
                        place,
                    )
                    for place in pc.unique(gone.column(ELEMENT)).to_pylist()
                )
            kept.append(table.filter(pa.array(~late)))
        stats.pending = kept


def _later(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)
