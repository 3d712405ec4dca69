"""Everything treestore does, run on one SparkSession, its answers as plain data.

:func:`run_scenario` loads, queries (also as DataFrames), dedups, keeps pending records,
sweeps with both plans, and reads the store's info, check and gc; the cluster tests run
it once on the local session and once in a driver of the standalone cluster (``python -m
tests.support.cluster_scenario``, with a SparkSession built there the way a user builds one),
and compare the two answers whole. Inputs and stores live under the locations given
(a folder or an ``s3://`` URI); the job files are written to ``work``, which the
executors must never need.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

from loaders import load_job, run_load
from loaders.sweep.command import run_sweep
from shell.demo import DEMO_JOB, DEMO_OPS, DEMO_PATH, write_demo_inputs
from shell.output.info import write_info
from tests.support.jobs import CLICKS_FIRST, CLICKS_JOB, CLICKS_SECOND, PENDING_JOB
from treestore import open as open_store
from treestore.filesystems import open_location
from treestore.storage.pagestore import page_store_for
from treestore.store.lock import store_lock
from treestore.store.maintenance import check_store, collect_garbage

__all__ = ["frame_answers", "plain", "run_scenario"]

QUERIES = [
    (DEMO_PATH, DEMO_OPS),
    ("root/+:+hits", None),
    ("root/+/+/+", None),
    ("root/+/M/+", None),
]
EVENTS = "id,time\n1,1\n1,5\n2,3\n2,9\n3,4\n"
INTERVALS = "id,start,end,points\n1,0,4,2\n1,3,6,5\n2,2,8,1\n3,5,7,4\n"


def _put(location: str, name: str, text: str) -> None:
    """Write ``text`` as the file ``name`` under ``location`` (a folder or a URI)."""
    filesystem, root = open_location(location)
    path = f"{root}/{name}"
    filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with filesystem.open_output_stream(path) as out:
        out.write(text.encode())


def _job(work: Path, name: str, job: dict[str, Any], paths: dict[str, str]) -> Path:
    """Write ``job`` to ``work/NAME.json`` with its sources' paths replaced."""
    job = copy.deepcopy(job)
    for source in job["source"]:
        source["path"] = paths[source["name"]]
    file = work / f"{name}.json"
    file.write_text(json.dumps(job))
    return file


def plain(value: Any) -> Any:
    """Values as JSON keeps them (numpy and pandas scalars as Python ones)."""
    return json.loads(
        json.dumps(value, default=lambda v: v.item() if hasattr(v, "item") else str(v))
    )


def _answers(spark: Any, store: str, every_form: bool = True) -> dict[str, Any]:
    """Every query of :data:`QUERIES` as rows, Arrow and pandas (rows only unless
    ``every_form``), and the Spark jobs each query started."""
    handle = open_store(store, spark=spark)
    handle.local_limit = -1  # every query through Spark
    tracker = spark.sparkContext.statusTracker()
    found: dict[str, Any] = {}
    for path, rops in QUERIES:
        rows = handle.query(path, rops=rops).to_list()
        jobs = len(tracker.getJobIdsForGroup(handle.last_job_group))
        found[path] = {"rows": rows, "jobs": jobs}
        if every_form:
            found[path]["arrow"] = handle.query(path, rops=rops).to_arrow().to_pylist()
            frame = handle.query(path, rops=rops).to_pandas()
            found[path]["pandas"] = frame.to_dict("records")
        found[path] = plain(found[path])
    return found


def _report(result: Any) -> dict[str, Any]:
    """What a load's report says that does not depend on where or how fast it ran."""
    report = result.report
    return plain(
        {
            "version": result.version,
            "sources": report.get("sources"),
            "pending": report.get("pending"),
        }
    )


def _demo(spark: Any, inputs: str, stores: str, work: Path) -> dict[str, Any]:
    local = work / "demo-inputs"
    write_demo_inputs(local)
    for file in sorted(p for p in local.rglob("*") if p.is_file() and p.suffix == ".tsv"):
        _put(inputs, f"demo/{file.relative_to(local)}", file.read_text())
    paths = {s["name"]: f"{inputs}/demo/{s['name']}/" for s in DEMO_JOB["source"]}
    job = load_job(_job(work, "demo", DEMO_JOB, paths))
    store = f"{stores}/demo"
    first = _report(run_load(spark, job, store))
    before = _answers(spark, store)
    _put(inputs, "demo/mapping/mapping-0002.tsv", "TIME\tUID\tPUID\n1\t67890\tnew\n")
    second = _report(run_load(spark, load_job(work / "demo.json"), store))
    after = _answers(spark, store, every_form=False)
    frames = frame_answers(spark, store)
    return {"first": first, "queries": before, "second": second, "after": after, "frames": frames}


def frame_answers(spark: Any, store: str) -> dict[str, Any]:
    """Every query of :data:`QUERIES` read as a DataFrame (``Rows.to_spark``, the source's
    tasks), its rows sorted, and whether they equal the query's rows; and the first
    query's DataFrame joined with a Spark table of some of its keys."""
    handle = open_store(store, spark=spark)

    def ordered(rows: Any) -> list[list[Any]]:
        return sorted((list(row) for row in rows), key=repr)

    found: dict[str, Any] = {}
    for path, rops in QUERIES:
        frame = handle.query(path, rops=rops).to_spark(spark)
        rows = ordered(frame.collect())
        expected = ordered(handle.query(path, rops=rops).to_list())
        found[path] = {"columns": frame.columns, "rows": rows, "equal": rows == expected}
    table = spark.createDataFrame([("12345", "x"), ("67890", "y")], "name string, tag string")
    joined = handle.query("root/+/+:+hits").to_spark(spark).join(table, "name")
    found["join"] = ordered(joined.collect())
    return plain(found)


def _dedup(spark: Any, inputs: str, stores: str, work: Path) -> dict[str, Any]:
    def tsv(rows: list[tuple[int, str, str]]) -> str:
        return "TIME\tUID\tURL\n" + "".join(f"{t}\t{u}\t{url}\n" for t, u, url in rows)

    _put(inputs, "clicks/c1.tsv", tsv(CLICKS_FIRST))
    _put(inputs, "clicks/c2.tsv", tsv([(1, "u2", "a"), (5, "u4", "e")]))
    file = _job(work, "dedup", CLICKS_JOB, {"clicks": f"{inputs}/clicks/"})
    store = f"{stores}/dedup"
    first = _report(run_load(spark, load_job(file), store))
    _put(inputs, "clicks/c3.tsv", tsv(CLICKS_SECOND))
    second = _report(run_load(spark, load_job(file), store))
    hits = open_store(store, spark=spark).query("root/+/+:+hits").to_list()
    return {"first": first, "second": second, "hits": sorted(hits)}


def _pending(spark: Any, inputs: str, stores: str, work: Path) -> dict[str, Any]:
    paths = {"attributes": f"{inputs}/pending/a/", "mapping": f"{inputs}/pending/m/"}
    file = _job(work, "pending", PENDING_JOB, paths)
    store = f"{stores}/pending"
    _put(inputs, "pending/a/1.csv", "U\nu1\n")
    _put(inputs, "pending/m/1.csv", "U,P\nu2,p2\nu3,p3\n")  # no node for u2, u3 yet
    first = _report(run_load(spark, load_job(file), store))
    _put(inputs, "pending/a/2.csv", "U\nu2\n")  # u2's node appears: its record applies
    second = _report(run_load(spark, load_job(file), store))
    rows = open_store(store, spark=spark).query("root/+/M/+/seen:+hits").to_list()
    return {"first": first, "second": second, "rows": sorted(rows)}


def _sweeps(spark: Any, inputs: str, stores: str) -> dict[str, Any]:
    import pyarrow.parquet as pq

    _put(inputs, "sweep/events.csv", EVENTS)
    _put(inputs, "sweep/intervals.csv", INTERVALS)
    store = f"{stores}/sweeps"
    found = {}
    for plan in ("range", "broadcast"):
        out = f"{stores}/sweep-out/{plan}"
        run_sweep(
            spark, f"{inputs}/sweep/events.csv", f"{inputs}/sweep/intervals.csv", store, plan,
            agg="sum", plan=plan, shards=2, out=out,
        )  # fmt: skip
        filesystem, folder = open_location(out)
        written = pq.read_table(folder, filesystem=filesystem).to_pylist()
        found[plan] = {
            "rows": sorted(open_store(store, spark=spark).query(f"{plan}/+/+/+").to_list()),
            "out": sorted(written, key=lambda row: sorted(row.items())),
        }
    return plain(found)


def _maintenance(stores: str) -> dict[str, Any]:
    store = f"{stores}/demo"
    shown = io.StringIO()
    write_info(store, shown)
    pages = page_store_for(store)
    with store_lock(pages, "gc"):
        removed = collect_garbage(pages, keep=1)
    return {
        "info": [  # without the loads' times
            re.sub(r" at \S+ \([\d.]+ s\)", "", line)
            for line in shown.getvalue().replace(store, "STORE").splitlines()
        ],
        "check": check_store(store),
        "gc": removed,
        "check after gc": check_store(store),
    }


def run_scenario(spark: Any, inputs: str, stores: str, work: Path) -> dict[str, Any]:
    """Run everything on ``spark``; the answers, as JSON-able data."""
    work.mkdir(parents=True, exist_ok=True)
    return plain(
        {
            "demo": _demo(spark, inputs, stores, work),
            "dedup": _dedup(spark, inputs, stores, work),
            "pending": _pending(spark, inputs, stores, work),
            "sweeps": _sweeps(spark, inputs, stores),
            "maintenance": _maintenance(stores),
        }
    )


def refused_commands(master: str, own: Path, stores: Path) -> list[dict[str, Any]]:
    """Run ``treestore load`` and ``treestore sweep`` (the command line, in this driver)
    on a job file and inputs in ``own``, a folder only the driver has; what each said."""
    import contextlib
    import traceback

    from shell.cli import main as cli

    write_demo_inputs(own)
    (own / "events.csv").write_text(EVENTS)
    (own / "intervals.csv").write_text(INTERVALS)
    said = []
    for args, store in [
        (["load", str(own / "job.json")], "store"),
        (["sweep", "--events", str(own / "events.csv"), "--intervals",
          str(own / "intervals.csv"), "--name", "s"], "sweeps"),
    ]:  # fmt: skip
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = cli([*args, "--store", str(stores / store), "--master", master])
            except Exception:  # what must never happen: the test shows the traceback
                code = -1
                err.write(traceback.format_exc())
        said.append({"command": args[0], "code": code, "stderr": err.getvalue(),
                     "published": (stores / store / "CURRENT").exists()})  # fmt: skip
    return said


def _record_channels() -> list[bool]:
    """Whether each query's row channel spoke TLS, in the order the queries ran (their
    ``RowChannel`` replaced by one that records it)."""
    import query.driver.runner as runner

    used: list[bool] = []

    class Recorded(runner.RowChannel):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            used.append(self.certificate is not None)

    runner.RowChannel = Recorded  # type: ignore[misc]
    return used


def main() -> None:
    """Run the scenario in a driver of its own, on ``--master``, and write the answers;
    with ``--driver-only``, also the command lines refused there (key ``refused``)."""
    parser = argparse.ArgumentParser()
    for name in ("--master", "--inputs", "--stores", "--work", "--out"):
        parser.add_argument(name, required=True)
    parser.add_argument("--driver-only", type=Path, help="a folder only this driver has")
    parser.add_argument("--local-stores", type=Path, help="stores' folder for --driver-only")
    options = parser.parse_args()
    from pyspark.sql import SparkSession

    spark = (  # a user's own session: treestore is given it, it does not make it
        SparkSession.builder.master(options.master)
        .appName("treestore-cluster-scenario")
        .config("spark.ui.enabled", "false")
        .config("spark.executor.memory", "512m")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    tls = _record_channels()
    answers = run_scenario(spark, options.inputs, options.stores, Path(options.work))
    answers["channels"] = {
        "authenticate": spark.sparkContext.getConf().get("spark.authenticate"),
        "tls": tls,
    }
    if options.driver_only:
        answers["refused"] = refused_commands(
            options.master, options.driver_only, options.local_stores
        )
    Path(options.out).write_text(json.dumps(answers, indent=1))
    spark.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
