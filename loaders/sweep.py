"""The interval sweep: a time-range join without a join, skew-proof.

For each event row of ``events(id, time, ...)``, aggregate the values of the
``intervals(id, start, end, value)`` with the same id that cover the event's
time, without the many-to-many non-equi join:

1. Generalise: events become ``a`` rows, each interval a ``b+`` row at its start
   and a ``b-`` row at its end. At equal times the kinds sort in the order that
   ``closed`` implies (see :data:`loaders.sweep_kernels.KIND_ORDER`).
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
import pyarrow as pa
import pyarrow.compute as pc

from loaders.sweep_kernels import (
    CLOSED,
    END,
    EVENT,
    KIND_ORDER,
    START,
    Aggregation,
    PartitionSummary,
    carry_ins,
    make_aggregation,
    replay,
    sweep_rows,
)
from treestore.errors import LoadError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
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
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The report as printable lines."""
        return [
            f"events {self.events:,} (skipped {self.skipped_events:,} with a null id or time)",
            f"intervals {self.intervals:,} (skipped {self.skipped_intervals:,}: null id or time, "
            "start after end, or empty)",
            f"partitions {self.partitions}: max {self.max_partition_rows:,} rows, "
            f"median {self.median_partition_rows:,.0f} rows; packed sort key: {self.packed_key}",
            *self.notes,
        ]


def _time_as_long(frame: DataFrame, column: str) -> Column:
    from pyspark.sql import functions as F
    from pyspark.sql.types import DateType, IntegralType, TimestampNTZType, TimestampType

    data_type = frame.schema[column].dataType
    col = F.col(f"`{column}`")
    if isinstance(data_type, TimestampType | TimestampNTZType):
        return F.unix_micros(col.cast("timestamp"))
    if isinstance(data_type, DateType):
        return F.unix_date(col)
    if isinstance(data_type, IntegralType):
        return col.cast("long")
    return col.cast("double")


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
    event_time = _time_as_long(events, columns["time"])
    start = _time_as_long(intervals, columns["start"])
    end = _time_as_long(intervals, columns["end"])
    event_id = F.col(f"`{columns['id']}`")
    interval_id = F.col(f"`{columns['id']}`")
    value = F.col(f"`{columns['value']}`")
    kept_events = events.where(event_id.isNotNull() & event_time.isNotNull())
    valid = interval_id.isNotNull() & start.isNotNull() & end.isNotNull() & (start <= end)
    if closed != "both":
        valid = valid & (start < end)
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
    b_plus = kept_intervals.select(
        interval_id.alias(ID),
        start.alias(TIME),
        F.lit(START).alias(ROLE),
        F.lit(order[START]).alias(KIND),
        value.alias(VALUE),
        *nulls,
    )
    b_minus = kept_intervals.select(
        interval_id.alias(ID),
        end.alias(TIME),
        F.lit(END).alias(ROLE),
        F.lit(order[END]).alias(KIND),
        value.alias(VALUE),
        *nulls,
    )
    rows = a_rows.unionByName(b_plus).unionByName(b_minus)
    counts = events.select(
        F.count(F.lit(1)).alias("events"),
        F.sum((event_id.isNull() | event_time.isNull()).cast("long")).alias("skipped_events"),
    ).crossJoin(
        intervals.select(
            F.count(F.lit(1)).alias("intervals"),
            F.sum((~F.coalesce(valid, F.lit(False))).cast("long")).alias("skipped_intervals"),
        )
    )
    return kept_events, rows, counts


def _packed_key(spark: SparkSession, rows: DataFrame, report: SweepReport) -> DataFrame:
    """Add one long sort key (id, time, kind) when ids and times are whole numbers that fit."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegralType

    if (
        not isinstance(rows.schema[ID].dataType, IntegralType)
        or rows.schema[TIME].dataType.simpleString() != "bigint"
    ):
        return rows.withColumn(KEY, F.lit(0).cast("long"))
    bounds = rows.select(F.min(ID), F.max(ID), F.min(TIME), F.max(TIME)).first()
    if bounds is None or bounds[0] is None:
        return rows.withColumn(KEY, F.lit(0).cast("long"))
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
        report: filled with counts and partition balance when given.

    Returns:
        The events' columns plus ``value``; an event no interval covers gets the
        aggregation's empty value (0, an empty list, or null for min/max).
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    if closed not in CLOSED:
        raise ValueError(f"closed must be one of {', '.join(CLOSED)}, not {closed!r}")
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
    _, rows, counts = _generalised(events, intervals, columns, closed)
    rows = _packed_key(spark, rows, report)
    count_row = counts.first()
    assert count_row is not None
    report.events, report.skipped_events = int(count_row[0]), int(count_row[1] or 0)
    report.intervals, report.skipped_intervals = int(count_row[2]), int(count_row[3] or 0)
    n = partitions or int(spark.conf.get("spark.sql.shuffle.partitions") or 8)
    order = [F.col(KEY)] if report.packed_key else [F.col(ID), F.col(TIME), F.col(KIND)]
    arranged = rows.repartitionByRange(n, *order).sortWithinPartitions(*order)
    arranged = arranged.persist(StorageLevel.MEMORY_AND_DISK)
    summary_rows = arranged.mapInArrow(_summary_task(), "summary binary").collect()
    summaries = [msgpack.unpackb(r["summary"], strict_map_key=False) for r in summary_rows]
    sizes = [s["rows"] for s in summaries]
    report.partitions = len(sizes)
    report.max_partition_rows = max(sizes, default=0)
    report.median_partition_rows = statistics.median(sizes) if sizes else 0
    carry = carry_ins(summaries)
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import StructField, StructType

    out_type = _value_type(aggregation, intervals.schema[value_col].dataType, value_type)
    schema = StructType([*events.schema.fields, StructField("value", out_type)])
    task = _sweep_task(aggregation, carry, events.columns, to_arrow_type(out_type))
    return arranged.mapInArrow(task, schema)
