"""What each Spark task of a load runs over its shard's records.

Per Arrow batch, vectorized: count records per file and per source, set rejected
records aside (written to the store's ``rejected/`` folder with file and line),
classify dedup duplicates, and apply the map's verdict. The surviving records
are applied to the shard's tree in batches (see :mod:`loaders.tree.builder`), in
record order, as Hydra applies them one after another: sources in job order, a
source's files in path order, lines in file order (Spark sorts each partition so).
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from loaders.formats.readers import FILE_COLUMN, LINE, REJECT, TEXT
from loaders.load.dedup_step import EARLIER, WITHIN, BatchDedup
from loaders.load.protocol import (
    KEEP,
    ORDER,
    ShardResult,
    SourceCounts,
    TaskSpec,
    TaskTotals,
    encode_results,
    lists_from_text,
)
from loaders.load.shard_frames import SHARD
from loaders.load.timing import Timer
from loaders.route.pieces import shard_batches
from loaders.tree.pending import with_origin
from loaders.tree.shard_load import ShardLoad
from treestore.arrays import distinct_sorted
from treestore.failpoints import failpoint
from treestore.settings import task_started
from treestore.storage.page_cache import cache
from treestore.storage.pagestore import PageStore

__all__ = ["shard_task"]

_QUEUE_LIMIT = 500_000
"""Records queued before they are applied (bounds a task's memory)."""


class _Rejected:
    """A task's rejected records: all counted, the first ``limit`` kept and written."""

    def __init__(self, pages: PageStore, spec: TaskSpec) -> None:
        self.pages, self.spec = pages, spec
        self.rows: list[str] = []
        self.count = 0

    def add(self, batch: pa.RecordBatch, fields: list[str]) -> None:
        self.count += batch.num_rows
        room = self.spec.max_rejected + 1 - len(self.rows)
        if room <= 0:
            return
        kept = batch.slice(0, room).to_pydict()
        for i in range(len(kept[REJECT])):
            row: dict[str, Any] = {
                "source": self.spec.source_names[kept[ORDER][i]],
                "file": self.spec.files[kept[FILE_COLUMN][i]],
                "line": kept[LINE][i],
                "reason": kept[REJECT][i],
            }
            if kept[TEXT][i] is not None:
                row["text"] = kept[TEXT][i]
            else:
                row["record"] = {name: kept[name][i] for name in fields}
            self.rows.append(json.dumps(row, ensure_ascii=False))

    def write(self) -> str | None:
        if not self.rows:
            return None
        name = f"{self.spec.rejected_folder}/part-{uuid.uuid4().hex[:12]}.jsonl"
        self.pages.write(name, ("\n".join(self.rows) + "\n").encode())
        return name


class _ShardWork:
    """The task's shards (one :class:`ShardLoad` each) and the records queued for them."""

    def __init__(self, pages: PageStore, spec: TaskSpec, per_source: list[Counter[str]]) -> None:
        self.pages, self.spec, self.per_source = pages, spec, per_source
        self.loads: dict[int, ShardLoad] = {}
        self.queued: list[pa.RecordBatch] = []
        self.queued_rows = 0
        self.queued_order = -1
        self.fields = spec.builder.fields
        self.source_names = pa.array(spec.source_names, pa.string())
        self.files = pa.array(spec.files, pa.string())

    def add(self, batch: pa.RecordBatch) -> None:
        """Queue the records of ``batch`` (already filtered, in record order: by source,
        file and line); a source's records are applied apart, for its counts."""
        if batch.num_rows == 0:
            return
        orders = batch.column(ORDER).to_numpy(zero_copy_only=False)
        for order in np.unique(orders):  # ascending: the batch is in record order
            part = batch.filter(pa.array(orders == order)) if orders[0] != orders[-1] else batch
            if order != self.queued_order or self.queued_rows > _QUEUE_LIMIT:
                self.apply_queued()
            self.queued_order = int(order)
            queued = part.select([SHARD, *self.fields])
            if self.spec.builder.keeps_pending:  # a waiting record keeps where it was read
                queued = with_origin(
                    queued,
                    pa.DictionaryArray.from_arrays(part.column(ORDER), self.source_names),
                    pa.DictionaryArray.from_arrays(part.column(FILE_COLUMN), self.files),
                    part.column(LINE),
                )
            self.queued.append(queued)
            self.queued_rows += part.num_rows

    def load(self, shard: int) -> ShardLoad:
        """The task's load of ``shard`` (opened on first use)."""
        load = self.loads.get(shard)
        if load is None:
            spec = self.spec
            load = self.loads[shard] = ShardLoad(
                spec.builder, self.pages, shard, spec.states.get(shard), spec.owner,
                parts=spec.parts.get(shard, 1),
            )  # fmt: skip
        return load

    def apply_queued(self) -> None:
        """Apply the queued records of one source, shard by shard."""
        if not self.queued:
            return
        table = pa.Table.from_batches(self.queued)
        shards = table.column(SHARD).to_numpy()
        distinct = distinct_sorted(shards).tolist()
        for shard in distinct:  # a task may hold several shards (Spark merges small partitions)
            part = table.filter(pa.array(shards == shard)) if len(distinct) > 1 else table
            self.load(shard).apply(part.drop_columns([SHARD]), self.queued_order)
        self.queued, self.queued_rows = [], 0

    def apply_all(self) -> None:
        """Apply the records still queued, and build those the shards hold (in parts)."""
        self.apply_queued()
        for load in self.loads.values():
            load.apply_held()

    def close(self) -> None:
        """Let go of the records the shards hold (a failed task's)."""
        for load in self.loads.values():
            load.close()

    def commit(self) -> Iterator[ShardResult]:
        """Write every tree's new runs; yield each shard's result (its task_seconds unset)."""
        self.apply_all()
        for shard, load in self.loads.items():
            state = load.finish()
            for source, counts in load.by_source.items():
                self.per_source[source].update(counts)
            stats, tree = load.stats, load.tree
            expired_file = load.write_expired(self.spec.expired_folder)
            failpoint("in-task")
            yield ShardResult(
                shard=shard,
                state=state.to_json(),
                records=stats.records,
                missed_updates=stats.missed_updates,
                bad_values=stats.bad_values,
                nodes_created=tree.stats.nodes_created,
                nodes_updated=tree.stats.nodes_updated,
                bytes_written=tree.stats.bytes_written,
                compacted=tree.stats.compacted,
                pending=load.pending_counts(),
                expired_file=expired_file,
                parts=load.parts,
            )


def _per_source(counts: list[Counter[str]], key: str, orders: np.ndarray) -> None:
    if len(orders):
        for order, n in enumerate(np.bincount(orders, minlength=len(counts)).tolist()):
            if n:
                counts[order][key] += n


def shard_task(
    pages: PageStore, spec: TaskSpec
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function the load's shard tasks run (``mapInArrow`` over the task numbers,
    ``spark.range``): task ``t`` serves the shards :attr:`TaskSpec.shard_tasks` gives it,
    applying their pieces' records (:mod:`loaders.route.pieces`) and retrying their
    pending records, whether records reach them or not."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_started()
        numbers = [number for batch in batches for number in batch.column(0).to_pylist()]
        page_cache = cache()
        for number in numbers:
            shards = [s for s, task in enumerate(spec.shard_tasks) if task == number]
            records = (
                batch for s in shards for batch in shard_batches(pages, spec.pieces.get(s, ()))
            )
            waiting = [s for s in spec.waiting_shards() if s in shards]
            with page_cache.lend(page_cache.budget // 2):  # the memtables get the whole budget
                result = _run(pages, spec, records, waiting)
            yield result

    return run


def _run(
    pages: PageStore, spec: TaskSpec, batches: Iterable[pa.RecordBatch], waiting: list[int]
) -> pa.RecordBatch:
    """A task's work: its records (set aside, deduplicated, applied by shard), then every
    shard's load committed, ``waiting`` (shards with pending records) among them."""
    per_file: Counter[int] = Counter()
    per_source: list[Counter[str]] = [Counter() for _ in spec.source_names]
    rejected = _Rejected(pages, spec)
    work = _ShardWork(pages, spec, per_source)
    try:
        dedup = BatchDedup(pages, spec.dedup_sources, spec.dedup_runs, spec.dedup_store)
        clock = Timer("input")
        for batch in clock.waiting(batches):
            batch = lists_from_text(batch, spec.list_fields)
            orders = batch.column(ORDER).to_numpy(zero_copy_only=False)
            for entry in pc.value_counts(batch.column(FILE_COLUMN)).to_pylist():
                per_file[entry["values"]] += entry["counts"]
            _per_source(per_source, "read", orders)
            bad = batch.column(REJECT).is_valid().to_numpy(zero_copy_only=False)
            if bad.any():
                _per_source(per_source, "rejected", orders[bad])
                rejected.add(batch.filter(pa.array(bad)), spec.builder.key_fields)
                batch = batch.filter(pa.array(~bad))
                orders = orders[~bad]
            within, earlier = dedup.classify(batch, orders)
            _per_source(per_source, WITHIN, orders[within])
            _per_source(per_source, EARLIER, orders[earlier])
            fresh = ~(within | earlier)
            keep = batch.column(KEEP).to_numpy(zero_copy_only=False).astype(bool)
            _per_source(per_source, "kept", orders[fresh])
            _per_source(per_source, "dropped", orders[fresh & ~keep])
            kept = fresh & keep
            work.add(batch if kept.all() else batch.filter(pa.array(kept)))
        clock.lap("records")
        work.apply_all()
        for shard in waiting:  # its pending records are retried as its load finishes
            work.load(shard)
        clock.lap("apply")
        results = []
        for result in work.commit():
            clock.lap("write")
            results.append(
                replace(
                    result,
                    task_seconds=clock.since_last_share(),
                    task_cpu_seconds=clock.cpu_since_last_share(),
                )
            )
        totals = TaskTotals(
            files={spec.files[n]: count for n, count in per_file.items()},
            sources={
                name: SourceCounts(**counts)
                for name, counts in zip(spec.source_names, per_source, strict=True)
            },
            dedup=dedup.commit(),
            rejected_count=rejected.count,
            rejected_file=rejected.write(),
        )
        return encode_results(results, totals)
    finally:
        work.close()  # what a failed task holds
