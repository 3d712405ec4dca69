"""The interval sweep: a time-range join without a join, skew-proof.

For each event row of ``events(id, time, ...)``, aggregate the values of the
``intervals(id, start, end, value)`` with the same id that cover the event's
time, without the many-to-many non-equi join:

1. Generalise: events become ``a`` rows, each interval a ``b+`` row at its start
   and a ``b-`` row at its end. At equal times the kinds sort in the order that
   ``closed`` implies (see :data:`loaders.sweep.kernels.KIND_ORDER`).
2. Range-partition by (id, time, kind) with sampled bounds
   (``repartitionByRange``), so one hot id spans several partitions instead of
   overloading one task, and sort within partitions. When ids and times are
   whole numbers that fit, the three are packed into one long sort key
   (Spark's sort then compares one prefix instead of three columns).
3. A first, light pass reports per partition its first and last id and, for
   them, the values opened minus closed there. The driver adds these up into
   each partition's *carry-in*: the intervals of its first id still open at its
   lower bound.
4. The sweep: each partition starts its first id from the carry-in and walks its
   rows with a running state (vectorized cumulative sums for ``sum``/``count``).

That is the ``range`` plan, for every aggregation. For ``sum`` and ``count``
with intervals that fit in memory, the ``broadcast`` plan
(:mod:`loaders.sweep.broadcast_plan`) computes the same values without moving or
sorting the events: per id, the running totals of the ``b+`` and ``b-`` rows
sorted by time answer each event with two binary searches.

Rows with a null id or time, intervals with ``start > end`` and, for half-open
or open intervals, empty intervals (``start == end``) are not swept; they are
counted in the report.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgpack
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import StructField, StructType

from loaders.sweep.broadcast_plan import broadcast_refusal, broadcast_sweep
from loaders.sweep.columns import arrow_type, interval_bounds, time_as_long
from loaders.sweep.kernels import (
    END,
    EVENT,
    KIND_ORDER,
    START,
    Aggregation,
    PartitionSummary,
    carry_ins,
    make_aggregation,
    replay,
    running_totals,
    sweep_rows,
)
from loaders.sweep.options import BROADCAST_LIMIT, CLOSED, PLANS
from treestore.errors import LoadError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

__all__ = ["SweepReport", "interval_sweep"]

ID, TIME, ROLE, KIND, VALUE, KEY = "__id", "__time", "__role", "__kind", "__value", "__key"


@dataclass
class SweepReport:
    """What a sweep did: rows swept and skipped, and how the partitions were balanced."""

    events: int = 0
    intervals: int = 0
    skipped_events: int = 0
    skipped_intervals: int = 0
    partitions: int = 0
    max_partition_rows: int = 0
    median_partition_rows: float = 0.0
    packed_key: bool = False
    plan: str = "range"
    index_bytes: int = 0
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The report as printable lines."""
        if self.plan == "broadcast":
            how = (
                "plan broadcast: the intervals indexed on the driver "
                f"({self.index_bytes / 1e6:,.1f} MB), looked up where the events lie (no shuffle)"
            )
        else:
            how = (
                f"plan range: partitions {self.partitions}: max {self.max_partition_rows:,} rows, "
                f"median {self.median_partition_rows:,.0f} rows; packed sort key: {self.packed_key}"
            )
        return [
            f"events {self.events:,} (skipped {self.skipped_events:,} with a null id or time)",
            f"intervals {self.intervals:,} (skipped {self.skipped_intervals:,}: null id or time, "
            "start after end, or empty)",
            how,
            *self.notes,
        ]


def _value_type(
    aggregation: Aggregation, value_type: DataType, custom_type: str | None
) -> DataType:
    from pyspark.sql.types import ArrayType, DoubleType, FractionalType, LongType

    if aggregation.name == "count":
        return LongType()
    if aggregation.name == "sum":
        return DoubleType() if isinstance(value_type, FractionalType) else LongType()
    if aggregation.name in ("set", "list"):
        return ArrayType(value_type)
    if aggregation.name in ("min", "max"):
        return value_type
    if custom_type is None:
        return DoubleType()
    from pyspark.sql.types import _parse_datatype_string

    return _parse_datatype_string(custom_type)


def _generalised(
    events: DataFrame,
    intervals: DataFrame,
    columns: dict[str, str],
    closed: str,
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(events kept, generalised rows, skipped-row counts)."""
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
    nulls = [F.lit(None).cast(events.schema[c].dataType).alias(c) for c in events.columns]
    b_plus, b_minus = (
        kept_intervals.select(
            interval_id.alias(ID),
            time.alias(TIME),
            F.lit(role).alias(ROLE),
            F.lit(order[role]).alias(KIND),
            value.alias(VALUE),
            *nulls,
        )
        for time, role in ((start, START), (end, END))
    )
    rows = a_rows.unionByName(b_plus).unionByName(b_minus)
    # One job counts the skipped rows and finds the id and time ranges (for the packed key).
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
    return kept_events, rows, counts


def _packed_key(rows: DataFrame, report: SweepReport, ranges: Any) -> DataFrame:
    """Add one long sort key (id, time, kind) when ids and times are whole numbers that fit."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegralType

    if (
        not isinstance(rows.schema[ID].dataType, IntegralType)
        or rows.schema[TIME].dataType.simpleString() != "bigint"
    ):
        return rows.withColumn(KEY, F.lit(0).cast("long"))
    lows = [v for v in (ranges["id_low"], ranges["id_low_b"]) if v is not None]
    highs = [v for v in (ranges["id_high"], ranges["id_high_b"]) if v is not None]
    t_lows = [v for v in (ranges["time_low"], ranges["time_low_b"]) if v is not None]
    t_highs = [v for v in (ranges["time_high"], ranges["time_high_b"]) if v is not None]
    if not lows or not t_lows:
        return rows.withColumn(KEY, F.lit(0).cast("long"))
    bounds = (min(lows), max(highs), min(t_lows), max(t_highs))
    id_bits = max(1, int(bounds[1] - bounds[0]).bit_length())
    time_bits = max(1, int(bounds[3] - bounds[2]).bit_length())
    if id_bits + time_bits + 2 > 63:
        report.notes.append("ids and times too wide to pack: sorting by three columns")
        return rows.withColumn(KEY, F.lit(0).cast("long"))
    report.packed_key = True
    key = (
        F.shiftleft((F.col(ID) - F.lit(bounds[0])).cast("long"), time_bits + 2)
        + F.shiftleft(F.col(TIME) - F.lit(bounds[2]), 2)
        + F.col(KIND)
    )
    return rows.withColumn(KEY, key)


def _summary_task() -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Pass one: per partition, its first and last id and their net open values."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
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
            if aggregation.vectorized:
                ids = batch.column(ID).to_numpy(zero_copy_only=False)
                roles = batch.column(ROLE).to_numpy(zero_copy_only=False)
                values = pc.fill_null(batch.column(VALUE), 0).to_numpy(zero_copy_only=False)
            else:
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


def interval_sweep(
    spark: SparkSession,
    events: DataFrame,
    intervals: DataFrame,
    agg: str | tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]] = "sum",
    closed: str = "both",
    *,
    id_col: str = "id",
    time_col: str = "time",
    start_col: str = "start",
    end_col: str = "end",
    value_col: str = "points",
    initial: Any = 0,
    value_type: str | None = None,
    partitions: int | None = None,
    plan: str = "auto",
    broadcast_limit: int = BROADCAST_LIMIT,
    report: SweepReport | None = None,
) -> DataFrame:
    """Aggregate, for every event, the values of the intervals with its id that cover its time.

    Args:
        spark: the session to run on.
        events: rows with ``id_col`` and ``time_col`` (every column is kept).
        intervals: rows with ``id_col``, ``start_col``, ``end_col``, ``value_col``.
        agg: ``sum`` (the seed), ``count``, ``set``, ``list``, ``min``, ``max``,
            or a pair of functions ``(add, remove)`` taking and returning a state
            that starts as ``initial``; ``value_type`` is then its Spark type.
        closed: which ends are inside: ``both`` ([s, e], the default, as the
            seed's SQL), ``left`` ([s, e)), ``right`` ((s, e]) or ``neither``.
        partitions: how many range partitions (default: the shuffle partitions).
        plan: ``range`` sweeps range partitions of the generalised rows (every
            aggregation); ``broadcast`` (sum and count) indexes the intervals on
            the driver and looks the events up where they lie, without a shuffle;
            ``auto`` (the default) broadcasts sum and count when at most
            ``broadcast_limit`` intervals are valid.
        broadcast_limit: the most intervals ``auto`` broadcasts (the index costs
            about 33 bytes an interval in every Python worker).
        report: filled with counts and partition balance when given.

    Returns:
        The events' columns plus ``value``; an event no interval covers gets the
        aggregation's empty value (0, an empty list, or null for min/max). The
        swept rows stay cached (memory, then disk) so that the sweep runs once;
        ``spark.catalog.clearCache()`` releases them.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    if closed not in CLOSED:
        raise ValueError(f"closed must be one of {', '.join(CLOSED)}, not {closed!r}")
    if plan not in PLANS:
        raise ValueError(f"plan must be one of {', '.join(PLANS)}, not {plan!r}")
    aggregation = make_aggregation(agg, initial)
    report = report if report is not None else SweepReport()
    columns = {
        "id": id_col,
        "time": time_col,
        "start": start_col,
        "end": end_col,
        "value": value_col,
    }
    for frame, needed in ((events, ("id", "time")), (intervals, ("id", "start", "end", "value"))):
        missing = [columns[n] for n in needed if columns[n] not in frame.columns]
        if missing:
            raise LoadError(
                f"The sweep input has no column {', '.join(missing)} "
                f"(it has {', '.join(frame.columns)})."
            )
    if "value" in events.columns:
        raise LoadError("The events already have a column called 'value'; rename it first.")
    out_type = _value_type(aggregation, intervals.schema[value_col].dataType, value_type)
    if _broadcasts(plan, aggregation, events, intervals, id_col, report):
        result, counted = broadcast_sweep(
            spark,
            events,
            intervals,
            columns,
            closed=closed,
            count=agg == "count",
            out_type=out_type,
            limit=broadcast_limit if plan == "auto" else None,
        )
        report.events, report.skipped_events = counted.events, counted.skipped_events
        report.intervals, report.skipped_intervals = counted.intervals, counted.skipped_intervals
        if result is not None:
            report.plan, report.index_bytes = "broadcast", counted.index_bytes
            return result
        valid = counted.intervals - counted.skipped_intervals
        report.notes.append(
            f"range plan: {valid:,} intervals are more than the broadcast limit {broadcast_limit:,}"
        )
    _, rows, counts = _generalised(events, intervals, columns, closed)
    count_row = counts.first()
    assert count_row is not None
    rows = _packed_key(rows, report, count_row)
    report.events, report.skipped_events = int(count_row[0]), int(count_row[1] or 0)
    report.intervals = int(count_row["intervals"])
    report.skipped_intervals = int(count_row["skipped_intervals"] or 0)
    n = partitions or int(spark.conf.get("spark.sql.shuffle.partitions") or 8)
    order = [F.col(KEY)] if report.packed_key else [F.col(ID), F.col(TIME), F.col(KIND)]
    arranged = rows.repartitionByRange(n, *order).sortWithinPartitions(*order)
    # Python needs only the id, the role, the value and the events' own columns.
    arranged = arranged.select(ID, ROLE, VALUE, *[f"`{c}`" for c in events.columns])
    if aggregation.vectorized:
        return _one_pass_sum(arranged, aggregation, events, out_type, report)
    arranged = arranged.persist(StorageLevel.MEMORY_AND_DISK)
    summary_rows = arranged.mapInArrow(_summary_task(), "summary binary").collect()
    summaries = [msgpack.unpackb(r["summary"], strict_map_key=False) for r in summary_rows]
    _balance(report, [s["rows"] for s in summaries])
    carry = carry_ins(summaries)
    schema = StructType([*events.schema.fields, StructField("value", out_type)])
    task = _sweep_task(aggregation, carry, events.columns, arrow_type(out_type, arranged))
    return arranged.mapInArrow(task, schema)


def _broadcasts(
    plan: str,
    aggregation: Aggregation,
    events: DataFrame,
    intervals: DataFrame,
    id_col: str,
    report: SweepReport,
) -> bool:
    """Whether to try the broadcast plan (and why not, in the report's notes)."""
    if plan == "range":
        return False
    refusal = broadcast_refusal(events, intervals, id_col, aggregation.vectorized)
    if refusal and plan == "broadcast":
        raise LoadError(f"The broadcast plan cannot run this sweep: {refusal}; use plan 'range'.")
    if refusal and aggregation.vectorized:
        report.notes.append(f"range plan: {refusal}")
    return not refusal


def _balance(report: SweepReport, sizes: list[int]) -> None:
    report.partitions = len(sizes)
    report.max_partition_rows = max(sizes, default=0)
    report.median_partition_rows = statistics.median(sizes) if sizes else 0


PART, HEAD, SUMMARY = "__partition", "__head", "__summary"


def _local_sum_task(
    aggregation: Aggregation, event_fields: list[pa.Field], value_arrow_type: pa.DataType
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The one pass of sum/count: sweep from zero, flag the first id's rows, summarize."""
    event_columns = [f.name for f in event_fields]

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context else 0
        state: tuple[Any, Any] | None = None
        first: Any = None
        first_net: Any = 0
        head_open = True
        rows = 0
        names = [*event_columns, "value", PART, HEAD, SUMMARY]
        for batch in batches:
            if batch.num_rows == 0:
                continue
            rows += batch.num_rows
            ids = batch.column(ID).to_numpy(zero_copy_only=False)
            roles = batch.column(ROLE).to_numpy(zero_copy_only=False)
            values = pc.fill_null(batch.column(VALUE), 0).to_numpy(zero_copy_only=False)
            if first is None:
                first = ids[0].item() if hasattr(ids[0], "item") else ids[0]
            running = running_totals(aggregation, ids, roles, values, state)
            head = np.zeros(len(ids), dtype=bool)
            if head_open:
                other = np.flatnonzero(ids != ids[0]) if ids[0] == first else np.array([0])
                end = int(other[0]) if len(other) else len(ids)
                head[:end] = True
                if end:
                    first_net = running[end - 1].item()
                head_open = end == len(ids)
            last = ids[-1].item() if hasattr(ids[-1], "item") else ids[-1]
            state = (last, running[-1].item())
            is_event = roles == EVENT
            events = batch.filter(pa.array(is_event))
            if events.num_rows:
                columns = [events.column(c) for c in event_columns]
                yield pa.RecordBatch.from_arrays(
                    [
                        *columns,
                        pa.array(running[is_event], type=value_arrow_type),
                        pa.array(np.full(events.num_rows, partition, dtype=np.int32)),
                        pa.array(head[is_event]),
                        pa.nulls(events.num_rows, pa.binary()),
                    ],
                    names,
                )
        last_id, last_net = state if state is not None else (None, 0)
        summary = {
            "partition": partition,
            "first": first,
            "last": last_id,
            "rows": rows,
            "first_net": first_net,
            "last_net": last_net,
        }
        empty = [pa.nulls(1, f.type) for f in event_fields] + [pa.nulls(1, value_arrow_type)]
        yield pa.RecordBatch.from_arrays(
            [
                *empty,
                pa.array([partition], pa.int32()),
                pa.nulls(1, pa.bool_()),
                pa.array([msgpack.packb(summary)], pa.binary()),
            ],
            names,
        )

    return run


def carry_totals(summaries: list[dict[str, Any]]) -> dict[int, Any]:
    """Each partition's carry-in for sum/count: its first id's total from earlier partitions."""
    carry: dict[int, Any] = {}
    open_id: Any = object()
    total: Any = 0
    for summary in sorted(summaries, key=lambda s: s["partition"]):
        if summary["rows"] == 0:
            continue
        first, last = summary["first"], summary["last"]
        if first == open_id and total:
            carry[summary["partition"]] = total
        if first == last and first == open_id:
            total += summary["first_net"]
        else:
            open_id, total = last, summary["last_net"]
    return carry


def _one_pass_sum(
    arranged: DataFrame,
    aggregation: Aggregation,
    events: DataFrame,
    out_type: DataType,
    report: SweepReport,
) -> DataFrame:
    """sum/count in one sweep: results are corrected afterwards by each partition's carry-in."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, BooleanType, IntegerType

    value_arrow = arrow_type(out_type, arranged)
    fields = [pa.field(f.name, arrow_type(f.dataType, arranged)) for f in events.schema.fields]
    task = _local_sum_task(aggregation, fields, value_arrow)
    schema = StructType(
        [
            *events.schema.fields,
            StructField("value", out_type),
            StructField(PART, IntegerType()),
            StructField(HEAD, BooleanType()),
            StructField(SUMMARY, BinaryType()),
        ]
    )
    swept = arranged.mapInArrow(task, schema).persist(StorageLevel.MEMORY_AND_DISK)
    rows = swept.where(F.col(SUMMARY).isNotNull()).select(SUMMARY).collect()
    summaries = [msgpack.unpackb(r[SUMMARY], strict_map_key=False) for r in rows]
    _balance(report, [s["rows"] for s in summaries])
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
    return result.drop(PART, HEAD, SUMMARY)
