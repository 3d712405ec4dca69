"""Queries through a Spark Connect session, in a process of its own; answers as JSON.

``python -m tests.support.connect_queries URL STORE OUT`` opens a Connect session (the
way a user does: ``SparkSession.builder.remote(URL)``), gives it to ``treestore.open``
and writes to OUT what :func:`connect_answers` finds: every query of
:data:`tests.support.cluster_scenario.QUERIES` as rows, Arrow and pandas, through one
Spark job each (and walked on the client), the same queries as DataFrames (the store's
source: ``to_spark`` and ``spark.read.format``), a query closed after its first row and
one cancelled, each followed by a query that must still answer, and
the error a damaged store gives. Nothing here may touch ``sparkContext``: a Connect
session has none, so any use fails the run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import treestore
from shell.demo import DEMO_ANSWER_ROPS, DEMO_PATH
from tests.support.cluster_scenario import QUERIES, frame_answers, plain

__all__ = ["connect_answers", "query_answers"]


def query_answers(handle: Any, every_form: bool = True) -> dict[str, Any]:
    """Every query as rows, and (``every_form``) as Arrow and pandas."""
    found: dict[str, Any] = {}
    for path, rops in QUERIES:
        found[path] = {"rows": handle.query(path, rops=rops).to_list()}
        if every_form:
            found[path]["arrow"] = handle.query(path, rops=rops).to_arrow().to_pylist()
            frame = handle.query(path, rops=rops).to_pandas()
            found[path]["pandas"] = frame.to_dict("records")
    # the seed's answer: a gather after cross's lists (the tasks code shards together),
    # in the order its PUIDs first come (no sort: the shards' rows in order)
    answer = handle.query(DEMO_PATH, rops=DEMO_ANSWER_ROPS, ops="gather=kJ")
    found["answer"] = {"rows": answer.to_list()}
    return plain(found)


def _stopped_early(handle: Any) -> dict[str, Any]:
    """A query closed after its first row, one cancelled (``Rows.cancel``, which a server
    calls from another thread) before its rows are read: each ends, and the next query
    still answers."""
    path = QUERIES[2][0]
    rows = handle.query(path)
    first = next(iter(rows))
    rows.close()
    after_close = handle.query(path).to_list()
    cancelled = handle.query(path)
    cancelled.cancel()  # as a server does when its client goes away, here before any row
    try:
        said = f"read {len(cancelled.to_list())} rows"
    except treestore.TreestoreError as exc:
        said = type(exc).__name__
    return plain({"first": first, "after_close": after_close, "cancelled": said,
                   "after_cancel": handle.query(path).to_list()})  # fmt: skip


def connect_answers(spark: Any, store: str) -> dict[str, Any]:
    """What the module's docstring lists, on ``spark``."""
    handle = treestore.open(store, spark=spark)
    walked = query_answers(handle, every_form=False)
    handle.local_limit = -1  # every query through Spark
    in_spark = query_answers(handle)
    treestore.register(spark)
    read = spark.read.format("treestore").option("query", "root/+/+:+hits").load(store)
    return {
        "walked": walked,
        "spark": in_spark,
        "runs": handle.last_run,
        "frames": frame_answers(spark, store),
        "read": sorted((list(row) for row in read.collect()), key=repr),
        "read_schema": read.schema.simpleString(),
        "stopped": _stopped_early(handle),
    }


def damaged_error(spark: Any, store: str) -> str:
    """The error a query of a store with a damaged page gives, as the user sees it."""
    handle = treestore.open(store, spark=spark)
    handle.local_limit = -1
    try:
        handle.query("root/+/+/+").to_list()
    except treestore.TreestoreError as exc:
        return f"{type(exc).__name__}: {exc}"
    return "no error"


def main() -> None:
    """Run :func:`connect_answers` on a Connect session; with a fourth argument (a damaged
    store), also :func:`damaged_error` on it."""
    url, store, out = sys.argv[1:4]
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(url).getOrCreate()
    answers = connect_answers(spark, store)
    if len(sys.argv) > 4:
        answers["damaged"] = damaged_error(spark, sys.argv[4])
    Path(out).write_text(json.dumps(answers, indent=1))
    spark.stop()


if __name__ == "__main__":
    main()
