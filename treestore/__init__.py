"""treestore: sharded record streams folded into per-shard trees, queried by paths.

The public entry points::

    import treestore
    store = treestore.open("DIR")            # read-only, one consistent version
    rows = store.query("root/+:nodes>1/+/+", rops="...", ops="...")
    rows.to_arrow(); rows.to_pandas()

Lives here: the facade (``open``), the exception tree (``errors``), settings, the
Spark session, sharding, data attachments and failpoints; the paged engine is in
``treestore.storage`` and a store's versions in ``treestore.store``.

May import: nothing. One named exception: the fixed API hangs a query-layer method
on ``treestore.open``, so :func:`open` imports ``query.driver.runner`` when it is
called. Nothing in ``query`` imports this facade, so that makes no cycle
(``tests/test_architecture.py``).
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
    SparkSetupError,
    StoreError,
    TreestoreError,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from query.driver.runner import QueryStore

__all__ = [
    "CorruptPageError",
    "JobConfigError",
    "LoadError",
    "OpError",
    "QuerySyntaxError",
    "RecordError",
    "SparkSetupError",
    "StoreError",
    "TreestoreError",
    "open",
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
