"""A query's rows on a Spark Connect session: through Spark's own result channel.

A Spark Connect client has no JVM of its own and its executors may not reach it, so the
row channel of a classic session (a socket the driver opens, :mod:`query.driver.channel`)
cannot be used. The same tasks run instead as ``mapInArrow`` over the shards, a task per
group of consecutive shards, and each piece a shard makes (:func:`shard_output`, encoded
as :mod:`query.driver.transport` encodes it for the channel: Arrow IPC or msgpack rows)
becomes one result row ``(shard, kind, payload)``. The client reads the rows with
``toLocalIterator``, which streams them in partition order, so the pieces arrive in
shard order and each is decoded as the channel's are: the driver's ops, ``Rows`` and
every output format see the same pieces either way.

The query's job carries a tag of its own (``spark.addTag``): closing the rows early or
:meth:`Rows.cancel` interrupts it (``spark.interruptTag``).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from query.driver.plan import QueryPlan
from query.driver.result import Piece, Rows
from query.driver.shard_output import shard_output
from query.driver.transport import ERROR, decode_piece, encode_error, encode_piece
from treestore.errors import StoreError, TreestoreError
from treestore.failpoints import failpoint
from treestore.spark import spark_errors
from treestore.storage.pagestore import PageStore
from treestore.storage.tree import ShardState, ShardTree
from treestore.store.versions import StoreVersion

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["MAX_PARTITIONS", "RESULT_SCHEMA", "connect_pieces"]

RESULT_SCHEMA = "shard int, kind int, payload binary"
"""The query tasks' output on a Connect session: one row per piece."""
MAX_PARTITIONS = 64
"""The most tasks a query starts: a task per shard up to this many (a task's result
reaches the client once the task ends, so smaller tasks bring the first rows sooner)."""
_ARROW_SCHEMA = pa.schema([("shard", pa.int32()), ("kind", pa.int32()), ("payload", pa.binary())])


def _result_task(
    pages: PageStore, states: dict[int, ShardState], plan: QueryPlan, owner: str | None
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function each task runs: shard numbers in, one row per piece out (a treestore
    error as a piece too, raised on the client)."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        failpoint("in-query-task")
        for batch in batches:
            for shard in batch.column(0).to_pylist():
                try:
                    tree = ShardTree(pages, states[shard], shard=shard, owner=owner)
                    for output in shard_output(tree, plan):
                        yield _piece_row(shard, *encode_piece(output, compress=True))
                except TreestoreError as exc:
                    yield _piece_row(shard, ERROR, encode_error(exc))

    return run


def _piece_row(shard: int, kind: int, payload: bytes) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array([shard], pa.int32()), pa.array([kind], pa.int32()), pa.array([payload])],
        schema=_ARROW_SCHEMA,
    )


def connect_pieces(
    spark: SparkSession, plan: QueryPlan, version: StoreVersion, rows: Rows | None = None
) -> Iterator[Piece]:
    """The pieces of ``plan``'s shards, in shard order, from one Spark job on the Connect
    session ``spark`` (a generator: closing it early interrupts the job)."""
    from pyspark.sql import functions as F

    states = {s: version.manifest.trees[s] for s in plan.shards}
    if not states:
        return
    shards = list(plan.shards)
    shard_of_partition = F.element_at(
        F.array(*[F.lit(s) for s in shards]), (F.col("id") + 1).cast("int")
    )
    partitions = min(len(shards), MAX_PARTITIONS)
    frame = spark.range(0, len(shards), 1, partitions).select(
        shard_of_partition.cast("int").alias("shard")
    )
    task = _result_task(version.pages, states, plan, version.owner)
    tag = f"treestore-query-{uuid.uuid4().hex}"
    if rows is not None:
        rows.on_cancel(lambda: _interrupt(spark, tag))
    finished = False
    stream: Iterator[object] = iter(())
    try:
        with spark_errors(StoreError, "The query's Spark job"):
            spark.addTag(tag)
            try:
                stream = iter(frame.mapInArrow(task, RESULT_SCHEMA).toLocalIterator())
                row = next(stream, None)  # the job starts here, with the tag
            finally:
                spark.removeTag(tag)
            while row is not None:
                if rows is not None and rows.cancelled:  # also one cancelled before its job
                    raise StoreError("The query was stopped before all its rows came.")
                yield decode_piece(row.kind, bytes(row.payload))  # type: ignore[attr-defined]
                row = next(stream, None)
        finished = True
    finally:
        if not finished:
            _interrupt(spark, tag)
        close = getattr(stream, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):  # a session already stopped
                close()


def _interrupt(spark: SparkSession, tag: str) -> None:
    """Interrupt the query's job (it may have ended already)."""
    with contextlib.suppress(Exception):  # a session already stopped
        spark.interruptTag(tag)
