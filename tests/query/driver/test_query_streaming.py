"""Query rows stream back shard by shard; closing the rows early cancels the rest."""

from __future__ import annotations

import json
import threading
import time
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


def test_one_spark_job_runs_every_shard_and_the_first_row_comes_before_it_ends(
    spark: Any, demo_store: Path
) -> None:
    handle = _store(spark, demo_store)
    shards = len(handle.store_version.manifest.trees)
    assert shards >= 3
    tracker = spark.sparkContext.statusTracker()
    rows = handle.query("root/+/+/+")
    first = next(rows)
    (job,) = tracker.getJobIdsForGroup(handle.last_job_group)
    rest = list(rows)
    assert len([first, *rest]) == 12
    assert tracker.getJobIdsForGroup(handle.last_job_group) == [job]  # one job, every shard
    assert handle.query("root/+/+/+").to_list() == [first, *rest]  # same rows, same order
    (stage,) = tracker.getJobInfo(job).stageIds
    tasks = tracker.getStageInfo(stage).numTasks
    assert tasks == min(shards, spark.sparkContext.defaultParallelism)  # a task per core


def test_rows_come_in_shard_order(spark: Any, demo_store: Path) -> None:
    handle = _store(spark, demo_store)
    expected = []
    for shard in sorted(
        handle.store_version.manifest.trees
    ):  # each shard's children of root, by name
        tree = handle.store_version.tree(shard)
        top = tree.child(tree.root, "root")
        expected += [node.name for node in tree.children(top)] if top is not None else []
    assert len(expected) == 4 and expected != sorted(expected)  # shard order is not name order
    assert [row[0] for row in handle.query("root/+")] == expected


@pytest.fixture
def tasks_stop_after_their_first_shard(spark: Any, tmp_path: Path) -> Any:
    """In the next queries, every task sleeps after sending its first shard until it is
    cancelled (the failpoint's settings reach the tasks through the session's executor
    environment): such a query's Spark job never ends by itself."""
    settings = {
        "TREESTORE_FAILPOINT": "query-shard-sent",
        "TREESTORE_FAILPOINT_MARKER": str(tmp_path / "stopped"),
    }
    environment = spark.sparkContext.environment
    environment.update(settings)
    yield tmp_path / "stopped"
    for name in settings:
        environment.pop(name, None)


@pytest.fixture
def one_shard_store(spark: Any, demo_dir: Path) -> Path:
    """The demo loaded into one shard: a query of it is one task."""
    job = json.loads((demo_dir / "job.json").read_text())
    (demo_dir / "one-shard.json").write_text(json.dumps({**job, "shards": 1}))
    run_load(spark, load_job(demo_dir / "one-shard.json"), demo_dir / "one-shard")
    return demo_dir / "one-shard"


@pytest.mark.parametrize("how", ["close", "limit"])
def test_closing_the_rows_cancels_the_query(
    spark: Any, one_shard_store: Path, tasks_stop_after_their_first_shard: Path, how: str
) -> None:
    """Closing the rows after the first (or a driver-side ``limit`` met) cancels the Spark
    job. Its one task sends the shard's rows, then waits: only the cancel ends the job
    (without it, the caller would wait for the task forever)."""
    handle = _store(spark, one_shard_store)
    tracker = spark.sparkContext.statusTracker()
    got: list[Any] = []

    def read() -> None:
        if how == "close":
            with handle.query("root/+/+/+") as rows:
                got.append(next(rows))
            got.extend(rows)  # closed: nothing more comes
        else:
            got.extend(handle.query("root/+/+/+", ops="limit=1"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=120)  # a guard against a hang, not a measure of speed
    assert not reader.is_alive(), "the query was not cancelled: its tasks still wait"
    assert len(got) == 1
    assert tasks_stop_after_their_first_shard.exists()  # the tasks were held
    (job,) = tracker.getJobIdsForGroup(handle.last_job_group)
    assert tracker.getJobInfo(job).status == "FAILED"  # cancelled, not run to its end


def test_a_cancel_before_spark_has_the_job_still_ends_it(spark: Any, demo_store: Path) -> None:
    """``rows.cancel()`` from another thread may come before the query's job reaches Spark
    (a service whose client left at once): a job group cancelled then has no job yet, so
    the cancel is said again until the job ends, and the reader sees the rows end."""
    handle = _store(spark, demo_store)
    rows = handle.query("root/+/+/+", rops="sleep=600000")  # ten minutes a row
    rows.cancel()  # the job is started, and cancelled, when the rows are first asked for
    ended: list[BaseException] = []

    def read() -> None:
        try:
            list(rows)
        except Exception as exc:
            ended.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=120)  # a guard against a hang, not a measure of speed
    assert not reader.is_alive(), "the cancel missed the job: it runs its ten-minute rows"
    assert ended, "a cancelled query's rows end with an error"
    tracker = spark.sparkContext.statusTracker()
    jobs = tracker.getJobIdsForGroup(handle.last_job_group)

    def ended() -> bool:  # its tasks told to stop (SUCCEEDED), or the job cancelled (FAILED)
        return all(tracker.getJobInfo(job).status in ("SUCCEEDED", "FAILED") for job in jobs)

    deadline = time.monotonic() + 60  # a guard against a hang, not a measure of speed
    while not ended() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ended(), "the query's job still runs its ten-minute rows"


def test_the_session_answers_after_a_cancelled_query(spark: Any, demo_store: Path) -> None:
    handle = _store(spark, demo_store)
    with handle.query("root/+/+/+") as rows:
        next(rows)
    assert handle.query("root/+:+hits", ops="merge=is").to_list() == [(8,)]


def test_labels_name_the_arrow_columns(spark: Any, demo_store: Path) -> None:
    handle = _store(spark, demo_store)
    table = handle.query("+{top}/(1)+{uid}:+hits>2").to_arrow()
    assert table.column_names == ["top", "uid", "hits"]
    assert table.to_pylist() == [{"top": "root", "uid": "12345", "hits": 3}]
    kept = handle.query("+{top}", ops="merge=k").to_arrow()
    assert kept.column_names == ["top"]  # ops that keep columns keep their names
    pivoted = handle.query("+{top}/+:+hits", ops="pivot=0,1,2").to_arrow()
    assert pivoted.column_names[0] == "c0"  # an op whose columns cannot be named ahead


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
    assert len(handle.store_version.manifest.trees) > 1
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
        table = handle.query(path, rops=rops, ops=ops).to_arrow()
        assert [tuple(r.values()) for r in table.to_pylist()] == rows
    scan = list(handle.query("root/+/+/+:+hits").batches())
    assert {b.schema.types[0] for b in scan} == {pa.string()}
    assert {b.schema.types[3] for b in scan} == {pa.int64()}


def test_a_query_needs_no_scratch_folder_on_the_driver(
    spark: Any, demo_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows reach the driver through its socket, not through files executors cannot see."""
    import tempfile

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    handle = _store(spark, demo_store)
    with handle.query("root/+/+/+") as rows:
        next(rows)
        assert list(scratch.iterdir()) == []
        assert len(list(rows)) == 11
    assert list(scratch.iterdir()) == []


def test_repr_says_which_store_version_and_shards(spark: Any, demo_store: Path) -> None:
    handle = treestore.open(demo_store)
    assert repr(handle) == f"<QueryStore {str(demo_store)!r} version 1 of 1, 8 shards>"


def test_rows_closed_early_let_the_tasks_end_by_themselves(spark: Any, demo_store: Path) -> None:
    """Rows closed after the first: the tasks are told to stop and end without an error
    (the Spark job succeeds, so Spark keeps their Python workers), and the next query
    reads every row."""
    handle = _store(spark, demo_store)
    tracker = spark.sparkContext.statusTracker()
    with handle.query("root/+/+/+") as rows:
        first = next(rows)
    (job,) = tracker.getJobIdsForGroup(handle.last_job_group)
    assert tracker.getJobInfo(job).status == "SUCCEEDED"  # ended, not cancelled
    assert handle.query("root/+/+/+").to_list()[0] == first


@pytest.mark.parametrize("tls", [False, True])
def test_a_stopped_channel_tells_its_senders_and_its_reader(tls: bool) -> None:
    """stop_senders: a connected task sees it before its next piece, a task that connects
    later at once, and the reader's pieces end (the caller raises: rows are missing)."""
    from query.driver.channel import RowChannel, TaskSender
    from query.driver.transport import encode_piece

    class Running:
        error: BaseException | None = None

        def running(self) -> bool:
            return True

    channel = RowChannel("127.0.0.1", tls=tls)
    early = TaskSender(channel.address, channel.token, channel.certificate)
    early.send(0, *encode_piece([("a",)]))
    pieces = channel.pieces([0, 1], Running())
    assert next(pieces) == [("a",)]
    assert not early.stopped()
    channel.stop_senders()
    assert list(pieces) == []
    late = TaskSender(channel.address, channel.token, channel.certificate)
    for sender in (early, late):
        deadline = time.monotonic() + 30  # a guard, not a measure
        while not sender.stopped() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sender.stopped()
        sender.send(1, *encode_piece([("dropped",)]))  # the driver still reads, and drops
        sender.close()
    channel.close()
