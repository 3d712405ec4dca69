"""``treestore sweep``: read events and intervals, sweep them, keep the results in a store.

The results are written as Parquet under ``STORE/sweeps/NAME/`` (and to
``--out`` if asked), then loaded into the store's trees like any source, as
``NAME / id / time / value``: a path ``NAME/+/+/+`` lists every event's id,
time and value (one row per element for ``set`` and ``list``; an event with a
null ``min``/``max`` has no value node), and ``:+hits`` on the time counts the
events at that id and time.
"""

from __future__ import annotations

import itertools
import posixpath
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from typing import TYPE_CHECKING

import pyarrow as pa

from loaders.job.model import ElementSpec, JobSpec, MapSpec, SourceSpec
from loaders.load.driver import run_load
from loaders.sweep.driver import SweepReport, interval_sweep
from loaders.sweep.inputs import read_table
from loaders.sweep.options import (
    COLUMNS,
    DEFAULT_AGG,
    DEFAULT_CLOSED,
    DEFAULT_PLAN,
    DEFAULT_SHARDS,
)
from treestore.errors import LoadError, StoreError
from treestore.events import EventSink, Message, ignore_events
from treestore.spark import spark_errors
from treestore.storage.pagestore import PageStore, page_store_for
from treestore.store.versions import StoreWriter, open_version

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["run_sweep"]


def _timed(frame: DataFrame, columns: list[str], time_format: str | None) -> DataFrame:
    """Parse string time columns as timestamps (with ``time_format`` if given)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    for name in columns:
        if name in frame.columns and isinstance(frame.schema[name].dataType, StringType):
            parsed = (
                F.to_timestamp(F.col(name), time_format)
                if time_format
                else F.col(name).cast("timestamp")
            )
            frame = frame.withColumn(name, parsed)
    return frame


def _parts_writer(
    targets: list[tuple[PageStore, str]],
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A Spark task writing its partition of the results as one Parquet file in each
    target (a page store and a folder in it: the store's ``sweeps/NAME``, ``--out``),
    through the target's own filesystem (a folder, S3, HDFS): ``FOLDER/part-NNNNN.parquet``.
    A retried task writes the same names again."""

    def write(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.parquet as pq
        from pyspark import TaskContext

        context = TaskContext.get()
        part = context.partitionId() if context is not None else 0
        remaining = (batch for batch in batches if batch.num_rows)
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


def _out_folder(out: str) -> PageStore:
    """``--out`` as a page store, its part files from an earlier run removed (nothing else)."""
    pages = page_store_for(out)
    for name in pages.list():
        if "/" not in name and name.startswith("part-") and name.endswith(".parquet"):
            pages.delete(name)
    return pages


def _results_job(name: str, folder: str, id_col: str, time_col: str, shards: int) -> JobSpec:
    where = f"sweep {name}"
    tree = (
        ElementSpec("const", f"{where}: name", value=name),
        ElementSpec("value", f"{where}: id", key=id_col),
        ElementSpec("value", f"{where}: time", key=time_col),
        ElementSpec("value", f"{where}: value", key="value"),
    )
    source = SourceSpec(name=f"sweep-{name}", path=folder, format="parquet", shard_by=id_col)
    return JobSpec(where, shards, (source,), MapSpec(), tree)


def run_sweep(
    spark: SparkSession,
    events_path: str,
    intervals_path: str,
    store: str,
    name: str,
    *,
    agg: str = DEFAULT_AGG,
    closed: str = DEFAULT_CLOSED,
    plan: str = DEFAULT_PLAN,
    columns: dict[str, str] | None = None,
    time_format: str | None = None,
    input_format: str | None = None,
    out: str | None = None,
    shards: int = DEFAULT_SHARDS,
    on_event: EventSink = ignore_events,
) -> SweepReport:
    """Sweep the two files and keep the results in ``store`` under the top node ``name``.

    The sweep's report and the load of its results go to ``on_event`` as they happen.
    """
    names = {**COLUMNS, **(columns or {})}
    pages = page_store_for(store)
    if pages.list(f"sweeps/{name}"):
        raise StoreError(f"The store already holds a sweep called {name!r}: choose another --name.")
    if not name or "/" in name:
        raise LoadError(f"A sweep's name must be a non-empty node name without '/', not {name!r}.")
    events = _timed(read_table(spark, events_path, input_format), [names["time"]], time_format)
    intervals = _timed(
        read_table(spark, intervals_path, input_format),
        [names["start"], names["end"]],
        time_format,
    )
    if pages.exists("store.json"):
        shards = open_version(pages).shards
    StoreWriter(pages, shards)  # creates the store if it is new, so the results can live in it
    report = SweepReport()
    with spark_errors(LoadError, "The sweep"):
        results = interval_sweep(
            spark,
            events,
            intervals,
            agg,
            closed,
            plan=plan,
            id_col=names["id"],
            time_col=names["time"],
            start_col=names["start"],
            end_col=names["end"],
            value_col=names["value"],
            report=report,
        )
        folder = f"sweeps/{name}"
        targets = [(pages, folder), *([(_out_folder(out), "")] if out else [])]
        results.mapInArrow(_parts_writer(targets), "files int").collect()
    spark.catalog.clearCache()  # the swept rows were cached for the writes above
    for line in report.lines():
        on_event(Message(line))
    where = f"{pages.location}/{folder}"
    job = _results_job(name, where, names["id"], names["time"], shards)
    result = run_load(spark, job, store, on_event=on_event)
    on_event(Message(f"results kept in {store} as version {result.version}: query '{name}/+/+/+'"))
    return report
