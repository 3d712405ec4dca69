"""Every job filter, compiled to Spark SQL and run on one small DataFrame (one Spark job).

Each case is (filter as in a job file, input value, expected output). Value
filters run on a text column and on a list column; bundle filters on a record.
"""

from __future__ import annotations

from typing import Any

import pytest

from loaders.filters.catalogue import (
    FilterCompiler,
    SymbolicRecord,
    parse_bundle_filter,
    parse_value_filter,
)
from loaders.job.text import JobText
from tests.support.filter_cases import BUNDLE_CASES, VALUE_CASES

pytestmark = pytest.mark.spark

JOB = JobText("job.json", "{}")


def _typed(value: Any) -> str:
    return "list" if isinstance(value, list) else "text"


def test_value_filters_give_hydras_results(spark: Any) -> None:
    from pyspark.sql import functions as F

    rows = [
        {"text": None if isinstance(v, list) else v, "list": v if isinstance(v, list) else None}
        for _spec, v, _ in VALUE_CASES
    ]
    frame = spark.createDataFrame(rows, "text string, list array<string>")
    frame = frame.withColumn("i", F.monotonically_increasing_id())
    compiler = FilterCompiler()
    columns = []
    for i, (spec, value, _) in enumerate(VALUE_CASES):
        kind = _typed(value)
        column, _is_array = compiler.value(
            parse_value_filter(spec, ("f",), JOB), F.col(kind), kind == "list"
        )
        columns.append(F.to_json(F.array(column)).alias(f"c{i}"))
    got = [row.asDict() for row in frame.select("i", *columns).orderBy("i").collect()]
    import json

    for i, (spec, _value, expected) in enumerate(VALUE_CASES):
        assert json.loads(got[i][f"c{i}"])[0] == expected, (spec, got[i][f"c{i}"])


def test_bundle_filters_give_hydras_results(spark: Any) -> None:
    from pyspark.sql import functions as F

    frame = spark.createDataFrame(
        [
            {"i": i, "A": r.get("A"), "B": r.get("B")}
            for i, (_s, r, _p, _f) in enumerate(BUNDLE_CASES)
        ],
        "i long, A string, B string",
    )
    compiler = FilterCompiler()
    columns = []
    for i, (spec, _record, _passes, fields) in enumerate(BUNDLE_CASES):
        record = SymbolicRecord({"A": F.col("A"), "B": F.col("B")})
        passes, after = compiler.bundle(parse_bundle_filter(spec, ("f",), JOB), record)
        columns.append(passes.alias(f"p{i}"))
        columns += [after.get(name).alias(f"f{i}_{name}") for name in fields]
    got = {row["i"]: row.asDict() for row in frame.select("i", *columns).collect()}
    for i, (spec, _record, passes, fields) in enumerate(BUNDLE_CASES):
        assert got[i][f"p{i}"] is passes, spec
        for name, value in fields.items():
            assert got[i][f"f{i}_{name}"] == value, (spec, name)


def test_mod_of_a_word_is_a_reject_reason(spark: Any) -> None:
    from pyspark.sql import functions as F

    frame = spark.createDataFrame([("12",), ("twelve",), (None,)], "v string")
    compiler = FilterCompiler()
    spec = parse_value_filter({"op": "mod", "mod": 5}, ("f",), JOB)
    value, _ = compiler.value(spec, F.col("v"), False)
    listed, _ = compiler.value(spec, F.array(F.col("v")), True)
    got = frame.select(
        value.alias("m"), listed.alias("l"), compiler.reject_reason().alias("why")
    ).collect()
    assert [(r["m"], r["l"], r["why"]) for r in got] == [
        ("2", ["2"], None),
        (None, None, "mod: a value is not a whole number"),
        (None, None, None),
    ]
