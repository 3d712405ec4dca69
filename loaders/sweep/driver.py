"""The interval sweep: a time-range join without a join, skew-proof.

For each event row of ``events(id, time, ...)``, aggregate the values of the
``intervals(id, start, end, value)`` with the same id that cover the event's
time, without the many-to-many non-equi join:

1. Generalise: events become ``a`` rows, each interval a ``b+`` row at its start
   and a ``b-`` row at its end. At equal times the kinds sort in the order that
   ``closed`` implies (see :data:`loaders.sweep.kernels.KIND_ORDER`).
2. Range-partition by (id, time, kind) with sampled bounds, so one hot id spans
   several partitions instead of overloading one task. When ids and times are
   whole numbers that fit, the three are packed into one long key
   (:mod:`loaders.sweep.packed_range`): the driver samples the keys and places
   the bounds, every interval goes to each partition it spans, so each
   partition is swept from an empty state (for ``sum`` and ``count``, its
   intervals' starts and ends sorted by numpy and its events looked up in them;
   otherwise the whole partition sorted by numpy and swept), and steps 3 and 4
   below are not needed. Otherwise Spark range-partitions
   (``repartitionByRange``) and sorts within partitions.
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

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loaders.sweep.broadcast_plan import CONNECT_BROADCAST, broadcast_refusal, broadcast_sweep
from loaders.sweep.kernels import Aggregation, make_aggregation
from loaders.sweep.options import (
    BROADCAST_LIMIT,
    CLOSED,
    COLUMNS,
    DEFAULT_AGG,
    DEFAULT_CLOSED,
    DEFAULT_PLAN,
    PLANS,
)
from loaders.sweep.range_plan import range_sweep
from loaders.sweep.report import SweepReport
from treestore.errors import LoadError
from treestore.spark import is_connect

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

__all__ = ["SweepReport", "interval_sweep"]


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


def interval_sweep(
    spark: SparkSession,
    events: DataFrame,
    intervals: DataFrame,
    agg: str | tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]] = DEFAULT_AGG,
    closed: str = DEFAULT_CLOSED,
    *,
    id_col: str = COLUMNS["id"],
    time_col: str = COLUMNS["time"],
    start_col: str = COLUMNS["start"],
    end_col: str = COLUMNS["end"],
    value_col: str = COLUMNS["value"],
    initial: Any = 0,
    value_type: str | None = None,
    partitions: int | None = None,
    plan: str = DEFAULT_PLAN,
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
        partitions: how many range partitions (default: the shuffle partitions);
            with a packed key, more when one would hold over about 4M rows to
            sort, and fewer when the sampled keys repeat.
        plan: ``range`` sweeps range partitions of the generalised rows (every
            aggregation); ``broadcast`` (sum and count) indexes the intervals on
            the driver and looks the events up where they lie, without a shuffle;
            ``auto`` (the default) broadcasts sum and count when at most
            ``broadcast_limit`` intervals are valid.
        broadcast_limit: the most intervals ``auto`` broadcasts (the index costs
            24 to 32 bytes an interval in every Python worker).
        report: filled with counts and partition balance when given.

    Returns:
        The events' columns plus ``value``; an event no interval covers gets the
        aggregation's empty value (0, an empty list, or null for min/max). With
        a packed key the range plan's result is computed when used (each action
        sweeps again); otherwise the swept rows stay cached (memory, then disk)
        so that the sweep runs once, and ``spark.catalog.clearCache()`` releases
        them.
    """
    spec = _validate(
        events,
        intervals,
        agg,
        closed,
        {"id": id_col, "time": time_col, "start": start_col, "end": end_col, "value": value_col},
        initial,
        value_type,
        partitions,
        plan,
        broadcast_limit,
    )
    report = report if report is not None else SweepReport()
    if _broadcasts(spec, events, intervals, report):
        result = _broadcast(spark, events, intervals, spec, report)
        if result is not None:
            return result
    return range_sweep(
        spark,
        events,
        intervals,
        spec.columns,
        spec.closed,
        spec.aggregation,
        spec.out_type,
        spec.partitions,
        report,
    )


@dataclass(frozen=True)
class SweepSpec:
    """A sweep's options, validated against its inputs."""

    columns: dict[str, str]  # by role: id, time, start, end, value
    closed: str
    aggregation: Aggregation
    out_type: DataType
    plan: str
    partitions: int | None
    broadcast_limit: int


def _validate(
    events: DataFrame,
    intervals: DataFrame,
    agg: str | tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]],
    closed: str,
    columns: dict[str, str],
    initial: Any,
    value_type: str | None,
    partitions: int | None,
    plan: str,
    broadcast_limit: int,
) -> SweepSpec:
    """Check the options and that the inputs have the columns they name."""
    if closed not in CLOSED:
        raise ValueError(f"closed must be one of {', '.join(CLOSED)}, not {closed!r}")
    if plan not in PLANS:
        raise ValueError(f"plan must be one of {', '.join(PLANS)}, not {plan!r}")
    aggregation = make_aggregation(agg, initial)
    for frame, needed in ((events, ("id", "time")), (intervals, ("id", "start", "end", "value"))):
        missing = [columns[n] for n in needed if columns[n] not in frame.columns]
        if missing:
            raise LoadError(
                f"The sweep input has no column {', '.join(missing)} "
                f"(it has {', '.join(frame.columns)})."
            )
    if "value" in events.columns:
        raise LoadError("The events already have a column called 'value'; rename it first.")
    out_type = _value_type(aggregation, intervals.schema[columns["value"]].dataType, value_type)
    return SweepSpec(columns, closed, aggregation, out_type, plan, partitions, broadcast_limit)


def _broadcast(
    spark: SparkSession,
    events: DataFrame,
    intervals: DataFrame,
    spec: SweepSpec,
    report: SweepReport,
) -> DataFrame | None:
    """The broadcast plan, or None (with a note) when the intervals are past its limit."""
    result, counted = broadcast_sweep(
        spark,
        events,
        intervals,
        spec.columns,
        closed=spec.closed,
        count=spec.aggregation.name == "count",
        out_type=spec.out_type,
        limit=spec.broadcast_limit if spec.plan == "auto" else None,
    )
    report.intervals, report.skipped_intervals = counted.intervals, counted.skipped_intervals
    if result is not None:
        report.plan, report.index_bytes = "broadcast", counted.index_bytes
        report.count_events_when_read(counted.count_events)
        if is_connect(spark):
            report.notes.append(f"broadcast plan: {CONNECT_BROADCAST}")
        return result
    if counted.refusal:
        if spec.plan == "broadcast":
            raise LoadError(
                f"The broadcast plan cannot run this sweep: {counted.refusal}; use plan 'range'."
            )
        report.notes.append(f"range plan: {counted.refusal}")
        return None
    valid = counted.intervals - counted.skipped_intervals
    report.notes.append(
        f"range plan: {valid:,} intervals are more than the broadcast limit "
        f"{spec.broadcast_limit:,}"
    )
    return None


def _broadcasts(
    spec: SweepSpec, events: DataFrame, intervals: DataFrame, report: SweepReport
) -> bool:
    """Whether to try the broadcast plan (and why not, in the report's notes)."""
    if spec.plan == "range":
        return False
    refusal = broadcast_refusal(events, intervals, spec.columns["id"], spec.aggregation.vectorized)
    if refusal and spec.plan == "broadcast":
        raise LoadError(f"The broadcast plan cannot run this sweep: {refusal}; use plan 'range'.")
    if refusal and spec.aggregation.vectorized:
        report.notes.append(f"range plan: {refusal}")
    return not refusal
