"""Running a query over a store: the path and rops in Spark tasks, one per shard;
the ops on the driver. A selective query runs on the driver alone.

Each shard's task opens that shard's tree from the store version being read,
runs the path, runs the rops over the rows, and sends the rows back in chunks.
A path that reads no attachment runs on columns (:mod:`query.colexec`), as do
the leading rops that can (``str``, ``merge``); those chunks travel as Arrow
IPC. Rows from row ops travel as msgpack lists. Either way ints stay ints and
nulls stay nulls. The driver reads the shards' rows as they arrive, in shard
order, and runs the ops over them; the first row is out before the last
shard's task has run.

Selective queries skip Spark: when the path's leading name lookups (``root/12345/...``)
reach nodes with at most :data:`LOCAL_LIMIT` children in all, across the shards,
the driver runs the path and rops itself, reading only those pages (a Spark job
costs more than the whole lookup).
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import msgpack
import pyarrow as pa

from query.ast import Path
from query.colexec import column_types, run_path_columns, supports
from query.ops import Value
from query.ops.columns import Chunk, rows_of
from query.parser import parse_path
from query.pathexec import run_path
from query.plan import OpsPlan, compile_ops
from query.rows import Piece, Rows
from treestore.errors import OpError, StoreError, TreestoreError
from treestore.failpoints import failpoint
from treestore.pagestore import PageStore
from treestore.spark import spark_errors
from treestore.store import StoreVersion, open_version
from treestore.tree import ShardState, ShardTree

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["QueryStore", "Rows", "open_store", "shard_output", "shard_rows"]

_ROW, _ERROR, _COLUMNS, _FILE = 0, 1, 2, 3
_BATCH_ROWS = 8192
_FIRST_CHUNK = 64
_RESULT_SCHEMA = "kind tinyint, payload binary"
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")
"""Column chunks are LZ4-compressed: names compress well, and every byte crosses the JVM."""
LOCAL_LIMIT = 20_000
"""A query whose leading name lookups reach at most this many children runs on the driver
(``TREESTORE_LOCAL_QUERY_LIMIT`` overrides it; -1 sends every query to Spark)."""


def _error_payload(exc: TreestoreError) -> bytes:
    if isinstance(exc, OpError):
        fields = {"reason": exc.reason, "text": exc.text, "column": exc.column, "hint": exc.hint}
        return msgpack.packb({"type": "OpError", **fields})
    return msgpack.packb({"type": "StoreError", "message": str(exc)})


def _raise_payload(payload: bytes) -> None:
    error = msgpack.unpackb(payload)
    if error["type"] == "OpError":
        raise OpError(error["reason"], error["text"], 1, error["column"], hint=error["hint"])
    raise StoreError(error["message"])


def shard_rows(tree: ShardTree, path: Path, rops: OpsPlan) -> Iterator[tuple[Value, ...]]:
    """The rows of one shard: ``path`` over its tree, then ``rops``."""
    return rops.run(run_path(tree, path))


def shard_output(tree: ShardTree, path: Path, rops: OpsPlan) -> Iterator[Chunk | list[Any]]:
    """One shard's rows for a scan: column chunks while the path and the leading rops can
    run on columns (see :mod:`query.colexec`), else lists of rows that grow from
    :data:`_FIRST_CHUNK` to :data:`_BATCH_ROWS` (so the first rows leave early)."""
    rows: Iterable[tuple[Value, ...]]
    if supports(path):
        column_ops, rest = rops.column_prefix(column_types(path))
        chunks: Iterator[Chunk] = run_path_columns(tree, path)
        for op in column_ops:
            chunks = op.run_columns(chunks)
        if not rest:
            yield from chunks
            return
        rows = rest.run(rows_of(chunks))  # type: ignore[arg-type]
    else:
        rows = shard_rows(tree, path, rops)
    size = _FIRST_CHUNK
    iterator = iter(rows)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk
        size = min(size * 4, _BATCH_ROWS)


def _packed(output: Chunk | list[Any], scratch: str | None = None) -> pa.RecordBatch:
    """A chunk of a shard's output as the task sends it: Arrow IPC for typed columns
    (written to a file in ``scratch`` when given, LZ4-compressed inline otherwise),
    msgpack for rows."""
    if isinstance(output, list):
        return _result_batch(_ROW, msgpack.packb(output))
    count, columns = output
    if not columns:
        return _result_batch(_ROW, msgpack.packb([()] * count))
    batch = pa.RecordBatch.from_arrays(columns, [f"c{i}" for i in range(len(columns))])
    if scratch is not None:
        name = os.path.join(scratch, f"{uuid.uuid4().hex}.arrow")
        with pa.OSFile(name + ".tmp", "wb") as out, pa.ipc.new_stream(out, batch.schema) as writer:
            writer.write_batch(batch)
        os.rename(name + ".tmp", name)
        return _result_batch(_FILE, name.encode())
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=_IPC_OPTIONS) as writer:
        writer.write_batch(batch)
    return _result_batch(_COLUMNS, sink.getvalue().to_pybytes())


def _unpacked(kind: int, payload: bytes) -> Piece:
    """One chunk the driver received, as a piece of the result."""
    if kind == _ERROR:
        _raise_payload(payload)
    if kind == _FILE:
        name = payload.decode()
        with pa.OSFile(name, "rb") as source:
            batch = pa.ipc.open_stream(source.read_buffer()).read_next_batch()
        os.remove(name)
        return batch
    if kind == _COLUMNS:
        return pa.ipc.open_stream(payload).read_next_batch()
    return list(map(tuple, msgpack.unpackb(payload)))


def _shard_task(
    pages: PageStore,
    states: dict[int, ShardState],
    path: Path,
    rops: OpsPlan,
    scratch: str | None = None,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function each Spark task runs: shard numbers in, chunks of packed rows out.

    Rows leave in chunks that start small, so the first rows reach the driver
    early (see :func:`shard_output`). With ``scratch`` (a folder the driver can
    read: Spark runs on the driver's machine), column chunks go there as files
    and only their names go through Spark.
    """

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        failpoint("in-query-task")
        for batch in batches:
            for shard in batch.column(0).to_pylist():
                try:
                    tree = ShardTree(pages, states[shard], shard=shard)
                    for output in shard_output(tree, path, rops):
                        yield _packed(output, scratch)
                except TreestoreError as exc:
                    yield _result_batch(_ERROR, _error_payload(exc))

    return run


def _result_batch(kind: int, payload: bytes) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array([kind], pa.int8()), pa.array([payload], pa.binary())], ["kind", "payload"]
    )


class QueryStore:
    """A read-only store at one consistent version, answering path queries.

    Queries run as Spark jobs on ``spark`` (by default the process's session,
    created on first use with treestore's settings).
    """

    def __init__(
        self,
        version: StoreVersion,
        spark: SparkSession | None = None,
        session_factory: Callable[[], SparkSession] | None = None,
    ) -> None:
        self.store = version
        self.last_job_group: str | None = None  # the Spark job group of the latest query
        self.last_plan: str | None = None  # "local" or "spark": how the latest query ran
        self.results_via_files = True
        """With Spark running on this machine (a ``local`` master), column chunks come back
        through a temporary folder instead of through the JVM (several times faster)."""
        self.local_limit = int(os.environ.get("TREESTORE_LOCAL_QUERY_LIMIT", LOCAL_LIMIT))
        """Children the leading lookups may reach for a query to run on the driver (-1: never)."""
        self._spark = spark
        self._session_factory = session_factory
        self._trees: dict[int, ShardTree] = {}

    @property
    def version(self) -> int:
        """The store version this handle reads."""
        return self.store.version

    @property
    def shards(self) -> int:
        """The store's shard count."""
        return self.store.shards

    def _session(self) -> SparkSession:
        if self._spark is None:
            if self._session_factory is None:
                raise StoreError("No SparkSession was given to run the query on.")
            self._spark = self._session_factory()
        return self._spark

    def query(self, path: str, rops: str | None = None, ops: str | None = None) -> Rows:
        """Run ``path`` on every shard, ``rops`` in each shard's task, ``ops`` on the driver.

        Syntax errors are raised here, before anything runs; the rows come lazily.
        """
        parsed = parse_path(path)
        shard_plan = compile_ops(rops)
        driver_plan = compile_ops(ops)

        def produce() -> Iterator[Piece]:
            if self._selective(parsed):
                self.last_plan = "local"
                return self._local_pieces(parsed, shard_plan)
            self.last_plan = "spark"
            return self._shard_pieces(parsed, shard_plan)

        return Rows(produce, driver_plan, None if (shard_plan or driver_plan) else parsed.labels())

    def _tree(self, shard: int) -> ShardTree:
        tree = self._trees.get(shard)
        if tree is None:
            state = self.store.manifest.trees[shard]
            tree = self._trees[shard] = ShardTree(self.store.pages, state, shard=shard)
        return tree

    def _selective(self, path: Path) -> bool:
        """Whether the path's leading name lookups reach few enough children to run here."""
        if self.local_limit < 0 or not self.store.manifest.trees:
            return False
        leading = []
        for element in path.elements:
            if element.kind != "names" or element.default is not None:
                break
            leading.append(element)
        if not leading:
            return False
        if len(leading) == len(path.elements):
            return True
        reached = 0
        for shard in self.store.manifest.trees:
            tree = self._tree(shard)
            nodes = [tree.root]
            for element in leading:
                nodes = [
                    child
                    for node in nodes
                    for name in element.names
                    if (child := tree.child(node, name)) is not None
                ]
            reached += sum(node.node_count for node in nodes)
            if reached > self.local_limit:
                return False
        return True

    def _local_pieces(self, path: Path, rops: OpsPlan) -> Iterator[Piece]:
        """The shards' rows, computed on the driver, in shard order."""
        for shard in sorted(self.store.manifest.trees):
            rows = shard_rows(self._tree(shard), path, rops)
            while piece := list(itertools.islice(rows, _BATCH_ROWS)):
                yield piece

    def _shard_pieces(self, path: Path, rops: OpsPlan) -> Iterator[Piece]:
        """The shards' rows as each shard's task sends them (a generator).

        The job runs partition by partition (one shard each), the next one
        computed while the current one's rows are read. Closing the generator
        early (a ``limit``, a ``break``, Ctrl-C) cancels what is still running.
        """
        from pyspark.sql import functions as F

        states = dict(self.store.manifest.trees)
        if not states:
            return
        spark = self._session()
        shards = sorted(states)
        shard_of_partition = F.element_at(
            F.array(*[F.lit(s) for s in shards]), (F.col("id") + 1).cast("int")
        )
        frame = spark.range(0, len(shards), 1, len(shards)).select(
            shard_of_partition.cast("int").alias("shard")
        )
        context = spark.sparkContext
        scratch = None
        if self.results_via_files and (context.master or "").startswith("local"):
            scratch = tempfile.mkdtemp(prefix="treestore-query-")
        task = _shard_task(self.store.pages, states, path, rops, scratch)
        group = self.last_job_group = f"treestore-query-{uuid.uuid4().hex}"
        context.setJobGroup(group, "treestore query", interruptOnCancel=True)
        finished = False
        try:
            with spark_errors(StoreError, "The query's Spark job"):
                results = frame.mapInArrow(task, _RESULT_SCHEMA).toLocalIterator(True)
                for kind, payload in results:
                    yield _unpacked(kind, payload)
            finished = True
        finally:
            if not finished:
                context.cancelJobGroup(group)
            context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)


def open_store(
    path: str | PageStore, spark: SparkSession | None = None, **kwargs: Any
) -> QueryStore:
    """Open the newest version of the store at ``path`` for queries."""
    return QueryStore(open_version(path), spark, **kwargs)
