"""Benchmark of the store as a Spark DataFrame and of queries on a Spark Connect session.

On a store of the seed-004 shape with about --nodes nodes (the issue's figures are for
12.5M: reuse the one bench/serve.py builds with --store), in one run:

* a full scan (``root/+/+/+``) read as a DataFrame by the store's source and counted,
  against ``Rows.to_arrow()`` of the same query in this process, and written to Parquet
  by Spark, against ``Rows.to_parquet`` (the Arrow path writing Parquet): each at least
  0.7x the in-process rows/s (the medians of three, in turns); Spark's Parquet writer
  alone on the same rows (cached) is printed for scale;
* the seed's query (its path and rops) through a Spark Connect session (a real server on
  loopback, its client in a process of its own) against this process's classic session:
  at most 1.5x its time, and its first row at most 1.5x (the medians of five; each side
  alone on the machine while it runs);
* a query's rows (UID, attribute id) as a DataFrame joined with a Spark table of the
  same keys (the mapping input's UID -> PUID, read by Spark), against loading both sides
  as DataFrames from the inputs (the attribute lists split and exploded) and joining:
  the ratio is printed.

Each figure prints PASS or FAIL (the join: its ratio), with the load average before
and after: on a machine shared with other work the timings move.

    .venv/bin/python bench/spark_native.py [--nodes 1000000] [--store DIR]
    .venv/bin/python bench/spark_native.py --store /tmp/serve-bench-store
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]
sys.path.insert(0, str(ROOT))

from treestore.settings import prepare_process  # noqa: E402

prepare_process()

# isort: split
from shell.demo import DEMO_OPS, DEMO_PATH  # noqa: E402

SCAN = "root/+/+/+"
RUNS = 3
CONNECT_RUNS = 5


def _bench_query() -> Any:
    """bench/query.py as a module (its store builder)."""
    spec = importlib.util.spec_from_file_location("bench_query", ROOT / "bench" / "query.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def _seconds(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def _first_and_total(store: Any, path: str, rops: str | None) -> tuple[float, float]:
    """Seconds to a query's first row, and to its last."""
    started = time.perf_counter()
    first = None
    for _row in store.query(path, rops=rops):
        if first is None:
            first = time.perf_counter() - started
    total = time.perf_counter() - started
    return (total if first is None else first), total


def _timings(store: Any, runs: int) -> dict[str, float]:
    """The seed's query, warmed, then ``runs`` times: the medians."""
    _first_and_total(store, DEMO_PATH, DEMO_OPS)
    measured = [_first_and_total(store, DEMO_PATH, DEMO_OPS) for _ in range(runs)]
    return {
        "first": statistics.median(m[0] for m in measured),
        "total": statistics.median(m[1] for m in measured),
    }


def connect_client(url: str, store_dir: str, runs: int) -> None:
    """The Connect side (``--connect-client``): the seed's query's timings as JSON."""
    from pyspark.sql import SparkSession

    import treestore

    spark = SparkSession.builder.remote(url).getOrCreate()
    store = treestore.open(store_dir, spark=spark)
    store.local_limit = -1
    print(json.dumps(_timings(store, runs)))
    spark.stop()


def _scan_figures(spark: Any, store: Any, work: Path) -> None:
    """The full scan counted (a DataFrame against ``to_arrow()`` in process) and written to
    Parquet (``to_spark(...).write.parquet`` against ``Rows.to_parquet``); and, for
    scale, Spark's Parquet writer alone on the same rows cached in memory."""
    out = work / "scan-frame"
    rows = store.query(SCAN).to_arrow().num_rows

    def counted() -> int:
        return int(store.query(SCAN).to_spark(spark).count())

    def written() -> None:
        store.query(SCAN).to_spark(spark).write.mode("overwrite").parquet(str(out))

    def in_process() -> None:
        store.query(SCAN).to_parquet(work / "scan.parquet", overwrite=True)

    cached = store.query(SCAN).to_spark(spark).cache()
    assert counted() == rows and cached.count() == rows  # warm, and the same rows
    written()
    in_process()
    work_of: dict[str, Callable[[], object]] = {
        "arrow": lambda: store.query(SCAN).to_arrow(),
        "count": counted,
        "to_parquet": in_process,
        "parquet": written,
        "writer": lambda: cached.write.mode("overwrite").parquet(str(work / "cached")),
    }
    times: dict[str, list[float]] = {name: [] for name in work_of}
    for _ in range(RUNS):  # in turns: each sees the same machine
        for name, run in work_of.items():
            times[name].append(_seconds(run))
    cached.unpersist()
    rate = {name: rows / statistics.median(values) for name, values in times.items()}
    print(f"full scan {SCAN}: {rows:,} rows, medians of {RUNS}")
    for name, label, peer in (
        ("count", "DataFrame, counted", "arrow"),
        ("parquet", "DataFrame to Parquet", "to_parquet"),
    ):
        ratio = rate[name] / rate[peer]
        print(
            f"  {label:22} {rate[name]:11,.0f} rows/s; in process ({peer}) "
            f"{rate[peer]:11,.0f} rows/s: {ratio:.2f}x (goal >= 0.7x): {_verdict(ratio >= 0.7)}"
        )
    print(
        f"  (Spark's Parquet writer alone, the rows cached: {rate['writer']:,.0f} rows/s; "
        f"the DataFrame's write is {rate['parquet'] / rate['writer']:.2f}x of it)"
    )


def _connect_figures(store: Any, store_dir: Path, work: Path) -> None:
    """The seed's query on a Connect server against this classic session."""
    from tests.support.connect_server import start_connect_server

    classic = _timings(store, CONNECT_RUNS)
    server = start_connect_server(work / "connect", cores=os.cpu_count() or 2)
    try:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, __file__, "--connect-client", server.url, str(store_dir)],
            env=env, capture_output=True, text=True, timeout=1800, check=False,
        )  # fmt: skip
    finally:
        server.stop()
    if done.returncode != 0:
        print(f"the Connect client failed:\n{done.stderr[-3000:]}")
        return
    remote = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"seed's query ({DEMO_PATH} | rops {DEMO_OPS}), medians of {CONNECT_RUNS}:")
    for name, label in (("total", "time"), ("first", "first row")):
        ratio = remote[name] / classic[name]
        print(
            f"  {label:9} Connect {remote[name]:7.3f} s, classic {classic[name]:7.3f} s = "
            f"{ratio:.2f}x (goal <= 1.5x): {_verdict(ratio <= 1.5)}"
        )


def _join_figures(spark: Any, store: Any, folder: Path) -> None:
    """A query's rows joined with a Spark table, against both sides from the inputs."""
    from pyspark.sql import functions as F

    def mapping() -> Any:
        return (
            spark.read.option("sep", "\t")
            .option("header", True)
            .csv(str(folder / "mapping"))
            .select("UID", "PUID")
        )

    def from_store() -> int:
        frame = store.query("root/+/A/+").to_spark(spark).toDF("UID", "ATTRIBUTE")
        return int(frame.join(mapping(), "UID").count())

    def from_inputs() -> int:
        attributes = (
            spark.read.option("sep", "\t").option("header", True).csv(str(folder / "attributes"))
        )
        exploded = attributes.select(
            "UID", F.explode(F.split("ATTRIBUTE_IDS", ",")).alias("ATTRIBUTE")
        ).distinct()
        return int(exploded.join(mapping(), "UID").count())

    pairs = from_store()
    same = from_inputs()
    store_times, input_times = [], []
    for _ in range(RUNS):
        store_times.append(_seconds(from_store))
        input_times.append(_seconds(from_inputs))
    ours, theirs = statistics.median(store_times), statistics.median(input_times)
    print(
        f"join of root/+/A/+ with the mapping table ({pairs:,} pairs; from the inputs "
        f"{same:,}): {ours:.2f} s from the store, {theirs:.2f} s from the inputs = "
        f"{theirs / ours:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--store", help="reuse (or keep) the store here (bench/serve.py's)")
    parser.add_argument("--connect-client", nargs=2, metavar=("URL", "STORE"))
    args = parser.parse_args()
    if args.connect_client:
        connect_client(*args.connect_client, CONNECT_RUNS)
        return
    import treestore
    from treestore.spark import get_session

    bench_query = _bench_query()
    spark = get_session()
    with tempfile.TemporaryDirectory(prefix="treestore-spark-native-bench-") as name:
        folder = Path(args.store) if args.store else Path(name) / "work"
        store_dir = folder / "store"
        if not store_dir.exists():
            from loaders import load_job, run_load

            folder.mkdir(parents=True, exist_ok=True)
            bench_query.write_inputs(folder, args.nodes)
            run_load(spark, load_job(bench_query.write_job(folder)), store_dir)
        store = treestore.open(store_dir, spark=spark)
        store.local_limit = -1
        nodes = sum(s.nodes for s in store.store_version.manifest.trees.values())
        print(f"store: {nodes:,} nodes in {store.shards} shards; {_load()}, {os.cpu_count()} cores")
        _scan_figures(spark, store, Path(name))
        _join_figures(spark, store, folder)
        _connect_figures(store, store_dir, Path(name))
        print(_load())


if __name__ == "__main__":
    main()
