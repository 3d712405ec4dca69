"""Running a query over a store: the path and rops in Spark tasks, one per shard;
the ops on the driver. A selective query runs on the driver alone.

Each shard's task opens that shard's tree from the store version being read,
runs the path, runs the rops over the rows, and sends the rows back in chunks.
A path that reads no attachment runs on columns (:mod:`query.walk.column_engine`), as do
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
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from query.driver.channel import RowChannel, TaskSender
from query.driver.result import Piece, Rows
from query.driver.transport import ERROR, encode_error, encode_piece
from query.ops import Value
from query.ops.columns import Chunk, ColumnType, rows_of, run_on_columns
from query.ops.compiler import OpsPipeline, compile_ops
from query.syntax.ast import Path
from query.syntax.path_parser import parse_path
from query.walk.column_engine import column_types, run_path_columns, supports
from query.walk.row_walker import run_path
from treestore.errors import StoreError, TreestoreError
from treestore.failpoints import failpoint
from treestore.settings import env_number
from treestore.spark import check_executors_python, spark_errors
from treestore.storage.pagestore import PageStore
from treestore.storage.tree import ShardState, ShardTree
from treestore.store.versions import StoreVersion, current_version, open_version

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["QueryStore", "Rows", "open_store", "shard_output", "shard_rows"]

PIECE_ROWS = 8192
"""The most rows a shard sends in one piece (a task's pieces grow to it from
:data:`_FIRST_CHUNK`, so the first rows leave early)."""
_FIRST_CHUNK = 64
_NO_OUTPUT = "done boolean"
"""The query tasks' Spark output: none (their rows go through the channel)."""
LOCAL_LIMIT = 20_000
"""A query whose leading name lookups reach at most this many children runs on the driver
(``TREESTORE_LOCAL_QUERY_LIMIT`` overrides it; -1 sends every query to Spark)."""


def shard_rows(tree: ShardTree, path: Path, rops: OpsPipeline) -> Iterator[tuple[Value, ...]]:
    """The rows of one shard: ``path`` over its tree, then ``rops``."""
    return rops.run(run_path(tree, path))


def shard_output(tree: ShardTree, path: Path, rops: OpsPipeline) -> Iterator[Chunk | list[Any]]:
    """One shard's rows for a scan: column chunks while the path and the leading rops can
    run on columns (see :mod:`query.walk.column_engine`; they may be coded, see
    :mod:`query.ops.columns`), else lists of rows that grow from :data:`_FIRST_CHUNK` to
    :data:`PIECE_ROWS` (so the first rows leave early)."""
    rows: Iterable[tuple[Value, ...]]
    if supports(path):
        column_ops, rest = rops.column_prefix(column_types(path))
        chunks = run_on_columns(column_ops, run_path_columns(tree, path))
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
        size = min(size * 4, PIECE_ROWS)


def _piece_types(path: Path, rops: OpsPipeline) -> list[ColumnType] | None:
    """The column types of every piece when the shards send columns (the path and all the
    rops run on columns), so the driver's ops can run on columns too; else ``None``."""
    return rops.output_types(column_types(path)) if supports(path) else None


def _shard_task(
    pages: PageStore,
    states: dict[int, ShardState],
    path: Path,
    rops: OpsPipeline,
    address: tuple[str, int],
    token: bytes,
    compress: bool,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function each Spark task runs: shard numbers in, nothing out.

    The task sends each shard's rows to the driver's :class:`RowChannel` at ``address``,
    in pieces that start small so the first rows reach the driver early (see
    :func:`shard_output`), then says the shard is done. A treestore error is sent as a
    piece too, and raised on the driver.
    """

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        failpoint("in-query-task")
        sender = TaskSender(address, token)
        try:
            for batch in batches:
                for shard in batch.column(0).to_pylist():
                    try:
                        tree = ShardTree(pages, states[shard], shard=shard)
                        for output in shard_output(tree, path, rops):
                            sender.send(shard, *encode_piece(output, compress=compress))
                    except TreestoreError as exc:
                        sender.send(shard, ERROR, encode_error(exc))
                    sender.finish(shard)
                    failpoint("query-shard-sent")
        finally:
            sender.close()
        yield from ()

    return run


class _BackgroundSparkJob:
    """A Spark job run to its end in a thread, in a job group (so it can be cancelled)."""

    def __init__(self, spark: SparkSession, frame: Any, task: Any, group: str) -> None:
        from pyspark import InheritableThread

        self.error: BaseException | None = None

        def run() -> None:
            spark.sparkContext.setJobGroup(group, "treestore query", interruptOnCancel=True)
            try:
                frame.mapInArrow(task, _NO_OUTPUT).collect()
            except BaseException as exc:
                self.error = exc

        self.thread = InheritableThread(target=run, daemon=True)
        self.thread.start()

    def running(self) -> bool:
        """Whether the Spark job is still running."""
        return self.thread.is_alive()

    def finish(self) -> None:
        """Wait for the end; raise the Spark job's error, if any."""
        self.thread.join()
        if self.error is not None:
            raise self.error


def _driver_address(spark: SparkSession) -> tuple[str, str | None]:
    """Where executors reach the driver (``spark.driver.host``) and the address to bind."""
    conf = spark.sparkContext.getConf()
    host = conf.get("spark.driver.host") or "127.0.0.1"
    return host, conf.get("spark.driver.bindAddress")


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
        self.last_run: str | None = None  # "local" or "spark": where the latest query ran
        self.local_limit = int(env_number("TREESTORE_LOCAL_QUERY_LIMIT", LOCAL_LIMIT, whole=True))
        """Children the leading lookups may reach for a query to run on the driver (-1: never)."""
        self._spark = spark
        self._session_factory = session_factory
        self._trees: dict[int, ShardTree] = {}

    def __repr__(self) -> str:
        """Which store, which version and how many shards, e.g.
        ``<QueryStore 'demo-work/store' version 2 of 2, 8 shards>``."""
        return (
            f"<QueryStore {self.store.location!r} version {self.store.version}"
            f" of {self._newest_or_own()}, {self.store.shards} shards>"
        )

    def _newest_or_own(self) -> int:
        try:
            return self.newest_version()
        except TreestoreError:
            return self.store.version

    @property
    def version(self) -> int:
        """The store version this handle reads."""
        return self.store.version

    @property
    def shards(self) -> int:
        """The store's shard count."""
        return self.store.shards

    def newest_version(self) -> int:
        """The newest version published in the store (a follower or a load may have
        published since this handle opened)."""
        return current_version(self.store.pages)

    def refresh(self) -> bool:
        """Move to the newest published version (queries already running keep theirs);
        whether the version changed."""
        if self.newest_version() == self.store.version:
            return False
        self.store = open_version(self.store.pages)
        self._trees = {}
        return True

    def _session(self) -> SparkSession:
        if self._spark is None:
            if self._session_factory is None:
                raise StoreError("No SparkSession was given to run the query on.")
            self._spark = self._session_factory()
        check_executors_python(self._spark)  # a user's session whose workers lack our packages
        return self._spark

    def query(self, path: str, rops: str | None = None, ops: str | None = None) -> Rows:
        """Run ``path`` on every shard, ``rops`` in each shard's task, ``ops`` on the driver.

        Syntax errors are raised here, before anything runs; the rows come lazily.
        """
        parsed = parse_path(path)
        rops_pipeline = compile_ops(rops)
        ops_pipeline = compile_ops(ops)

        def produce() -> Iterator[Piece]:
            if self._selective(parsed):
                self.last_run = "local"
                return self._local_pieces(parsed, rops_pipeline)
            self.last_run = "spark"
            return self._shard_pieces(parsed, rops_pipeline)

        path_names = parsed.labels()
        labels = ops_pipeline.column_names(rops_pipeline.column_names(path_names))
        types = {n: t for n, t in zip(path_names, parsed.column_types(), strict=True) if t}
        rows = Rows(produce, ops_pipeline, labels, types, rops_pipeline)
        rows.piece_types = _piece_types(parsed, rops_pipeline)
        return rows

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
            reached += sum(node.child_count for node in nodes)
            if reached > self.local_limit:
                return False
        return True

    def _local_pieces(self, path: Path, rops: OpsPipeline) -> Iterator[Piece]:
        """The shards' rows, computed on the driver, in shard order."""
        for shard in sorted(self.store.manifest.trees):
            rows = shard_rows(self._tree(shard), path, rops)
            while piece := list(itertools.islice(rows, PIECE_ROWS)):
                yield piece

    def _shard_pieces(self, path: Path, rops: OpsPipeline) -> Iterator[Piece]:
        """The shards' rows as the tasks send them (a generator), in shard order.

        ONE Spark job runs every shard: a few tasks, each over consecutive shards, the
        first shard first; the rows come through the driver's :class:`RowChannel` and
        are read while later tasks still run. Closing the generator early (a
        ``limit``, a ``break``, Ctrl-C) cancels the job.
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
        context = spark.sparkContext
        # a Python task costs ~50 ms on its own: a few tasks, each running its
        # consecutive shards one after the other
        partitions = min(len(shards), 2 * context.defaultParallelism)
        frame = spark.range(0, len(shards), 1, partitions).select(
            shard_of_partition.cast("int").alias("shard")
        )
        group = self.last_job_group = f"treestore-query-{uuid.uuid4().hex}"
        host, bind = _driver_address(spark)
        channel = RowChannel(host, bind)
        remote = not (context.master or "").startswith("local")
        task = _shard_task(
            self.store.pages, states, path, rops, channel.address, channel.token, remote
        )
        spark_job = _BackgroundSparkJob(spark, frame, task, group)
        finished = False
        try:
            with spark_errors(StoreError, "The query's Spark job"):
                yield from channel.pieces(shards, spark_job)
                spark_job.finish()
            finished = True
        finally:
            if not finished:
                context.cancelJobGroup(group)
            channel.close()
            if not finished:
                spark_job.thread.join()


def open_store(
    path: str | PageStore, spark: SparkSession | None = None, **kwargs: Any
) -> QueryStore:
    """Open the newest version of the store at ``path`` for queries."""
    return QueryStore(open_version(path), spark, **kwargs)
