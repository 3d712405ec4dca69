"""Every op over its golden rows (tests/fixtures/ops_rows.txt), in plain Python."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from query import apply_ops, compile_ops
from query.ops import ALL_OPS, REGISTRY, table_ops
from treestore.errors import OpError

FIXTURES = Path(__file__).parent / "fixtures"


def _cases() -> list[tuple[str, Any, Any]]:
    lines = [
        line
        for line in (FIXTURES / "ops_rows.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    return [
        (lines[i], json.loads(lines[i + 1]), json.loads(lines[i + 2]))
        for i in range(0, len(lines), 3)
    ]


CASES = _cases()


@pytest.mark.parametrize(("ops", "rows", "expected"), CASES, ids=[c[0] for c in CASES])
def test_ops_rows(ops: str, rows: list[list[Any]], expected: list[list[Any]]) -> None:
    assert [list(r) for r in apply_ops(rows, ops)] == expected


def test_every_op_has_a_golden_case_and_help() -> None:
    tested = {REGISTRY[c[0].split(";")[0].split("=")[0]].name for c in CASES}
    for op in ALL_OPS:
        assert op.name in tested, op.name
        assert op.__doc__ and "Example" in op.__doc__, op.name


def test_limit_stops_reading_its_input() -> None:
    read = []

    def rows():  # type: ignore[no-untyped-def]
        for i in range(1000):
            read.append(i)
            yield [i]

    assert list(compile_ops("limit=3").run(rows())) == [(0,), (1,), (2,)]
    assert len(read) == 3


def test_sort_spills_to_disk_past_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(table_ops, "SORT_BUDGET_ROWS", 7)
    rows = [[i % 13, f"r{i}"] for i in range(100)]
    pipeline = compile_ops("sort=0:n:d")
    sorter = pipeline.ops[0]
    assert isinstance(sorter, table_ops.SortOp) and sorter.budget == 7
    spilled: list[int] = []
    original = table_ops._spill

    def counting(items):  # type: ignore[no-untyped-def]
        spilled.append(len(items))
        return original(items)

    monkeypatch.setattr(table_ops, "_spill", counting)
    out = [list(r) for r in pipeline.run(rows)]
    assert out == sorted(rows, key=lambda r: -r[0])  # stable: equal keys keep input order
    assert len(spilled) == 14 and set(spilled) == {7}


def test_top_without_t_is_a_plain_gather() -> None:
    rows = [["a", 1], ["b", 5], ["a", 2]]
    assert apply_ops(rows, "top=ks") == apply_ops(rows, "gather=ks") == [("a", 3), ("b", 5)]


@pytest.mark.parametrize(
    ("ops", "column", "words"),
    [
        ("limit=x", 7, "expected N or M:N"),
        ("limit=0", 7, "at least 1"),
        ("sort=a", 6, "column number"),
        ("top=kts", 6, "number of keys"),
        ("num=c0,add", 8, "needs 2 value"),
        ("num=c0,frob", 8, "unknown word"),
        ("compare=1:gteq", 9, "expected C:OP:N"),
        ('map=0::{"a"', 8, "not valid JSON"),
        ("pad=0", 6, "SPEC:N"),
        ("delta=S1", 7, "no summary"),
        ("groupby=i:limit=1", 9, "at least one k"),
        ("pivot=0,1", 10, "ROWS,COLS,CELL"),
        ("pivot=0,1,2,median", 13, "unknown pivot word"),
        ("num=c0,vx", 8, "v must be followed by a number"),
        ("depivot=row,foo", 13, "unknown part"),
        ("diff=kx", 7, "unknown letter"),
        ("datef=0:yyMMdd", 7, "COLS:FROM:TO"),
        ("datef=0:qq:yy", 9, "unknown pattern letter"),
        ("ftable=0:1:0.5", 10, "VALUE,FREQ"),
        ("ftable=0:1,2:half", 14, "neither a fraction"),
        ("histo2=1,2", 10, "at least two"),
        ("histo2=1", 9, "C,B1,B2"),
        ("distribution=x", 14, "column number"),
        ("changepoints=0:x", 16, "not a whole number"),
        ("holtwinters=0:1:2", 17, "between 0 and 1"),
        ("holtwinters=0:1:.1:.1:.1:2:3", 13, "AHEAD between 1 and PERIOD"),
        ("histo=0,1", 9, "at least 2"),
        ("disorder=0", 10, "P:S[:F]"),
        ("rmap=0::{'(':'x'}", 9, "bad regular expression"),
        ("sleep=x", 7, "milliseconds to wait"),
        ("distribution=1,x", 16, "the sample size"),
    ],
)
def test_argument_errors_point_at_the_column(ops: str, column: int, words: str) -> None:
    with pytest.raises(OpError) as caught:
        compile_ops(ops)
    assert caught.value.column == column
    assert words in str(caught.value)


@pytest.mark.parametrize(
    ("ops", "rows", "column", "words"),
    [
        ("num=diverr,c0,n0,div", [[1]], 18, "division by zero"),
        ("datef=0:yyMMdd:yyww", [["14-01-01"]], 7, "cannot read the date"),
        ("holtwinters=0:1:.1:.1:.1:2:1", [["a", 1]], 13, "at least 2 * PERIOD"),
    ],
)
def test_run_time_errors_point_at_the_op(
    ops: str, rows: list[list[Any]], column: int, words: str
) -> None:
    with pytest.raises(OpError) as caught:
        apply_ops(rows, ops)
    assert caught.value.column == column
    assert words in str(caught.value)
