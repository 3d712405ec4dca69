"""The load's task function without Spark: batches in, trees and counts out."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from loaders.job.model import load_job
from loaders.load.dedup_step import DHASH, DKEY
from loaders.load.readers import FILE_COLUMN, LINE, REJECT, TEXT
from loaders.load.shard_frames import SHARD
from loaders.load.task import KEEP, ORDER, TaskPlan, shard_task
from loaders.tree.builder import TreeBuilder
from treestore.storage.pagestore import MemoryPageStore
from treestore.storage.tree import ShardState, ShardTree


def test_a_task_holding_several_shards_keeps_their_records_apart(demo_dir: Path) -> None:
    builder = TreeBuilder(load_job(demo_dir / "job.json").tree)
    attr, mapping = builder.filter_columns.values()
    pages = MemoryPageStore()
    plan = TaskPlan(builder, ("attributes", "mapping"), {}, {}, {}, ("f.tsv",), "rejected/t", 10)
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
    (out,) = list(shard_task(pages, plan)([batch]))
    results = dict(
        zip(out.column("shard").to_pylist(), out.column("result").to_pylist(), strict=True)
    )
    trees = {
        shard: ShardTree(pages, ShardState.from_json(json.loads(results[shard])["state"]))
        for shard in (2, 7)
    }
    names = {
        shard: sorted(path[1] for path, _ in tree.walk() if len(path) == 2)
        for shard, tree in trees.items()
    }
    assert names == {2: ["a", "c", "e"], 7: ["b", "d"]}
    counts = json.loads(results[-1])
    assert counts["files"] == {"f.tsv": 5} and counts["sources"]["attributes"]["applied"] == 5
