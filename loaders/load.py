"""One incremental load: new input files -> map -> shards -> trees -> a new store version.

The plan, all in one Spark job:

1. For each source (in job order), read only the files the store has not
   loaded yet; compute the shard (``pmod(xxhash64(shard_by), shards)``, see
   :mod:`treestore.sharding`), the source's order and, with ``dedup``, a
   within-load duplicate flag.
2. Union the sources, run ``map`` (``filter_in``, ``fields``, ``filter_out``) and
   every element filter as Spark SQL expressions.
3. Repartition so that partition number == shard number, sort each partition by
   source order, and in ``mapInArrow`` apply the records to each shard's tree,
   writing the new tree under a fresh file name (a retried task never clobbers).
4. The driver gathers the tasks' small reports and publishes the next version
   (new tree files, the loaded input files with their record counts, the load
   report) atomically. Nothing is published if anything failed.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from loaders.dedup import (
    DHASH,
    DKEY,
    EARLIER,
    WITHIN,
    BatchDedup,
    dedup_columns,
    prepare_index,
    publish_index,
)
from loaders.filters import SymbolicRecord, compile_bundle_filter, compile_value_filter
from loaders.job import JobSpec, SourceSpec
from loaders.shard_frames import SHARD, partition_by_shard, shard_column
from loaders.sources import FILE_COLUMN, InputFile, list_input_files, read_source
from loaders.treebuild import ApplyStats, TreeBuilder
from treestore.errors import LoadError
from treestore.failpoints import failpoint
from treestore.pagestore import PageStore
from treestore.spark import spark_errors
from treestore.store import DEFAULT_RETENTION, StoreWriter, collect_garbage, store_lock
from treestore.tree import ShardState, ShardTree

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["LoadResult", "run_load"]

ORDER, KEEP = "__source_order", "__keep"
_TASK_SCHEMA = "shard int, result string"


@dataclass
class LoadResult:
    """What a load did; ``version`` is ``None`` when there was nothing new to load."""

    version: int | None
    report: dict[str, Any] = field(default_factory=dict)


def _source_frame(
    spark: SparkSession, index: int, source: SourceSpec, files: list[InputFile], shards: int
) -> DataFrame:
    from pyspark.sql import functions as F

    frame = read_source(spark, source, files)
    frame = frame.withColumn(SHARD, shard_column(frame, source, shards))
    frame = frame.withColumn(ORDER, F.lit(index))
    if source.inject_source_name:
        frame = frame.withColumn(source.inject_source_name, F.col(FILE_COLUMN))
    return dedup_columns(frame, source)


def _mapped(frame: DataFrame, job: JobSpec, builder: TreeBuilder) -> DataFrame:
    """Add ``__keep`` (the map's verdict) and element filter columns; keep what the tree needs."""
    from pyspark.sql import functions as F

    names = [c for c in frame.columns if not c.startswith("__")]
    record = SymbolicRecord({name: F.col(f"`{name}`") for name in names})
    keep: Column = F.lit(True)
    if job.map.filter_in is not None:
        passes, record = compile_bundle_filter(job.map.filter_in, record)
        keep = keep & passes
    if job.map.fields:
        projected = SymbolicRecord({})
        for mapping in job.map.fields:
            value, is_array = record.get(mapping.source), mapping.source in record.arrays
            if mapping.filter is not None:
                value, is_array = compile_value_filter(mapping.filter, value, is_array)
            projected = projected.with_field(mapping.target, value, is_array)
        record = projected
    if job.map.filter_out is not None:
        passes, record = compile_bundle_filter(job.map.filter_out, record)
        keep = keep & passes
    columns = [F.col(c) for c in (SHARD, ORDER, FILE_COLUMN, DKEY, DHASH)]
    columns.append(keep.alias(KEEP))
    columns += [record.get(key).alias(key) for key in builder.key_fields]
    for element in builder.filters:
        assert element.filter is not None
        passes, _ = compile_bundle_filter(element.filter, record)
        columns.append(passes.alias(builder.filter_columns[element.where]))
    return frame.select(*columns)


def _shard_task(
    pages: PageStore,
    states: dict[int, ShardState],
    builder: TreeBuilder,
    source_names: list[str],
    dedup_sources: dict[int, str],
    dedup_runs: dict[str, dict[int, tuple[str, ...]]],
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function each Spark task runs over its shard(s)' records."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        trees: dict[int, ShardTree] = {}
        stats: dict[int, ApplyStats] = {}
        per_file: Counter[str] = Counter()
        per_source: dict[str, Counter[str]] = {name: Counter() for name in source_names}
        record_fields = [*builder.key_fields, *builder.filter_columns.values()]
        dedup = BatchDedup(pages, dedup_sources, dedup_runs)
        for batch in batches:
            orders = batch.column(ORDER).to_numpy(zero_copy_only=False)
            within, earlier = dedup.classify(batch, orders)
            columns = batch.to_pydict()
            shard_of, order, file_of = columns[SHARD], columns[ORDER], columns[FILE_COLUMN]
            keep = columns[KEEP]
            values = [columns[name] for name in record_fields]
            for i in range(batch.num_rows):
                per_file[file_of[i]] += 1
                counts = per_source[source_names[order[i]]]
                counts["read"] += 1
                if within[i]:
                    counts[WITHIN] += 1
                    continue
                if earlier[i]:
                    counts[EARLIER] += 1
                    continue
                counts["kept"] += 1
                if not keep[i]:
                    counts["dropped"] += 1
                    continue
                shard = shard_of[i]
                tree = trees.get(shard)
                if tree is None:
                    tree = trees[shard] = ShardTree(pages, states.get(shard), shard=shard)
                    stats[shard] = ApplyStats()
                shard_stats = stats[shard]
                missed_before = shard_stats.missed_updates
                record = {
                    name: column[i] for name, column in zip(record_fields, values, strict=True)
                }
                builder.apply(tree, record, shard_stats)
                counts["applied"] += 1
                counts["missed_updates"] += shard_stats.missed_updates - missed_before
        shards: list[int] = []
        results: list[str] = []
        for shard, tree in trees.items():
            state = tree.commit()
            failpoint("in-task")
            shards.append(shard)
            results.append(
                json.dumps(
                    {
                        "state": state.to_json(),
                        "records": stats[shard].records,
                        "missed_updates": stats[shard].missed_updates,
                        "nodes_created": tree.stats.nodes_created,
                        "bytes_written": tree.stats.bytes_written,
                        "compacted": tree.stats.compacted,
                    }
                )
            )
        index_runs = dedup.commit()
        shards.append(-1)  # one row for the whole task's input counts and index runs
        results.append(json.dumps({"files": per_file, "sources": per_source, "dedup": index_runs}))
        yield pa.RecordBatch.from_arrays(
            [pa.array(shards, pa.int32()), pa.array(results, pa.string())], ["shard", "result"]
        )

    return run


def _new_files(
    job: JobSpec, writer: StoreWriter, log: Callable[[str], None]
) -> dict[int, list[InputFile]]:
    loaded = writer.base.inputs
    found: dict[int, list[InputFile]] = {}
    for index, source in enumerate(job.sources):
        fresh = []
        for input_file in list_input_files(source):
            known = loaded.get(input_file.path)
            if known is None:
                fresh.append(input_file)
            elif (known["size"], known["mtime_ns"]) != (input_file.size, input_file.mtime_ns):
                log(
                    f"warning: {input_file.path} changed after it was loaded "
                    f"(version {known.get('version')}); it is skipped, not loaded twice."
                )
        log(f"source {source.name}: {len(fresh)} new file(s)")
        if fresh:
            found[index] = fresh
    return found


def run_load(
    spark: SparkSession,
    job: JobSpec,
    store_dir: str | Path | PageStore,
    log: Callable[[str], None] = print,
    keep_versions: int = DEFAULT_RETENTION,
) -> LoadResult:
    """Load the job's new input files into the store at ``store_dir``; publish a version.

    The store is locked for the whole load; after publishing, versions beyond
    ``keep_versions`` and unreferenced runs are removed.
    """
    writer = StoreWriter(store_dir, job.shards)
    with store_lock(writer.pages, f"a load of {job.file}", log):
        writer = StoreWriter(writer.pages, job.shards)  # re-read under the lock
        result = _load_locked(spark, job, writer, log)
        if result.version is not None:
            removed = collect_garbage(writer.pages, keep_versions)
            result.report["gc"] = removed
        return result


def _load_locked(
    spark: SparkSession, job: JobSpec, writer: StoreWriter, log: Callable[[str], None]
) -> LoadResult:

    started = time.time()
    fresh = _new_files(job, writer, log)
    if not fresh:
        log("nothing new to load: the store is unchanged")
        return LoadResult(None, {"version": writer.base.version})
    builder = TreeBuilder(job.tree)
    index = prepare_index(spark, job, writer, log)
    with spark_errors(LoadError, "Reading the new input files"):
        frames = [
            _source_frame(spark, index, job.sources[index], files, job.shards)
            for index, files in sorted(fresh.items())
        ]
    union = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)
    mapped = _mapped(union, job, builder)
    arranged = partition_by_shard(spark, mapped, job.shards).sortWithinPartitions(ORDER)
    dedup_sources = {i: s.name for i, s in enumerate(job.sources) if s.dedup_keys}
    task = _shard_task(
        writer.pages,
        dict(writer.base.trees),
        builder,
        [s.name for s in job.sources],
        dedup_sources,
        {name: index.runs(name) for name in dedup_sources.values()},
    )
    with spark_errors(LoadError, "The load's Spark job"):
        rows = arranged.mapInArrow(task, _TASK_SCHEMA).collect()
    failpoint("after-tasks")
    report = _summarize(job, fresh, rows, started)
    inputs = {
        f.path: {
            "source": job.sources[index].name,
            "size": f.size,
            "mtime_ns": f.mtime_ns,
            "records": report["files"].get(f.path, 0),
            "version": writer.base.version + 1,
        }
        for index, files in fresh.items()
        for f in files
    }
    trees = {
        row["shard"]: ShardState.from_json(json.loads(row["result"])["state"])
        for row in rows
        if row["shard"] >= 0
    }
    del report["files"]
    new_runs = report.pop("dedup")
    manifest = writer.publish(trees, inputs, report, failpoint=failpoint)
    failpoint("between-data-and-index")
    if dedup_sources:
        publish_index(writer.pages, index, job, new_runs, manifest.version)
    report["version"] = manifest.version
    return LoadResult(manifest.version, report)


def _summarize(
    job: JobSpec, fresh: dict[int, list[InputFile]], rows: list[Any], started: float
) -> dict[str, Any]:
    files: Counter[str] = Counter()
    sources: dict[str, Counter[str]] = {s.name: Counter() for s in job.sources}
    shards: dict[str, Any] = {}
    index_runs: dict[int, dict[str, list[str]]] = {}
    for row in rows:
        result = json.loads(row["result"])
        if row["shard"] < 0:
            files.update(result["files"])
            for name, counts in result["sources"].items():
                sources[name].update(counts)
            for shard, runs in result["dedup"].items():
                index_runs.setdefault(int(shard), {}).update(runs)
        else:
            state = result.pop("state")
            shards[str(row["shard"])] = {**result, "nodes": state["nodes"], "bytes": state["bytes"]}
    for index, new in fresh.items():
        sources[job.sources[index].name]["files"] = len(new)
    return {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": round(time.time() - started, 3),
        "sources": {name: dict(counts) for name, counts in sources.items()},
        "shards": shards,
        "files": dict(files),
        "dedup": index_runs,
    }
