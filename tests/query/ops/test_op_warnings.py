"""Silent no-ops warn, each once, with the column of the argument at fault."""

from __future__ import annotations

from query.ops.compiler import compile_ops

ROWS = [["A", "1"], ["B", "2"]]


def _run(ops: str, rows: list[list[object]] | None = None) -> tuple[list[object], list[str]]:
    pipeline = compile_ops(ops)
    out = list(pipeline.run(rows if rows is not None else ROWS))
    return out, [f"{w.reason} @{w.column}" for w in pipeline.warnings()]


def test_an_unknown_sort_type_or_direction_warns_and_sorts_as_hydra_does() -> None:
    rows, warnings = _run("sort=0:x:q")
    assert rows == [("A", "1"), ("B", "2")]
    assert warnings == [
        "sort: unknown sort type 'x': the column sorts as text @8",
        "sort: unknown sort direction 'q': the column sorts ascending @10",
    ]


def test_a_sort_column_past_the_rows_warns_once() -> None:
    rows, warnings = _run("sort=5")
    assert rows == [("A", "1"), ("B", "2")]
    assert warnings == ["sort: column 5 is past the row (2 columns): it sorts as null @6"]


def test_str_that_changes_nothing_and_a_column_past_the_row() -> None:
    rows, warnings = _run("str=c5")
    assert rows == [("A", "1"), ("B", "2")]
    assert warnings == [
        "str: str sets no column and tests nothing: the rows pass unchanged @7",
        "str: column 5 is past the row (2 columns): it pushes null @5",
    ]
    assert _run("str=c0,c1,cat,v2,set")[1] == []


def test_num_dropping_rows_for_a_column_past_them_warns() -> None:
    rows, warnings = _run("num=n1,c9,add,c1,set")
    assert rows == []
    assert warnings == ["num: column 9 is past the row (2 columns): the row is dropped @8"]
    assert _run("num=c1,n1,add,v1,set") == ([("A", 2), ("B", 3)], [])
