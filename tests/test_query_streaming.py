"""Query rows stream back shard by shard; closing the rows early cancels the rest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import treestore
from loaders import load_job, run_load

pytestmark = pytest.mark.spark


def _store(spark: Any, demo_dir: Path) -> Any:
    run_load(spark, load_job(demo_dir / "job.json"), demo_dir / "store", log=lambda _line: None)
    return treestore.open(demo_dir / "store", spark=spark)


def test_the_first_row_comes_before_the_last_shard_runs(spark: Any, demo_dir: Path) -> None:
    handle = _store(spark, demo_dir)
    shards = len(handle.store.manifest.trees)
    assert shards >= 3
    tracker = spark.sparkContext.statusTracker()
    rows = handle.query("root/+/+/+")
    first = next(rows)
    started = tracker.getJobIdsForGroup(handle.last_job_group)
    # one job per shard, run one ahead of the reader: most shards have not run yet
    assert 1 <= len(started) <= 2 < shards
    rest = list(rows)
    assert len(tracker.getJobIdsForGroup(handle.last_job_group)) == shards
    assert len([first, *rest]) == 12


def test_closing_the_rows_cancels_the_query(spark: Any, demo_dir: Path) -> None:
    handle = _store(spark, demo_dir)
    shards = len(handle.store.manifest.trees)
    tracker = spark.sparkContext.statusTracker()
    with handle.query("root/+/+/+") as rows:
        next(rows)
    assert list(rows) == []  # closed: nothing more comes
    assert len(tracker.getJobIdsForGroup(handle.last_job_group)) < shards
    # the session is fine for the next query, and a driver-side limit closes early too
    assert handle.query("root/+:+hits", ops="merge=is").to_list() == [(8,)]


def test_labels_name_the_arrow_columns(spark: Any, demo_dir: Path) -> None:
    handle = _store(spark, demo_dir)
    table = handle.query("+{top}/(1)+{uid}:+hits>2").to_arrow()
    assert table.column_names == ["top", "uid", "c2"]
    assert table.to_pylist() == [{"top": "root", "uid": "12345", "c2": 3}]
    plain = handle.query("+{top}", ops="merge=k").to_arrow()
    assert plain.column_names == ["c0"]  # ops may reshape the rows: no labels then
