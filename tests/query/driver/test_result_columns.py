"""A result's column names: the path's names as the ops keep them (no Spark)."""

from __future__ import annotations

from collections.abc import Iterator

from query.driver.plan import QueryPlan
from query.driver.result import Piece, Rows
from query.ops.compiler import compile_ops
from query.syntax.path_parser import parse_path


def _rows(path: str, ops: str | None, rows: list[tuple[object, ...]]) -> Rows:
    pipeline = compile_ops(ops)

    def produce() -> Iterator[Piece]:
        yield list(rows)  # type: ignore[misc]

    parsed = parse_path(path)
    types = {n: t for n, t in zip(parsed.labels(), parsed.column_types(), strict=True) if t}
    plan = QueryPlan.over_pieces(pipeline, None, pipeline.column_names(parsed.labels()), types)
    return Rows(produce, plan)


def test_ops_that_keep_or_reorder_columns_keep_their_names() -> None:
    names = ("uid", "attr", "hits")
    assert compile_ops("sort=2:n:d;limit=5;str=c0,v1,set").column_names(names) == names
    assert compile_ops("order=2,0").column_names(names) == ("hits", "uid")
    assert compile_ops("merge=kis").column_names(names) == ("uid", "hits")
    assert compile_ops("gather=kjsu").column_names(names) == ("uid", "attr", "hits", "count")
    assert compile_ops("pivot=0,1,2").column_names(names) is None


def test_rows_name_their_columns_and_appended_ones() -> None:
    rows = _rows("root/+{uid}/+:+hits", "num=c1,n2,mult,v3,set", [("a", "1", 2)])
    assert rows.column_names() == ["uid", "name", "hits"]
    table = rows.to_arrow()
    assert table.column_names == ["uid", "name", "hits", "c3"]
    assert table.to_pylist() == [{"uid": "a", "name": "1", "hits": 2, "c3": 2}]


def test_an_empty_result_keeps_its_columns_and_types() -> None:
    frame = _rows("root/+{uid}/+:+hits,+{n}nodes", None, []).to_pandas()
    assert frame.shape == (0, 4)
    assert list(frame.columns) == ["uid", "name", "hits", "n"]
    assert [str(t) for t in frame.dtypes] == ["object", "object", "int64", "int64"]
    table = _rows("root/+{uid}/+:+hits", "merge=kis;sort=1", []).to_arrow()
    assert table.schema.names == ["uid", "hits"]
    assert [str(t) for t in table.schema.types] == ["string", "int64"]
