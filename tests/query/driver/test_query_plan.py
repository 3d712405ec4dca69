"""A query's plan: every choice made once, before anything runs, and said in words.

The plan is what runs: ``Rows`` is built from it, the shards' tasks walk on columns or
rows as it says, the driver's ops split as it says. ``--explain`` (command line),
``\\explain`` (shell) and ``Rows.plan`` (Python) print it.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

import treestore
import treestore.spark
from query.driver.plan import QueryPlan
from query.driver.runner import open_store, shard_output
from query.ops import MergeOp, SortOp
from query.ops.columns import plain_columns
from shell.cli import main
from shell.demo import DEMO_PATH
from shell.repl.session import ShellSession
from treestore.errors import OpError, StoreError

JOIN_ROPS = "str=c1,v=,cat,c2,cat,v2,set;merge=kij"
JOIN_ROWS = [("12345", "A=1,A=3,A=4,A=5,M=abc"), ("67890", "A=1,A=2,M=xyz,M=zzz")]


class SparkStarted(Exception):
    """Raised by the patched session factory: something asked for Spark."""


def _refuse_spark(*args: object, **kwargs: object) -> Any:
    raise SparkStarted("a Spark session was asked for")


def test_a_scan_runs_in_spark_on_columns_and_the_driver_ops_on_arrow(
    demo_store: Path, spark: Any
) -> None:
    store = open_store(str(demo_store), spark)
    store.local_limit = -1
    plan = store.plan(DEMO_PATH, rops=JOIN_ROPS, ops="sort;num=c1,n1,add")
    assert plan.where == "spark" and "TREESTORE_LOCAL_QUERY_LIMIT=-1" in plan.where_reason
    assert plan.path_on_columns and plan.path_rows_reason is None
    assert [op.name for op in plan.rops.on_columns] == ["str", "merge"]
    assert not plan.rops.on_rows
    assert plan.piece_types == ("str", "str")
    assert [op.name for op in plan.ops.on_columns] == ["sort"]
    assert [op.name for op in plan.ops.on_rows.ops] == ["num"]
    assert plan.shards == tuple(sorted(store.store_version.manifest.trees))
    assert plan.version == 1 and plan.location == str(demo_store)
    text = str(plan)
    assert "one Spark job" in text and "rops on columns: str, merge" in text
    assert "ops on columns: sort; on rows: num" in text


def test_rows_follow_their_plan(demo_store: Path, spark: Any) -> None:
    store = open_store(str(demo_store), spark)
    store.local_limit = -1
    rows = store.query(DEMO_PATH, rops=JOIN_ROPS)
    assert rows.plan.where == "spark" and rows.labels == ("name", "name3")
    assert rows.to_list() == JOIN_ROWS
    assert store.last_run == "spark"


def test_a_shards_task_runs_as_its_plan_says(demo_store: Path, monkeypatch: Any) -> None:
    """A task walks on columns or rows as the plan says (the choice is made once, in the
    plan): the same query planned on rows never touches the ops' column forms."""
    store = open_store(str(demo_store), session_factory=_refuse_spark)
    store.local_limit = -1
    plan = store.plan(DEMO_PATH, rops="merge=kij;sort")
    assert [op.name for op in plan.rops.on_columns] == ["merge", "sort"]
    on_rows = QueryPlan(**{**vars(plan), "path_on_columns": False})
    assert "the path on rows" in str(on_rows)
    shard = plan.shards[-1]
    expected = [row for piece in shard_output(store.tree(shard), plan) for row in _rows(piece)]

    def refuse(self: object, chunks: object) -> Any:
        raise AssertionError("ran on columns")

    monkeypatch.setattr(MergeOp, "run_columns", refuse)
    monkeypatch.setattr(SortOp, "run_columns", refuse)
    with pytest.raises(AssertionError, match="ran on columns"):
        list(shard_output(store.tree(shard), plan))
    pieces = list(shard_output(store.tree(shard), on_rows))
    assert all(isinstance(piece, list) for piece in pieces)
    assert [row for piece in pieces for row in piece] == expected


def _rows(piece: Any) -> list[tuple[Any, ...]]:
    if isinstance(piece, list):
        return piece
    _, columns = piece
    return list(zip(*(c.to_pylist() for c in plain_columns(columns)), strict=True))


def test_leading_name_lookups_walk_on_the_driver_over_the_shards_that_have_them(
    demo_store: Path,
) -> None:
    store = open_store(str(demo_store), session_factory=_refuse_spark)
    plan = store.plan("root/12345/+/+")
    assert plan.where == "driver" and plan.runs_on_driver
    assert "(root/12345) reach 2 children" in plan.where_reason
    assert len(plan.shards) == 1  # one UID lives in one shard
    assert plan.piece_types == ("str", "str") and not plan.path_on_columns
    assert store.run(plan).to_list() == [
        ("A", "1"),
        ("A", "3"),
        ("A", "4"),
        ("A", "5"),
        ("M", "abc"),
    ]
    assert store.last_run == "local"
    store.local_limit = 1
    over = store.plan("root/12345/+/+")
    assert over.where == "spark" and "more than 1 children" in over.where_reason


def test_an_attachment_path_runs_on_rows_and_says_which_element(demo_store: Path) -> None:
    store = open_store(str(demo_store), session_factory=_refuse_spark)
    store.local_limit = -1
    plan = store.plan("root/+/%top", ops="sort")
    assert not plan.path_on_columns and plan.piece_types is None
    assert plan.path_rows_reason == "element 3 (%top) reads an attachment"
    assert not plan.ops.on_columns and [op.name for op in plan.ops.on_rows.ops] == ["sort"]
    assert "rows (the path runs on rows)" in str(plan)


def test_syntax_errors_are_raised_by_the_plan(demo_store: Path) -> None:
    store = open_store(str(demo_store), session_factory=_refuse_spark)
    with pytest.raises(OpError, match="Unknown op"):
        store.plan("root/+", ops="nosuchop")


def test_a_plan_of_another_version_is_refused(demo_store: Path) -> None:
    store = open_store(str(demo_store), session_factory=_refuse_spark)
    plan = store.plan("root/+")
    stale = QueryPlan(**{**vars(plan), "version": plan.version + 1})  # type: ignore[operator]
    with pytest.raises(StoreError, match="planned on version 2"):
        store.run(stale)


def test_the_python_api_shows_the_plan(demo_store: Path, spark: Any) -> None:
    rows = treestore.open(demo_store, spark).query("root/+:+hits", ops="gather=ks")
    assert rows.plan.where == "driver"
    assert str(rows.plan).splitlines()[0] == "query root/+:+hits | ops gather=ks"
    assert rows.to_list()  # the plan did not use the rows up


def test_explain_on_the_command_line_prints_the_plan_without_spark(
    demo_store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(treestore.spark, "get_session", _refuse_spark)
    monkeypatch.setenv("TREESTORE_LOCAL_QUERY_LIMIT", "-1")
    status = main(["query", str(demo_store), DEMO_PATH, "--rops", JOIN_ROPS, "--explain"])
    out = capsys.readouterr().out
    assert status == 0
    assert out.splitlines()[0] == f"query {DEMO_PATH} | rops {JOIN_ROPS}"
    assert "one Spark job" in out and "walks on the driver are off" in out
    assert "12345" not in out  # the plan, not the rows
    status = main(["query", str(demo_store), DEMO_PATH, "--explain", "--format", "json"])
    plan = json.loads(capsys.readouterr().out)
    assert status == 0 and plan["where"] == "spark" and plan["path_on"] == "columns"
    assert plan["columns"] == ["name", "name2", "name3"] and plan["version"] == 1


def test_explain_in_the_shell(demo_store: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    session = ShellSession(str(demo_store), _refuse_spark, out=out, err=err)
    assert session.run_line("\\explain root/12345/+ | ops gather=kc")
    assert "on the driver, no Spark job" in out.getvalue()
    assert "ops on columns: gather" in out.getvalue()
    assert not session.run_line("\\explain root/+:nodez")
    assert "column 8" in err.getvalue() and "^" in err.getvalue()
    assert not session.run_line("\\explain")
    assert "\\explain takes a query line" in err.getvalue()
