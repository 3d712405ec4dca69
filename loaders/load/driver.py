"""One incremental load: new input files -> map -> shards -> trees -> a new store version.

The steps, all in one Spark job:

1. For each source (in job order), read only the files the store has not
   loaded yet, one task per file, with pyarrow (:mod:`loaders.load.readers`: every
   record keeps its file and line; malformed lines become rejected records);
   compute the shard (``pmod(xxhash64(shard_by), shards)``, see
   :mod:`treestore.sharding`), the source's order and the dedup key.
2. Union the sources, run ``map`` (``filter_in``, ``fields``, ``filter_out``),
   every element filter and the reject tests as Spark SQL expressions.
3. Repartition so that each shard's records are in one partition, sort each
   partition in record order (source, file number, line), and in ``mapInArrow``
   (:mod:`loaders.load.task`) set the rejected records aside, drop duplicates and
   apply the records to the shard's tree in that order, writing new runs (a
   retried task never clobbers: run names are fresh).
4. The driver folds the tasks' typed results into the load's report
   (:class:`~loaders.load.report.LoadReport`) and confirms that every file the tasks
   wrote is where it sees it (:mod:`treestore.store.written`: a store at a path only the
   driver has fails here, in one line); more than ``max_rejected`` rejected
   records fail the load. Otherwise it publishes the next version (new tree runs, the
   loaded input files with their record counts, the report as JSON and the files of
   records it set aside) atomically, then the dedup index. Nothing is published if
   anything failed.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loaders.filters.catalogue import FilterCompiler, SymbolicRecord
from loaders.job.model import JobSpec, SourceSpec
from loaders.listing.identity import loaded_entry, scan_inputs
from loaders.load.dedup_step import DHASH, DKEY, dedup_columns, prepare_index, publish_index
from loaders.load.inputs import (
    Fingerprints,
    InputFile,
    list_fields,
    list_input_files,
    read_source,
)
from loaders.load.options import DEFAULT_MAX_REJECTED, LoadOptions
from loaders.load.progress import spark_progress
from loaders.load.protocol import (
    KEEP,
    ORDER,
    TASK_SCHEMA,
    ShardResult,
    TaskSpec,
    decode_results,
    list_as_text,
)
from loaders.load.readers import FILE_COLUMN, LINE, REJECT, TEXT
from loaders.load.report import (
    LoadReport,
    RejectedRecords,
    StreamBatch,
    Summary,
    first_rejected,
    summarize,
)
from loaders.load.shard_frames import SHARD, load_partitions, partition_by_shard, shard_column
from loaders.load.task import pending_task, shard_task
from loaders.load.timing import Timer
from loaders.tree.builder import TreeBuilder
from loaders.tree.pending import merge_expired
from treestore.errors import LoadError
from treestore.events import EventSink, Message, ignore_events
from treestore.failpoints import failpoint
from treestore.spark import check_executors_python, spark_errors
from treestore.storage.pagestore import PageStore
from treestore.store.layout import expired_file, expired_parts_folder, rejected_folder
from treestore.store.lock import store_lock
from treestore.store.maintenance import collect_garbage
from treestore.store.versions import StoreWriter
from treestore.store.written import confirm_written, written_files

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["DEFAULT_MAX_REJECTED", "LoadOptions", "LoadResult", "load_listed", "run_load"]


@dataclass
class LoadResult:
    """What a load did; ``version`` is ``None`` when there was nothing new to load."""

    version: int | None
    report: dict[str, Any] = field(default_factory=dict)
    """The load's report as JSON, as its version keeps it, with every phase and what gc
    removed (:meth:`LoadReport.to_json`); when nothing was new, the store's version and the
    files found changed."""
    load: LoadReport | None = None
    """The same report, typed (``None`` when nothing was new)."""


def _source_frame(
    spark: SparkSession,
    index: int,
    source: SourceSpec,
    files: list[InputFile],
    job: JobSpec,
    lists: frozenset[str],
    numbers: dict[str, int],
    fingerprints: Fingerprints,
) -> DataFrame:
    from pyspark.sql import functions as F

    fields = job.input_fields(source)
    frame = read_source(spark, source, files, fields, lists, numbers, fingerprints)
    frame = frame.withColumn(SHARD, shard_column(frame, source, job.shards))
    frame = frame.withColumn(ORDER, F.lit(index))
    if source.inject_source_name:
        paths = F.array(*[F.lit(f.path) for f in files])
        injected = F.element_at(paths, F.col(FILE_COLUMN) - numbers[files[0].path] + 1)
        if source.inject_source_name in lists:
            injected = F.array(injected)
        frame = frame.withColumn(source.inject_source_name, injected)
    return dedup_columns(frame, source)


def _attachment_checks(builder: TreeBuilder, record: SymbolicRecord) -> list[tuple[Column, str]]:
    """Rejects for values a ``sum`` or ``time`` attachment, or a pending element's time,
    cannot take."""
    from pyspark.sql import functions as F

    checks = []
    for spec in builder.attachments:
        if spec.kind not in ("sum", "time") or spec.key is None:
            continue
        kind = "double" if spec.kind == "sum" else "long"

        def bad(x: Column, kind: str = kind) -> Column:
            return (x != "") & x.try_cast(kind).isNull()

        value = record.get(spec.key)
        test = F.exists(value, bad) if spec.key in record.arrays else bad(value)
        what = "a number" if spec.kind == "sum" else "a whole number"
        checks.append((test, f"data {spec.name!r} ({spec.kind}): {spec.key!r} is not {what}"))
    if builder.pending_time is not None:
        value = record.get(builder.pending_time)

        def late(x: Column) -> Column:  # what the task parses: an optional minus and digits
            return (x != "") & (~x.rlike("^-?[0-9]+$") | x.try_cast("long").isNull())

        test = F.exists(value, late) if builder.pending_time in record.arrays else late(value)
        checks.append((test, f"pending time: {builder.pending_time!r} is not a whole number"))
    return checks


def _mapped(
    frame: DataFrame, job: JobSpec, builder: TreeBuilder
) -> tuple[DataFrame, tuple[str, ...]]:
    """Add ``__keep`` (the map's verdict), element filter columns and reject reasons; also
    the key fields that hold lists (they go to the tasks as text, :func:`list_as_text`)."""
    from pyspark.sql import functions as F

    names = [c for c in frame.columns if not c.startswith("__")]
    record = SymbolicRecord({name: F.col(f"`{name}`") for name in names})
    for spec in frame.schema.fields:
        if spec.name in record.columns and spec.dataType.typeName() == "array":
            record = record.with_field(spec.name, record.columns[spec.name], True)
    compiler = FilterCompiler()
    keep: Column = F.lit(True)
    if job.map.filter_in is not None:
        passes, record = compiler.bundle(job.map.filter_in, record)
        keep = keep & passes
    if job.map.fields:
        projected = SymbolicRecord({})
        for mapping in job.map.fields:
            value, is_array = record.get(mapping.source), mapping.source in record.arrays
            if mapping.filter is not None:
                value, is_array = compiler.value(mapping.filter, value, is_array)
            projected = projected.with_field(mapping.target, value, is_array)
        record = projected
    if job.map.filter_out is not None:
        passes, record = compiler.bundle(job.map.filter_out, record)
        keep = keep & passes
    columns = [F.col(c) for c in (SHARD, ORDER, FILE_COLUMN, LINE, TEXT, DKEY, DHASH)]
    columns.append(keep.alias(KEEP))
    columns += [
        (list_as_text(record.get(key)) if key in record.arrays else record.get(key)).alias(key)
        for key in builder.key_fields
    ]
    for element in builder.filters:
        assert element.filter is not None
        passes, _ = compiler.bundle(element.filter, record)
        columns.append(passes.alias(builder.filter_columns[element.where]))
    compiler.rejects.extend(_attachment_checks(builder, record))
    columns.append(F.coalesce(F.col(REJECT), compiler.reject_reason()).alias(REJECT))
    return frame.select(*columns), tuple(k for k in builder.key_fields if k in record.arrays)


def run_load(
    spark: SparkSession,
    job: JobSpec,
    store_dir: str | Path | PageStore,
    on_event: EventSink = ignore_events,
    *,
    options: LoadOptions | None = None,
    keep_versions: int | None = None,
    max_rejected: int | None = None,
    reprocess_changed: bool | None = None,
) -> LoadResult:
    """Load the job's new input files into the store at ``store_dir``; publish a version.

    The store is locked for the whole load; after publishing, versions beyond
    ``keep_versions`` and unreferenced runs are removed. More than
    ``max_rejected`` rejected records fail the load: nothing is published.
    What the load finds and does, and its Spark stages as they run, go to
    ``on_event`` (see :mod:`treestore.events`); the load itself prints nothing.

    ``options`` holds them all (:class:`~loaders.load.options.LoadOptions`, whose
    defaults these are); ``keep_versions``, ``max_rejected`` and ``reprocess_changed``,
    when given, replace its fields.
    """
    options = (options or LoadOptions()).updated(
        keep_versions=keep_versions, max_rejected=max_rejected, reprocess_changed=reprocess_changed
    )
    check_executors_python(spark)  # a user's session whose workers lack our packages
    # inputs first: a source that cannot be listed leaves no store and no lock behind
    phases = Timer()
    with phases.phase("list files"):
        listed = [list_input_files(source, on_event) for source in job.sources]
    writer = StoreWriter(store_dir, job.shards, job.hash, create=False)  # checks only
    with store_lock(writer.pages, f"a load of {job.file}", on_event) as lease:
        # re-read under the lock; a manifest a killed load left unpublished goes
        writer = StoreWriter(writer.pages, job.shards, job.hash, fence=lease.verify)
        writer.drop_unpublished()
        return load_listed(spark, job, writer, listed, on_event, options=options, phases=phases)


def load_listed(
    spark: SparkSession,
    job: JobSpec,
    writer: StoreWriter,
    listed: list[list[InputFile]],
    on_event: EventSink = ignore_events,
    *,
    options: LoadOptions,
    phases: Timer | None = None,
    stream: StreamBatch | None = None,
) -> LoadResult:
    """Load the new files among ``listed`` (each source's files) through ``writer``, whose
    store's lock the caller holds; publish one version (or nothing, if none is new) and
    collect old versions beyond ``options.keep_versions``. ``stream``: the follower's
    micro-batch this load is, kept in the version's report."""

    def log(line: str) -> None:
        on_event(Message(line))

    with spark_progress(spark, on_event):
        result = _load_locked(
            spark, job, listed, phases or Timer(), writer, log, options, stream,
        )  # fmt: skip
    if result.load is not None:
        load = replace(result.load, gc=collect_garbage(writer.pages, options.keep_versions))
        result = LoadResult(result.version, load.to_json(), load)
    return result


def _load_locked(
    spark: SparkSession,
    job: JobSpec,
    listed: list[list[InputFile]],
    phases: Timer,
    writer: StoreWriter,
    log: Callable[[str], None],
    options: LoadOptions,
    stream: StreamBatch | None,
) -> LoadResult:
    max_rejected = options.max_rejected
    with phases.phase("list files"):
        scan = scan_inputs(job.sources, listed, writer.base.inputs, log, options.reprocess_changed)
    if not scan.fresh:
        log("nothing new to load: the store is unchanged")
        return LoadResult(None, {"version": writer.base.version, "changed_files": scan.changed})
    builder = TreeBuilder(job.tree)
    with phases.phase("dedup index"):
        index = prepare_index(spark, job, writer, log)
    with phases.phase("prepare"), spark_errors(LoadError, "Reading the new input files"):
        # a field that holds lists in one source is read as a list in all of them
        lists = frozenset().union(
            *(
                list_fields(job.sources[i], files, job.input_fields(job.sources[i]))
                for i, files in scan.fresh.items()
            )
        )
        ordered = [f.path for _, files in sorted(scan.fresh.items()) for f in files]
        numbers = {path: n for n, path in enumerate(ordered)}
        fingerprints = Fingerprints()  # each file's, as its task reads it
        frames = [
            _source_frame(
                spark, index, job.sources[index], files, job, lists, numbers, fingerprints
            )
            for index, files in sorted(scan.fresh.items())
        ]
    union = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)
    mapped, text_lists = _mapped(union, job, builder)
    size = sum(f.size for files in scan.fresh.values() for f in files)
    tasks = load_partitions(spark, job.shards, size)
    arranged = partition_by_shard(spark, mapped, job.shards, tasks)
    arranged = arranged.sortWithinPartitions(ORDER, FILE_COLUMN, LINE)  # the records' order
    dedup_sources = {i: s.name for i, s in enumerate(job.sources) if s.dedup_keys}
    stamp = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"  # this load's folders
    spec = TaskSpec(
        builder=builder,
        source_names=tuple(s.name for s in job.sources),
        dedup_sources=dedup_sources,
        dedup_runs={name: index.runs(name) for name in dedup_sources.values()},
        dedup_store=writer.owner,
        states=dict(writer.base.trees),
        files=tuple(ordered),
        rejected_folder=rejected_folder(stamp),
        expired_folder=expired_parts_folder(stamp),
        max_rejected=max_rejected,
        list_fields=text_lists,
        partitions=tasks,
        owner=writer.owner,
    )
    with (
        phases.phase("read, map and apply (Spark)"),
        spark_errors(LoadError, "The load's Spark job"),
    ):
        rows = arranged.mapInArrow(shard_task(writer.pages, spec), TASK_SCHEMA).collect()
        shard_results, task_totals = decode_results(rows)
        shard_results += _retry_unserved(spark, writer.pages, spec, shard_results)
    failpoint("after-tasks")
    summary = summarize(job, scan.fresh, (shard_results, task_totals), phases)
    with phases.phase("publish"):  # the tasks' files, where the driver sees them
        confirm_written(writer.pages, _written_by_tasks(writer, spec, summary))
    report = replace(summary.report, changed_files=scan.changed, stream=stream)
    if report.rejected.count > max_rejected:
        raise LoadError(_too_many_rejected(writer.pages, report.rejected, max_rejected))
    if report.expired:  # the shards' expired records, one file per version
        merged = expired_file(stamp)
        merge_expired(writer.pages, list(report.expired), merged)
        report = replace(report, expired=(merged,))
    taken = fingerprints.taken(numbers)
    inputs = {  # the files read; files found moved or with a new time: their new root
        **scan.refreshed,
        **{
            scan.keys[(index, f.path)]: loaded_entry(
                job.sources[index].name,
                f,
                summary.file_records.get(f.path, 0),
                writer.base.version + 1,
                taken.get(f.path),
            )
            for index, files in scan.fresh.items()
            for f in files
        },
    }
    with phases.phase("publish"):
        manifest = writer.publish(
            summary.trees, inputs, report.to_json(), failpoint=failpoint,
            record_files=report.record_files(),
        )  # fmt: skip
        failpoint("between-data-and-index")
        # every load, dedup or not: an index covering a version above CURRENT tells check
        # (and the next load) that CURRENT was rolled back
        publish_index(writer.pages, index, job, summary.index_runs, manifest.version)
    report = replace(report, version=manifest.version, phases=dict(phases.seconds))
    return LoadResult(manifest.version, report.to_json(), report)


def _retry_unserved(
    spark: SparkSession, pages: PageStore, spec: TaskSpec, served: list[ShardResult]
) -> list[ShardResult]:
    """Retry the pending records of the shards no task of the load served, as a small Spark
    job of their own; their results.

    Each task of the load retries the shards with pending records that its partition serves
    (:attr:`TaskSpec.partitions`), whether records reach them or not: Spark runs a task for
    every partition of the repartition by shard, empty or not. Only when the load's input
    holds no record at all does Spark run none (it plans an empty shuffle as no partitions),
    and only then does this step run.
    """
    shards = [result.shard for result in served]
    twice = sorted(shard for shard, n in Counter(shards).items() if n > 1)
    if twice:  # one of the two trees would be lost: publish nothing
        raise LoadError(f"Two tasks of the load wrote shard(s) {twice}; nothing was published.")
    unserved = sorted(set(spec.waiting_shards()) - set(shards))
    if not unserved:
        return []
    frame = spark.createDataFrame([(shard,) for shard in unserved], f"{SHARD} int")
    rows = frame.mapInArrow(pending_task(pages, spec), TASK_SCHEMA).collect()
    return decode_results(rows)[0]


def _written_by_tasks(
    writer: StoreWriter, spec: TaskSpec, summary: Summary
) -> dict[str, int | None]:
    """The files the load's tasks wrote that the new version (or the dedup index published
    after it) names, with the sizes the tasks reported (None: not reported): runs, side
    files, files of records set aside, dedup index runs."""
    files = written_files(writer.base, summary.trees)
    files.update(dict.fromkeys(summary.report.record_files().names()))
    for shard, by_source in summary.index_runs.items():
        for source, runs in by_source.items():
            files.update(
                dict.fromkeys(set(runs) - set(spec.dedup_runs.get(source, {}).get(shard, ())))
            )
    return files


def _too_many_rejected(pages: PageStore, rejected: RejectedRecords, limit: int) -> str:
    shown = "; ".join(
        f"{r['file']}:{r['line']}: {r['reason']}" for r in first_rejected(pages, rejected, 3)
    )
    return (
        f"{rejected.count} records were rejected, more than --max-rejected {limit}; "
        f"nothing was published. First: {shown}. All kept ones are in "
        f"{pages.location}/{rejected.folder}/ (until the next gc). Fix the input, or raise "
        "--max-rejected to load the good records and set the bad ones aside."
    )
