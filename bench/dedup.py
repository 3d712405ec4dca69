"""Benchmark of the dedup index against a left anti-join, same data, one Spark session.

A fixed batch of 500k click records (30% repeat records already loaded, 10%
repeat records within the batch, the rest new) is deduplicated against stores
whose index holds 1M, 10M and 30M keys (16 shards):

- ours: the load's dedup pass (shard, exact key and hash in Spark; per shard,
  vectorized checks against the memory-mapped index runs; the survivors' keys
  written as one new run per shard) — the same code a load runs, without the
  trees, and without publishing, so every size is measured from the same index;
- peer 1: ``dropDuplicates`` on the batch and a left anti-join against the loaded
  records read from Parquet;
- peer 2, the one a Spark user picks next: the loaded keys kept as a table
  bucketed (and sorted) by the keys into as many buckets as shards, written once
  like our index (not timed); the batch deduplicated and anti-joined to it, which
  shuffles only the batch.

All must find the same number of new records. Prints seconds and ratios.
Goals: at the largest size ours at least 10x faster than the anti-join and 2x
faster than the bucketed join; ours at the largest size at most 1.3x its time at
the smallest (``--sizes 1000000,100000000`` for the 100M check).

    .venv/bin/python bench/dedup.py [--sizes 1000000,10000000,30000000]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

# This file is in bench/, next to bench/query.py: drop its folder from the import path,
# or that file would stand in for the `query` package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

from treestore.settings import prepare_process  # noqa: E402

prepare_process()  # first, before numpy and pyarrow load: the treestore command's settings

# isort: split
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from loaders.job.model import JobSpec, MapSpec, SourceSpec  # noqa: E402
from loaders.load.dedup_step import index_files  # noqa: E402
from loaders.load.inputs import InputFile  # noqa: E402
from treestore.spark import get_session  # noqa: E402
from treestore.store.dedup_index import DedupManifest, publish_dedup_manifest  # noqa: E402
from treestore.store.versions import StoreWriter  # noqa: E402

SHARDS = 16
BATCH = 500_000
KEYS = ("TIME", "UID")


def _records(times: np.ndarray, uids: np.ndarray) -> pa.Table:
    return pa.table(
        {
            "TIME": pa.array(times.astype(str)),
            "UID": pa.array(np.char.add("u", uids.astype(str))),
            "URL": pa.array(np.char.add("http://x/", (uids % 977).astype(str))),
        }
    )


def write_loaded(folder: Path, size: int) -> Path:
    """``size`` distinct records, as Parquet files of 1M rows."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(size)
    for start in range(0, size, 1_000_000):
        n = min(1_000_000, size - start)
        times = np.arange(start, start + n, dtype=np.int64)  # distinct (TIME, UID) pairs
        uids = rng.integers(0, 5_000_000, n)
        pq.write_table(_records(times, uids), folder / f"part-{start // 1_000_000:04d}.parquet")
    return folder


def write_batch(folder: Path, loaded: Path, size: int) -> tuple[Path, int]:
    """The batch: 30% records already loaded, 10% repeats within it; returns (file, new)."""
    rng = np.random.default_rng(7)
    old = pq.read_table(loaded / "part-0000.parquet").slice(0, int(0.3 * BATCH))
    fresh_count = BATCH - len(old) - int(0.1 * BATCH)
    fresh = _records(
        np.arange(size + 10, size + 10 + fresh_count, dtype=np.int64),
        rng.integers(0, 5_000_000, fresh_count),
    )
    repeats = fresh.take(pa.array(rng.integers(0, fresh_count, int(0.1 * BATCH))))
    batch = pa.concat_tables([old, fresh, repeats])
    batch = batch.take(pa.array(rng.permutation(len(batch))))
    path = folder / "batch.parquet"
    pq.write_table(batch, path)
    return path, fresh_count


def _files(path: Path) -> list[InputFile]:
    found = [path] if path.is_file() else sorted(path.glob("*.parquet"))
    return [InputFile.at(p) for p in found]


def ours(spark, job: JobSpec, writer: StoreWriter, batch: Path, runs) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    """Our dedup pass over the batch: seconds and new records."""
    started = time.perf_counter()
    done = index_files(spark, job, writer.pages, job.sources[0], _files(batch), runs)
    return time.perf_counter() - started, done.kept


def anti_join(spark, batch: Path, loaded: Path) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    """The peer: drop repeats within the batch, then a left anti-join against Parquet."""
    started = time.perf_counter()
    batch_frame = spark.read.parquet(str(batch)).dropDuplicates(list(KEYS))
    old = spark.read.parquet(str(loaded)).select(*KEYS)
    kept = batch_frame.join(old, list(KEYS), "left_anti").count()
    return time.perf_counter() - started, kept


def bucketed_table(spark, loaded: Path, folder: Path) -> str:  # type: ignore[no-untyped-def]
    """Peer 2's stored side: the loaded keys as a table bucketed and sorted by the keys."""
    name = f"loaded_{folder.name.replace('-', '_')}"
    (
        spark.read.parquet(str(loaded))
        .select(*KEYS)
        .write.bucketBy(SHARDS, *KEYS)
        .sortBy(*KEYS)
        .option("path", str(folder))
        .mode("overwrite")
        .saveAsTable(name)
    )
    return name


def bucketed_join(spark, batch: Path, table: str) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    """Peer 2: the batch deduplicated and anti-joined to the bucketed table."""
    started = time.perf_counter()
    batch_frame = spark.read.parquet(str(batch)).dropDuplicates(list(KEYS))
    kept = batch_frame.join(spark.table(table), list(KEYS), "left_anti").count()
    return time.perf_counter() - started, kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000000,10000000,30000000")
    args = parser.parse_args()
    spark = get_session()
    with tempfile.TemporaryDirectory(prefix="treestore-dedup-bench-") as name:
        root = Path(name)
        source = SourceSpec("clicks", str(root), "parquet", shard_by="UID", dedup_keys=KEYS)
        job = JobSpec("bench", SHARDS, (source,), MapSpec(), ())
        ours_at: dict[int, float] = {}
        for size in [int(s) for s in args.sizes.split(",")]:
            loaded = write_loaded(root / f"loaded-{size}", size)
            batch, new = write_batch(root, loaded, size)
            store = root / f"store-{size}"
            writer = StoreWriter(store, SHARDS)
            started = time.perf_counter()
            built = index_files(spark, job, writer.pages, source, _files(loaded), {})
            build_seconds = time.perf_counter() - started
            manifest = DedupManifest(0).with_source("clicks", KEYS, built.runs)
            publish_dedup_manifest(writer.pages, manifest)
            runs = sum(len(r) for r in built.runs.values())
            print(f"index of {size:,} keys built in {build_seconds:.1f} s ({runs} runs)")

            ours(spark, job, writer, batch, built.runs)  # warm up
            ours_seconds, ours_kept = min(
                ours(spark, job, writer, batch, built.runs) for _ in range(3)
            )
            join_seconds, join_kept = min(anti_join(spark, batch, loaded) for _ in range(2))
            table = bucketed_table(spark, loaded, root / f"bucketed-{size}")
            bucketed_join(spark, batch, table)  # warm up
            bucket_seconds, bucket_kept = min(bucketed_join(spark, batch, table) for _ in range(2))
            assert ours_kept == join_kept == bucket_kept == new, (
                ours_kept,
                join_kept,
                bucket_kept,
                new,
            )
            ours_at[size] = ours_seconds
            last = size == max(int(s) for s in args.sizes.split(","))
            print(
                f"  batch of {BATCH:,} ({new:,} new): ours {ours_seconds:.2f} s, "
                f"anti-join {join_seconds:.2f} s -> {join_seconds / ours_seconds:.1f}x faster"
                + (f" (goal >= 10x): {_verdict(join_seconds >= 10 * ours_seconds)}" if last else "")
            )
            print(
                f"  bucketed-table anti-join {bucket_seconds:.2f} s -> "
                f"{bucket_seconds / ours_seconds:.1f}x faster"
                + (f" (goal >= 2x): {_verdict(bucket_seconds >= 2 * ours_seconds)}" if last else "")
            )
            shutil.rmtree(store)
            shutil.rmtree(loaded)
            shutil.rmtree(root / f"bucketed-{size}", ignore_errors=True)
        smallest, largest = min(ours_at), max(ours_at)
        ratio = ours_at[largest] / ours_at[smallest]
        print(
            f"ours at {largest:,} keys takes {ratio:.2f}x its time at {smallest:,} "
            f"(goal <= 1.3x): {_verdict(ratio <= 1.3)}"
        )


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


if __name__ == "__main__":
    main()
