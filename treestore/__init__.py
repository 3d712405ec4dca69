"""treestore: sharded record streams folded into per-shard trees, queried by paths.

The public entry points::

    import treestore
    store = treestore.open("DIR")            # read-only, one consistent version
    rows = store.query("root/+:nodes>1/+/+", rops="...", ops="...")
    rows.to_arrow(); rows.to_pandas()
    rows.to_spark(spark)                    # the same rows as a Spark DataFrame
    treestore.register(spark)               # spark.read.format("treestore")...load("DIR")
    remote = treestore.connect("http://127.0.0.1:8040")   # a running `treestore serve`

Lives here: the facade (``open``), the exception tree (``errors``), settings, the
Spark session, sharding, data attachments and failpoints; the paged engine is in
``treestore.storage`` and a store's versions in ``treestore.store``.

May import: nothing. Named exceptions: the fixed API hangs a query-layer method
on ``treestore.open``, so :func:`open` imports ``query.driver.runner`` when it is
called, :func:`connect` imports ``query.remote.client`` and :func:`register`
``query.driver.spark_source``. Nothing in ``query``
imports this facade, so that makes no cycle (``tests/test_architecture.py``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from treestore.errors import (
    CorruptPageError,
    JobConfigError,
    LoadError,
    OpError,
    QuerySyntaxError,
    RecordError,
    ServiceError,
    SparkSetupError,
    StoreError,
    TreestoreError,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from query.driver.runner import QueryStore
    from query.remote.client import RemoteStore

__all__ = [
    "CorruptPageError",
    "JobConfigError",
    "LoadError",
    "OpError",
    "QuerySyntaxError",
    "RecordError",
    "ServiceError",
    "SparkSetupError",
    "StoreError",
    "TreestoreError",
    "connect",
    "open",
    "register",
]

__version__ = "0.1.0"


def open(path: str | os.PathLike[str], spark: SparkSession | None = None) -> QueryStore:
    """Open the store at ``path`` read-only, at its newest published version.

    Queries run on ``spark``; without one, the process's SparkSession is used,
    created on the first query with treestore's settings.
    """
    from treestore.packages import require_own_packages

    require_own_packages("query")  # a user's query.py beside the script: named, not a puzzle
    from query.driver.runner import open_store
    from treestore.spark import check_executors_python, get_session

    check_executors_python(spark)  # a session of the caller's whose workers lack our packages
    return open_store(os.fspath(path), spark, session_factory=get_session)


def connect(url: str, store: str | None = None, token: str | None = None) -> RemoteStore:
    """A store served by a running ``treestore serve`` at ``url``: its ``query(...)`` gives
    rows with the interface of ``open(...).query(...)``, read over HTTP (no Spark, no Java).

    ``store`` names the served store (``None``: the one the service serves); ``token`` is
    the service's bearer token, if it needs one.
    """
    from query.remote.client import connect as connect_remote

    return connect_remote(url, store, token)


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("treestore")`` known to ``spark`` (a classic or a Spark
    Connect session): a query's rows as a DataFrame, read in Spark's tasks::

        spark.read.format("treestore").option("query", "root/+/+:+hits").load("DIR")

    Options: ``query`` (the path), ``rops``, ``version``, ``partitions``; see
    :mod:`query.driver.spark_source`. ``rows.to_spark(spark)`` registers it itself.
    """
    from query.driver.spark_source import register as register_source

    register_source(spark)
