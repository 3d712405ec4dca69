"""``treestore sweep``: read events and intervals, sweep them, keep the results in a store.

The results are written as Parquet under ``STORE/sweeps/NAME/`` (and to
``--out`` if asked), then loaded into the store's trees like any source, as
``NAME / id / time / value``: a path ``NAME/+/+/+`` lists every event's id,
time and value (one row per element for ``set`` and ``list``; an event with a
null ``min``/``max`` has no value node), and ``:+hits`` on the time counts the
events at that id and time.

Times of day stay times of day: with a ``--time-format`` that has no date in it
(``H:mm``, ``HH:mm:ss``), or without one when every value of a time column reads
as a time of day (``9:30``, ``T09:30:00.5``), the times are swept as microseconds
since midnight, written to Parquet as their text (``09:30:00``; Spark 4.0 reads no
Parquet ``time`` type) and kept in the tree the same way: no date is added, neither
1970's nor today's.

``--out`` names a Parquet file (``results.parquet``: one file, merged on the driver
from the tasks' parts) or a folder (its ``part-NNNNN.parquet`` files, nothing else);
an existing one is refused unless ``replace`` (``--replace``) is given.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import posixpath
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.fs as pafs

from loaders.formats.readers import time_of_day_text
from loaders.job.model import ElementSpec, JobSpec, MapSpec, SourceSpec
from loaders.load.driver import load_listed
from loaders.load.inputs import list_input_files
from loaders.load.options import LoadOptions
from loaders.load.timing import Timer
from loaders.sweep.driver import SweepReport, interval_sweep
from loaders.sweep.inputs import list_table, read_table
from loaders.sweep.options import SweepOptions
from treestore.errors import LoadError, StoreError
from treestore.events import EventSink, Message, ignore_events
from treestore.failpoints import failpoint
from treestore.filesystems import is_uri
from treestore.settings import task_started
from treestore.spark import spark_errors
from treestore.storage.pagestore import FilePageStore, PageStore, page_store_for
from treestore.store.layout import CONFIG, sweep_folder
from treestore.store.lock import Lease, check_unlocked, store_lock
from treestore.store.versions import StoreWriter, open_version, read_config

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["check_sweep", "is_time_of_day_format", "run_sweep"]


_TIME_OF_DAY_LETTERS = frozenset("HhKkmsSa")
"""The letters of a Spark datetime pattern that say a time of day (hours to fractions)."""
_TIME_OF_DAY_TEXT = r"^T?[0-9]{1,2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?$"
"""A string Spark's cast would read as a time of day (and give today's date)."""


def is_time_of_day_format(time_format: str) -> bool:
    """Whether a Spark datetime pattern reads only a time of day (``H:mm``), no date."""
    letters = {c for c in re.sub(r"'[^']*'", "", time_format) if c.isalpha()}
    return bool(letters) and letters <= _TIME_OF_DAY_LETTERS


def _strings_are_times_of_day(frame: DataFrame, columns: list[str]) -> bool:
    """Whether every value of the (string) ``columns`` reads as a time of day (one pass)."""
    from pyspark.sql import functions as F

    counts = frame.agg(
        *(F.count(F.col(f"`{c}`")).alias(f"n{i}") for i, c in enumerate(columns)),
        *(
            F.count_if(F.col(f"`{c}`").rlike(_TIME_OF_DAY_TEXT)).alias(f"t{i}")
            for i, c in enumerate(columns)
        ),
    ).first()
    assert counts is not None
    return all(counts[f"n{i}"] and counts[f"n{i}"] == counts[f"t{i}"] for i in range(len(columns)))


def _micros_of_day(text: Column, time_format: str | None) -> Column:
    """A time of day as microseconds since midnight (a whole number the sweep orders)."""
    from pyspark.sql import functions as F

    stamp = (
        F.to_timestamp(text, time_format)
        if time_format
        else F.concat(F.lit("1970-01-01 "), F.regexp_replace(text, "^T", "")).cast("timestamp")
    )
    return F.unix_micros(stamp) - F.unix_micros(F.date_trunc("day", stamp))


def _timed(
    frame: DataFrame, columns: list[str], time_format: str | None, times_of_day: bool
) -> DataFrame:
    """Parse string time columns: as timestamps (with ``time_format`` if given), or as
    microseconds since midnight when ``times_of_day``."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    for name in columns:
        if name in frame.columns and isinstance(frame.schema[name].dataType, StringType):
            if times_of_day:
                parsed = _micros_of_day(F.col(f"`{name}`"), time_format)
            elif time_format:
                parsed = F.to_timestamp(F.col(f"`{name}`"), time_format)
            else:
                parsed = F.col(f"`{name}`").cast("timestamp")
            frame = frame.withColumn(name, parsed)
    return frame


def _string_columns(frame: DataFrame, columns: list[str]) -> list[str]:
    from pyspark.sql.types import StringType

    return [
        c
        for c in columns
        if c in frame.columns and isinstance(frame.schema[c].dataType, StringType)
    ]


def _as_time_of_day(batch: pa.RecordBatch, column: str | None) -> pa.RecordBatch:
    """``column`` (microseconds since midnight) as the text of the time of day
    (``09:30:00``): a string column any Parquet reader takes (Spark 4.0 reads no
    Parquet ``time``), with no date in it."""
    if column is None or column not in batch.schema.names:
        return batch
    index = batch.schema.get_field_index(column)
    times = time_of_day_text(batch.column(index).cast(pa.int64()).cast(pa.time64("us")))
    return batch.set_column(index, pa.field(column, pa.string()), times)


def _parts_writer(
    targets: list[tuple[PageStore, str]], time_of_day: str | None = None
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A Spark task writing its partition of the results as one Parquet file in each
    target (a page store and a folder in it: the store's ``sweeps/NAME``, ``--out``),
    through the target's own filesystem (a folder, S3, HDFS): ``FOLDER/part-NNNNN.parquet``.
    A retried task writes the same names again. ``time_of_day`` names the time column
    that holds microseconds since midnight (written as a ``time``)."""

    def write(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_started()
        import pyarrow.parquet as pq
        from pyspark import TaskContext

        context = TaskContext.get()
        part = context.partitionId() if context is not None else 0
        remaining = (_as_time_of_day(batch, time_of_day) for batch in batches if batch.num_rows)
        first = next(remaining, None)
        if first is None:
            return  # an empty partition leaves no file
        with ExitStack() as files:
            writers = [
                pq.ParquetWriter(
                    files.enter_context(
                        pages.writer(posixpath.join(folder, f"part-{part:05d}.parquet"))
                    ),
                    first.schema,
                )
                for pages, folder in targets
            ]
            for batch in itertools.chain([first], remaining):
                for writer in writers:
                    writer.write_batch(batch)
            for writer in writers:
                writer.close()
        yield pa.RecordBatch.from_pydict({"files": [1]}, schema=pa.schema([("files", pa.int32())]))

    return write


def _is_part(name: str) -> bool:
    return "/" not in name and name.startswith("part-") and name.endswith(".parquet")


def _check_out(out: str, replace: bool) -> None:
    """Refuse an ``out`` in the way: a folder named ``.parquet``; unless ``replace``, an
    existing file, or a folder holding part files. Looks only."""
    base = out.rstrip("/")
    if base.lower().endswith(".parquet"):
        parent, name = posixpath.split(base) if is_uri(base) else os.path.split(base)
        pages = FilePageStore(parent or ".")
        found = pages.fs.get_file_info(posixpath.join(pages.root, name)).type
        if found == pafs.FileType.Directory:
            raise LoadError(
                f"--out {out} is a folder: name a new file, or a folder without '.parquet'."
            )
        if found == pafs.FileType.File and not replace:
            raise LoadError(
                f"--out {out} exists: pass --replace to replace it, or choose another --out."
            )
        return
    parts = [name for name in FilePageStore(base).list() if _is_part(name)]
    if parts and not replace:
        raise LoadError(
            f"--out {out} already holds sweep results ({len(parts)} part file(s)): pass "
            "--replace to replace them, or choose another --out."
        )


def _out_target(out: str, replace: bool) -> tuple[FilePageStore, str | None]:
    """``--out`` as a page store and, for a ``.parquet`` name, the one file's name in it
    (None: a folder of part files). What is in the way is refused (:func:`_check_out`);
    with ``replace`` the file is overwritten, or the folder's part files removed (its
    other files are kept)."""
    _check_out(out, replace)
    base = out.rstrip("/")
    if base.lower().endswith(".parquet"):
        parent, name = posixpath.split(base) if is_uri(base) else os.path.split(base)
        return FilePageStore(parent or "."), name
    pages = FilePageStore(base)
    for name in [name for name in pages.list() if _is_part(name)]:
        pages.delete(name)
    return pages, None


def _merge_parts(
    pages: FilePageStore, folder: str, out: FilePageStore, name: str, schema: pa.Schema
) -> None:
    """Write the part files under ``folder`` as the one Parquet file ``name`` of ``out``,
    a part at a time (the driver holds one part in memory)."""
    import pyarrow.parquet as pq

    parts = sorted(p for p in pages.list(folder) if _is_part(posixpath.basename(p)))
    with out.writer(name) as sink:
        writer: pq.ParquetWriter | None = None
        for part in parts:
            with pages.fs.open_input_file(posixpath.join(pages.root, part)) as source:
                table = pq.read_table(source)
            writer = writer or pq.ParquetWriter(sink, table.schema)
            writer.write_table(table)
        if writer is None:  # no event: an empty file with the results' columns
            writer = pq.ParquetWriter(sink, schema)
        writer.close()


def _results_source(name: str) -> str:
    """The source a sweep's results load as: the manifest's inputs name it."""
    return f"sweep-{name}"


def _results_job(name: str, folder: str, id_col: str, time_col: str, shards: int) -> JobSpec:
    where = f"sweep {name}"
    tree = (
        ElementSpec("const", f"{where}: name", value=name),
        ElementSpec("value", f"{where}: id", key=id_col),
        ElementSpec("value", f"{where}: time", key=time_col),
        ElementSpec("value", f"{where}: value", key="value"),
    )
    source = SourceSpec(name=_results_source(name), path=folder, format="parquet", shard_by=id_col)
    return JobSpec(where, shards, (source,), MapSpec(), tree)


def _loaded(pages: PageStore, name: str) -> bool:
    """Whether the store's published version loaded the results of a sweep called ``name``."""
    if not pages.exists(CONFIG):
        return False
    source = _results_source(name)
    return any(
        entry.get("source") == source for entry in open_version(pages).manifest.inputs.values()
    )


def _refuse_taken(pages: PageStore, name: str) -> None:
    """Refuse ``name`` when the published version holds a sweep of that name. Results under
    ``sweeps/NAME`` that no version loaded do not take the name: a sweep that was killed or
    failed before its load published them wrote them (see :func:`_remove_unloaded`)."""
    if pages.list(sweep_folder(name)) and _loaded(pages, name):
        raise StoreError(f"The store already holds a sweep called {name!r}: choose another --name.")


def _remove_unloaded(pages: PageStore, name: str, on_event: EventSink) -> None:
    """Remove the files under ``sweeps/NAME`` if no published version loaded them (what a
    sweep that was killed or failed before publishing left), saying so. Call it only while
    holding the store's lock."""
    left = pages.list(sweep_folder(name))
    if not left or _loaded(pages, name):
        return
    for file in left:
        pages.delete(file)
    on_event(
        Message(
            f"removed {len(left)} file(s) under {pages.location}/{sweep_folder(name)} that a "
            f"sweep called {name!r} wrote but never loaded (it was stopped or failed)"
        )
    )


def check_sweep(
    events_path: str, intervals_path: str, store: str, name: str, options: SweepOptions
) -> None:
    """Refuse what :func:`run_sweep` would refuse, without Spark and creating nothing: a
    bad or taken name, a store that is a file or of no use, a store a live process has
    locked, inputs that are missing or of no telling format, an ``out`` in the way
    (unless ``options.replace``).

    :func:`run_sweep` makes these checks first (and the name's again under the store's
    lock); the command line makes them before Spark starts."""
    if not name or "/" in name:
        raise LoadError(f"A sweep's name must be a non-empty node name without '/', not {name!r}.")
    pages = page_store_for(store)
    if pages.exists(CONFIG):
        read_config(pages)
    else:
        StoreWriter(pages, options.shards, create=False)  # a file in the way, a foreign folder
    _refuse_taken(pages, name)
    check_unlocked(pages)  # a live sweep or load holds the store
    for path in (events_path, intervals_path):
        list_table(path, options.input_format)  # missing, no telling format, no files
    if options.out:
        _check_out(options.out, options.replace)


def run_sweep(
    spark: SparkSession,
    events_path: str,
    intervals_path: str,
    store: str,
    name: str,
    *,
    options: SweepOptions | None = None,
    agg: str | None = None,
    closed: str | None = None,
    plan: str | None = None,
    columns: Mapping[str, str] | None = None,
    time_format: str | None = None,
    input_format: str | None = None,
    out: str | None = None,
    shards: int | None = None,
    on_event: EventSink = ignore_events,
    replace: bool | None = None,
) -> SweepReport:
    """Sweep the two files and keep the results in ``store`` under the top node ``name``.

    The sweep's report and the load of its results go to ``on_event`` as they happen.
    ``out`` also writes them as Parquet (a ``.parquet`` file, else a folder); ``replace``
    replaces an existing ``out``. ``options`` holds how it runs
    (:class:`~loaders.sweep.options.SweepOptions`, whose defaults these are); the other
    keyword arguments, when given, replace its fields.

    The store's lock is held from the check that no sweep called ``name`` is there to
    the load of its results, so of two sweeps of one name only one writes (the other is
    refused, as a second load is). Results under ``sweeps/NAME`` that no published
    version loaded (a sweep of that name killed, or failed, before its load published)
    are removed under the lock first; a sweep that fails removes its own.
    """
    options = (options or SweepOptions()).updated(
        agg=agg, closed=closed, plan=plan, columns=columns, time_format=time_format,
        input_format=input_format, out=out, shards=shards, replace=replace,
    )  # fmt: skip
    check_sweep(events_path, intervals_path, store, name, options)
    pages = page_store_for(store)
    with store_lock(pages, f"a sweep called {name!r}", on_event) as lease:
        _refuse_taken(pages, name)  # again, under the lock: another sweep may have just won
        _remove_unloaded(pages, name, on_event)  # a dead sweep's results, never loaded
        try:
            return _sweep_locked(
                spark, events_path, intervals_path, store, name, options, lease, on_event
            )
        except Exception:  # its results go with the rest of what it wrote (store_lock)
            with contextlib.suppress(StoreError, OSError):
                lease.verify()
                _remove_unloaded(pages, name, ignore_events)
            raise


def _sweep_locked(
    spark: SparkSession,
    events_path: str,
    intervals_path: str,
    store: str,
    name: str,
    options: SweepOptions,
    lease: Lease,
    on_event: EventSink,
) -> SweepReport:
    """The sweep, its results written under ``sweeps/NAME`` and loaded into the trees,
    while the store's lock is held (``lease``)."""
    pages = page_store_for(store)
    names = options.columns
    time_format = options.time_format
    out_target = _out_target(options.out, options.replace) if options.out else None
    events = read_table(spark, events_path, options.input_format)
    intervals = read_table(spark, intervals_path, options.input_format)
    time_columns = [(events, [names["time"]]), (intervals, [names["start"], names["end"]])]
    strings = [(frame, _string_columns(frame, cols)) for frame, cols in time_columns]
    if time_format:
        times_of_day = is_time_of_day_format(time_format)
    else:
        times_of_day = any(cols for _, cols in strings) and all(
            _strings_are_times_of_day(frame, cols) for frame, cols in strings if cols
        )
    events = _timed(events, [names["time"]], time_format, times_of_day)
    intervals = _timed(intervals, [names["start"], names["end"]], time_format, times_of_day)
    time_of_day = names["time"] if times_of_day and strings[0][1] else None
    shards = open_version(pages).shards if pages.exists(CONFIG) else options.shards
    StoreWriter(pages, shards)  # creates the store if it is new, so the results can live in it
    report = SweepReport()
    with spark_errors(LoadError, "The sweep"):
        results = interval_sweep(
            spark,
            events,
            intervals,
            options.agg,
            options.closed,
            plan=options.plan,
            id_col=names["id"],
            time_col=names["time"],
            start_col=names["start"],
            end_col=names["end"],
            value_col=names["value"],
            report=report,
        )
        folder = sweep_folder(name)
        targets = [(pages, folder)]
        if out_target is not None and out_target[1] is None:
            targets.append((out_target[0], ""))
        results.mapInArrow(_parts_writer(targets, time_of_day), "files int").collect()
        if out_target is not None and out_target[1] is not None:
            from pyspark.sql.pandas.types import to_arrow_schema

            empty = pa.RecordBatch.from_pylist([], schema=to_arrow_schema(results.schema))
            schema = _as_time_of_day(empty, time_of_day).schema
            assert isinstance(pages, FilePageStore)
            _merge_parts(pages, folder, out_target[0], out_target[1], schema)
        said = report.lines()  # may count the events (the broadcast plan counts them when read)
    spark.catalog.clearCache()  # the swept rows were cached for the writes above
    for line in said:
        on_event(Message(line))
    failpoint("sweep-after-results")  # the results under sweeps/NAME, their load not begun
    job = _results_job(name, f"{pages.location}/{folder}", names["id"], names["time"], shards)
    phases = Timer()  # the results' load, as run_load would, under the lock this sweep holds
    with phases.phase("list files"):
        listed = [list_input_files(source, on_event) for source in job.sources]
    writer = StoreWriter(pages, job.shards, job.hash, fence=lease.verify)
    writer.drop_unpublished()
    writer.columns[name] = (names["id"], names["time"], "value")  # NAME/+/+/+'s columns
    result = load_listed(spark, job, writer, listed, on_event, options=LoadOptions(), phases=phases)
    on_event(Message(f"results kept in {store} as version {result.version}: query '{name}/+/+/+'"))
    return report
