"""Driver ops run on the Arrow columns the shards send, and answer as they do on rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from query.driver.plan import QueryPlan
from query.driver.result import Piece, Rows
from query.driver.runner import open_store
from query.ops import GatherOp, SortOp
from query.ops.columns import ColumnType
from query.ops.compiler import compile_ops
from shell.demo import DEMO_PATH

SEED_ANSWER = [("abc", "1,3,4,5"), ("xyz", "1,2"), ("zzz", "1,2")]
"""PUID -> attribute ids of the demo's tables (12345 has 1 and 3,4,5 and maps to abc;
67890 has 1,2 and maps to xyz and zzz)."""


def _refuse_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the row path of gather and sort fail, so a test shows the columns ran."""

    def refuse(self: object, rows: object) -> Iterator[Any]:
        raise AssertionError("ran on rows")

    monkeypatch.setattr(GatherOp, "run", refuse)
    monkeypatch.setattr(SortOp, "run", refuse)


def _pieces(batches: list[pa.RecordBatch], types: list[ColumnType] | None = None) -> Rows:
    def produce() -> Iterator[Piece]:
        yield from batches

    return Rows(produce, QueryPlan.over_pieces(compile_ops("gather=kJu;sort=1:s:d"), types))


def _batches() -> list[pa.RecordBatch]:
    def batch(keys: list[str | None], values: list[str | None]) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays([pa.array(keys), pa.array(values)], ["c0", "c1"])

    return [batch(["p", "q", None], ["3,1", "2", "9"]), batch(["p", "q"], ["1", None])]


def test_driver_ops_run_on_the_pieces_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    on_rows = _pieces(_batches()).to_list()
    assert on_rows == [(None, "9", 1), ("q", "2", 2), ("p", "1,3", 2)]
    _refuse_rows(monkeypatch)
    rows = _pieces(_batches(), ["str", "str"])
    assert rows.to_list() == on_rows
    rows = _pieces(_batches(), ["str", "str"])
    (batch,) = list(rows.batches())
    assert batch.schema.types == [pa.string(), pa.string(), pa.int64()]
    assert batch.to_pylist()[2] == {"c0": "p", "c1": "1,3", "c2": 2}


def test_rows_from_a_driver_walk_are_typed_for_the_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    _refuse_rows(monkeypatch)

    def produce() -> Iterator[Piece]:
        yield [("p", "1"), ("q", "2"), ("p", "3,1")]

    rows = Rows(produce, QueryPlan.over_pieces(compile_ops("gather=kJ"), ["str", "str"]))
    assert rows.to_list() == [("p", "1,3"), ("q", "2")]


@pytest.mark.parametrize("where", ["spark", "local"])
def test_the_store_answers_puid_to_attribute_ids(
    where: str, demo_store: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seed's answer in one query: rops pair each UID's PUIDs with its attribute ids
    in the shards' tasks; the driver gathers them per PUID on columns."""
    _refuse_rows(monkeypatch)
    store = open_store(str(demo_store), spark)
    store.local_limit = -1 if where == "spark" else 10**9
    rows = store.query(DEMO_PATH, rops="cross=0,1,2,M,A", ops="gather=kJ;sort")
    assert rows.plan.piece_types == ("str", "str")
    assert rows.to_list() == SEED_ANSWER
    assert store.last_run == where


def test_coded_columns_leave_a_query_plain(demo_store: Path, spark: Any) -> None:
    """cross's pairs travel coded from the shards; whoever reads the result gets text."""
    store = open_store(str(demo_store), spark)
    store.local_limit = -1
    table = store.query(DEMO_PATH, rops="cross=0,1,2,M,A").to_arrow()
    assert table.schema.types == [pa.string(), pa.string()]
    batches = list(store.query(DEMO_PATH, rops="cross=0,1,2,M,A;gather=kJ").batches())
    assert all(t == pa.string() for b in batches for t in b.schema.types)
    pairs = sorted(table.to_pylist(), key=lambda row: (row["M"], row["A"]))
    assert pairs[0] == {"M": "abc", "A": "1"}
