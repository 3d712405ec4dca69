"""Records routed to their shards by the tasks that read them, as Arrow pieces in the store.

A load runs two Spark jobs. In the first, each reading task (one or more whole input
files, each file's records in line order) sends every mapped record to its shard's
*piece* for that file (:func:`route_task`): an Arrow IPC stream at
:func:`~treestore.store.layout.routed_piece`, written whole or not at all. In the second,
each shard task reads its shards' pieces in file number order (:func:`shard_batches`),
which is the records' order (sources in job order, a source's files in path order, lines
in file order), so no shuffle and no sort stand between the read and the tree.

A retried reading task writes the same pieces again (same names, same records); the
driver removes the load's folder when its tasks are done, and gc removes a killed load's.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from loaders.formats.readers import FILE_COLUMN
from loaders.route.columns import SHARD
from treestore.arrays import grouped_order
from treestore.errors import LoadError, StoreError
from treestore.settings import task_started
from treestore.storage.pagestore import PageStore
from treestore.store.layout import routed_piece

__all__ = ["ROUTE_SCHEMA", "Pieces", "Router", "route_task", "shard_batches", "spread_shards"]

ROUTE_SCHEMA = "shard int, file int, piece string, rows long, fingerprint string"
"""What a reading task returns: a row per piece it wrote; with the Arrow map, also a row
per file whose content fingerprint it took (shard and piece null)."""
_BATCH_ROWS = 1 << 16
"""Rows a piece's batches gather before they are written (the shard tasks' batch size)."""


class _PieceWriter:
    """One piece being written: its batches gathered to :data:`_BATCH_ROWS` rows."""

    def __init__(self, handle: BinaryIO, schema: pa.Schema) -> None:
        self.stream = pa.ipc.new_stream(handle, schema)
        self.held: list[pa.RecordBatch] = []
        self.held_rows = self.rows = 0

    def add(self, batch: pa.RecordBatch) -> None:
        self.held.append(batch)
        self.held_rows += batch.num_rows
        self.rows += batch.num_rows
        if self.held_rows >= _BATCH_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.held:
            self.stream.write_batch(pa.concat_batches(self.held))
            self.held, self.held_rows = [], 0

    def close(self) -> None:
        self.flush()
        self.stream.close()


class Router:
    """Routes mapped records to their pieces under ``folder`` as they come (each file's
    records together, in line order); :meth:`close` gives a row per piece written
    (:data:`ROUTE_SCHEMA`)."""

    def __init__(self, pages: PageStore, folder: str) -> None:
        self.pages, self.folder = pages, folder
        self.files = ExitStack()
        self.open_file = -1
        self.writers: dict[int, _PieceWriter] = {}
        self.written: list[tuple[int | None, int, str | None, int, str | None]] = []

    def add(self, batch: pa.RecordBatch) -> None:
        """Route ``batch``'s records (mapped; in file and line order)."""
        if not batch.num_rows:
            return
        files = batch.column(FILE_COLUMN).to_numpy(zero_copy_only=False)
        cuts = [0, *(np.flatnonzero(np.diff(files)) + 1).tolist(), len(files)]
        for start, stop in itertools.pairwise(cuts):
            number = int(files[start])
            if number != self.open_file:  # a file's records end where the next file's begin
                self._close_file()
                self.open_file = number
            for shard, rows in _by_shard(batch.slice(start, stop - start)):
                writer = self.writers.get(shard)
                if writer is None:
                    name = routed_piece(self.folder, shard, number)
                    handle = self.files.enter_context(self.pages.scratch_writer(name))
                    writer = self.writers[shard] = _PieceWriter(handle, batch.schema)
                writer.add(rows)

    def _close_file(self) -> None:
        try:
            for shard, writer in sorted(self.writers.items()):
                writer.close()
                piece = routed_piece(self.folder, shard, self.open_file)
                self.written.append((shard, self.open_file, piece, writer.rows, None))
        except BaseException as error:  # a full disk: the store's error, naming a piece
            self.abort(error)
            raise
        self.files.close()  # the pieces are published whole
        self.writers = {}

    def fingerprint(self, number: int, found: str) -> None:
        """Return input file ``number``'s content fingerprint with the pieces."""
        self.written.append((None, number, None, 0, found))

    def close(self) -> pa.RecordBatch:
        """Close the open pieces; the rows of every piece written (and fingerprint given)."""
        self._close_file()
        columns = list(zip(*self.written, strict=True)) or [()] * 5
        types = (pa.int32(), pa.int32(), pa.string(), pa.int64(), pa.string())
        return pa.RecordBatch.from_arrays(
            [pa.array(list(c), t) for c, t in zip(columns, types, strict=True)],
            names=["shard", "file", "piece", "rows", "fingerprint"],
        )

    def abort(self, error: BaseException) -> None:
        """Drop the pieces still open (a failed task): none of them is published. Raises
        what the store makes of ``error`` (an ``OSError`` becomes a ``StoreError`` naming
        a piece); the caller raises ``error`` itself otherwise."""
        self.writers = {}
        self.files.__exit__(type(error), error, error.__traceback__)


def route_task(
    pages: PageStore, folder: str
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function a reading task runs over its mapped records (``mapInArrow``): each
    file's records split by shard into pieces under ``folder``; yields a row of
    :data:`ROUTE_SCHEMA` per piece."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_started()
        router = Router(pages, folder)
        try:
            for batch in batches:
                router.add(batch)
        except BaseException as error:
            router.abort(error)
            raise
        yield router.close()

    return run


def _by_shard(batch: pa.RecordBatch) -> Iterator[tuple[int, pa.RecordBatch]]:
    """``batch``'s rows by shard, each shard's in their order."""
    shards = batch.column(SHARD).to_numpy(zero_copy_only=False)
    if shards[0] == shards[-1] and (shards == shards[0]).all():
        yield int(shards[0]), batch
        return
    order = grouped_order(shards)
    ordered = batch.take(pa.array(order))
    sorted_shards = shards[order]
    cuts = [0, *(np.flatnonzero(np.diff(sorted_shards)) + 1).tolist(), len(order)]
    for start, stop in itertools.pairwise(cuts):
        yield int(sorted_shards[start]), ordered.slice(start, stop - start)


@dataclass(frozen=True)
class Pieces:
    """The pieces a load's reading tasks wrote: each shard's, in file number order, and
    how many records each shard has."""

    by_shard: dict[int, tuple[str, ...]]
    rows: dict[int, int]

    @classmethod
    def of(cls, rows: Iterable[tuple[int | None, int, str | None, int, str | None]]) -> Pieces:
        """From the reading tasks' rows (:data:`ROUTE_SCHEMA`; fingerprint rows skipped)."""
        found: dict[int, list[tuple[int, str]]] = {}
        counts: dict[int, int] = {}
        for shard, file, piece, count, _ in rows:
            if shard is None or piece is None:
                continue
            found.setdefault(shard, []).append((file, piece))
            counts[shard] = counts.get(shard, 0) + count
        by_shard = {shard: tuple(p for _, p in sorted(named)) for shard, named in found.items()}
        return cls(by_shard, counts)


def spread_shards(rows: dict[int, int], shards: int, tasks: int) -> tuple[int, ...]:
    """Which of ``tasks`` shard tasks serves each shard: the shards with most records first,
    each to the task with the fewest so far (shards without records round-robin)."""
    load = [0] * tasks
    served = [0] * shards
    for shard in sorted(range(shards), key=lambda s: (-rows.get(s, 0), s)):
        task = min(range(tasks), key=lambda t: (load[t], t)) if rows.get(shard) else shard % tasks
        served[shard] = task
        load[task] += rows.get(shard, 0)
    return tuple(served)


def shard_batches(pages: PageStore, pieces: Iterable[str]) -> Iterator[pa.RecordBatch]:
    """The records of ``pieces`` (names, in file number order) in batches of about
    :data:`_BATCH_ROWS` rows: a follower's micro-batch of many small files gives a shard
    many small pieces, and a task's work per batch is better spent on few big ones."""
    held: list[pa.RecordBatch] = []
    rows = 0
    for batch in _piece_batches(pages, pieces):
        if held and (batch.schema != held[0].schema or rows >= _BATCH_ROWS):
            yield pa.concat_batches(held) if len(held) > 1 else held[0]
            held, rows = [], 0
        held.append(batch)
        rows += batch.num_rows
    if held:
        yield pa.concat_batches(held) if len(held) > 1 else held[0]


def _piece_batches(pages: PageStore, pieces: Iterable[str]) -> Iterator[pa.RecordBatch]:
    """The records of ``pieces`` (names, in file number order), batch by batch; a local
    store's pieces are mapped into memory, not read. A piece that is not there fails the
    load in one line (a store at a path each executor has its own copy of)."""
    for name in pieces:
        local = pages.local_path(name)
        try:
            source = pa.memory_map(str(local)) if local else pa.BufferReader(pages.read(name))
        except (FileNotFoundError, StoreError):
            if pages.exists(name):
                raise
            raise LoadError(
                f"{pages.location}/{name}, which a reading task of this load wrote, is missing "
                "where a shard task looks for it: the executors do not share the store's "
                "folder; put the store on a filesystem every executor and the driver share "
                "(HDFS, S3, NFS). Nothing was published."
            ) from None
        yield from pa.ipc.open_stream(source)
