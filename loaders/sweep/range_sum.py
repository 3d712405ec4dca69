"""Sum and count on the range plan: one sweep per partition from zero, then each
partition's rows of its first id corrected by what earlier partitions carried in.

When one long key packs (id, time, rank) (:class:`Packing`), only that key, the
interval's value and the events' columns the key does not hold cross the shuffle and
reach Python; each range partition is sorted there by numpy, with no sort in the JVM,
and the events' id and time are rebuilt from the key. Partitions are then sized so
that one fits a Python worker (:data:`ROWS_PER_SORTED_PARTITION`). Otherwise the rows
arrive sorted by Spark.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgpack
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import StructField, StructType

from loaders.sweep.columns import ID, KEY, KIND, ROLE, TIME, VALUE, arrow_type
from loaders.sweep.kernels import EVENT, KIND_ORDER, Aggregation, RunningSums, carry_totals

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

__all__ = [
    "ROWS_PER_SORTED_PARTITION",
    "Packing",
    "corrected",
    "sorted_partitions",
    "sorted_rows_sum",
    "unsorted_packed_sum",
]

PART, HEAD, SUMMARY = "__partition", "__head", "__summary"

ROWS_PER_SORTED_PARTITION = 4_000_000
"""At most this many generalised rows per partition sorted in a Python worker (about
16 bytes a row with the events' id and time rebuilt from the key)."""

OUT_BATCH = 65_536


@dataclass(frozen=True)
class Packing:
    """How the sort key packs (id, time, rank): ``(id - id_low) << (time_bits + 2) |
    (time - time_low) << 2 | rank``."""

    id_low: int
    time_low: int
    time_bits: int

    def key(self) -> Column:
        """The key of a generalised row."""
        from pyspark.sql import functions as F

        return (
            F.shiftleft((F.col(ID) - F.lit(self.id_low)).cast("long"), self.time_bits + 2)
            + F.shiftleft(F.col(TIME) - F.lit(self.time_low), 2)
            + F.col(KIND)
        )

    def relative_ids(self, keys: np.ndarray) -> np.ndarray:
        """Each key's id less ``id_low`` (the same order and equalities as the ids)."""
        return keys >> (self.time_bits + 2)

    def times(self, keys: np.ndarray) -> np.ndarray:
        """Each key's time."""
        return ((keys >> 2) & ((1 << self.time_bits) - 1)) + self.time_low


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
        partition = _partition()
        sums = RunningSums(aggregation)
        for batch in batches:
            if batch.num_rows == 0:
                continue
            ids = batch.column(ID).to_numpy(zero_copy_only=False)
            roles = batch.column(ROLE).to_numpy(zero_copy_only=False)
            values = pc.fill_null(batch.column(VALUE), 0).to_numpy(zero_copy_only=False)
            running, head = sums.feed(ids, roles, values)
            is_event = roles == EVENT
            events = batch.filter(pa.array(is_event))
            if events.num_rows:
                columns = [events.column(c) for c in event_columns]
                value = pa.array(running[is_event], type=value_type)
                yield _swept_batch(columns, names, value, partition, head[is_event])
        yield _summary_batch(fields, value_type, sums.summary(partition), names)

    return run


def sorted_rows_sum(
    arranged: DataFrame, aggregation: Aggregation, events: DataFrame, out_type: DataType
) -> DataFrame:
    """Sum/count over rows Spark sorted within range partitions: the swept rows, to be
    :func:`corrected`."""
    fields = [pa.field(f.name, arrow_type(f.dataType, arranged)) for f in events.schema.fields]
    task = _sorted_rows_task(aggregation, fields, arrow_type(out_type, arranged))
    return arranged.mapInArrow(task, _schema(events, out_type))


@dataclass(frozen=True)
class _Rebuilt:
    """Which event columns the sorted-in-Python sweep rebuilds from the key, and their types."""

    id_column: str | None
    time_column: str | None
    fields: list[pa.Field]


def _packed_task(
    aggregation: Aggregation,
    packing: Packing,
    closed: str,
    rebuilt: _Rebuilt,
    value_type: pa.DataType,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Rows in key range, unsorted: sort the partition by key with numpy, then sweep."""
    names = [*[f.name for f in rebuilt.fields], "value", PART, HEAD, SUMMARY]
    role_of_rank = np.zeros(4, dtype=np.int64)
    for role, rank in KIND_ORDER[closed].items():
        role_of_rank[rank] = role

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        partition = _partition()
        sums = RunningSums(aggregation)
        kept = [b for b in batches if b.num_rows]
        if kept:
            table = pa.Table.from_batches(kept)
            keys = table.column(KEY).to_numpy()
            order = np.argsort(keys)
            keys = keys[order]
            values = pc.fill_null(table.column(VALUE), 0).to_numpy()[order]
            ids = packing.relative_ids(keys)
            roles = role_of_rank[keys & 3]
            for low in range(0, len(keys), OUT_BATCH):
                high = low + OUT_BATCH
                running, head = sums.feed(ids[low:high], roles[low:high], values[low:high])
                is_event = roles[low:high] == EVENT
                if is_event.any():
                    columns = _event_columns(table, keys[low:high], order[low:high], is_event)
                    value = pa.array(running[is_event], type=value_type)
                    yield _swept_batch(columns, names, value, partition, head[is_event])
        yield _summary_batch(rebuilt.fields, value_type, sums.summary(partition), names)

    def _event_columns(
        table: pa.Table, keys: np.ndarray, order: np.ndarray, is_event: np.ndarray
    ) -> list[pa.Array]:
        picked = order[is_event]
        columns = []
        for field in rebuilt.fields:
            if field.name == rebuilt.id_column:
                ids = packing.relative_ids(keys[is_event]) + packing.id_low
                columns.append(pa.array(ids).cast(field.type))
            elif field.name == rebuilt.time_column:
                columns.append(pa.array(packing.times(keys[is_event])).cast(field.type))
            else:
                columns.append(table.column(field.name).take(picked).combine_chunks())
        return columns

    return run


def unsorted_packed_sum(
    rows: DataFrame,
    packing: Packing,
    partitions: int,
    closed: str,
    aggregation: Aggregation,
    events: DataFrame,
    columns: dict[str, str],
    out_type: DataType,
) -> DataFrame:
    """Sum/count over packed keys range-partitioned by Spark and sorted in Python: the
    swept rows, to be :func:`corrected`."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegralType

    def integral(column: str) -> str | None:
        return column if isinstance(events.schema[column].dataType, IntegralType) else None

    id_column, time_column = integral(columns["id"]), integral(columns["time"])
    passed = [c for c in events.columns if c not in (id_column, time_column)]
    narrow = rows.select(KEY, VALUE, *[F.col(f"`{c}`") for c in passed])
    arranged = narrow.repartitionByRange(partitions, F.col(KEY))
    fields = [pa.field(f.name, arrow_type(f.dataType, rows)) for f in events.schema.fields]
    rebuilt = _Rebuilt(id_column, time_column, fields)
    task = _packed_task(aggregation, packing, closed, rebuilt, arrow_type(out_type, rows))
    return arranged.mapInArrow(task, _schema(events, out_type))


def sorted_partitions(requested: int, rows: int) -> int:
    """Enough range partitions that none holds more than one Python worker sorts."""
    return max(requested, math.ceil(rows / ROWS_PER_SORTED_PARTITION))


def corrected(swept: DataFrame, out_type: DataType) -> tuple[DataFrame, list[int]]:
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
