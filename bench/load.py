"""Benchmark of the loader on the seed-004 shape against the same join in Spark SQL.

Generated input (TSV, as in the seed): attribute rows ``TIME UID ATTRIBUTE_IDS``
with 1-5 attribute ids each, and mapping rows ``TIME UID PUID`` of which a third
have a UID no attribute row has. The seed's job (16 shards): attributes create
``root/UID/A/id`` (deduplicated), mappings update ``root/UID/M/PUID`` only
where the UID exists.

Measured in one Spark session on the same files, each side after a warm-up run (the
SQL once on the same files, the load on 1% of the rows into a scratch store):

- full load: ``run_load`` of every file into a new store;
- incremental load: +1% new mapping rows (one new file);
- the seed's answer from the store in one query, warm (the median of 3 runs):
  ``root/+:nodes>1/+/+``
  with rops ``cross=0,1,2,M,A,list`` (each shard gives each PUID row of its UIDs the
  UID's attribute ids as one list view, as dictionary codes: the 33M pairs are never
  spelled out) and ops ``gather=kJ`` (the driver folds the lists per PUID, on Arrow
  columns): PUID -> attribute ids. Folding per PUID in the shards too
  (``cross=...;gather=kJ``) saves the driver nothing here: a PUID's UIDs are spread
  over all the shards, so the shards' folds shrink the rows by little, for more work
  in all;
- for reference, the seed's UID-per-row query (``str``/``merge`` rops) and the
  client's fold of its rows per PUID in Python (the seed leaves that to the client);
- peer: the equivalent Spark SQL recomputed from the files (attribute ids
  grouped by UID, joined to the mappings, grouped by PUID), all rows collected.

Every way must give the same PUID -> attribute ids. Prints seconds and the
ratios. Goals: full load at most 0.5x the SQL recomputation; the shard tasks'
CPU time per record read (records, apply and write, summed over shards) at most 1 us;
incremental load at least 40x and the store's answer at least 20x faster than it.
With ``--scale N`` the load is timed again on N times the rows (same shards, same
executor memory): goal at most 1.05 N times the first load's time.

    .venv/bin/python bench/load.py [--attributes 1000000] [--mappings 10000000] [--scale 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path = [p for p in sys.path if Path(p).resolve() != Path(__file__).resolve().parent]

from treestore.settings import prepare_process  # noqa: E402

prepare_process()  # first, before numpy and pyarrow load: the treestore command's settings
import treestore  # noqa: E402

# isort: split
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.csv as pacsv  # noqa: E402

from loaders import load_job, run_load  # noqa: E402
from shell.demo import DEMO_JOB, DEMO_OPS, DEMO_PATH  # noqa: E402
from treestore.spark import get_session  # noqa: E402

SHARDS = 16
FILES = 8


def _write_tsv(table: pa.Table, path: Path) -> None:
    with path.open("wb") as out:
        out.write(("\t".join(table.column_names) + "\n").encode())
        pacsv.write_csv(
            table,
            out,
            pacsv.WriteOptions(delimiter="\t", quoting_style="none", include_header=False),
        )


def generate(folder: Path, attributes: int, mappings: int) -> tuple[Path, Path]:
    """Write the inputs; returns (job file, the +1% mapping file to add later)."""
    rng = np.random.default_rng(4)
    uids = max(1, int(attributes * 0.6))
    (folder / "attributes").mkdir(parents=True)
    (folder / "mapping").mkdir()
    ids = rng.integers(1, 1000, (attributes, 5)).astype(str)
    counts = rng.integers(1, 6, attributes)
    lists = [",".join(row[:n]) for row, n in zip(ids.tolist(), counts.tolist(), strict=True)]
    table = pa.table(
        {
            "TIME": pa.array((1419441590000 + np.arange(attributes)).astype(str)),
            "UID": pa.array(np.char.add("u", rng.integers(0, uids, attributes).astype(str))),
            "ATTRIBUTE_IDS": pa.array(lists),
        }
    )
    for i in range(FILES):
        _write_tsv(
            table.slice(i * attributes // FILES, attributes // FILES + 1),
            folder / "attributes" / f"part-{i}.tsv",
        )

    def mapping_rows(n: int, seed: int) -> pa.Table:
        r = np.random.default_rng(seed)
        known = r.random(n) < 2 / 3
        uid = np.where(known, r.integers(0, uids, n), uids + r.integers(0, uids, n))
        return pa.table(
            {
                "TIME": pa.array((1419441590000 + r.integers(0, 10**8, n)).astype(str)),
                "UID": pa.array(np.char.add("u", uid.astype(str))),
                "PUID": pa.array(
                    np.char.add("p", r.integers(0, max(1, mappings // 50), n).astype(str))
                ),
            }
        )

    for i in range(FILES):
        _write_tsv(mapping_rows(mappings // FILES, 100 + i), folder / "mapping" / f"part-{i}.tsv")
    extra = folder / "extra.tsv"
    _write_tsv(mapping_rows(max(1, mappings // 100), 999), extra)
    job = json.loads(json.dumps(DEMO_JOB))
    job["shards"] = SHARDS
    (folder / "job.json").write_text(json.dumps(job))
    # The files just written are still on their way to the disk: a load timed right after
    # (the scaled one) would share the disk with 3.3 GB of that write-back, which the first
    # load (timed after the SQL's warm-up run) does not. Both start with it done.
    os.sync()
    return folder / "job.json", extra


def sql_join(spark, folder: Path) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """The peer: the final join recomputed by Spark SQL from the files."""
    from pyspark.sql import functions as F

    def read(name: str):  # type: ignore[no-untyped-def]
        return spark.read.options(header="true", sep="\t").csv(str(folder / name))

    attributes = (
        read("attributes")
        .dropDuplicates(["TIME", "UID", "ATTRIBUTE_IDS"])
        .select("UID", F.explode(F.split("ATTRIBUTE_IDS", ",")).alias("A"))
        .groupBy("UID")
        .agg(F.collect_set("A").alias("ids"))
    )
    joined = (
        read("mapping")
        .join(attributes, "UID")
        .groupBy("PUID")
        .agg(
            F.array_join(
                F.array_sort(F.array_distinct(F.flatten(F.collect_list("ids")))), ","
            ).alias("ids")
        )
    )
    return {row["PUID"]: row["ids"] for row in joined.collect()}


def store_query(store: Path, spark) -> list[tuple]:  # type: ignore[no-untyped-def, type-arg]
    """The seed's UID query from the store, every row read (one per UID that has both
    attributes and mappings: ``UID, A=id,...,M=puid,...``)."""
    return treestore.open(store, spark=spark).query(DEMO_PATH, rops=DEMO_OPS).to_list()


ANSWER_ROPS = "cross=0,1,2,M,A,list"
ANSWER_OPS = "gather=kJ"
ANSWER_RUNS = 3
"""The store's answer is timed this many times, warm; its median is compared (one
query takes 3-5 s, and moves by a fifth from one run to the next on 2 cores)."""


def store_answer(store: Path, spark) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Ours: the store answers PUID -> attribute ids itself, in one query."""
    rows = treestore.open(store, spark=spark).query(DEMO_PATH, rops=ANSWER_ROPS, ops=ANSWER_OPS)
    table = rows.to_arrow()
    return dict(zip(table.column(0).to_pylist(), table.column(1).to_pylist(), strict=True))


def fold_per_puid(rows: list[tuple]) -> dict[str, str]:  # type: ignore[type-arg]
    """The client's step the seed describes: one line at a time, into PUID -> ids."""
    found: dict[str, set[str]] = {}
    for _uid, items in rows:
        parts = str(items).split(",")
        ids = {p[2:] for p in parts if p.startswith("A=")}
        for p in parts:
            if p.startswith("M="):
                found.setdefault(p[2:], set()).update(ids)
    return {puid: ",".join(sorted(ids)) for puid, ids in found.items()}


def _task_time(report: dict) -> str:  # type: ignore[type-arg]
    """The shard tasks' phases, wall seconds (CPU seconds), summed over the shards."""
    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for shard in report["shards"].values():
        for clock, totals in (("task_seconds", wall), ("task_cpu_seconds", cpu)):
            for phase, seconds in shard.get(clock, {}).items():
                totals[phase] = totals.get(phase, 0.0) + seconds
    phases = (f"{k} {v:.1f} s ({cpu.get(k, 0.0):.1f} s CPU)" for k, v in wall.items())
    return ", ".join(phases) + " (summed over shards)"


def _per_record(report: dict, clock: str = "task_cpu_seconds") -> float:  # type: ignore[type-arg]
    """The shard tasks' microseconds per record read: their records, apply and write
    phases (tree building and run writing, and the batches' own handling) summed over
    the shards, over the records the load read; CPU time, or with ``clock=
    "task_seconds"`` wall time (more where two tasks and Spark's threads share a core)."""
    seconds = sum(
        shard.get(clock, {}).get(phase, 0.0)
        for shard in report["shards"].values()
        for phase in ("records", "apply", "write")
    )
    read = sum(source.get("read", 0) for source in report["sources"].values())
    return 1e6 * seconds / max(1, read)


def _written(report: dict) -> str:  # type: ignore[type-arg]
    """The bytes the shards' tasks wrote against the bytes their trees keep (spills and
    compactions rewrite entries)."""
    shards = report["shards"].values()
    written = sum(s["bytes_written"] for s in shards)
    kept = sum(s["bytes"] for s in shards)
    return (
        f"trees: {kept / 1e6:,.0f} MB kept, {written / 1e6:,.0f} MB written ({written / kept:.1f}x)"
    )


def _timed(action):  # type: ignore[no-untyped-def]
    began = time.perf_counter()
    result = action()
    return result, time.perf_counter() - began


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _differ(ours: dict[str, str], peer: dict[str, str], what: str) -> None:
    if ours != peer:
        differ = [k for k in set(ours) | set(peer) if ours.get(k) != peer.get(k)]
        print(f"RESULTS DIFFER ({what}) for {len(differ)} PUIDs, e.g. {differ[:3]}")
        sys.exit(1)


def warm_up_load(spark, attributes: int, mappings: int) -> None:  # type: ignore[no-untyped-def]
    """A load of 1% of the rows into a scratch store, as the SQL side gets its warm-up
    run: the Python workers' imports and the JVM's code for the load's plan are then
    warm for the timed load, as they are for every load of a session but its first."""
    folder = Path(tempfile.mkdtemp(prefix="treestore-bench-load-warm-"))
    try:
        job_file, _ = generate(folder, max(1, attributes // 100), max(1, mappings // 100))
        run_load(spark, load_job(job_file), folder / "store")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def scaled_load(spark, attributes: int, mappings: int, scale: int, first: float) -> None:  # type: ignore[no-untyped-def]
    """Time a full load of ``scale`` times the rows; print the ratio to ``first``."""
    folder = Path(tempfile.mkdtemp(prefix="treestore-bench-load-scaled-"))
    try:
        job_file, _ = generate(folder, attributes * scale, mappings * scale)
        result, seconds = _timed(lambda: run_load(spark, load_job(job_file), folder / "store"))
        ratio = seconds / first
        print(f"  phases {result.report['phases']}")
        print(f"  {_written(result.report)}")
        print(f"  shard tasks: {_task_time(result.report)}")
        built = sorted({shard.get("parts", 1) for shard in result.report["shards"].values()})
        print(f"  each shard built in {' or '.join(map(str, built))} part(s)")
        print(
            f"  shard tasks per record read: {_per_record(result.report):.2f} us of CPU, "
            f"{_per_record(result.report, 'task_seconds'):.2f} us of wall time"
        )
        print(
            f"full load of {scale}x the rows: {seconds:.1f} s = {ratio:.2f}x the first load's "
            f"time (goal <= {1.05 * scale:.1f}x): {_verdict(ratio <= 1.05 * scale)}"
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attributes", type=int, default=1_000_000)
    parser.add_argument("--mappings", type=int, default=10_000_000)
    parser.add_argument("--scale", type=int, default=0, help="also load N times the rows")
    args = parser.parse_args()
    spark = get_session()
    folder = Path(tempfile.mkdtemp(prefix="treestore-bench-load-"))
    try:
        (job_file, extra), gen = _timed(lambda: generate(folder, args.attributes, args.mappings))
        print(
            f"generated {args.attributes:,} attribute rows and {args.mappings:,} mapping rows in {gen:.1f} s"
        )
        sql_join(spark, folder)  # warm-up: JIT and file cache for both sides
        warm_up_load(spark, args.attributes, args.mappings)
        store = folder / "store"
        job = load_job(job_file)
        result, full = _timed(lambda: run_load(spark, job, store))
        print(f"full load: {full:.1f} s  phases {result.report['phases']}")
        print(f"  {_written(result.report)}")
        print(f"  shard tasks: {_task_time(result.report)}")
        per_record = _per_record(result.report)
        print(
            f"  shard tasks per record read: {_per_record(result.report, 'task_seconds'):.2f} us of wall time"
        )
        shutil.copy(extra, folder / "mapping" / "part-extra.tsv")
        result, incremental = _timed(lambda: run_load(spark, job, store))
        print(
            f"incremental load (+1% mappings): {incremental:.1f} s  phases {result.report['phases']}"
        )
        print(f"  shard tasks: {_task_time(result.report)}")
        store_answer(store, spark)  # warm: the session's Python workers and the file cache
        timings = []
        for _ in range(ANSWER_RUNS):
            answer, seconds = _timed(lambda: store_answer(store, spark))
            timings.append(seconds)
        answering = statistics.median(timings)
        print(
            f"the store's answer, PUID -> attribute ids in one query: {answering:.1f} s "
            f"(median of {', '.join(f'{t:.2f}' for t in timings)})"
        )
        rows, query = _timed(lambda: store_query(store, spark))
        print(f"(reference) the seed's UID query: {query:.1f} s ({len(rows):,} UID rows)")
        folded, fold = _timed(lambda: fold_per_puid(rows))
        print(f"(reference) client fold of those rows per PUID in Python: {fold:.1f} s")
        peer, sql = _timed(lambda: sql_join(spark, folder))
        print(f"Spark SQL recomputation: {sql:.1f} s ({len(peer):,} PUIDs)")
        _differ(answer, peer, "the store's answer")
        _differ(folded, peer, "the client fold")
        print("all give the same PUID -> attribute ids")
        print(f"full load / SQL: {full / sql:.2f}x (goal <= 0.5x): {_verdict(full <= 0.5 * sql)}")
        print(
            f"shard tasks' CPU per record read: {per_record:.2f} us (goal <= 1 us): "
            f"{_verdict(per_record <= 1.0)}"
        )
        print(
            f"SQL / incremental load: {sql / incremental:.1f}x (goal >= 40x): "
            f"{_verdict(sql >= 40 * incremental)}"
        )
        print(
            f"SQL / the store's answer: {sql / answering:.1f}x (goal >= 20x): "
            f"{_verdict(sql >= 20 * answering)}"
        )
        print(f"(reference) SQL / (UID query + client fold): {sql / (query + fold):.1f}x")
        if args.scale > 1:
            scaled_load(spark, args.attributes, args.mappings, args.scale, full)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
