"""A store as a Spark DataFrame source: ``spark.read.format("treestore")``.

A PySpark Python data source (:class:`TreestoreDataSource`) whose rows are a query's
rows: the path and the rops run inside the read's tasks, a task per group of
consecutive shards, and the rows go to Spark as Arrow batches. It works the same on a
classic session and on a Spark Connect session (Spark runs the source's Python on its
own side: the store must be reachable from there, as for a load)::

    treestore.register(spark)            # once per session (to_spark does it too)
    frame = (spark.read.format("treestore")
             .option("query", "root/+/+:+hits")      # the path
             .option("rops", "...")                  # optional: run in the tasks
             .option("version", "3")                 # optional: an older version
             .load("/data/store"))

Options: ``query`` (the path; or ``path`` when the store is given as the ``store``
option: Spark's ``load(STORE)`` sets ``path`` itself), ``rops``, ``version`` (default:
the newest published when the DataFrame is planned, then kept by all its tasks) and
``partitions`` (default: one per shard, at most :data:`MAX_PARTITIONS`) and ``pushdown``
(below). Driver-side
``ops`` have no place in a DataFrame: the DataFrame's own operations are its driver.

The schema comes from the path (:mod:`query.driver.frame_schema`), so
``frame.printSchema()`` runs no Spark job.

Filter pushdown is the ``pushdown`` option (``"true"``): equality and IN filters on a
column of node names then narrow the walk (:mod:`query.driver.frame_filters`), and
Spark applies the rest. It is off by default because Spark 4.3 keeps a Python source's
pushed-down scan on the DataFrame: another query of the same DataFrame (``df.count()``
after ``df.filter(...).count()``) would read the narrowed rows. With the option, read a
DataFrame for one filtered query; without it, every query of a DataFrame is exact and
Spark filters the rows itself. Naming the names in the path (``root/US/+``) narrows the
walk always.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from query.driver.frame_filters import NOTHING, push_filters
from query.driver.frame_schema import arrow_schema, batch_of, frame_schema
from query.driver.plan import QueryPlan, QueryRequest, plan_query
from query.driver.shard_groups import shard_groups
from query.driver.shard_output import cached_tree, shard_output
from treestore.errors import OpError, StoreError, TreestoreError
from treestore.settings import task_started
from treestore.spark import default_parallelism, spark_errors
from treestore.storage.tree import ShardTree
from treestore.store.versions import StoreVersion, open_version

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.datasource import Filter
    from pyspark.sql.types import StructType

__all__ = [
    "FORMAT",
    "MAX_PARTITIONS",
    "PUSHDOWN_SETTING",
    "NarrowingReader",
    "TreestoreDataSource",
    "frame_of_plan",
    "register",
]

FORMAT = "treestore"
MAX_PARTITIONS = 64
"""The most input partitions a read makes by default (a Python task costs ~50 ms)."""
PUSHDOWN_SETTING = "spark.sql.python.filterPushdown.enabled"
"""Spark's switch for Python data sources' filter pushdown (off by default);
:func:`register` turns it on for the session."""


def _said_in_one_line(error: TreestoreError) -> TreestoreError:
    """``error`` without its frames and cause, to raise again where Spark called the
    source: Spark shows the source's traceback in its own message, and the error's own
    frames would bury the one line that says what to do."""
    error.__cause__ = error.__context__ = None
    return error.with_traceback(None)


class _Options:
    """A read's options, checked: where the store is, the query, the version."""

    def __init__(self, options: Mapping[str, str]) -> None:
        given = {str(k).lower(): str(v) for k, v in options.items()}
        if "ops" in given:
            raise OpError(
                "a DataFrame has no driver-side ops: use the DataFrame's own operations "
                "(filter, groupBy, orderBy...), or pass ops that can run per shard as rops"
            )
        self.location = given.get("store") or given.get("path")
        path = given.get("query") or (given.get("path") if "store" in given else None)
        if not self.location:
            raise StoreError(
                'no store to read: spark.read.format("treestore").option("query", PATH).load(STORE)'
            )
        if not path:
            raise StoreError(
                'no path to query: add .option("query", "root/+/+:+hits") (the option '
                '"path" is the store\'s location, which load(STORE) sets)'
            )
        self.request = QueryRequest(path, given.get("rops") or None)
        self.version = _whole(given, "version")
        self.partitions = _whole(given, "partitions")
        self.pushdown = given.get("pushdown", "false").strip().lower() == "true"

    def open(self) -> StoreVersion:
        """The store's version to read (the newest published one, if none was named)."""
        assert self.location is not None
        return open_version(self.location, self.version)


def _whole(options: Mapping[str, str], name: str) -> int | None:
    text = options.get(name)
    if text is None:
        return None
    if not text.strip().isdigit() or int(text) < 1:
        raise StoreError(f"the option {name!r} takes a whole number from 1, not {text!r}")
    return int(text)


def _frame_plan(version: StoreVersion, request: QueryRequest) -> QueryPlan:
    """The plan of ``request`` as a DataFrame's tasks run it (every shard, in Spark: the
    plan reads no tree to choose)."""
    trees: dict[int, ShardTree] = {}
    return plan_query(
        request,
        shards=tuple(version.manifest.trees),
        tree_of=lambda shard: cached_tree(version, trees, shard),
        local_limit=-1,
        version=version.version,
        location=version.location,
        columns=version.manifest.columns,
    )


class TreestoreDataSource(DataSource):
    """``spark.read.format("treestore")``: a query's rows as a DataFrame (see the module)."""

    @classmethod
    def name(cls) -> str:
        """The format's name: ``treestore``."""
        return FORMAT

    def schema(self) -> StructType:
        """The rows' schema, from the path (no Spark job)."""
        try:
            options = _Options(self.options)
            version = options.open()
            plan = _frame_plan(version, options.request)
            trees: dict[int, ShardTree] = {}
            return frame_schema(plan, (cached_tree(version, trees, s) for s in plan.shards))
        except TreestoreError as exc:
            raise _said_in_one_line(exc) from None

    def reader(self, schema: StructType) -> TreestoreReader:
        """The reader of the rows, typed ``schema`` (one that takes filters with the
        ``pushdown`` option)."""
        try:
            options = _Options(self.options)
            kind = NarrowingReader if options.pushdown else TreestoreReader
            return kind(options, schema)
        except TreestoreError as exc:
            raise _said_in_one_line(exc) from None


class TreestoreReader(DataSourceReader):
    """Reads a query's rows: one input partition per group of consecutive shards, all at
    one version (named, or the newest when the reader is made)."""

    def __init__(self, options: _Options, schema: StructType) -> None:
        version = options.open()
        self.pages = version.pages  # carries the object store settings of where it opened
        self.version = version.version
        self.request = options.request
        self.wanted_partitions = options.partitions
        self.path_text: str | None = options.request.path
        self.schema = arrow_schema(schema)
        self.shards = tuple(sorted(version.manifest.trees))
        self.states = dict(version.manifest.trees)
        self._plan: QueryPlan | None = None

    def plan(self) -> QueryPlan | None:
        """The plan the tasks run (``None``: the filters leave no row)."""
        if self.path_text is None:
            return None
        if self._plan is None:
            version = open_version(self.pages, self.version)
            request = QueryRequest(self.path_text, self.request.rops)
            self._plan = _frame_plan(version, request)
        return self._plan

    def partitions(self) -> list[InputPartition]:
        """Groups of consecutive shards of about equal nodes (:func:`shard_groups`), at
        most :data:`MAX_PARTITIONS` (or the ``partitions`` option), none when the filters
        leave no row."""
        plan = self.plan()
        if plan is None or not plan.shards:
            return []
        count = self.wanted_partitions or MAX_PARTITIONS
        return [InputPartition(group) for group in shard_groups(plan.shards, self.states, count)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The rows of the partition's shards, shard by shard, as Arrow batches."""
        task_started()
        plan = self.plan()
        if plan is None or partition.value is None:
            return
        try:
            version = open_version(self.pages, self.version)
            trees: dict[int, ShardTree] = {}
            for shard in partition.value:
                for piece in shard_output(cached_tree(version, trees, shard), plan):
                    batch = batch_of(piece, self.schema)
                    if batch.num_rows:
                        yield batch
        except TreestoreError as exc:
            raise _said_in_one_line(exc) from None


class NarrowingReader(TreestoreReader):
    """A :class:`TreestoreReader` that takes the filters the path can (the ``pushdown``
    option): equality and IN filters on columns of node names narrow the walk."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        """Take the equality and IN filters on columns of node names (see
        :mod:`query.driver.frame_filters`); give the others back to Spark."""
        if self.request.rops:
            yield from filters
            return
        from query.syntax.path_parser import parse_path

        narrowed, left = push_filters(parse_path(self.request.path), filters)
        self.path_text = None if narrowed is NOTHING else str(narrowed)
        yield from left


_REGISTERED: dict[int, Any] = {}


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("treestore")`` known to ``spark`` (a classic or a Spark
    Connect session), with Spark's filter pushdown for Python sources on (the ``pushdown``
    option needs it; without the option a reader takes no filter); once per session."""
    if _REGISTERED.get(id(spark)) is spark:
        return
    with spark_errors(StoreError, "Registering the treestore DataFrame source"):
        spark.dataSource.register(TreestoreDataSource)
        spark.conf.set(PUSHDOWN_SETTING, "true")
    _REGISTERED[id(spark)] = spark


def frame_of_plan(spark: SparkSession, plan: QueryPlan) -> DataFrame:
    """The DataFrame of a planned query's rows (its path and rops, at its version), read by
    the source in twice as many tasks as the session runs at once (at most one per
    shard); refused when the plan has driver-side ops."""
    if plan.ops.pipeline:
        raise OpError(
            f"ops={plan.ops.pipeline.text!r} run on the driver, which a DataFrame does not "
            "have: pass them as rops if they can run per shard, or use the DataFrame's own "
            "operations (filter, groupBy, orderBy...)"
        )
    if plan.location is None:
        raise StoreError("these rows come from no store: there is nothing to read as a DataFrame")
    register(spark)
    # a few tasks, each over consecutive shards (a Python task costs ~50 ms); twice the
    # cores, so that the DataFrame's own later stages start with that many partitions
    partitions = min(len(plan.shards), 2 * default_parallelism(spark)) or 1
    reader = spark.read.format(FORMAT).option("query", plan.text)
    reader = reader.option("partitions", str(partitions))
    if plan.rops.pipeline:
        reader = reader.option("rops", plan.rops.pipeline.text)
    if plan.version is not None:
        reader = reader.option("version", str(plan.version))
    frame = reader.load(plan.location)
    with spark_errors(StoreError, "Reading the store as a DataFrame"):
        frame.schema  # noqa: B018 - analysed now, so a bad query fails here, in one line
    return frame
