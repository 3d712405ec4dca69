"""Benchmark of queries on a Spark standalone cluster: does a store scale out by shards?

Starts the loopback cluster the tests use (a master and two 1-core workers, from the
pyspark install), loads the same ~1M-node store (seed-004 shape) at 8, 64 and 128
shards, and prints for each: the full scan's first-row and total time, the Spark jobs
one query started, and a selective query's time (warm). The peer is the 8-shard
store: ratios are against it.
Goals: one Spark job per query at every shard count; the 128-shard full scan within
1.5x of the 8-shard one; a selective query under 0.5 s warm.

    .venv/bin/python bench/cluster.py [--nodes 1000000] [--shards 8,64,128]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

# This file is bench/cluster.py: drop its folder from the import path (bench/query.py would
# stand in for the `query` package) and put the project's root on it (for tests/).
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

from loaders import load_job, run_load  # noqa: E402
from tests.support.spark_cluster import start_cluster  # noqa: E402
from treestore.spark import get_session  # noqa: E402


def _query_bench():  # type: ignore[no-untyped-def]
    """bench/query.py as a module (its inputs, job and timing)."""
    spec = importlib.util.spec_from_file_location("query_bench", HERE / "query.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--shards", default="8,64,128")
    args = parser.parse_args()
    counts = [int(n) for n in args.shards.split(",")]
    bench = _query_bench()
    with tempfile.TemporaryDirectory(prefix="treestore-cluster-bench-") as name:
        folder = Path(name)
        cluster = start_cluster(folder / "cluster")
        try:
            spark = get_session(cluster.url, app_name="treestore-cluster-bench")
            tracker = spark.sparkContext.statusTracker()
            cores = spark.sparkContext.defaultParallelism
            uid = bench.write_inputs(folder, args.nodes)
            job = json.loads(bench.write_job(folder).read_text())
            print(f"cluster {cluster.url}: 2 workers, {cores} cores in all")
            results, jobs_seen, selective_seen = {}, {}, {}
            for shards in counts:
                job["shards"] = shards
                file = folder / f"job-{shards}.json"
                file.write_text(json.dumps(job))
                store_dir = folder / f"store-{shards}"
                started = time.perf_counter()
                run_load(spark, load_job(file), store_dir)
                loaded = time.perf_counter() - started
                import treestore

                store = treestore.open(store_dir, spark=spark)
                bench.timed(store, "root/+/+/+", arrow=True)  # warm the workers and pages
                first, total, rows = bench.timed(store, "root/+/+/+", arrow=True)
                jobs = len(tracker.getJobIdsForGroup(store.last_job_group))
                bench.timed(store, f"root/{uid}/+/+")
                _, selective, _ = bench.timed(store, f"root/{uid}/+/+")
                results[shards] = total
                jobs_seen[shards], selective_seen[shards] = jobs, selective
                ratio = total / results[counts[0]]
                print(
                    f"{shards:4} shards: loaded in {loaded:5.1f} s; full scan {rows:,} rows: "
                    f"first row {first:.3f} s, total {total:.2f} s ({ratio:.2f}x the "
                    f"{counts[0]}-shard scan), {jobs} Spark job(s); selective {selective:.3f} s"
                )
            widest = results[counts[-1]] / results[counts[0]]
            goals = [
                ("one Spark job per query at every shard count", set(jobs_seen.values()) == {1}),
                (
                    f"the {counts[-1]}-shard full scan within 1.5x of the {counts[0]}-shard one "
                    f"({widest:.2f}x)",
                    widest <= 1.5,
                ),
                (
                    f"a selective query under 0.5 s warm (slowest {max(selective_seen.values()):.3f} s)",
                    max(selective_seen.values()) < 0.5,
                ),
            ]
            for goal, met in goals:
                print(f"goal: {goal}: {'PASS' if met else 'FAIL'}")
            spark.stop()
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
