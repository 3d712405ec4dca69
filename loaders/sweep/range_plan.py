"""The sweep's range plan, for every aggregation and past memory: the generalised rows
(events ``a``, interval starts ``b+`` and ends ``b-``) in ranges of (id, time, kind)
with sampled bounds, so a hot id spans several partitions, each swept with a running
state. With a packed key the partitions need nothing from each other
(:mod:`loaders.sweep.packed_range`); otherwise Spark range-partitions and sorts the
rows (``repartitionByRange``), and what each partition's first and last ids opened
and closed is carried into the next partitions by the driver.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgpack
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import StructField, StructType

from loaders.sweep.columns import (
    END_TIME,
    ID,
    KEY,
    KIND,
    ROLE,
    TIME,
    VALUE,
    arrow_type,
    interval_bounds,
    summed_values,
    time_as_long,
)
from loaders.sweep.kernels import (
    END,
    EVENT,
    KIND_ORDER,
    START,
    Aggregation,
    PartitionSummary,
    RunningSums,
    carry_ins,
    carry_totals,
    replay,
    sweep_rows,
)
from loaders.sweep.packed_range import KeySample, Packing, packed_sweep, sample_fraction
from loaders.sweep.parquet_inputs import read_ranges
from loaders.sweep.report import SweepReport
from treestore.settings import task_started

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

__all__ = ["range_sweep"]

PART, HEAD, SUMMARY = "__partition", "__head", "__summary"


def range_sweep(
    spark: SparkSession,
    events: DataFrame,
    intervals: DataFrame,
    columns: dict[str, str],
    closed: str,
    aggregation: Aggregation,
    out_type: DataType,
    partitions: int | None,
    report: SweepReport,
) -> DataFrame:
    """The range plan: the generalised rows range-partitioned by (id, time, kind) with
    sampled bounds, each partition swept with a running state, carries added between them."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    generalised = _generalised(events, intervals, columns, closed)
    n = partitions or int(spark.conf.get("spark.sql.shuffle.partitions") or 8)
    read = read_ranges(events, intervals, columns, closed, lambda rows: sample_fraction(n, rows))
    # read on the driver: no counting job (and no sampling job below)
    ranges = read.counts if read is not None else _counted(events, intervals, columns, closed)
    packing = _packing(generalised, report, ranges)
    report.events, report.skipped_events = int(ranges["events"]), int(ranges["skipped_events"] or 0)
    report.intervals = int(ranges["intervals"])
    report.skipped_intervals = int(ranges["skipped_intervals"] or 0)
    if packing is not None:
        sample = None
        if read is not None:
            sample = KeySample.of(packing, closed, read.events, read.spans, read.fraction)
        kept = report.events - report.skipped_events
        kept += 2 * (report.intervals - report.skipped_intervals)
        packed = packed_sweep(
            generalised.events,
            generalised.spans,
            packing,
            (n, kept),
            closed,
            aggregation,
            events,
            columns,
            out_type,
            sample,
        )
        if packed.frame is not None:
            report.partitions, report.max_partition_rows, report.median_partition_rows = (
                packed.balance
            )
            report.sampled_rows = packed.sampled_rows
            return packed.frame
        report.notes.append(packed.refusal)
    rows = generalised.rows()
    if packing is not None:  # Spark sorts by the one packed key
        rows = rows.withColumn(KEY, packing.key())
    order = [F.col(KEY)] if packing is not None else [F.col(ID), F.col(TIME), F.col(KIND)]
    arranged = rows.repartitionByRange(n, *order).sortWithinPartitions(*order)
    # Python needs only the id, the role, the value and the events' own columns.
    arranged = arranged.select(ID, ROLE, VALUE, *[f"`{c}`" for c in events.columns])
    if aggregation.vectorized:
        swept = _sorted_rows_sum(arranged, aggregation, events, out_type)
        return _corrected(swept, out_type, report)
    arranged = arranged.persist(StorageLevel.MEMORY_AND_DISK)
    summary_rows = arranged.mapInArrow(_summary_task(), "summary binary").collect()
    summaries = [msgpack.unpackb(r["summary"], strict_map_key=False) for r in summary_rows]
    _balance(report, [s["rows"] for s in summaries])
    carry = carry_ins(summaries)
    schema = StructType([*events.schema.fields, StructField("value", out_type)])
    task = _sweep_task(aggregation, carry, events.columns, arrow_type(out_type, arranged))
    return arranged.mapInArrow(task, schema)


@dataclass(frozen=True)
class _Generalised:
    """The events' rows and the valid intervals as (id, start, end, value); :meth:`rows`
    makes the generalised rows from them."""

    events: DataFrame
    spans: DataFrame
    closed: str

    def rows(self) -> DataFrame:
        """The events' rows, then each interval's start row and end row."""
        from pyspark.sql import functions as F

        order = KIND_ORDER[self.closed]
        payload = [c for c in self.events.columns if c not in (ID, TIME, ROLE, KIND, VALUE)]
        nulls = [F.lit(None).cast(self.events.schema[c].dataType).alias(c) for c in payload]
        b_plus, b_minus = (
            self.spans.select(
                ID,
                F.col(time).alias(TIME),
                F.lit(role).alias(ROLE),
                F.lit(order[role]).alias(KIND),
                VALUE,
                *nulls,
            )
            for time, role in ((TIME, START), (END_TIME, END))
        )
        return self.events.unionByName(b_plus).unionByName(b_minus)


def _generalised(
    events: DataFrame,
    intervals: DataFrame,
    columns: dict[str, str],
    closed: str,
) -> _Generalised:
    """The generalised rows and the rest of :class:`_Generalised`."""
    from pyspark.sql import functions as F

    order = KIND_ORDER[closed]
    event_time = time_as_long(events, columns["time"])
    event_id = interval_id = F.col(f"`{columns['id']}`")
    value = F.col(f"`{columns['value']}`")
    kept_events = events.where(event_id.isNotNull() & event_time.isNotNull())
    start, end, valid = interval_bounds(intervals, columns, closed)
    kept_intervals = intervals.where(valid)
    payload = [F.col(f"`{c}`") for c in events.columns]
    a_rows = kept_events.select(
        event_id.alias(ID),
        event_time.alias(TIME),
        F.lit(EVENT).alias(ROLE),
        F.lit(order[EVENT]).alias(KIND),
        F.lit(None).cast(intervals.schema[columns["value"]].dataType).alias(VALUE),
        *payload,
    )
    spans = kept_intervals.select(
        interval_id.alias(ID), start.alias(TIME), end.alias(END_TIME), value.alias(VALUE)
    )
    return _Generalised(a_rows, spans, closed)


def _counted(
    events: DataFrame, intervals: DataFrame, columns: dict[str, str], closed: str
) -> dict[str, Any]:
    """One job counts the rows and the skipped ones and finds the kept rows' id and time
    ranges (for the packed key); ``_b`` names the intervals' (times: starts and ends)."""
    from pyspark.sql import functions as F

    event_time = time_as_long(events, columns["time"])
    event_id = interval_id = F.col(f"`{columns['id']}`")
    start, end, valid = interval_bounds(intervals, columns, closed)
    event_ok = event_id.isNotNull() & event_time.isNotNull()
    interval_ok = F.coalesce(valid, F.lit(False))
    counts = events.select(
        F.count(F.lit(1)).alias("events"),
        F.sum((~event_ok).cast("long")).alias("skipped_events"),
        F.min(F.when(event_ok, event_id)).alias("id_low"),
        F.max(F.when(event_ok, event_id)).alias("id_high"),
        F.min(F.when(event_ok, event_time)).alias("time_low"),
        F.max(F.when(event_ok, event_time)).alias("time_high"),
    ).crossJoin(
        intervals.select(
            F.count(F.lit(1)).alias("intervals"),
            F.sum((~interval_ok).cast("long")).alias("skipped_intervals"),
            F.min(F.when(interval_ok, interval_id)).alias("id_low_b"),
            F.max(F.when(interval_ok, interval_id)).alias("id_high_b"),
            F.min(F.when(interval_ok, start)).alias("time_low_b"),
            F.max(F.when(interval_ok, end)).alias("time_high_b"),
        )
    )
    row = counts.first()
    assert row is not None
    return row.asDict()


def _packing(
    generalised: _Generalised, report: SweepReport, ranges: dict[str, Any]
) -> Packing | None:
    """How one long sort key packs (id, time, kind), when ids and times are whole
    numbers that fit; else None."""
    from pyspark.sql.types import IntegralType

    events, spans = generalised.events, generalised.spans
    ids_whole = all(isinstance(f.schema[ID].dataType, IntegralType) for f in (events, spans))
    times = (events.schema[TIME], spans.schema[TIME], spans.schema[END_TIME])
    times_long = all(t.dataType.simpleString() == "bigint" for t in times)
    if not (ids_whole and times_long):
        return None
    lows = [v for v in (ranges["id_low"], ranges["id_low_b"]) if v is not None]
    highs = [v for v in (ranges["id_high"], ranges["id_high_b"]) if v is not None]
    t_lows = [v for v in (ranges["time_low"], ranges["time_low_b"]) if v is not None]
    t_highs = [v for v in (ranges["time_high"], ranges["time_high_b"]) if v is not None]
    if not lows or not t_lows:
        return None
    bounds = (min(lows), max(highs), min(t_lows), max(t_highs))
    id_bits = max(1, int(bounds[1] - bounds[0]).bit_length())
    time_bits = max(1, int(bounds[3] - bounds[2]).bit_length())
    if id_bits + time_bits + 2 > 63:
        report.notes.append("ids and times too wide to pack: sorting by three columns")
        return None
    report.packed_key = True
    return Packing(int(bounds[0]), int(bounds[2]), time_bits)


def _summary_task() -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Pass one: per partition, its first and last id and their net open values."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_started()
        from pyspark import TaskContext

        context = TaskContext.get()
        summary = PartitionSummary()
        for batch in batches:
            summary.feed(
                batch.column(ID).to_pylist(),
                batch.column(ROLE).to_pylist(),
                batch.column(VALUE).to_pylist(),
            )
        payload = msgpack.packb(summary.to_dict(context.partitionId() if context else 0))
        yield pa.RecordBatch.from_arrays([pa.array([payload], pa.binary())], ["summary"])

    return run


def _sweep_task(
    aggregation: Aggregation,
    carry: dict[int, tuple[Any, list[Any]]],
    event_columns: list[str],
    value_arrow_type: pa.DataType,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Pass two: sweep each partition from its carry-in; emit event rows with their value."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_started()
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context else 0
        state: tuple[Any, Any] | None = None
        if partition in carry:
            first_id, pairs = carry[partition]
            state = (first_id, replay(aggregation, [(v, c) for v, c in pairs]))
        for batch in batches:
            if batch.num_rows == 0:
                continue
            ids = batch.column(ID).to_pylist()
            roles = batch.column(ROLE).to_pylist()
            values = batch.column(VALUE).to_pylist()
            results, state = sweep_rows(aggregation, ids, roles, values, state)
            events = batch.filter(pc.equal(batch.column(ROLE), EVENT))
            if events.num_rows:
                columns = [events.column(c) for c in event_columns]
                value = pa.array(results, type=value_arrow_type)
                yield pa.RecordBatch.from_arrays([*columns, value], [*event_columns, "value"])

    return run


def _balance(report: SweepReport, sizes: list[int]) -> None:
    report.partitions = len(sizes)
    report.max_partition_rows = max(sizes, default=0)
    report.median_partition_rows = statistics.median(sizes) if sizes else 0


def _corrected(swept: DataFrame, out_type: DataType, report: SweepReport) -> DataFrame:
    result, sizes = _corrected_sums(swept, out_type)
    _balance(report, sizes)
    return result


def _schema(events: DataFrame, out_type: DataType) -> StructType:
    from pyspark.sql.types import BinaryType, BooleanType, IntegerType

    return StructType(
        [
            *events.schema.fields,
            StructField("value", out_type),
            StructField(PART, IntegerType()),
            StructField(HEAD, BooleanType()),
            StructField(SUMMARY, BinaryType()),
        ]
    )


def _swept_batch(
    columns: list[pa.Array], names: list[str], value: pa.Array, partition: int, head: np.ndarray
) -> pa.RecordBatch:
    """Event rows with their running value, partition and head flag."""
    rows = len(value)
    return pa.RecordBatch.from_arrays(
        [
            *columns,
            value,
            pa.array(np.full(rows, partition, dtype=np.int32)),
            pa.array(head),
            pa.nulls(rows, pa.binary()),
        ],
        names,
    )


def _summary_batch(
    fields: list[pa.Field], value_type: pa.DataType, summary: dict[str, Any], names: list[str]
) -> pa.RecordBatch:
    """The one row that carries a partition's summary to the driver."""
    return pa.RecordBatch.from_arrays(
        [
            *[pa.nulls(1, f.type) for f in fields],
            pa.nulls(1, value_type),
            pa.array([summary["partition"]], pa.int32()),
            pa.nulls(1, pa.bool_()),
            pa.array([msgpack.packb(summary)], pa.binary()),
        ],
        names,
    )


def _partition() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context else 0


def _sorted_rows_task(
    aggregation: Aggregation, fields: list[pa.Field], value_type: pa.DataType
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Rows already sorted by Spark: sweep batch by batch."""
    event_columns = [f.name for f in fields]
    names = [*event_columns, "value", PART, HEAD, SUMMARY]

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_started()
        partition = _partition()
        sums = RunningSums(aggregation)
        for batch in batches:
            if batch.num_rows == 0:
                continue
            ids = batch.column(ID).to_numpy(zero_copy_only=False)
            roles = batch.column(ROLE).to_numpy(zero_copy_only=False)
            values = summed_values(aggregation.name, batch.column(VALUE))
            running, head = sums.feed(ids, roles, values)
            is_event = roles == EVENT
            events = batch.filter(pa.array(is_event))
            if events.num_rows:
                columns = [events.column(c) for c in event_columns]
                value = pa.array(running[is_event], type=value_type)
                yield _swept_batch(columns, names, value, partition, head[is_event])
        yield _summary_batch(fields, value_type, sums.summary(partition), names)

    return run


def _sorted_rows_sum(
    arranged: DataFrame, aggregation: Aggregation, events: DataFrame, out_type: DataType
) -> DataFrame:
    """Sum/count over rows Spark sorted within range partitions: the swept rows, to be
    :func:`_corrected_sums`."""
    fields = [pa.field(f.name, arrow_type(f.dataType, arranged)) for f in events.schema.fields]
    task = _sorted_rows_task(aggregation, fields, arrow_type(out_type, arranged))
    return arranged.mapInArrow(task, _schema(events, out_type))


def _corrected_sums(swept: DataFrame, out_type: DataType) -> tuple[DataFrame, list[int]]:
    """The swept rows, kept, with each partition's head rows corrected by its carry-in;
    and each partition's row count."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    swept = swept.persist(StorageLevel.MEMORY_AND_DISK)
    rows = swept.where(F.col(SUMMARY).isNotNull()).select(SUMMARY).collect()
    summaries = [msgpack.unpackb(r[SUMMARY], strict_map_key=False) for r in rows]
    carry = carry_totals(summaries)
    correction = F.lit(0).cast(out_type)
    if carry:
        table = F.create_map(
            *[x for p, c in carry.items() for x in (F.lit(p), F.lit(c).cast(out_type))]
        )
        correction = F.when(
            F.col(HEAD), F.coalesce(table[F.col(PART)], F.lit(0).cast(out_type))
        ).otherwise(0)
    result = swept.where(F.col(SUMMARY).isNull()).withColumn(
        "value", (F.col("value") + correction).cast(out_type)
    )
    return result.drop(PART, HEAD, SUMMARY), [s["rows"] for s in summaries]
