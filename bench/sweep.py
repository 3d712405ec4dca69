"""Benchmark of the interval sweep against its peers, on the same generated data in one run.

Data: events (id, time) and intervals (id, start, end, points) with skewed ids
(one id holds about 20% of the rows). Prints seconds and ratios for:

(a) Spark SQL's non-equi join + group by at the largest of --join-rows (default
    300k, then 200k rows a side) that it finishes within --join-timeout seconds
    (default 300), against our sweep at that size (goal: at least 200x faster;
    --no-join skips it);
(b) DuckDB's window-function sweep (a single-node anchor) at --rows (default
    2M a side), against our sweep at that size: the plan the sweep picks (goal:
    within 1.5x for the broadcast plan) and the range plan forced (goal: within 3x).

The sweep and DuckDB are each timed as the best of --repeat runs (default 3)
after a warm-up; the non-equi join runs once (it takes minutes).

    .venv/bin/pip install -e '.[bench]'; .venv/bin/python bench/sweep.py
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from treestore.settings import prepare_process

prepare_process()  # first, before numpy and pyarrow load: the treestore command's settings

# isort: split
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from loaders.sweep.driver import SweepReport, interval_sweep  # noqa: E402
from treestore.spark import get_session  # noqa: E402

SPAN = 10_000_000


def generate(rows: int, folder: Path, seed: int = 1) -> tuple[str, str]:
    """Write events and intervals with a hot id; return their Parquet paths."""
    rng = np.random.default_rng(seed)

    def ids(n: int) -> np.ndarray:
        hot = rng.random(n) < 0.2
        return np.where(hot, 0, rng.zipf(1.3, n) % 200_000 + 1).astype(np.int64)

    events = pa.table({"id": ids(rows), "time": rng.integers(0, SPAN, rows, dtype=np.int64)})
    starts = rng.integers(0, SPAN, rows, dtype=np.int64)
    intervals = pa.table(
        {
            "id": ids(rows),
            "start": starts,
            "end": starts + rng.integers(0, 50_000, rows, dtype=np.int64),
            "points": rng.integers(1, 100, rows, dtype=np.int64),
        }
    )
    paths = (str(folder / f"events-{rows}.parquet"), str(folder / f"intervals-{rows}.parquet"))
    pq.write_table(events, paths[0])
    pq.write_table(intervals, paths[1])
    return paths


def ours(spark, events: str, intervals: str, plan: str = "auto") -> tuple[float, int, SweepReport]:  # type: ignore[no-untyped-def]
    report = SweepReport()
    spark.catalog.clearCache()  # the sweep caches its swept rows; time every run from scratch
    started = time.perf_counter()
    result = interval_sweep(
        spark, spark.read.parquet(events), spark.read.parquet(intervals), plan=plan, report=report
    )
    total = result.agg({"value": "sum"}).first()[0]
    return time.perf_counter() - started, int(total or 0), report


def spark_join(
    spark, events: str, intervals: str, timeout: float
) -> tuple[float | None, int | None]:  # type: ignore[no-untyped-def]
    spark.read.parquet(events).createOrReplaceTempView("a")
    spark.read.parquet(intervals).createOrReplaceTempView("b")
    query = """
        SELECT sum(value) FROM (
          SELECT a.id, a.time, coalesce(sum(b.points), 0) AS value
          FROM (SELECT *, monotonically_increasing_id() AS row FROM a) a
          LEFT JOIN b ON a.id = b.id AND b.start <= a.time AND a.time <= b.end
          GROUP BY a.row, a.id, a.time)
    """
    outcome: dict[str, object] = {}

    def run() -> None:
        spark.sparkContext.setJobGroup("non-equi", "non-equi join", interruptOnCancel=True)
        try:
            outcome["total"] = spark.sql(query).first()[0]
        except Exception as exc:  # cancelled at the timeout
            outcome["error"] = exc

    started = time.perf_counter()
    worker = threading.Thread(target=run)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        spark.sparkContext.cancelJobGroup("non-equi")
        worker.join()
        return None, None
    return time.perf_counter() - started, int(outcome.get("total") or 0)  # type: ignore[call-overload]


def duckdb_sweep(events: str, intervals: str) -> tuple[float, int]:
    import duckdb

    con = duckdb.connect()
    query = f"""
        WITH g AS (
          SELECT id, time AS t, 1 AS kind, 0::BIGINT AS delta FROM read_parquet('{events}')
          UNION ALL SELECT id, start, 0, points FROM read_parquet('{intervals}')
          UNION ALL SELECT id, "end", 2, -points FROM read_parquet('{intervals}')),
        swept AS (
          SELECT kind, sum(delta) OVER (PARTITION BY id ORDER BY t, kind
                                        ROWS UNBOUNDED PRECEDING) AS value FROM g)
        SELECT sum(value) FROM swept WHERE kind = 1
    """
    started = time.perf_counter()
    total = con.execute(query).fetchone()[0]  # type: ignore[index]
    return time.perf_counter() - started, int(total)


def best_of(times: int, run):  # type: ignore[no-untyped-def]
    """The fastest of ``times`` runs (each peer gets the same treatment)."""
    return min((run() for _ in range(times)), key=lambda outcome: outcome[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--join-rows", default="300000,200000", help="sizes to try, largest first")
    parser.add_argument("--join-timeout", type=float, default=300)
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs (sweep, DuckDB)")
    parser.add_argument(
        "--no-join", action="store_true", help="skip (a), Spark SQL's non-equi join (minutes)"
    )
    args = parser.parse_args()
    spark = get_session()
    with tempfile.TemporaryDirectory(prefix="treestore-sweep-bench-") as name:
        folder = Path(name)
        big = generate(args.rows, folder, seed=2)
        sizes = [] if args.no_join else [int(size) for size in args.join_rows.split(",")]
        for size in sizes:
            small = generate(size, folder)
            join_seconds, join_total = spark_join(spark, *small, args.join_timeout)
            if join_seconds is not None:
                break
            print(
                f"    (Spark SQL's non-equi join did not finish at {size:,} rows in {args.join_timeout:.0f} s)"
            )
        if sizes:
            _against_the_join(spark, small, size, join_seconds, join_total, args)
        ours(spark, *big)  # warm the session at this size too
        ours_big, total_big, report = best_of(args.repeat, lambda: ours(spark, *big))
        range_big, range_total, range_report = best_of(
            args.repeat, lambda: ours(spark, *big, plan="range")
        )
        duck_seconds, duck_total = best_of(args.repeat, lambda: duckdb_sweep(*big))
        assert duck_total == total_big == range_total, (duck_total, total_big, range_total)
        print(f"(b) at {args.rows:,} events x {args.rows:,} intervals:")
        print(f"    treestore sweep        {ours_big:8.2f} s  ({report.lines()[2]})")
        ratio = ours_big / duck_seconds
        broadcast = "broadcast" in report.lines()[2]
        goal = 1.5 if broadcast else 3.0
        print(
            f"    DuckDB window sweep    {duck_seconds:8.2f} s -> sweep takes "
            f"{ratio:,.2f}x DuckDB's time (goal for its plan <= {goal}x): "
            f"{_verdict(ratio <= goal)}; same sums: {duck_total == total_big} ({total_big:,})"
        )
        ratio = range_big / duck_seconds
        print(
            f"    treestore sweep, range plan forced {range_big:8.2f} s = "
            f"{ratio:,.2f}x DuckDB's time (goal <= 3x): {_verdict(ratio <= 3)}; "
            f"same sums: {range_total == total_big} ({range_report.lines()[2]})"
        )


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _against_the_join(spark, small, size, join_seconds, join_total, args) -> None:  # type: ignore[no-untyped-def]
    """(a): our sweep at the size Spark SQL's non-equi join finished, against it."""
    ours(spark, *small)  # warm the session
    ours_small, total_small, small_report = best_of(args.repeat, lambda: ours(spark, *small))
    print(f"(a) at {size:,} events x {size:,} intervals:")
    print(f"    treestore sweep        {ours_small:8.2f} s  ({small_report.lines()[2]})")
    if join_seconds is None:
        print(
            f"    Spark SQL non-equi join did not finish in {args.join_timeout:.0f} s "
            f"-> sweep is more than {args.join_timeout / ours_small:,.0f}x faster (goal >= 200x): "
            f"{_verdict(args.join_timeout >= 200 * ours_small)}"
        )
        return
    assert join_total == total_small, (join_total, total_small)
    ratio = join_seconds / ours_small
    print(
        f"    Spark SQL non-equi join {join_seconds:8.2f} s -> sweep is {ratio:,.1f}x faster "
        f"(goal >= 200x): {_verdict(ratio >= 200)}; same sums: {join_total:,}"
    )


if __name__ == "__main__":
    main()
