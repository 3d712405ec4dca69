"""The load's task function without Spark: batches in, trees and counts out."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from loaders.job.model import load_job
from loaders.load.dedup_step import DHASH, DKEY
from loaders.load.protocol import KEEP, ORDER, TaskSpec, decode_results
from loaders.load.readers import FILE_COLUMN, LINE, REJECT, TEXT
from loaders.load.shard_frames import SHARD
from loaders.load.task import shard_task
from loaders.tree.builder import TreeBuilder
from treestore.storage.pagestore import MemoryPageStore
from treestore.storage.tree import ShardState, ShardTree


def test_a_task_holding_several_shards_keeps_their_records_apart(demo_dir: Path) -> None:
    builder = TreeBuilder(load_job(demo_dir / "job.json").tree)
    attr, mapping = builder.filter_columns.values()
    pages = MemoryPageStore()
    spec = TaskSpec(builder, ("attributes", "mapping"), {}, {}, {}, ("f.tsv",), "rejected/t", 10)
    shards, uids = [2, 7, 2, 7, 2], ["a", "b", "c", "d", "e"]
    size = len(shards)
    batch = pa.RecordBatch.from_pydict(
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
    (out,) = list(shard_task(pages, spec)([batch]))
    shard_results, (counts,) = decode_results(out.to_pylist())
    results = {result.shard: result for result in shard_results}
    trees = {
        shard: ShardTree(pages, ShardState.from_json(results[shard].state)) for shard in (2, 7)
    }
    names = {
        shard: sorted(path[1] for path, _ in tree.walk() if len(path) == 2)
        for shard, tree in trees.items()
    }
    assert names == {2: ["a", "c", "e"], 7: ["b", "d"]}
    assert counts.files == {"f.tsv": 5} and counts.sources["attributes"]["applied"] == 5
