"""A follower's stream (``treestore load --follow``): Spark's Structured Streaming finds
the new input files, and :class:`~loaders.follow.batches.MicroBatches` loads each
micro-batch's.

Each source of the job is a streaming file source (Spark's ``binaryFile`` format over
the source's folder, reading only the files' names: the content column is never
selected), so Spark itself keeps which files it has offered, in a checkpoint inside
the store (``stream/checkpoint``), and honours the trigger (``--trigger 10s``, or
``--available-now``: every file there now, then stop) and ``--max-files-per-trigger``
(per source). The sources' streams are one union, so a micro-batch holds the new
files of every source. The store's lock is held for the follower's whole life.

Exactly once: a file is loaded when the version that marks it loaded is published
(the marks are those of batch loads, so switching between ``load`` and ``load
--follow`` never loads a file twice or skips one); a micro-batch replayed after a
crash finds its files marked and publishes nothing.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loaders.follow.batches import STOP_MARK, FollowSummary, MicroBatches
from loaders.follow.options import FollowOptions
from loaders.follow.set_aside import SetAside
from loaders.job.model import JobSpec, SourceSpec
from loaders.listing.files import list_input_files, missing_source, split_glob
from treestore.errors import LoadError
from treestore.events import EventSink, Message, ignore_events
from treestore.filesystems import is_uri
from treestore.spark import failure_line, is_connect, spark_errors
from treestore.storage.pagestore import page_store_for
from treestore.store.layout import STREAM, STREAM_CHECKPOINT, STREAM_JOB, STREAM_UNREADABLE
from treestore.store.lock import check_unlocked, store_lock
from treestore.store.versions import StoreWriter

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["check_follow", "follow_job"]

_BINARY_FILE_SCHEMA = "path string, modificationTime timestamp, length long, content binary"


def _stream_root(source: SourceSpec) -> str:
    """The folder a source's stream watches: the folder, a file's folder, or a glob's
    folder before its first glob character (the load's own rules then pick the files)."""
    if is_uri(source.path):
        raise LoadError(
            f"Source {source.name!r}: --follow watches folders Spark reads itself; "
            f"{source.path} is a URI. Follow a local or mounted folder, or run "
            "'treestore load' (which reads URIs) from a scheduler."
        )
    path, pattern = split_glob(source.path)
    if pattern is not None:
        return path or "/"
    if Path(path).is_file():
        return str(Path(path).parent)
    if not Path(path).is_dir():
        raise LoadError(missing_source(source) + " The folder must exist before following it.")
    return path


def _job_digest(job: JobSpec) -> str:
    """What the follower's checkpoint is tied to: the job's shards, sources, map, tree."""
    text = repr((job.shards, job.sources, job.map, job.tree))
    return hashlib.sha256(text.encode()).hexdigest()


def _check_job(store_folder: Path, job: JobSpec, *, remember: bool = True) -> None:
    """Refuse a job that changed since the stream's checkpoint was made; remember it
    (unless not ``remember``)."""
    marker = store_folder / STREAM_JOB
    digest = _job_digest(job)
    if marker.exists():
        known = json.loads(marker.read_text())
        if known.get("digest") != digest:
            raise LoadError(
                f"The job changed since this store's follower started ({known.get('job')}); "
                f"its stream would mix two jobs. Remove {store_folder / STREAM} to follow the new "
                "job from here on (files already loaded stay loaded), or load into a new store."
            )
        return
    if remember:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"digest": digest, "job": str(job.file)}))


def _refuse_uri_store(location: str) -> None:
    if is_uri(location):
        raise LoadError(
            f"--follow keeps Spark's streaming checkpoint in the store, so the store must be "
            f"a folder (local or mounted), not {location}. Run 'treestore load' from a "
            "scheduler for a store at a URI."
        )


def check_follow(job: JobSpec, store: str | Path) -> None:
    """Refuse what :func:`follow_job` would refuse from the store's files and the job alone,
    without Spark and creating nothing: a store at a URI, a source that cannot be followed
    (at a URI, a folder that does not exist), a store of other shards or another job, a
    job that changed since the store's follower started, a store a live process has
    locked. :func:`follow_job` makes these checks again; the command line makes them
    before Spark starts."""
    location = str(store)
    _refuse_uri_store(location)
    for source in job.sources:
        _stream_root(source)
    pages = page_store_for(location)
    StoreWriter(pages, job.shards, job.hash, create=False)
    _check_job(Path(location).resolve(), job, remember=False)
    check_unlocked(pages)


def _stream(spark: SparkSession, job: JobSpec, max_files: int | None) -> DataFrame:
    """One streaming DataFrame of (source index, file URI) over every source."""
    from pyspark.sql import functions as F

    streams = []
    for index, source in enumerate(job.sources):
        reader = (
            spark.readStream.format("binaryFile")
            .schema(_BINARY_FILE_SCHEMA)
            .option("recursiveFileLookup", "true")
        )
        if max_files:
            reader = reader.option("maxFilesPerTrigger", str(max_files))
        streams.append(
            reader.load(_stream_root(source)).select(F.lit(index).alias("source"), F.col("path"))
        )
    union = streams[0]
    for other in streams[1:]:
        union = union.unionByName(other)
    return union


def follow_job(
    spark: SparkSession,
    job: JobSpec,
    store: str | Path,
    *,
    options: FollowOptions | None = None,
    trigger_seconds: float | None = None,
    available_now: bool | None = None,
    max_files: int | None = None,
    max_rejected: int | None = None,
    keep_versions: int | None = None,
    on_event: EventSink = ignore_events,
    stop: threading.Event | None = None,
    stop_now: threading.Event | None = None,
    poll_seconds: float | None = None,
) -> FollowSummary:
    """Follow ``job``'s sources into ``store`` until ``stop`` is set (or, with
    ``available_now``, until every file there at the start is loaded).

    Each micro-batch publishes at most one version; ``stop`` takes effect once the
    micro-batch under way is published, ``stop_now`` at once (the micro-batch under way
    publishes nothing; Spark offers its files again next time).

    ``options`` holds how it runs (:class:`~loaders.follow.options.FollowOptions`, whose
    defaults these are); ``trigger_seconds``, ``available_now``, ``max_files``,
    ``max_rejected``, ``keep_versions`` and ``poll_seconds``, when given, replace its
    fields.
    """
    options = (options or FollowOptions()).updated(
        trigger_seconds=trigger_seconds, available_now=available_now, max_files=max_files,
        max_rejected=max_rejected, keep_versions=keep_versions, poll_seconds=poll_seconds,
    )  # fmt: skip
    stop = stop or threading.Event()
    stop_now = stop_now or threading.Event()
    location = str(store)
    if is_connect(spark):
        raise LoadError(
            "load --follow needs a classic Spark session: on Spark Connect a stream's "
            "foreachBatch function runs on the server, not in this follower, which holds "
            "the store's lock and its state. Run the follower with a local or cluster "
            "master (--master spark://... or local[*]), or load in batches with "
            "'treestore load' on Connect."
        )
    _refuse_uri_store(location)
    for source in job.sources:  # refuse a source that cannot be followed before anything
        _stream_root(source)
        list_input_files(source, on_event)  # Spark's stream skips broken links: say so here
    pages = page_store_for(location)
    StoreWriter(pages, job.shards, job.hash)  # creates the store if it is new
    store_folder = Path(location).resolve()
    with store_lock(pages, f"a follower of {job.file} (--follow)", on_event) as lease:
        _check_job(store_folder, job)
        follower = MicroBatches(
            spark, job, location, lease, on_event, options.load_options(), stop,
            SetAside.open(store_folder / STREAM_UNREADABLE),
        )  # fmt: skip
        with _listing_in_the_driver(spark):
            with spark_errors(LoadError, "Starting the follower's stream"):
                query = _start(spark, job, follower, store_folder, options)
            on_event(
                Message(
                    f"following {len(job.sources)} source(s) into {location}"
                    + (" until every file there now is loaded" if options.available_now else
                       f", a micro-batch every {options.trigger_seconds:g} s; Ctrl-C stops "
                       "after the current one")
                )
            )  # fmt: skip
            try:
                _wait(query, follower, stop, stop_now, options.poll_seconds)
            finally:
                if query.isActive:
                    query.stop()
        return follower.summary


LISTING_SETTING = "spark.sql.sources.parallelPartitionDiscovery.threshold"
"""Spark lists the files of a micro-batch of more paths than this in a Spark job of its own
(default 32): about 1 s for a backlog of 120 files, where listing them in the driver
takes milliseconds (a follower's folders are local)."""
LOCAL_LISTING_PATHS = 100_000


@contextmanager
def _listing_in_the_driver(spark: SparkSession) -> Iterator[None]:
    """Inside the block, :data:`LISTING_SETTING` is :data:`LOCAL_LISTING_PATHS` on
    ``spark`` (the follower's stream reads it at every micro-batch); after it, the
    session's own value again."""
    before = spark.conf.get(LISTING_SETTING, None)
    spark.conf.set(LISTING_SETTING, str(LOCAL_LISTING_PATHS))
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(LISTING_SETTING)
        else:
            spark.conf.set(LISTING_SETTING, before)


def _start(
    spark: SparkSession,
    job: JobSpec,
    follower: MicroBatches,
    store_folder: Path,
    options: FollowOptions,
) -> Any:
    """Start the stream of the job's sources into the follower (a ``StreamingQuery``)."""
    writer = (
        _stream(spark, job, options.max_files)
        .writeStream.foreachBatch(follower.batch)
        .option("checkpointLocation", str(store_folder / STREAM_CHECKPOINT))
    )
    writer = (
        writer.trigger(availableNow=True)
        if options.available_now
        else writer.trigger(processingTime=f"{round(options.trigger_seconds * 1000)} milliseconds")
    )
    return writer.start()


def _wait(
    query: Any,
    follower: MicroBatches,
    stop: threading.Event,
    stop_now: threading.Event,
    poll: float,
) -> None:
    """Until the query ends (available-now), ``stop`` is set outside a micro-batch, or
    ``stop_now`` is set."""
    while query.isActive:
        if stop_now.is_set() or (stop.is_set() and not follower.busy.is_set()):
            interrupted = follower.summary.interrupted = follower.busy.is_set()
            query.stop()
            follower.summary.reason = (
                "asked to stop at once (the micro-batch under way published nothing)"
                if interrupted
                else "asked to stop"
            )
            return
        query.awaitTermination(poll)
    error = query.exception()
    if error is None:
        follower.summary.reason = "every available file is loaded"
        return
    if stop.is_set() and STOP_MARK in str(error):
        follower.summary.reason = "asked to stop"
        return
    if follower.failure is not None and isinstance(follower.failure, LoadError):
        raise follower.failure
    raise LoadError(f"The follower's stream failed: {failure_line(error)}")
