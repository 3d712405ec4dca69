"""Pending records: update-only records that arrived before their node, kept for later loads.

Their whole life is here: kept (:meth:`PendingRecords.keep`, as the builder meets them),
retried (:meth:`~loaders.tree.builder.TreeBuilder.retry_pending`, which a shard's load
calls for them), applied or expired (:meth:`PendingRecords.expire`,
:meth:`PendingRecords.expire_late`), stored with the shard's tree
(:meth:`PendingRecords.store`, :class:`PendingState`), counted (:class:`PendingCounts`),
and the expired ones written (:meth:`PendingRecords.write_expired`,
:func:`merge_expired`).

A ``create: false`` element with ``pending: {"loads": N}`` does not drop a record
whose node does not exist (Hydra's behaviour, and ours without ``pending``): the
record's path, from that element on, is kept with the shard's tree and retried at
the end of its own load and of each of the next N loads, after every source of the
load was applied (so a node any source of the load creates is found, whatever the
order of sources). A retried record whose node now
exists goes on from that element through the rest of the tree, as if it had arrived
after its node; one still without its node after N loads expires and is counted.
With ``"time": FIELD, "delay": D`` records also wait on an event-time watermark, as
a streaming join's state waits for the other side: the newest FIELD value the
shard's loads have seen (kept as :attr:`PendingState.time`) minus D; a waiting
record whose FIELD is below it expires, at once when it arrives that late.

Per shard, the waiting records are Arrow IPC files in the store (one per schema: a
field read as a list in one load may be text in another), kept as the shard's side
files named ``pending`` (:class:`PendingState`, see
:class:`~treestore.storage.state.SideFiles`) so that they are published, kept and
collected with the version that holds them. In the manifest::

    "pending": {"files": [...], "records": N, "time": T, "tree": FINGERPRINT}

Each row is a record's fields (those the tree reads), where it was read (source, file
and line, :data:`ORIGIN`), and where its path stopped: the element (its place in the
tree, and whether the path stopped at the node the element's ``name`` puts above it),
the parent node (id and key), the name it looked for, its weight and the loads it has
left. Each file also records a fingerprint of the job's tree: records kept under another tree expire
rather than being retried against elements that may mean something else now.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from treestore.storage.pagestore import PageStore
from treestore.storage.state import ShardState, SideFiles
from treestore.storage.visits import Handles
from treestore.store.layout import tree_folder

__all__ = [
    "ELEMENT",
    "LABEL",
    "LOADS_LEFT",
    "NAME",
    "ORIGIN",
    "PARENT",
    "PARENT_NAME",
    "PARENT_OF",
    "SIDE_NAME",
    "WEIGHT",
    "PendingCounts",
    "PendingRecords",
    "PendingState",
    "expired_rows",
    "latest_time",
    "merge_expired",
    "past_watermark",
    "read_pending",
    "with_origin",
    "write_pending",
]

ELEMENT = "__pending_element"  # the element's place in the tree (``ElementSpec.place``)
PARENT = "__pending_parent"  # the parent node's id
PARENT_OF = "__pending_parent_of"  # the parent node's key: its own parent's id ...
PARENT_NAME = "__pending_parent_name"  # ... and its name
NAME = "__pending_name"  # the child name the element looked for
WEIGHT = "__pending_weight"  # how many identical records the row stands for
LOADS_LEFT = "__pending_loads"  # how many more loads retry it
ORIGIN = ("__pending_source", "__pending_file", "__pending_line")
"""Where a waiting record was read: its source's name, its file and line (kept with it
when the load gives them, so that an expired record says where it came from)."""
_ORIGIN_NAMES = ("source", "file", "line")  # their names under ``expired/``
LABEL = " (name)"
"""Appended to ``ELEMENT`` when the path stopped at the node the element's ``name`` puts
above its own nodes."""
_FINGERPRINT = b"treestore.storage.tree"  # the schema metadata key (kept: stores hold it)
SIDE_NAME = "pending"
"""The name of the side files that hold a shard's pending records (its manifest key)."""


@dataclass(frozen=True)
class PendingState:
    """A shard's pending records as a version keeps them (its ``pending`` side files).

    Attributes:
        files: the files of the waiting records.
        records: how many records wait (summed weights).
        time: the largest time the shard's loads have seen in the field pending records
            wait on (their watermark is this minus the element's delay).
        tree: the fingerprint of the job's tree ``time`` was seen under (another tree
            starts a new watermark).
    """

    files: tuple[str, ...] = ()
    records: int = 0
    time: int | None = None
    tree: str | None = None

    @classmethod
    def of(cls, state: ShardState | None) -> PendingState:
        """The pending records ``state`` keeps (none if ``state`` is ``None``)."""
        side = state.side.get(SIDE_NAME) if state is not None else None
        if side is None:
            return cls()
        meta = side.meta
        return cls(side.files, int(meta.get("records", 0)), meta.get("time"), meta.get("tree"))

    def side_files(self) -> SideFiles | None:
        """The side files to keep with the shard's tree (``None``: nothing to keep, neither
        waiting records nor a watermark)."""
        if not self.files and self.time is None:
            return None
        return SideFiles(
            self.files, {"records": self.records, "time": self.time, "tree": self.tree}
        )


@dataclass(frozen=True)
class PendingCounts:
    """A shard's pending update-only records in one load (summed weights): kept in it for
    later loads, applied (of earlier loads, or kept earlier in it), expired, and left
    waiting."""

    buffered: int = 0
    applied: int = 0
    expired: int = 0
    waiting: int = 0

    def __add__(self, other: PendingCounts) -> PendingCounts:
        return PendingCounts(
            self.buffered + other.buffered,
            self.applied + other.applied,
            self.expired + other.expired,
            self.waiting + other.waiting,
        )


@dataclass
class PendingRecords:
    """A shard's pending records as one load moves them along, as tables: those that wait
    (kept in this load, or still waiting from an earlier one) and those that expired
    (:func:`expired_rows`). Their counts are the load's stats
    (:class:`~loaders.tree.builder.ApplyStats`)."""

    waiting: list[pa.Table] = field(default_factory=list)
    expired: list[pa.Table] = field(default_factory=list)

    def keep(
        self,
        records: pa.Table,
        fields: list[str],
        place: str,
        label: bool,
        parents: Handles,
        names: pa.Array,
        weights: np.ndarray,
        loads_left: np.ndarray,
    ) -> tuple[int, int]:
        """Keep ``records`` (each with all its columns), whose paths found no node at the
        pending element at ``place`` (``label``: at the node its ``name`` puts above its
        own) under ``parents[i]``, looking for ``names[i]``, with ``loads_left[i]`` loads to
        go; those with none left expire. Returns the weights kept and expired."""
        expired = loads_left <= 0
        if expired.any():
            gone = records.filter(pa.array(expired))
            self.expired.append(expired_rows(gone, fields, "its loads ran out", place))
        kept = ~expired
        if kept.any():
            carried = [name for name in ORIGIN if name in records.column_names]
            table = records.select([*fields, *carried]).filter(pa.array(kept))
            where = np.flatnonzero(kept)
            extra = {
                ELEMENT: pa.array([place + (LABEL if label else "")] * len(where), pa.string()),
                PARENT: pa.array(parents.ids[where], pa.int64()),
                PARENT_OF: pa.array(parents.parents[where], pa.int64()),
                PARENT_NAME: parents.names.take(pa.array(where)),
                NAME: names.take(pa.array(where)).cast(pa.string()),
                WEIGHT: pa.array(weights[where], pa.int64()),
                LOADS_LEFT: pa.array(loads_left[where], pa.int64()),
            }
            for name, column in extra.items():
                table = table.append_column(name, column)
            self.waiting.append(table)
        return int(weights[kept].sum()), int(weights[expired].sum())

    def take_waiting(self) -> list[pa.Table]:
        """The waiting records so far, which leave this value (to be retried)."""
        taken, self.waiting = self.waiting, []
        return taken

    def expire(self, table: pa.Table, fields: list[str], why: str, place: str) -> int:
        """Waiting records (``table``, all at the element at ``place``) that expire for
        ``why``; returns their weight."""
        self.expired.append(expired_rows(table, fields, why, place))
        return int(pc.sum(table.column(WEIGHT)).as_py() or 0)

    def expire_late(
        self,
        field_name: str,
        delays: dict[str, int],
        latest: int | None,
        time_only: set[str],
        fields: list[str],
    ) -> int:
        """Expire the waiting records that the watermark (``latest`` minus their element's
        delay) has passed, and those of elements that wait only on it which have no time
        (see :func:`past_watermark`); returns their weight."""
        kept, weight = [], 0
        for table in self.waiting:
            late = past_watermark(table, field_name, delays, latest, time_only)
            if late.any():
                gone = table.filter(pa.array(late))
                for place in pc.unique(gone.column(ELEMENT)).to_pylist():
                    at = gone.filter(pc.equal(gone.column(ELEMENT), place))
                    weight += self.expire(at, fields, "the watermark passed it", place)
            kept.append(table.filter(pa.array(~late)))
        self.waiting = kept
        return weight

    def store(self, pages: PageStore, shard: int, fingerprint: str) -> tuple[tuple[str, ...], int]:
        """Write the waiting records as the shard's new pending files (:func:`write_pending`);
        their names and how many records wait."""
        return write_pending(pages, shard, self.waiting, fingerprint)

    def write_expired(self, pages: PageStore, name: str) -> int:
        """Write the records that expired as one Parquet file ``name`` in the store (if any
        did); returns how many rows it holds (0: none expired, nothing written)."""
        tables = [t for t in self.expired if t.num_rows]
        if not tables:
            return 0
        import pyarrow.parquet as pq

        table = pa.concat_tables(tables, promote_options="permissive")
        with pages.writer(name) as out:  # a retried task writes the same name again
            pq.write_table(table, out)
        return table.num_rows


def with_origin(
    records: pa.RecordBatch, source: pa.Array, file: pa.Array, line: pa.Array
) -> pa.RecordBatch:
    """``records`` with where each was read (its source's name, its file and line), which a
    waiting record keeps (:data:`ORIGIN`)."""
    for name, column in zip(ORIGIN, (source, file, line), strict=True):
        records = records.append_column(name, column)
    return records


def read_pending(table: pa.Table) -> tuple[pa.Table, str]:
    """The pending records of a pending side file (read and verified by the shard's
    tree), and the fingerprint of the tree that kept them."""
    metadata = table.schema.metadata or {}
    return table, metadata.get(_FINGERPRINT, b"").decode()


def write_pending(
    pages: PageStore, shard: int, tables: list[pa.Table], fingerprint: str
) -> tuple[tuple[str, ...], int]:
    """Store the shard's waiting records as new files, one per schema; return their names
    and the number of records (summed weights)."""
    by_schema: dict[pa.Schema, list[pa.Table]] = {}
    for table in tables:
        if table.num_rows:
            by_schema.setdefault(table.schema, []).append(table)
    names, records = [], 0
    for parts in by_schema.values():
        table = pa.concat_tables(parts).replace_schema_metadata({_FINGERPRINT: fingerprint})
        for i, spec in enumerate(table.schema):  # the origin's names come as dictionaries
            if pa.types.is_dictionary(spec.type):
                table = table.set_column(i, spec.name, table.column(i).cast(spec.type.value_type))
        name = f"{tree_folder(shard)}/{uuid.uuid4().hex[:12]}-pending.arrow"
        pages.write_table(name, table)
        names.append(name)
        records += int(pc.sum(table.column(WEIGHT)).as_py() or 0)
    return tuple(names), records


def latest_time(column: pa.ChunkedArray | pa.Array) -> int | None:
    """The largest whole number in a text (or list of text) column; empty and null values
    are left out (the load rejected the records whose value is not a whole number)."""
    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_list(values.type):
        values = pc.list_flatten(values)
    found = pc.max(_numbers(values)).as_py()
    return None if found is None else int(found)


def past_watermark(
    table: pa.Table,
    field: str,
    delays: dict[str, int],
    latest: int | None,
    time_only: set[str] | frozenset[str] = frozenset(),
) -> np.ndarray:
    """Which waiting records expire: those older than their element's watermark (``latest``
    minus the element's delay), and those without a time whose element waits only on the
    watermark (``time_only``; they could wait for ever). Records of elements that wait only
    a number of loads never do. Compared as int64, exactly."""
    values = table.column(field).combine_chunks()
    if pa.types.is_list(values.type):  # a list of times: its largest counts
        flat = _numbers(pc.list_flatten(values))
        known = flat.is_valid().to_numpy(zero_copy_only=False)
        owners = pc.list_parent_indices(values).to_numpy()[known]
        times = np.full(len(values), np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(times, owners, pc.drop_null(flat).to_numpy())
        timed = np.zeros(len(values), dtype=bool)
        timed[owners] = True
    else:
        numbers = _numbers(values)
        timed = numbers.is_valid().to_numpy(zero_copy_only=False)
        times = pc.fill_null(numbers, 0).to_numpy()
    lowest = int(np.iinfo(np.int64).min)
    marks_of = (
        {place: max(lowest, latest - delay) for place, delay in delays.items()}
        if latest is not None
        else {}
    )
    places = [p.removesuffix(LABEL) for p in table.column(ELEMENT).to_pylist()]
    watched = np.fromiter((p in marks_of for p in places), dtype=bool, count=len(places))
    marks = np.fromiter((marks_of.get(p, 0) for p in places), dtype=np.int64, count=len(places))
    only = np.fromiter((p in time_only for p in places), dtype=bool, count=len(places))
    return (timed & watched & (times < marks)) | (~timed & only)


def _numbers(values: pa.Array) -> pa.Array:
    """Text holding whole numbers as int64 (empty text as null)."""
    return pc.cast(pc.if_else(pc.equal(values, ""), None, values), pa.int64())


def expired_rows(
    table: pa.Table, fields: list[str] | tuple[str, ...], why: str, place: str
) -> pa.Table:
    """Waiting records that expire, as written under ``expired/``: the record's fields
    (those the tree reads, as text; lists as JSON), where it was read (source, file, line;
    null when not known), the element it waited at, the name it looked for (when known),
    its weight (identical records folded into one) and why."""
    import json

    size = table.num_rows
    columns: dict[str, pa.Array] = {}
    for name in fields:
        if name not in table.column_names or name.startswith("__"):
            continue  # absent, or the builder's own (filters' outcomes)
        column = table.column(name)
        if pa.types.is_list(column.type):
            column = pa.array(
                [None if v is None else json.dumps(v) for v in column.to_pylist()], pa.string()
            )
        columns[name] = column.cast(pa.string())
    origin_types = (pa.string(), pa.string(), pa.int64())
    for name, origin, column_type in zip(_ORIGIN_NAMES, ORIGIN, origin_types, strict=True):
        columns[name] = (
            table.column(origin).cast(column_type)
            if origin in table.column_names
            else pa.nulls(size, column_type)
        )
    columns["element"] = pa.array([place.removesuffix(LABEL)] * size, pa.string())
    columns["looked_for"] = (
        table.column(NAME).cast(pa.string())
        if NAME in table.column_names
        else pa.nulls(size, pa.string())
    )
    columns["weight"] = (
        table.column(WEIGHT).cast(pa.int64())
        if WEIGHT in table.column_names
        else pa.array(np.ones(size, dtype=np.int64))
    )
    columns["why"] = pa.array([why] * size, pa.string())
    return pa.table(columns)


def merge_expired(pages: PageStore, parts: list[str], name: str) -> int:
    """Write the expired records of a load's shards (``parts``, Parquet files in the store)
    as one Parquet file ``name``, one row group per part (a part at a time in memory);
    remove the parts. Returns how many rows it holds."""
    import io

    import pyarrow.parquet as pq

    tables = [pq.read_schema(io.BytesIO(pages.read(part))) for part in parts]
    schema = pa.unify_schemas(tables, promote_options="permissive")
    rows = 0
    with pages.writer(name) as out, pq.ParquetWriter(out, schema) as writer:
        for part in parts:
            table = pq.read_table(io.BytesIO(pages.read(part)))
            for missing in schema:
                if missing.name not in table.column_names:
                    table = table.append_column(missing, pa.nulls(table.num_rows, missing.type))
            writer.write_table(table.select(schema.names).cast(schema))
            rows += table.num_rows
    for part in parts:
        pages.delete(part)
    for folder in {part.rsplit("/", 1)[0] for part in parts if "/" in part}:
        local = pages.local_path(folder)  # a local store keeps no empty folder behind
        if local is not None and local.is_dir() and not any(local.iterdir()):
            local.rmdir()
    return rows
