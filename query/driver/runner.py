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

import contextlib
import itertools
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from query.driver.channel import RowChannel, TaskSender
from query.driver.channel_tls import SECURITY_SETTINGS, tls_reason
from query.driver.connect_pieces import connect_pieces
from query.driver.plan import LOCAL_LIMIT_SETTING, QueryPlan, QueryRequest, plan_query
from query.driver.result import Piece, Rows
from query.driver.shard_groups import shard_groups
from query.driver.shard_output import (
    PIECE_ROWS,
    cached_tree,
    encoded_shards,
    shard_output,
    shard_rows,
)
from treestore.errors import StoreError, TreestoreError
from treestore.failpoints import failpoint
from treestore.settings import env_number, task_started
from treestore.spark import check_executors_python, is_connect, spark_errors
from treestore.storage.pagestore import PageStore
from treestore.storage.tree import ShardState, ShardTree
from treestore.store.versions import StoreVersion, current_version, open_version

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "QueryPlan",
    "QueryRequest",
    "QueryStore",
    "Rows",
    "open_store",
    "shard_output",
    "shard_rows",
]

_RECANCEL_SECONDS = 0.2
"""How often a cancelled query's job is cancelled again until it ends (see
:meth:`_BackgroundSparkJob.cancel`)."""
LOCAL_LIMIT = 20_000
"""A query whose leading name lookups reach at most this many children runs on the driver
(``TREESTORE_LOCAL_QUERY_LIMIT`` overrides it; -1 sends every query to Spark)."""


def _shard_task(
    pages: PageStore,
    states: dict[int, ShardState],
    plan: QueryPlan,
    address: tuple[str, int],
    token: bytes,
    certificate: bytes | None,
    compress: bool,
    owner: str | None = None,
) -> Callable[[Iterable[tuple[int, ...]]], Iterator[Any]]:
    """The function each Spark task runs: its group of shard numbers in, nothing out.

    The task sends each shard's rows to the driver's :class:`RowChannel` at ``address``,
    in pieces that start small so the first rows reach the driver early (see
    :func:`shard_output`), then says the shard is done. A treestore error is sent as a
    piece too, and raised on the driver. Once the driver wants no more rows, the task
    sends nothing more and ends without an error (see :meth:`RowChannel.stop_senders`).
    """

    def run(groups: Iterable[tuple[int, ...]]) -> Iterator[Any]:
        task_started()
        failpoint("in-query-task")
        sender = TaskSender(address, token, certificate)
        try:
            for group in groups:  # read to the end even when stopped: Spark keeps the worker
                shards = encoded_shards(
                    pages, states, plan, group, owner, compress, stopped=sender.stopped
                )
                for shard, pieces in shards:
                    if sender.stopped():
                        continue  # the driver wants no more rows: end without an error
                    for kind, payload in pieces:
                        if sender.stopped():
                            break
                        sender.send(shard, kind, payload)
                    sender.finish(shard)
                    failpoint("query-shard-sent")
        finally:
            sender.close()
        yield from ()

    return run


class _BackgroundSparkJob:
    """A Spark job run to its end in a thread, in a job group (so it can be cancelled): a
    task per group of shards, as an RDD job (an empty DataFrame job's ``mapInArrow``
    took 0.20-0.25 s to run on a warm local session, the same job on an RDD 0.10-0.12 s:
    no query to analyze, optimize and plan)."""

    def __init__(
        self, spark: SparkSession, groups: list[tuple[int, ...]], task: Any, group: str
    ) -> None:
        from pyspark import InheritableThread

        self.error: BaseException | None = None
        self._context = spark.sparkContext
        self._group = group
        self._cancelling = False

        def run() -> None:
            spark.sparkContext.setJobGroup(group, "treestore query", interruptOnCancel=True)
            try:
                self._context.parallelize(groups, len(groups)).mapPartitions(task).collect()
            except BaseException as exc:
                self.error = exc

        self.thread = InheritableThread(target=run, daemon=True)
        self.thread.start()

    def running(self) -> bool:
        """Whether the Spark job is still running."""
        return self.thread.is_alive()

    def cancel(self) -> None:
        """Cancel the job, also one Spark has not got yet: cancelling a job group before
        its job is submitted does nothing, so the cancel is said again every
        :data:`_RECANCEL_SECONDS` until the job's thread ends (from a thread of its own:
        returns at once)."""
        if self._cancelling:
            return
        self._cancelling = True

        def cancel_until_ended() -> None:
            while self.thread.is_alive():
                with contextlib.suppress(Exception):  # a session stopping
                    self._context.cancelJobGroup(self._group)
                self.thread.join(_RECANCEL_SECONDS)

        threading.Thread(target=cancel_until_ended, daemon=True, name="treestore-cancel").start()

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
        self.store_version = version
        """The published version this handle reads (its manifest and page store)."""
        self.last_job_group: str | None = None  # the Spark job group of the latest query
        self.last_run: str | None = None  # "local" or "spark": where the latest query ran
        self.local_limit = int(env_number(LOCAL_LIMIT_SETTING, LOCAL_LIMIT, whole=True))
        """Children the leading lookups may reach for a query to run on the driver (-1: never)."""
        self._spark = spark
        self._session_factory = session_factory
        self._trees: dict[int, ShardTree] = {}

    def __repr__(self) -> str:
        """Which store, which version and how many shards, e.g.
        ``<QueryStore 'demo-work/store' version 2 of 2, 8 shards>``."""
        return (
            f"<QueryStore {self.store_version.location!r} version {self.store_version.version}"
            f" of {self._newest_or_own()}, {self.store_version.shards} shards>"
        )

    def _newest_or_own(self) -> int:
        try:
            return self.newest_version()
        except TreestoreError:
            return self.store_version.version

    @property
    def version(self) -> int:
        """The store version this handle reads."""
        return self.store_version.version

    @property
    def shards(self) -> int:
        """The store's shard count."""
        return self.store_version.shards

    def newest_version(self) -> int:
        """The newest version published in the store (a follower or a load may have
        published since this handle opened)."""
        return current_version(self.store_version.pages)

    def refresh(self) -> bool:
        """Move to the newest published version (queries already running keep theirs);
        whether the version changed."""
        if self.newest_version() == self.store_version.version:
            return False
        self.store_version = open_version(self.store_version.pages)
        self._trees = {}
        return True

    def _session(self) -> SparkSession:
        if self._spark is None:
            if self._session_factory is None:
                raise StoreError("No SparkSession was given to run the query on.")
            self._spark = self._session_factory()
        check_executors_python(self._spark)  # a user's session whose workers lack our packages
        return self._spark

    def plan(self, path: str, rops: str | None = None, ops: str | None = None) -> QueryPlan:
        """The plan of a query (see :mod:`query.driver.plan`): where it runs, which shards,
        what runs on columns and what on rows, and why. Syntax errors are raised here; it
        reads only the pages of the path's leading name lookups, and starts no Spark."""
        return self.plan_request(QueryRequest(path, rops, ops))

    def plan_request(self, request: QueryRequest) -> QueryPlan:
        """The plan of ``request`` (see :meth:`plan`)."""
        return plan_query(
            request,
            shards=tuple(self.store_version.manifest.trees),
            tree_of=self.tree,
            local_limit=self.local_limit,
            version=self.store_version.version,
            location=self.store_version.location,
            columns=self.store_version.manifest.columns,
        )

    def query(self, path: str, rops: str | None = None, ops: str | None = None) -> Rows:
        """Run ``path`` on every shard, ``rops`` in each shard's task, ``ops`` on the driver.

        The query is planned here (:meth:`plan`; syntax errors are raised before anything
        runs); the rows come lazily, as the plan says (``Rows.plan``).
        """
        return self.run(self.plan(path, rops, ops))

    def run(self, plan: QueryPlan) -> Rows:
        """The rows of a planned query, lazily (nothing runs until they are asked for), at
        the version it was planned on (a :meth:`refresh` later does not change them)."""
        version = self.store_version
        if plan.version is not None and plan.version != version.version:
            raise StoreError(
                f"This query was planned on version {plan.version} of the store, and this "
                f"handle reads version {version.version}: plan it again."
            )
        trees = self._trees

        def produce() -> Iterator[Piece]:
            if plan.where == "driver":
                self.last_run = "local"
                return self._local_pieces(plan, version, trees)
            self.last_run = "spark"
            spark = self._session()
            if is_connect(spark):
                return connect_pieces(spark, plan, version, rows)
            return self._shard_pieces(plan, version, rows)

        rows = Rows(produce, plan, to_frame=_frame_of_plan)
        return rows

    def tree(self, shard: int, version: StoreVersion | None = None) -> ShardTree:
        """Shard ``shard``'s tree at ``version`` (default: the version this handle reads),
        opened once and kept while the handle reads that version. A caller that reads
        several shards as one version takes :attr:`store_version` once and passes it (a
        :meth:`refresh` in another thread may move the handle on meanwhile)."""
        return cached_tree(version or self.store_version, self._trees, shard)

    def _local_pieces(
        self, plan: QueryPlan, version: StoreVersion, trees: dict[int, ShardTree]
    ) -> Iterator[Piece]:
        """The shards' rows, computed on the driver, in shard order."""
        for shard in plan.shards:
            tree = cached_tree(version, trees, shard)
            rows = shard_rows(tree, plan.path, plan.rops.pipeline)
            while piece := list(itertools.islice(rows, PIECE_ROWS)):
                yield piece

    def _shard_pieces(
        self, plan: QueryPlan, version: StoreVersion, rows: Rows | None = None
    ) -> Iterator[Piece]:
        """The shards' rows as the tasks send them (a generator), in shard order.

        ONE Spark job runs every shard: a task per core, each over consecutive shards of
        about equal size (:mod:`query.driver.shard_groups`), the first shard first; the
        rows come through the driver's :class:`RowChannel` and are read while later tasks
        still run. Closing the generator early (a ``limit``, a ``break``, Ctrl-C) cancels
        the job, and so does ``rows.cancel()`` from another thread.
        """
        states = {s: version.manifest.trees[s] for s in plan.shards}
        if not states:
            return
        spark = self._session()
        shards = list(plan.shards)
        context = spark.sparkContext
        groups = shard_groups(shards, states, context.defaultParallelism)
        group = self.last_job_group = f"treestore-query-{uuid.uuid4().hex}"
        host, bind = _driver_address(spark)
        conf = context.getConf()
        settings = {name: conf.get(name) for name in SECURITY_SETTINGS}
        channel = RowChannel(host, bind, tls=tls_reason(settings) is not None)
        remote = not (context.master or "").startswith("local")
        task = _shard_task(
            version.pages, states, plan, channel.address, channel.token, channel.certificate,
            remote, version.owner,
        )  # fmt: skip
        spark_job = _BackgroundSparkJob(spark, groups, task, group)
        if rows is not None:
            rows.on_cancel(lambda: _stop_soon(channel, spark_job))
        finished = False
        try:
            with spark_errors(StoreError, "The query's Spark job"):
                yield from channel.pieces(shards, spark_job)
                if channel.stopping:
                    raise StoreError("The query was stopped before all its rows came.")
                spark_job.finish()
            finished = True
        finally:
            if not finished:
                _stop(channel, spark_job)
            channel.close()


STOP_GRACE_SECONDS = 1.0
"""How long a stopped query's tasks have to end by themselves before its Spark job is
cancelled (a cancelled task's Python worker is killed: the next query would start new
ones)."""


def _stop(channel: RowChannel, spark_job: _BackgroundSparkJob) -> None:
    """End a query's Spark job early, waiting for its end: its tasks are told to stop
    (they end without an error at their next piece), and the job is cancelled if it still
    runs :data:`STOP_GRACE_SECONDS` later (a task busy in a rop, say)."""
    channel.stop_senders()
    spark_job.thread.join(STOP_GRACE_SECONDS)
    if spark_job.running():
        spark_job.cancel()
        spark_job.thread.join()


def _stop_soon(channel: RowChannel, spark_job: _BackgroundSparkJob) -> None:
    """:func:`_stop` without waiting (``Rows.cancel`` from another thread: the reading
    thread's rows end at once, the job within :data:`STOP_GRACE_SECONDS`)."""
    channel.stop_senders()
    timer = threading.Timer(STOP_GRACE_SECONDS, spark_job.cancel)
    timer.daemon = True
    timer.start()


def _frame_of_plan(spark: SparkSession, plan: QueryPlan) -> DataFrame:
    """The DataFrame of a planned query (the source imports pyspark: loaded when used)."""
    from query.driver.spark_source import frame_of_plan

    return frame_of_plan(spark, plan)


def open_store(
    path: str | PageStore, spark: SparkSession | None = None, **kwargs: Any
) -> QueryStore:
    """Open the newest version of the store at ``path`` for queries."""
    return QueryStore(open_version(path), spark, **kwargs)
