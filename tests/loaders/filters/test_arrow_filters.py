"""The filters' Arrow forms give their Spark forms' results: every filter case of a kind
with an Arrow form, and random texts and lists through Spark and Arrow side by side."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest

from loaders.filters.arrow_compiler import ArrowCompiler, ArrowRecord
from loaders.filters.catalogue import (
    FilterCompiler,
    NoArrowForm,
    SymbolicRecord,
    parse_bundle_filter,
    parse_value_filter,
)
from loaders.job.text import JobText
from tests.support.filter_cases import BUNDLE_CASES, VALUE_CASES

JOB = JobText("job.json", "{}")
TEXTS = pa.list_(pa.string())


def _column(value: Any) -> tuple[pa.Array, bool]:
    if isinstance(value, list):
        return pa.array([value], TEXTS), True
    return pa.array([value], pa.string()), False


def test_value_filter_cases_with_an_arrow_form_give_hydras_results() -> None:
    ran = 0
    for spec, value, expected in VALUE_CASES:
        column, is_array = _column(value)
        try:
            got, _ = ArrowCompiler().value(parse_value_filter(spec, ("f",), JOB), column, is_array)
        except NoArrowForm:
            continue
        assert got.to_pylist() == [expected], (spec, value)
        ran += 1
    assert ran >= 8  # the cases of split and empty


def test_bundle_filter_cases_with_an_arrow_form_give_hydras_results() -> None:
    ran = 0
    for spec, values, passes, fields in BUNDLE_CASES:
        record = ArrowRecord({n: pa.array([values.get(n)], pa.string()) for n in "AB"}, 1)
        try:
            got, after = ArrowCompiler().bundle(parse_bundle_filter(spec, ("f",), JOB), record)
        except NoArrowForm:
            continue
        assert got.tolist() == [passes], spec
        for name, value in fields.items():
            assert after.get(name).to_pylist() == [value], (spec, name)
        ran += 1
    assert ran >= 3


def test_a_kind_without_an_arrow_form_says_so_on_an_empty_batch() -> None:
    spec = parse_bundle_filter({"from": "A", "filter": {"op": "case", "upper": True}}, ("f",), JOB)
    with pytest.raises(NoArrowForm):
        ArrowCompiler().bundle(spec, ArrowRecord({"A": pa.array([], pa.string())}, 0))


FILTERS = [
    {"op": "split"},
    {"op": "split", "split": "ab"},
    {"op": "empty"},
    {"op": "empty", "not": True},
    {"op": "empty", "not": True, "once": True},
    [{"op": "empty", "not": True}, {"op": "split", "split": ";"}],
    {"op": "chain", "nullStop": False, "filter": [{"op": "split"}, {"op": "empty", "not": True}]},
]
BUNDLES = [
    {"from": "A", "to": "B", "filter": {"op": "split"}},
    {"from": "A", "filter": {"op": "empty", "not": True}},
    {"from": "A", "to": "B", "filter": {"op": "empty"}, "not": True},
    {"from": "L", "to": "B", "filter": {"op": "empty", "not": True}, "nullFail": True},
    {"op": "chain", "filter": [{"from": "A", "filter": {"op": "split"}}, {"from": "B"}]},
    {"op": "chain", "failReturn": True, "filter": [{"from": "B", "filter": {"op": "empty"}}]},
    {"op": "chain", "failStop": False, "filter": [{"from": "A", "filter": {"op": "empty"}}]},
]


def _random_rows(count: int) -> list[dict[str, Any]]:
    pick = random.Random(7)
    words = ["", ",", "a", "b,c", ",x,", "ab", "éa😀", ";", "a;;b", "abab", None]

    def text() -> str | None:
        return pick.choice(words) if pick.random() < 0.7 else "".join(pick.choices("ab,;é", k=5))

    def texts() -> list[str | None] | None:
        return None if pick.random() < 0.15 else [text() for _ in range(pick.randint(0, 3))]

    return [{"i": i, "A": text(), "B": text(), "L": texts()} for i in range(count)]


@pytest.mark.spark
def test_random_records_map_alike_in_spark_and_in_arrow(spark: Any) -> None:
    from pyspark.sql import functions as F

    rows = _random_rows(400)
    frame = spark.createDataFrame(rows, "i int, A string, B string, L array<string>")
    spark_columns, arrow_columns = [], []
    record = SymbolicRecord({n: F.col(n) for n in "ABL"}, frozenset({"L"}))
    arrays = ArrowRecord(
        {
            "A": pa.array([r["A"] for r in rows], pa.string()),
            "B": pa.array([r["B"] for r in rows], pa.string()),
            "L": pa.array([r["L"] for r in rows], TEXTS),
        },
        len(rows),
        frozenset({"L"}),
    )
    for k, spec in enumerate(FILTERS):
        parsed = parse_value_filter(spec, ("f",), JOB)
        for name in "AL":
            column, _ = FilterCompiler().value(parsed, record.get(name), name == "L")
            spark_columns.append(column.alias(f"v{k}{name}"))
            got, _ = ArrowCompiler().value(parsed, arrays.get(name), name == "L")
            arrow_columns.append((f"v{k}{name}", got.to_pylist()))
    for k, spec in enumerate(BUNDLES):
        parsed = parse_bundle_filter(spec, ("f",), JOB)
        passes, after = FilterCompiler().bundle(parsed, record)
        spark_columns += [passes.alias(f"p{k}"), after.get("B").alias(f"b{k}")]
        got, arrow_after = ArrowCompiler().bundle(parsed, arrays)
        arrow_columns += [(f"p{k}", got.tolist()), (f"b{k}", arrow_after.get("B").to_pylist())]
    collected = frame.select("i", *spark_columns).orderBy("i").collect()
    for name, values in arrow_columns:
        assert [row[name] for row in collected] == values, name
