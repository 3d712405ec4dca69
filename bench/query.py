"""Benchmark of queries over a store of about --nodes nodes (default 10M) in 8 shards.

The store has the seed-004 shape (root / UID / A / attribute id, and M / PUID
for a third of the UIDs), loaded with `treestore load`'s own code. In a warm
session it prints, for a full scan, a selective lookup (one UID) and the
seed-004 rops query: the first-row latency, the total time and rows/s (the medians
of five runs: single runs on these machines move by up to a fifth). The full
scan is timed twice: rows as Python tuples, and rows as the Arrow batches they
arrive in (``Rows.batches()``, no Python object per value).
Goals: a selective lookup in under 0.5 s warm; the full scan as Arrow batches at
3M rows/s per core, its first batch in under 0.3 s warm (PASS/FAIL printed).

    .venv/bin/python bench/query.py [--nodes 10000000] [--store DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

# This file is bench/query.py: drop its folder from the import path, or it would
# stand in for the `query` package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

from treestore.settings import prepare_process  # noqa: E402

prepare_process()  # first, before numpy and pyarrow load: the treestore command's settings

# isort: split
import numpy as np  # noqa: E402

from loaders import load_job, run_load  # noqa: E402
from shell.demo import DEMO_OPS, DEMO_PATH  # noqa: E402
from treestore.spark import get_session  # noqa: E402
from treestore.store.versions import open_version  # noqa: E402

RUNS = 5
"""Each query is timed this many times (after a warm-up); the medians are printed."""


def write_inputs(folder: Path, nodes: int) -> str:
    """Seed-004 shaped TSVs making about ``nodes`` nodes; returns a UID to look up."""
    rng = np.random.default_rng(4)
    uids = max(1, nodes // 5)  # each UID: itself, A, ~3 attribute ids, and M + PUID for a third
    (folder / "attributes").mkdir(parents=True)
    (folder / "mapping").mkdir()
    ids = rng.integers(0, uids, uids * 2)
    with open(folder / "attributes" / "part-0.tsv", "w") as out:
        out.write("TIME\tUID\tATTRIBUTE_IDS\n")
        for n, uid in enumerate(ids):
            attrs = ",".join(map(str, rng.integers(0, 1000, 1 + n % 3)))
            out.write(f"{n}\tu{uid}\t{attrs}\n")
    with open(folder / "mapping" / "part-0.tsv", "w") as out:
        out.write("TIME\tUID\tPUID\n")
        for n, uid in enumerate(rng.integers(0, uids, uids // 3)):
            out.write(f"{n}\tu{uid}\tp{n}\n")
    return f"u{ids[0]}"


def write_job(folder: Path) -> Path:
    """The seed-004 job (from the demo) with 8 shards."""
    from shell.demo import write_demo_inputs

    scratch = folder / "demo"
    write_demo_inputs(scratch)
    job = json.loads((scratch / "job.json").read_text())
    job["shards"] = 8
    for source in job["source"]:
        source.pop("dedup", None)
    path = folder / "job.json"
    path.write_text(json.dumps(job))
    return path


def timed(
    store, path: str, rops: str | None = None, arrow: bool = False
) -> tuple[float, float, int]:  # type: ignore[no-untyped-def]
    """(first-row seconds, total seconds, rows): the rows as Python tuples, or (``arrow``)
    as the Arrow batches they arrive in."""
    started = time.perf_counter()
    first = None
    count = 0
    rows = store.query(path, rops=rops)
    if arrow:
        for batch in rows.batches():
            if first is None:
                first = time.perf_counter() - started
            count += batch.num_rows
    else:
        for _row in rows:
            if first is None:
                first = time.perf_counter() - started
            count += 1
    total = time.perf_counter() - started
    return first if first is not None else total, total, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=10_000_000)
    parser.add_argument("--store", help="reuse (or keep) the store here")
    args = parser.parse_args()
    spark = get_session()
    cores = spark.sparkContext.defaultParallelism
    with tempfile.TemporaryDirectory(prefix="treestore-query-bench-") as name:
        folder = Path(args.store) if args.store else Path(name) / "work"
        store_dir = folder / "store"
        lookup_file = folder / "lookup.txt"
        if not store_dir.exists():
            folder.mkdir(parents=True, exist_ok=True)
            uid = write_inputs(folder, args.nodes)
            lookup_file.write_text(uid)
            started = time.perf_counter()
            run_load(spark, load_job(write_job(folder)), store_dir)
            print(f"loaded in {time.perf_counter() - started:.1f} s")
        uid = lookup_file.read_text()
        version = open_version(store_dir)
        nodes = sum(state.nodes for state in version.manifest.trees.values())
        print(f"store: {nodes:,} nodes in {len(version.manifest.trees)} shards; {cores} cores")
        import treestore

        store = treestore.open(store_dir, spark=spark)
        timed(store, "root/+:+hits")  # warm the session and the workers
        cases = [
            ("full scan", "root/+/+/+", None, False),
            ("full scan, Arrow", "root/+/+/+", None, True),
            ("selective lookup", f"root/{uid}/+/+", None, False),
            ("seed-004 rops query", DEMO_PATH, DEMO_OPS, False),
        ]
        measured = {}
        for label, path, rops, arrow in cases:
            timed(store, path, rops, arrow)  # warm this query's pages in the page cache
            runs = [timed(store, path, rops, arrow) for _ in range(RUNS)]
            first = statistics.median(r[0] for r in runs)
            total = statistics.median(r[1] for r in runs)
            rows = runs[0][2]
            rate = rows / total if total else 0.0
            measured[label] = (first, total, rate / cores)
            print(
                f"{label:20} first row {first:6.3f} s, total {total:7.2f} s, {rows:,} rows, "
                f"{rate:,.0f} rows/s ({rate / cores:,.0f} per core)"
            )
        first, _, per_core = measured["full scan, Arrow"]
        _, lookup, _ = measured["selective lookup"]
        print(f"selective lookup {lookup:.3f} s (goal < 0.5 s): {_verdict(lookup < 0.5)}")
        print(
            f"full scan as Arrow: {per_core:,.0f} rows/s per core (goal >= 3,000,000): "
            f"{_verdict(per_core >= 3_000_000)}; first batch {first:.3f} s (goal < 0.3 s): "
            f"{_verdict(first < 0.3)}"
        )


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


if __name__ == "__main__":
    main()
