"""Query rows stream back shard by shard; closing the rows early cancels the rest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import treestore
from loaders import load_job, run_load

pytestmark = pytest.mark.spark


def _store(spark: Any, store: Path) -> Any:
    """The demo store, every query on Spark (it is small enough to run anything locally)."""
    handle = treestore.open(store, spark=spark)
    handle.local_limit = -1
    return handle


def test_the_first_row_comes_before_the_last_shard_runs(spark: Any, demo_store: Path) -> None:
    """Through Spark (as on a cluster): one job per shard, run one ahead of the reader."""
    handle = _store(spark, demo_store)
    handle.results_via_files = False
    shards = len(handle.store.manifest.trees)
    assert shards >= 3
    tracker = spark.sparkContext.statusTracker()
    rows = handle.query("root/+/+/+")
    first = next(rows)
    started = tracker.getJobIdsForGroup(handle.last_job_group)
    assert 1 <= len(started) <= 2 < shards  # most shards have not run yet
    rest = list(rows)
    assert len(tracker.getJobIdsForGroup(handle.last_job_group)) == shards
    assert len([first, *rest]) == 12


def test_on_a_local_master_one_job_runs_every_shard(spark: Any, demo_store: Path) -> None:
    handle = _store(spark, demo_store)
    tracker = spark.sparkContext.statusTracker()
    rows = handle.query("root/+/+/+").to_list()
    assert len(rows) == 12
    assert len(tracker.getJobIdsForGroup(handle.last_job_group)) == 1
    handle.results_via_files = False
    assert handle.query("root/+/+/+").to_list() == rows  # the same rows, in the same order


def test_closing_the_rows_cancels_the_query(spark: Any, demo_store: Path) -> None:
    handle = _store(spark, demo_store)
    shards = len(handle.store.manifest.trees)
    tracker = spark.sparkContext.statusTracker()
    with handle.query("root/+/+/+") as rows:
        next(rows)
    assert list(rows) == []  # closed: nothing more comes
    assert len(tracker.getJobIdsForGroup(handle.last_job_group)) < shards
    # the session is fine for the next query, and a driver-side limit closes early too
    assert handle.query("root/+:+hits", ops="merge=is").to_list() == [(8,)]


def test_labels_name_the_arrow_columns(spark: Any, demo_store: Path) -> None:
    handle = _store(spark, demo_store)
    table = handle.query("+{top}/(1)+{uid}:+hits>2").to_arrow()
    assert table.column_names == ["top", "uid", "c2"]
    assert table.to_pylist() == [{"top": "root", "uid": "12345", "c2": 3}]
    plain = handle.query("+{top}", ops="merge=k").to_arrow()
    assert plain.column_names == ["c0"]  # ops may reshape the rows: no labels then


QUERIES = [
    ("root/+:nodes>1/+/+", "str=c1,v=,cat,c2,cat,v2,set;merge=kij"),
    ("root/+:+hits", None),
    ("root/++1/+/+", None),
    ("root/+@2,7/(1)+", None),
    ('root/|+"[0-9]+5"/A/+', "num=c1,n2,gteq"),
    ("root/!+1.*/+[none]M/+", None),
    ("(0-2)root/+/+:+hits/..", None),
    ("root/+/A/+", "gather=kiu"),
]


@pytest.mark.parametrize(("path", "rops"), QUERIES)
def test_sharded_store_and_one_shard_tree_give_the_same_rows(
    spark: Any,
    demo_dir: Path,
    demo_store: Path,
    tmp_path_factory: pytest.TempPathFactory,
    path: str,
    rops: Any,
) -> None:
    import json as json_module

    from query import compile_ops, parse_path, run_path

    job = json_module.loads((demo_dir / "job.json").read_text())
    job["shards"] = 1
    single_dir = tmp_path_factory.mktemp("single")
    single_job = demo_dir / "job-one-shard.json"
    single_job.write_text(json_module.dumps(job))
    run_load(spark, load_job(single_job), single_dir / "store")
    from treestore.store.versions import open_version

    one = open_version(single_dir / "store").tree(0)
    expected = sorted(compile_ops(rops).run(run_path(one, parse_path(path))), key=repr)
    handle = _store(spark, demo_store)
    assert len(handle.store.manifest.trees) > 1
    got = sorted(handle.query(path, rops=rops).to_list(), key=repr)
    assert got == expected and got


def test_selective_queries_run_on_the_driver_with_the_same_rows(
    spark: Any, demo_store: Path
) -> None:
    spark_handle = _store(spark, demo_store)
    local = treestore.open(demo_store)
    local.local_limit = 3
    for path, rops in [("root/12345/+/+", None), ("root/67890,12345/M/+", "str=c0,c0,cat,v1,set")]:
        expected = sorted(spark_handle.query(path, rops=rops).to_list(), key=repr)
        assert sorted(local.query(path, rops=rops).to_list(), key=repr) == expected and expected
        assert local.last_run == "local"
    assert local.last_job_group is None  # no Spark job ran
    # root's 4 children are more than the limit: a scan goes to Spark
    assert sorted(local.query("root/+").to_list()) == sorted(spark_handle.query("root/+"))
    assert local.last_run == "spark" and local.last_job_group is not None


def test_batches_stream_typed_columns_and_match_the_rows(spark: Any, demo_store: Path) -> None:
    import pyarrow as pa

    handle = _store(spark, demo_store)
    inline = _store(spark, demo_store)
    inline.results_via_files = False  # column chunks through the JVM, as on a cluster
    for path, rops, ops in [
        ("root/+/+/+:+hits", None, None),  # columns all the way
        *[(path, rops, None) for path, rops in QUERIES],
        ("root/+:+hits", None, "merge=is"),  # driver ops: batches made from rows
    ]:
        rows = handle.query(path, rops=rops, ops=ops).to_list()
        batches = list(handle.query(path, rops=rops, ops=ops).batches())
        assert all(isinstance(b, pa.RecordBatch) for b in batches)
        got = [
            row for b in batches for row in zip(*(c.to_pylist() for c in b.columns), strict=True)
        ]
        assert got == rows, (path, rops, ops)
        assert inline.query(path, rops=rops, ops=ops).to_list() == rows
        table = handle.query(path, rops=rops, ops=ops).to_arrow()
        assert [tuple(r.values()) for r in table.to_pylist()] == rows
    scan = list(handle.query("root/+/+/+:+hits").batches())
    assert {b.schema.types[0] for b in scan} == {pa.string()}
    assert {b.schema.types[3] for b in scan} == {pa.int64()}


def test_result_files_are_removed_when_the_rows_are_read_or_closed(
    spark: Any, demo_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    handle = _store(spark, demo_store)
    assert len(handle.query("root/+/+/+").to_list()) == 12
    assert list(scratch.iterdir()) == []
    with handle.query("root/+/+/+") as rows:
        next(rows)
        (folder,) = scratch.iterdir()  # in use while the rows are read
        assert folder.name.startswith("treestore-query-")
    assert list(scratch.iterdir()) == []
