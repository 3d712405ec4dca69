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

A task's rows reach the client only when the task ends, so the client walks the first
shard itself while the job runs the others (it reads the store already, to plan the
query): the first rows come as soon as on a classic session. The job's rows are pulled
in a thread into a bounded queue meanwhile.

The query's job carries a tag of its own (``spark.addTag``): closing the rows early or
:meth:`Rows.cancel` interrupts it (``spark.interruptTag``).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from query.driver.plan import QueryPlan
from query.driver.result import Piece, Rows
from query.driver.shard_groups import shard_frame, shard_groups
from query.driver.shard_output import cached_tree, encoded_shards, shard_output
from query.driver.transport import Payload, as_piece, decode_piece
from treestore.errors import StoreError
from treestore.failpoints import failpoint
from treestore.settings import task_started
from treestore.spark import default_parallelism, spark_errors
from treestore.storage.pagestore import PageStore
from treestore.storage.tree import ShardState, ShardTree
from treestore.store.versions import StoreVersion

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["MAX_PARTITIONS", "RESULT_SCHEMA", "connect_pieces"]

RESULT_SCHEMA = "shard int, kind int, payload binary"
"""The query tasks' output on a Connect session: one row per piece."""
MAX_PARTITIONS = 64
"""The most tasks a query starts: a task per core the session runs at once, up to this
many, each over consecutive shards (on a Connect session a task costs more than on a
classic one: one task per core ran the seed's query in 1.25 s where a task per shard took
1.67 s, on 2 cores; the first rows come from the client's walk of the first shard)."""
_QUEUED = 64
"""Result rows (pieces) the pulling thread keeps ahead of the reader."""
_END = object()
_ARROW_SCHEMA = pa.schema([("shard", pa.int32()), ("kind", pa.int32()), ("payload", pa.binary())])


def _result_task(
    pages: PageStore, states: dict[int, ShardState], plan: QueryPlan, owner: str | None
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function each task runs: shard numbers in, one row per piece out (a treestore
    error as a piece too, raised on the client)."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_started()
        failpoint("in-query-task")
        for batch in batches:
            shards = encoded_shards(pages, states, plan, batch.column(0).to_pylist(), owner, True)
            for shard, pieces in shards:
                for kind, payload in pieces:
                    yield _piece_row(shard, kind, payload)

    return run


def _piece_row(shard: int, kind: int, payload: Payload) -> pa.RecordBatch:
    data = payload if isinstance(payload, pa.Buffer) else pa.py_buffer(payload)
    offsets = pa.array([0, len(data)], pa.int32()).buffers()[1]
    column = pa.Array.from_buffers(pa.binary(), 1, [None, offsets, data])  # not copied
    return pa.RecordBatch.from_arrays(
        [pa.array([shard], pa.int32()), pa.array([kind], pa.int32()), column],
        schema=_ARROW_SCHEMA,
    )


class _ResultStream:
    """The Spark job's result rows, pulled in a thread of their own into a bounded queue
    (so the client can walk the first shard meanwhile); the job carries ``tag``."""

    def __init__(
        self,
        spark: SparkSession,
        frame: DataFrame,
        task: Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]],
        tag: str,
    ) -> None:
        from pyspark import InheritableThread

        self.queue: queue.Queue[object] = queue.Queue(maxsize=_QUEUED)
        self._stopping = threading.Event()

        def pull() -> None:
            stream: Iterator[object] = iter(())
            try:
                spark.addTag(tag)  # the tag of the operations this thread starts
                try:
                    stream = iter(frame.mapInArrow(task, RESULT_SCHEMA).toLocalIterator())  # type: ignore[arg-type]
                    for row in stream:
                        if not self._put(row):
                            return
                finally:
                    spark.removeTag(tag)
                self._put(_END)
            except BaseException as exc:  # raised where the rows are read
                self._put(exc)
            finally:
                close = getattr(stream, "close", None)
                if close is not None:
                    with contextlib.suppress(Exception):  # a session already stopped
                        close()

        self.thread = InheritableThread(
            target=pull, daemon=True, name="treestore-connect-rows", session=spark
        )
        self.thread.start()

    def _put(self, item: object) -> bool:
        """Queue ``item`` unless the reader stopped; whether it was queued."""
        while not self._stopping.is_set():
            with contextlib.suppress(queue.Full):
                self.queue.put(item, timeout=0.2)
                return True
        return False

    def rows(self) -> Iterator[object]:
        """The result rows in order (an error of the job raised here)."""
        while (item := self.queue.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield item

    def stop(self) -> None:
        """Stop pulling (the caller interrupts the job)."""
        self._stopping.set()


def connect_pieces(
    spark: SparkSession, plan: QueryPlan, version: StoreVersion, rows: Rows | None = None
) -> Iterator[Piece]:
    """The pieces of ``plan``'s shards, in shard order, on the Connect session ``spark``: the
    first shard walked here, as the job's tasks would (a task's rows reach the client only
    once it ends: this brings the first rows as soon as a classic session does), the
    others from one Spark job (a generator: closing it early interrupts the job)."""
    shards = list(plan.shards)
    if not shards:
        return
    here, remote = (shards[:1], shards[1:]) if len(shards) > 1 else ([], shards)
    states = {s: version.manifest.trees[s] for s in remote}
    partitions = min(default_parallelism(spark), MAX_PARTITIONS)
    frame = shard_frame(spark, shard_groups(remote, states, partitions))
    task = _result_task(version.pages, states, plan, version.owner)
    tag = f"treestore-query-{uuid.uuid4().hex}"
    if rows is not None:
        rows.on_cancel(lambda: _interrupt(spark, tag))
    finished = False
    stream = _ResultStream(spark, frame, task, tag)
    try:
        with spark_errors(StoreError, "The query's Spark job"):
            trees: dict[int, ShardTree] = {}
            for shard in here:
                for output in shard_output(cached_tree(version, trees, shard), plan):
                    _check_cancel(rows)
                    yield as_piece(output)
            for row in stream.rows():
                _check_cancel(rows)
                yield decode_piece(row.kind, bytes(row.payload))  # type: ignore[attr-defined]
        finished = True
    finally:
        stream.stop()
        if not finished:
            _interrupt(spark, tag)


def _check_cancel(rows: Rows | None) -> None:
    """Stop a query cancelled (also one cancelled before its job started)."""
    if rows is not None and rows.cancelled:
        raise StoreError("The query was stopped before all its rows came.")


def _interrupt(spark: SparkSession, tag: str) -> None:
    """Interrupt the query's job (it may have ended already)."""
    with contextlib.suppress(Exception):  # a session already stopped
        spark.interruptTag(tag)
