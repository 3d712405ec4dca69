"""What the load driver and its Spark tasks say to each other, typed, in one place.

Driver -> task: the columns every record row carries besides the job's fields
(:data:`ORDER`, :data:`KEEP`) and a :class:`TaskSpec`, pickled to the executors with
the task's function. Records travel in the pieces the reading tasks routed them to
(:mod:`loaders.route.pieces`); a shard task knows from its number
(:attr:`TaskSpec.shard_tasks`) which shards it serves, and so which shards with pending
records it retries even when no record reaches them. A field that holds lists travels as JSON text
(:func:`list_as_text`, :func:`lists_from_text`): Spark's Arrow writer spends about
0.3 us of CPU a row on a list column even where the list is empty (measured on the
seed's 11M rows: 1.6 s of the 12.2 s the shard stage takes on 2 cores without the
tree work), and next to nothing on a null string.

Task -> driver: rows of :data:`TASK_SCHEMA`, each one msgpack-encoded payload of a
known kind: a :class:`ShardResult` per shard the task wrote, and one
:class:`TaskTotals` for the whole task (counts per file and per source, as
:class:`SourceCounts`, its dedup index runs and rejected records).
:func:`decode_results` reads them back as these types, and
:func:`loaders.load.report.summarize` folds them into the typed
:class:`~loaders.load.report.LoadReport`, which becomes JSON only as it is published
(kept in the manifest, printed by ``treestore load``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import msgpack
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from loaders.route.columns import KEEP, ORDER
from loaders.tree.builder import TreeBuilder
from loaders.tree.pending import PendingCounts, PendingState
from treestore.storage.tree import ShardState
from treestore.store.layout import EXPIRED

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = [
    "KEEP",
    "ORDER",
    "TASK_SCHEMA",
    "PendingCounts",
    "ShardResult",
    "SourceCounts",
    "TaskSpec",
    "TaskTotals",
    "decode_results",
    "encode_results",
    "list_as_text",
    "lists_from_text",
]

TASK_SCHEMA = "kind tinyint, payload binary"
_LISTED = pa.schema([pa.field("v", pa.list_(pa.string()))])
_SHARD_RESULT, _TASK_TOTALS = 0, 1


@dataclass(frozen=True)
class TaskSpec:
    """What every load task needs to know (pickled to the executors)."""

    builder: TreeBuilder
    source_names: tuple[str, ...]
    dedup_sources: dict[int, str]
    dedup_runs: dict[str, dict[int, tuple[str, ...]]]
    states: dict[int, ShardState]
    files: tuple[str, ...]  # the input files, by their number in ``__file``
    rejected_folder: str
    max_rejected: int
    expired_folder: str = f"{EXPIRED}/unnamed"
    """Where the shards write the pending records that expire in this load."""
    list_fields: tuple[str, ...] = ()
    """The fields that hold lists, which travel as JSON text (:func:`list_as_text`)."""
    dedup_store: str | None = None
    """The store's identity, which the dedup runs a task opens must record (and its new
    runs do): see :class:`~treestore.store.dedup_index.RunOwner`."""
    shard_tasks: tuple[int, ...] = ()
    """The shard task that serves each shard (by shard number;
    :func:`~loaders.route.pieces.spread_shards`): it applies the shard's records and
    opens the shard when it has pending records, whether records reach it or not."""
    pieces: dict[int, tuple[str, ...]] = field(default_factory=dict)
    """Each shard's pieces of routed records, in file number order
    (:class:`~loaders.route.pieces.Pieces`)."""
    owner: str | None = None
    """The store's identity, which the runs the tasks write carry (None: the store has none)."""
    parts: dict[int, int] = field(default_factory=dict)
    """How many parts each big shard's records are built in (see
    :mod:`loaders.tree.parts`); a shard not named is built whole."""

    def waiting_shards(self) -> list[int]:
        """The shards whose version keeps pending records (each must be retried by a task)."""
        return sorted(shard for shard, state in self.states.items() if PendingState.of(state).files)


@dataclass(frozen=True)
class ShardResult:
    """What a task did to one shard's tree: its new state and what changed."""

    shard: int
    state: dict[str, Any]  # ShardState.to_json()
    records: int
    missed_updates: int
    bad_values: int
    nodes_created: int
    nodes_updated: int
    bytes_written: int
    compacted: bool
    pending: PendingCounts  # the pending room's counts (loaders.tree.pending)
    task_seconds: dict[str, float] = field(default_factory=dict)
    """The task's seconds by phase that this shard accounts for: a task's first shard
    carries its input, records and apply, and each shard its own write, so that summed
    over the shards they are the tasks' times (a task may serve several shards)."""
    task_cpu_seconds: dict[str, float] = field(default_factory=dict)
    """The same shares of the task's CPU seconds (its worker process's, threads included):
    below ``task_seconds`` where the task waited for a core."""
    expired_file: str | None = None  # the shard's expired pending records (Parquet)
    parts: int = 1
    """How many parts the shard's records were built in (1: whole)."""

    def report(self) -> dict[str, Any]:
        """The shard's entry of the published report (without its state)."""
        entry = asdict(self)
        del entry["shard"], entry["state"], entry["expired_file"]
        return {**entry, "nodes": self.state["nodes"], "bytes": self.state["bytes"]}


@dataclass(frozen=True)
class SourceCounts:
    """What happened to one source's records, in a task or in a whole load (the published
    report's counts per source, in this order)."""

    files: int = 0  # new input files (set by the driver: a task reads parts of files)
    read: int = 0
    rejected: int = 0
    duplicates_in_load: int = 0
    duplicates_of_earlier_loads: int = 0
    kept: int = 0  # not duplicates: the map's filters then keep or drop them
    dropped: int = 0
    applied: int = 0
    missed_updates: int = 0  # update-only records that found no node (and do not wait)
    pending: int = 0  # update-only records kept to be retried in later loads

    def __add__(self, other: SourceCounts) -> SourceCounts:
        return SourceCounts(
            **{k: v + getattr(other, k) for k, v in asdict(self).items()}  # every count
        )


@dataclass(frozen=True)
class TaskTotals:
    """What a whole task saw: records per file and per source, dedup runs, rejects."""

    files: dict[str, int]
    sources: dict[str, SourceCounts]
    dedup: dict[int, dict[str, list[str]]]  # shard -> source -> its index runs
    rejected_count: int
    rejected_file: str | None


def encode_results(shards: list[ShardResult], totals: TaskTotals) -> pa.RecordBatch:
    """A task's output: one row per shard result, then one for its totals."""
    kinds = [_SHARD_RESULT] * len(shards) + [_TASK_TOTALS]
    items: list[ShardResult | TaskTotals] = [*shards, totals]
    payloads = [msgpack.packb(asdict(item)) for item in items]
    return pa.RecordBatch.from_arrays(
        [pa.array(kinds, pa.int8()), pa.array(payloads, pa.binary())], ["kind", "payload"]
    )


def decode_results(rows: list[Any]) -> tuple[list[ShardResult], list[TaskTotals]]:
    """The collected rows of every task, as the types they were sent as."""
    shards: list[ShardResult] = []
    totals: list[TaskTotals] = []
    for row in rows:
        payload = msgpack.unpackb(row["payload"], strict_map_key=False)
        if row["kind"] == _SHARD_RESULT:
            payload["pending"] = PendingCounts(**payload["pending"])
            shards.append(ShardResult(**payload))
        else:
            payload["sources"] = {
                name: SourceCounts(**counts) for name, counts in payload["sources"].items()
            }
            totals.append(TaskTotals(**payload))
    return shards, totals


def list_as_text(value: Column) -> Column:
    """A list column as the tasks get it: ``{"v": [...]}`` as JSON text, null for a null
    or empty list (a task reads both as no value)."""
    from pyspark.sql import functions as F

    return F.when(F.size(value) > 0, F.to_json(F.struct(value.alias("v"))))


def lists_from_text(batch: pa.RecordBatch, names: Iterable[str]) -> pa.RecordBatch:
    """``batch`` with the columns ``names`` (:func:`list_as_text`) read back as lists of
    strings (null where the text is null), with one JSON parse per column."""
    for name in names:
        where = batch.schema.get_field_index(name)
        if where < 0:
            continue
        text = batch.column(where)
        valid = text.is_valid().to_numpy(zero_copy_only=False)
        present = text.filter(pa.array(valid))
        if len(present):
            joined = pc.binary_join(pa.ListArray.from_arrays([0, len(present)], present), "\n")
            data = joined[0].as_buffer()
            parsed = pajson.read_json(
                pa.BufferReader(data),
                read_options=pajson.ReadOptions(block_size=data.size + 1),
                parse_options=pajson.ParseOptions(explicit_schema=_LISTED),
            )
            values = parsed.column("v").combine_chunks()
        else:
            values = pa.array([], _LISTED.field("v").type)
        gone = len(values)
        places = np.where(valid, np.cumsum(valid) - 1, gone)
        lists = pa.concat_arrays([values, pa.nulls(1, values.type)]).take(pa.array(places))
        batch = batch.set_column(where, pa.field(name, lists.type), lists)
    return batch
