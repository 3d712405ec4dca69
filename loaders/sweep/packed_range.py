"""The range plan when one long key packs (id, time, rank) (:class:`Packing`): partitions
that need nothing from each other.

The driver samples the keys (or is given a sample it read itself: :class:`KeySample`)
and picks the partitions' bounds; an event goes to the partition its key falls in
(``repartitionById``), and an interval, as one row (the keys of its start and end), to
every partition from its start's to its end's, where it makes a start row and an end
row, so each partition is swept from an empty state: no carries between partitions,
nothing cached, and the result is computed once, when it is used. Only the key, the
interval's value and the events' columns the key does not hold cross the shuffle. In
its Python worker (no sort in the JVM) a partition of ``sum`` or ``count`` sorts its
starts and ends apart with numpy and looks its events up in them; one of another
aggregation is sorted whole by numpy and swept. The events' id and time are rebuilt
from the key. Partitions are sized so that one fits a Python worker
(:data:`ROWS_PER_SORTED_PARTITION`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import StructField, StructType

from loaders.sweep.columns import (
    END_TIME,
    ID,
    KEY,
    KIND,
    TIME,
    VALUE,
    arrow_type,
    summed_values,
)
from loaders.sweep.cover_index import open_totals
from loaders.sweep.kernels import (
    END,
    EVENT,
    KIND_ORDER,
    START,
    Aggregation,
    summable,
    sweep_rows,
)
from treestore.settings import task_started

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

__all__ = [
    "ROWS_PER_SORTED_PARTITION",
    "KeySample",
    "PackedSweep",
    "Packing",
    "packed_sweep",
    "sample_fraction",
]

ROWS_PER_SORTED_PARTITION = 4_000_000
"""At most about this many rows per partition sorted in a Python worker (16 bytes a
row when the events' id and time are rebuilt from the key). When the sample foresees
a partition of more than twice this (copies of long intervals, or many rows with one
key, which no bound can split), the plan sorts in Spark and carries instead."""

SAMPLE_ROWS_PER_PARTITION = 1_000
"""Keys sampled per partition to place the bounds (at least 10,000 in all)."""

OUT_BATCH = 65_536
PART, END_KEY = "__part", "__end_key"


@dataclass(frozen=True)
class Packing:
    """How the sort key packs (id, time, rank): ``(id - id_low) << (time_bits + 2) |
    (time - time_low) << 2 | rank``."""

    id_low: int
    time_low: int
    time_bits: int

    def key(self, time: str = TIME, rank: Column | None = None) -> Column:
        """The key of a generalised row (at another time and rank when given)."""
        from pyspark.sql import functions as F

        return (
            F.shiftleft(F.col(ID).cast("long") - F.lit(self.id_low), self.time_bits + 2)
            + F.shiftleft(F.col(time).cast("long") - F.lit(self.time_low), 2)
            + (F.col(KIND) if rank is None else rank)
        )

    def keys(self, ids: np.ndarray, times: np.ndarray, rank: int) -> np.ndarray:
        """The keys of rows with these ids and times and one rank, in numpy."""
        return ((ids - self.id_low) << (self.time_bits + 2)) + ((times - self.time_low) << 2) + rank

    def relative_ids(self, keys: np.ndarray) -> np.ndarray:
        """Each key's id less ``id_low`` (the same order and equalities as the ids)."""
        return keys >> (self.time_bits + 2)

    def times(self, keys: np.ndarray) -> np.ndarray:
        """Each key's time."""
        return ((keys >> 2) & ((1 << self.time_bits) - 1)) + self.time_low


@dataclass(frozen=True)
class KeySample:
    """Sampled keys (``KEY``, and ``END_KEY`` for an interval, null for an event) and the
    share of the rows sampled."""

    table: pa.Table
    fraction: float

    @classmethod
    def of(
        cls,
        packing: Packing,
        closed: str,
        events: tuple[np.ndarray, np.ndarray],
        spans: tuple[np.ndarray, np.ndarray, np.ndarray],
        fraction: float,
    ) -> KeySample:
        """The keys of sampled events (id, time) and intervals (id, start, end)."""
        ranks = KIND_ORDER[closed]
        keys = np.concatenate(
            [packing.keys(*events, ranks[EVENT]), packing.keys(spans[0], spans[1], ranks[START])]
        )
        ends = packing.keys(spans[0], spans[2], ranks[END])
        no_end = np.zeros(len(events[0]), dtype=np.int64)
        end_keys = pa.array(
            np.concatenate([no_end, ends]),
            mask=np.concatenate([np.ones(len(no_end), bool), np.zeros(len(ends), bool)]),
        )
        return cls(pa.table({KEY: keys, END_KEY: end_keys}), fraction)


def sample_fraction(partitions: int, rows: int) -> float:
    """The share of the rows to sample to place the bounds of at least ``partitions``
    partitions (more when ``rows`` would make them too big to sort)."""
    wanted = max(partitions, math.ceil(rows / ROWS_PER_SORTED_PARTITION))
    return min(1.0, max(10_000, SAMPLE_ROWS_PER_PARTITION * wanted) / max(rows, 1))


@dataclass(frozen=True)
class PackedSweep:
    """The swept events (computed when used; None when the sample foresees a partition
    too big for a worker to sort, see ``refusal``) and the partitions' balance as the
    sample foresees it: (partitions, most rows, median rows)."""

    frame: DataFrame | None
    balance: tuple[int, int, float]
    sampled_rows: int
    refusal: str = ""


def packed_sweep(
    event_rows: DataFrame,
    spans: DataFrame,
    packing: Packing,
    sizes: tuple[int, int],
    closed: str,
    aggregation: Aggregation,
    events: DataFrame,
    columns: dict[str, str],
    out_type: DataType,
    sample: KeySample | None = None,
) -> PackedSweep:
    """Sweep the events' rows and the intervals (``spans``: id, start, end, value) in
    partitions that need nothing from each other. ``sizes`` is (the partitions asked
    for, the rows to sweep): more partitions when a worker would sort too many rows.
    The bounds come from ``sample`` when given, else from a sample Spark takes."""
    from pyspark.sql import functions as F

    partitions, kept_rows = sizes
    wanted = max(partitions, math.ceil(kept_rows / ROWS_PER_SORTED_PARTITION))
    ranks = KIND_ORDER[closed]
    keyed_events = event_rows.withColumn(KEY, packing.key())
    keyed_spans = spans.select(
        packing.key(TIME, F.lit(ranks[START])).alias(KEY),
        packing.key(END_TIME, F.lit(ranks[END])).alias(END_KEY),
        VALUE,
    )
    if sample is None:
        sample = _sampled(keyed_events, keyed_spans, sample_fraction(partitions, kept_rows))
    bounds = _bounds(sample.table, wanted)
    balance = _balance(sample.table, bounds, sample.fraction)
    if balance[1] > 2 * ROWS_PER_SORTED_PARTITION:
        refusal = (
            f"range plan: a partition would hold about {balance[1]:,} rows to sort (long "
            "intervals copied into many partitions, or many rows with one id and time): "
            "sorting in Spark and carrying open intervals between partitions instead"
        )
        return PackedSweep(None, balance, sample.table.num_rows, refusal)
    id_column, time_column = _rebuilt_columns(events, columns)
    passed = [c for c in events.columns if c not in (id_column, time_column)]
    routed_events = keyed_events.select(
        _bucket(F.col(KEY), bounds).alias(PART),
        KEY,
        F.lit(None).cast("long").alias(END_KEY),
        VALUE,
        *[F.col(f"`{c}`") for c in passed],
    )
    # An interval travels as one row, to every partition from its start's to its end's.
    first, last = _bucket(F.col(KEY), bounds), _bucket(F.col(END_KEY), bounds)
    routed_spans = keyed_spans.select(
        F.explode(F.when(first == last, F.array(first)).otherwise(F.sequence(first, last))).alias(
            PART
        ),
        KEY,
        END_KEY,
        VALUE,
        *[F.lit(None).cast(events.schema[c].dataType).alias(c) for c in passed],
    )
    count = len(bounds) + 1
    routed = routed_events.unionByName(routed_spans)
    arranged = routed.repartitionById(count, F.col(PART)).drop(PART)
    fields = [pa.field(f.name, arrow_type(f.dataType, events)) for f in events.schema.fields]
    task = _sweep_task(
        aggregation,
        packing,
        closed,
        _Rebuilt(id_column, time_column, fields),
        arrow_type(out_type, events),
        OUT_BATCH,
    )
    schema = StructType([*events.schema.fields, StructField("value", out_type)])
    frame = arranged.mapInArrow(task, schema)
    return PackedSweep(frame, balance, sample.table.num_rows)


def _sampled(keyed_events: DataFrame, keyed_spans: DataFrame, fraction: float) -> KeySample:
    """A sample of the keys (one job): the key, and the end's key for an interval."""
    from pyspark.sql import functions as F

    picked = keyed_events.select(KEY, F.lit(None).cast("long").alias(END_KEY)).unionByName(
        keyed_spans.select(KEY, END_KEY)
    )
    if fraction < 1:
        picked = picked.sample(fraction=fraction, seed=20)
    return KeySample(picked.toArrow(), fraction)


def _bounds(sample: pa.Table, partitions: int) -> list[int]:
    """The partitions' upper bounds from the sampled keys (starts and ends)."""
    ends = sample.column(END_KEY).drop_null().to_numpy()
    keys = np.sort(np.concatenate([sample.column(KEY).to_numpy(), ends]))
    if not len(keys) or partitions < 2:
        return []
    at = (np.arange(1, partitions) * len(keys)) // partitions
    return sorted({int(k) for k in keys[at]})


def _bucket(key: Column, bounds: list[int]) -> Column:
    """The partition a key falls in: how many bounds lie below it (a balanced tree of
    comparisons, so each row makes about log2 of the partitions' count of them)."""
    from pyspark.sql import functions as F

    def within(low: int, high: int) -> Column:
        if low == high:
            return F.lit(low)
        middle = (low + high) // 2
        return F.when(key <= F.lit(bounds[middle]), within(low, middle)).otherwise(
            within(middle + 1, high)
        )

    return within(0, len(bounds))


def _balance(sample: Any, bounds: list[int], fraction: float) -> tuple[int, int, float]:
    """(partitions, most rows, median rows sorted) as the sample foresees them, the
    copies of intervals open across bounds included."""
    keys = sample.column(KEY).to_numpy()
    ends = sample.column(END_KEY).fill_null(-1).to_numpy()
    edges = np.asarray(bounds, dtype=np.int64)
    first = np.searchsorted(edges, keys, side="left")
    last = np.where(ends >= 0, np.searchsorted(edges, ends, side="left"), first)
    weight = np.where(ends >= 0, 2, 1)  # an interval's copy makes a start and an end
    sizes = np.zeros(len(bounds) + 2, dtype=np.int64)
    np.add.at(sizes, first, weight)
    np.add.at(sizes, last + 1, -weight)
    counts = np.cumsum(sizes)[:-1] / fraction
    return len(counts), int(counts.max(initial=0)), float(statistics.median(counts.tolist()))


@dataclass(frozen=True)
class _Rebuilt:
    """Which event columns the sweep rebuilds from the key, and the events' fields."""

    id_column: str | None
    time_column: str | None
    fields: list[pa.Field]


def _rebuilt_columns(events: DataFrame, columns: dict[str, str]) -> tuple[str | None, str | None]:
    """The events' id and time columns when whole numbers: the key holds them exactly."""
    from pyspark.sql.types import IntegralType

    def integral(column: str) -> str | None:
        return column if isinstance(events.schema[column].dataType, IntegralType) else None

    return integral(columns["id"]), integral(columns["time"])


def _sweep_task(
    aggregation: Aggregation,
    packing: Packing,
    closed: str,
    rebuilt: _Rebuilt,
    value_type: pa.DataType,
    batch_rows: int,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """One partition, unsorted, from an empty state; rows go out in slices of
    ``batch_rows``. ``sum`` and ``count`` sort the starts and the ends apart and look
    each event up in them (:func:`~loaders.sweep.cover_index.open_totals`): the events
    keep their order. The other aggregations sort the whole partition by key with numpy
    and sweep it (Python objects, one slice at a time)."""
    names = [*[f.name for f in rebuilt.fields], "value"]
    role_of_rank = np.zeros(4, dtype=np.int64)
    for role, rank in KIND_ORDER[closed].items():
        role_of_rank[rank] = role

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_started()
        kept = [b for b in batches if b.num_rows]
        if not kept:
            return
        table = pa.Table.from_batches(kept)
        is_span = pc.is_valid(table.column(END_KEY))
        spans = pc.indices_nonzero(is_span)
        if aggregation.vectorized:
            rows, event_keys, results = _looked_up(table, spans, is_span)
        else:
            rows, event_keys, results = _swept(table, spans)
        for low in range(0, len(rows), batch_rows):
            yield _events_batch(table, rows, event_keys, results, low)

    def _looked_up(table: pa.Table, spans: pa.Array, is_span: Any) -> tuple[Any, Any, Any]:
        rows = np.flatnonzero(~np.asarray(is_span))
        keys = table.column(KEY).to_numpy()
        weights = None
        if aggregation.name != "count":
            weights = summable(summed_values("sum", table.column(VALUE).take(spans)))
        spans_at = np.asarray(spans)
        end_keys = table.column(END_KEY).take(spans).to_numpy()
        event_keys = keys[rows]
        shift = packing.time_bits + 2
        return rows, event_keys, open_totals(keys[spans_at], end_keys, weights, event_keys, shift)

    def _swept(table: pa.Table, spans: pa.Array) -> tuple[Any, Any, Any]:
        # Each interval's row makes two: its start (the row's key) and its end.
        ends = table.column(END_KEY).take(spans)
        keys = np.concatenate([table.column(KEY).to_numpy(), pc.fill_null(ends, 0).to_numpy()])
        values = pa.chunked_array(
            [*table.column(VALUE).chunks, *table.column(VALUE).take(spans).chunks],
            table.schema.field(VALUE).type,
        )
        order = np.argsort(keys)
        keys = keys[order]
        ids = packing.relative_ids(keys)
        roles = role_of_rank[keys & 3]
        sorted_values = values.take(order)
        # slice by slice, so that only one slice's rows are Python objects at a time
        results: list[Any] = []
        state = None
        for low in range(0, len(ids), batch_rows):
            high = low + batch_rows
            part, state = sweep_rows(
                aggregation,
                ids[low:high].tolist(),
                roles[low:high].tolist(),
                sorted_values.slice(low, batch_rows).to_pylist(),
                state,
            )
            results.extend(part)
        events = np.flatnonzero(roles == EVENT)
        return order[events], keys[events], results

    def _events_batch(
        table: pa.Table, rows: Any, event_keys: Any, results: Any, low: int
    ) -> pa.RecordBatch:
        """Events ``rows[low:low + batch_rows]`` of ``table`` (their keys and results alike)."""
        high = low + batch_rows
        keys = event_keys[low:high]
        out = []
        for field in rebuilt.fields:
            if field.name == rebuilt.id_column:
                ids = packing.relative_ids(keys) + packing.id_low
                out.append(pa.array(ids).cast(field.type))
            elif field.name == rebuilt.time_column:
                out.append(pa.array(packing.times(keys)).cast(field.type))
            else:
                out.append(table.column(field.name).take(rows[low:high]).combine_chunks())
        value = pa.array(results[low:high], type=value_type)
        return pa.RecordBatch.from_arrays([*out, value], names)

    return run
