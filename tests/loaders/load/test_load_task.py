"""The load's task functions without Spark: batches routed to pieces, trees and counts out."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa

from loaders.formats.readers import FILE_COLUMN, LINE, REJECT, TEXT
from loaders.job.model import load_job
from loaders.load.dedup_step import DHASH, DKEY
from loaders.load.protocol import KEEP, ORDER, TaskSpec, decode_results
from loaders.load.shard_frames import SHARD
from loaders.load.task import shard_task
from loaders.route.pieces import Pieces, route_task
from loaders.tree.builder import ApplyStats, TreeBuilder
from treestore.storage import page_cache
from treestore.storage.pagestore import MemoryPageStore, PageStore
from treestore.storage.tree import ShardState, ShardTree
from treestore.storage.visits import memtable_limit


def _attribute_rows(builder: TreeBuilder, shards: list[int], uids: list[str]) -> pa.RecordBatch:
    """Attribute records of the demo's job (attribute id 1 each) for ``shards[i]``."""
    attr, mapping = builder.filter_columns.values()
    size = len(shards)
    return pa.RecordBatch.from_pydict(
        {
            SHARD: pa.array(shards, pa.int32()),
            ORDER: pa.array([0] * size, pa.int32()),
            FILE_COLUMN: pa.array([0] * size, pa.int32()),
            LINE: pa.array(range(2, 2 + size), pa.int64()),
            TEXT: pa.nulls(size, pa.string()),
            DKEY: pa.nulls(size, pa.string()),
            DHASH: pa.nulls(size, pa.int64()),
            KEEP: [True] * size,
            "ATTRIBUTE_IDS": pa.array([["1"]] * size, pa.list_(pa.string())),
            "PUID": pa.nulls(size, pa.string()),
            "UID": uids,
            attr: [True] * size,
            mapping: [False] * size,
            REJECT: pa.nulls(size, pa.string()),
        }
    )


def _spec(builder: TreeBuilder) -> TaskSpec:
    return TaskSpec(builder, ("attributes", "mapping"), {}, {}, {}, ("f.tsv",), "rejected/t", 10)


def _routed_and_applied(pages: PageStore, spec: TaskSpec, batch: pa.RecordBatch) -> pa.Table:
    """``batch``'s records routed to their shards' pieces by a reading task's function, then
    applied by one shard task serving every shard: its output."""
    (written,) = list(route_task(pages, "routed/t")([batch]))
    pieces = Pieces.of(tuple(row.values()) for row in written.to_pylist())
    spec = replace(spec, shard_tasks=(0,) * 8, pieces=pieces.by_shard)
    (out,) = list(shard_task(pages, spec)([pa.record_batch({"id": [0]})]))
    return out


def test_a_task_holding_several_shards_keeps_their_records_apart(demo_dir: Path) -> None:
    builder = TreeBuilder(load_job(demo_dir / "job.json").tree)
    pages = MemoryPageStore()
    spec = _spec(builder)
    batch = _attribute_rows(builder, [2, 7, 2, 7, 2], ["a", "b", "c", "d", "e"])
    out = _routed_and_applied(pages, spec, batch)
    assert sorted(pages.list("routed/t")) == [
        "routed/t/shard-0002/00000000.arrow",
        "routed/t/shard-0007/00000000.arrow",
    ]
    shard_results, (counts,) = decode_results(out.to_pylist())
    results = {result.shard: result for result in shard_results}
    trees = {
        shard: ShardTree(pages, ShardState.from_json(results[shard].state), shard=shard)
        for shard in (2, 7)
    }
    names = {
        shard: sorted(path[1] for path, _ in tree.walk() if len(path) == 2)
        for shard, tree in trees.items()
    }
    assert names == {2: ["a", "c", "e"], 7: ["b", "d"]}
    assert counts.files == {"f.tsv": 5} and counts.sources["attributes"].applied == 5


def test_a_task_lends_its_memtables_half_the_cache_so_they_spill_later(demo_dir: Path) -> None:
    """A memtable holds half the page cache's budget, and the whole during a load's task
    (the cache keeps the other half): 600 attribute rows make about 1,800 entries, more
    than the 1,024 of half this budget and fewer than the 2,048 of the whole."""
    builder = TreeBuilder(load_job(demo_dir / "job.json").tree)
    uids = [f"u{i:04d}" for i in range(600)]
    cache = page_cache.reset_cache(256 * 1024)
    try:
        assert memtable_limit() == 1024
        pages = MemoryPageStore()
        out = _routed_and_applied(pages, _spec(builder), _attribute_rows(builder, [0] * 600, uids))
        (result,), _ = decode_results(out.to_pylist())
        assert not result.compacted  # nothing spilled, so nothing to merge at commit
        assert cache.lent == 0 and memtable_limit() == 1024  # given back
        tree = ShardTree(pages, ShardState.from_json(result.state))
        assert sorted(path[1] for path, _ in tree.walk() if len(path) == 2) == uids

        spilled = ShardTree(MemoryPageStore())  # the same records outside a task spill
        spilled.memtable_limit = memtable_limit()
        builder.apply_table(spilled, _attribute_rows(builder, [0] * 600, uids), None, ApplyStats())
        assert spilled.stats.runs_written
    finally:
        page_cache.reset_cache(256 * 1024 * 1024)
