"""One incremental load: new input files -> map -> shards -> trees -> a new store version.

The steps, in two Spark jobs:

1. For each source (in job order), read only the files the store has not
   loaded yet, each file whole by one task, with pyarrow (:mod:`loaders.formats.readers`:
   every record keeps its file and line; malformed lines become rejected records);
   compute the shard (``pmod(xxhash64(shard_by), shards)``, see
   :mod:`treestore.sharding`), the source's order and the dedup key.
2. Union the sources, run ``map`` (``filter_in``, ``fields``, ``filter_out``),
   every element filter and the reject tests as Spark SQL expressions; the reading task
   routes each mapped record to its shard's piece for its file
   (:mod:`loaders.route.pieces`, Arrow files in the store's ``routed/`` folder).
3. The second job runs the shard tasks (:mod:`loaders.load.task`): each reads its
   shards' pieces in file number order, which is record order (source, file, line),
   sets the rejected records aside, drops duplicates and applies the records to the
   shard's tree in that order, writing new runs (a retried task never clobbers: run
   names are fresh). The driver then removes the pieces.
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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loaders.job.model import JobSpec
from loaders.listing.identity import loaded_entry, scan_inputs
from loaders.load.dedup_step import prepare_index, publish_index
from loaders.load.inputs import (
    InputFile,
    list_input_files,
)
from loaders.load.options import DEFAULT_MAX_REJECTED, LoadOptions
from loaders.load.progress import spark_progress
from loaders.load.protocol import (
    TASK_SCHEMA,
    ShardResult,
    TaskSpec,
    decode_results,
)
from loaders.load.report import (
    LoadReport,
    RejectedRecords,
    StreamBatch,
    Summary,
    first_rejected,
    summarize,
)
from loaders.load.route_job import RouteJob
from loaders.load.shard_frames import load_partitions
from loaders.load.task import shard_task
from loaders.load.timing import Timer
from loaders.route.pieces import spread_shards
from loaders.tree.builder import TreeBuilder
from loaders.tree.parts import shard_parts
from loaders.tree.pending import merge_expired
from treestore.errors import LoadError
from treestore.events import EventSink, Message, ignore_events
from treestore.failpoints import failpoint
from treestore.spark import check_executors_python, spark_errors
from treestore.storage.pagestore import PageStore
from treestore.store.layout import (
    expired_file,
    expired_parts_folder,
    rejected_folder,
    routed_folder,
)
from treestore.store.lock import store_lock
from treestore.store.maintenance import collect_garbage
from treestore.store.versions import StoreWriter
from treestore.store.written import confirm_written, written_files

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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
    size = sum(f.size for files in scan.fresh.values() for f in files)
    dedup_sources = {i: s.name for i, s in enumerate(job.sources) if s.dedup_keys}
    stamp = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"  # this load's folders
    routed = routed_folder(stamp)
    try:
        with phases.phase("prepare"), spark_errors(LoadError, "Reading the new input files"):
            first = RouteJob.plan(spark, job, builder, scan.fresh, writer.pages, routed)
        with (
            phases.phase(f"read and map ({first.map_in})"),
            spark_errors(LoadError, "The load's Spark job"),
        ):
            pieces = first.run()
        tasks = load_partitions(spark, job.shards, size)
        spec = TaskSpec(
            builder=builder,
            source_names=tuple(s.name for s in job.sources),
            dedup_sources=dedup_sources,
            dedup_runs={name: index.runs(name) for name in dedup_sources.values()},
            dedup_store=writer.owner,
            states=dict(writer.base.trees),
            files=first.ordered,
            rejected_folder=rejected_folder(stamp),
            expired_folder=expired_parts_folder(stamp),
            max_rejected=max_rejected,
            list_fields=first.text_lists,
            shard_tasks=spread_shards(pieces.rows, job.shards, tasks),
            pieces=pieces.by_shard,
            owner=writer.owner,
            parts=shard_parts(pieces.rows, builder),
        )
        shard_results: list[ShardResult] = []
        task_totals: list[Any] = []
        if pieces.by_shard or spec.waiting_shards():
            with (
                phases.phase("apply (Spark)"),
                spark_errors(LoadError, "The load's Spark job"),
            ):
                task_numbers = spark.range(0, tasks, 1, tasks)
                rows = task_numbers.mapInArrow(
                    shard_task(writer.pages, spec), TASK_SCHEMA
                ).collect()
                shard_results, task_totals = decode_results(rows)
    finally:
        for name in writer.pages.list(routed):
            writer.pages.delete(name)
    twice = sorted(shard for shard, n in Counter(r.shard for r in shard_results).items() if n > 1)
    if twice:  # one of the two trees would be lost: publish nothing
        raise LoadError(f"Two tasks of the load wrote shard(s) {twice}; nothing was published.")
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
    taken = first.fingerprints.taken(first.numbers)
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
