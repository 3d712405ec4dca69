"""The range plan with a packed key: partitions that need nothing from each other (an
interval's start copied into every partition it stays open into), sorted in Python, the
events' id and time rebuilt from the key, partitions sized to what a worker sorts."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from loaders.sweep import packed_range
from loaders.sweep.driver import SweepReport, interval_sweep
from loaders.sweep.options import AGGREGATIONS
from tests.support.sweep_oracle import expected

pytestmark = pytest.mark.spark

EPOCH = datetime(2024, 1, 1)


def _sweep(spark: Any, events: Any, intervals: Any, **kwargs: Any) -> tuple[Any, Any]:
    report = SweepReport()
    result = interval_sweep(spark, events, intervals, plan="range", report=report, **kwargs)
    return result, report


@pytest.mark.parametrize(
    ("id_type", "time_type"), [("smallint", "int"), ("int", "timestamp"), ("bigint", "bigint")]
)
# Three examples per case, not the profile's count: each runs a sweep on Spark (seconds).
@settings(max_examples=3, suppress_health_check=list(HealthCheck))
@given(
    events=st.lists(st.tuples(st.integers(-3, 3), st.integers(-20, 20)), min_size=1, max_size=30),
    intervals=st.lists(
        st.tuples(st.integers(-3, 3), st.integers(-20, 20), st.integers(0, 15), st.integers(-9, 9)),
        max_size=30,
    ),
    agg=st.sampled_from(AGGREGATIONS),
    closed=st.sampled_from(["both", "left", "right", "neither"]),
)
@example(events=[(0, 0), (0, 0)], intervals=[], agg="sum", closed="both")  # empty partitions
def test_events_come_back_whole_with_the_oracles_values(
    spark: Any,
    monkeypatch: Any,
    id_type: str,
    time_type: str,
    events: list[Any],
    intervals: list[Any],
    agg: str,
    closed: str,
) -> None:
    monkeypatch.setattr(packed_range, "ROWS_PER_SORTED_PARTITION", 7)  # many partitions, copies
    monkeypatch.setattr(packed_range, "OUT_BATCH", 3)  # swept and sent out in slices
    intervals = [(i, s, s + length, v) for i, s, length, v in intervals]

    def at(t: int) -> Any:
        return EPOCH + timedelta(seconds=t) if time_type == "timestamp" else t

    e = spark.createDataFrame(
        [(i, at(t), f"tag{n}") for n, (i, t) in enumerate(events)],
        f"id {id_type}, time {time_type}, tag string",
    )
    b = spark.createDataFrame(
        [(i, at(s), at(x), v) for i, s, x, v in intervals],
        f"id {id_type}, start {time_type}, end {time_type}, points bigint",
    )
    result, report = _sweep(spark, e, b, agg=agg, closed=closed, partitions=2)
    rows = result.collect()
    assert report.packed_key
    got = sorted(((r["tag"], r["id"], r["time"], r["value"]) for r in rows), key=str)
    want = sorted(
        (
            (f"tag{n}", i, at(t), value)
            for n, ((i, t), value) in enumerate(
                zip(events, expected(events, intervals, agg, closed), strict=True)
            )
        ),
        key=str,
    )
    assert got == want
    assert result.drop("value").schema.fields == e.schema.fields


def test_double_and_null_values_sum_like_the_broadcast_plan(spark: Any) -> None:
    e = spark.createDataFrame([(1, t) for t in range(0, 60, 3)], "id bigint, time bigint")
    b = spark.createDataFrame(
        [(1, s, s + 10, None if s % 4 == 0 else s / 8) for s in range(0, 60, 2)],
        "id bigint, start bigint, end bigint, points double",
    )
    ranged = _sweep(spark, e, b, partitions=5)[0].collect()
    broadcast = interval_sweep(spark, e, b, plan="broadcast").collect()
    # eighths add up exactly in floating point
    assert sorted((r["time"], r["value"]) for r in ranged) == sorted(
        (r["time"], r["value"]) for r in broadcast
    )


def test_no_sort_and_no_cache_with_a_packed_key_but_both_without(spark: Any) -> None:
    e = spark.createDataFrame([(1, 5), (2, 6)], "id bigint, time bigint")
    b = spark.createDataFrame(
        [(1, 0, 9, 3), (2, 6, 6, 4)], "id bigint, start bigint, end bigint, points bigint"
    )
    for agg in ("sum", "max"):
        result, report = _sweep(spark, e, b, agg=agg)
        assert sorted(r["value"] for r in result.collect()) == [3, 4]
        plan = result._jdf.queryExecution().executedPlan().toString()
        assert report.packed_key and "Sort [" not in plan and "InMemory" not in plan
    named = spark.createDataFrame([("x", 5)], "id string, time bigint")
    b = spark.createDataFrame(
        [("x", 0, 9, 3)], "id string, start bigint, end bigint, points bigint"
    )
    result, report = _sweep(spark, named, b)
    assert [r["value"] for r in result.collect()] == [3]
    plan = result._jdf.queryExecution().executedPlan().toString()
    assert not report.packed_key and "Sort [" in plan and "InMemory" in plan


def test_long_intervals_are_open_in_every_partition_they_cross(spark: Any) -> None:
    events = [(1, t) for t in range(0, 300, 3)] + [(2, t) for t in range(0, 300, 7)]
    intervals = [(1, 0, 299, 1), (1, 50, 250, 10), (2, 10, 20, 5), (2, 0, 299, 100)]
    intervals += [(1, s, s + 4, 1000) for s in range(0, 300, 30)]
    e = spark.createDataFrame(events, "id bigint, time bigint")
    b = spark.createDataFrame(intervals, "id bigint, start bigint, end bigint, points bigint")
    for agg in ("sum", "set"):
        result, report = _sweep(spark, e, b, agg=agg, partitions=9)
        assert report.partitions == 9
        got = sorted((r["id"], r["time"], r["value"]) for r in result.collect())
        want = sorted(
            (i, t, v)
            for (i, t), v in zip(events, expected(events, intervals, agg, "both"), strict=True)
        )
        assert got == want


def test_a_keys_partition_is_how_many_bounds_lie_below_it(spark: Any) -> None:
    keys = [-5, 0, 1, 2, 3, 4, 7, 9, 10, 11, 40, 41, 100]
    frame = spark.createDataFrame([(k,) for k in keys], "k bigint")
    for bounds in ([], [3], [0, 9], [1, 2, 3, 10, 40], list(range(0, 100, 7))):
        got = frame.select(packed_range._bucket(frame["k"], bounds).alias("b")).collect()
        assert [r["b"] for r in got] == [sum(b < k for b in bounds) for k in keys], bounds


def test_partitions_grow_with_the_rows_a_worker_sorts(spark: Any, monkeypatch: Any) -> None:
    e = spark.createDataFrame([(1, t) for t in range(100)], "id bigint, time bigint")
    b = spark.createDataFrame([(1, 0, 99, 1)], "id bigint, start bigint, end bigint, points bigint")
    _, report = _sweep(spark, e, b, partitions=3)
    assert report.partitions == 3
    monkeypatch.setattr(packed_range, "ROWS_PER_SORTED_PARTITION", 10)
    result, report = _sweep(spark, e, b, partitions=3)
    assert report.partitions == math.ceil(102 / 10)
    assert report.max_partition_rows <= 2 * 10
    assert sorted(r["value"] for r in result.collect()) == [1] * 100


def test_int_ids_far_apart_pack_without_overflow(spark: Any) -> None:
    far = [-2_000_000_000, 2_000_000_000]
    e = spark.createDataFrame([(i, 5) for i in far], "id int, time bigint")
    b = spark.createDataFrame(
        [(i, 0, 9, 3) for i in far], "id int, start bigint, end bigint, points int"
    )
    result, report = _sweep(spark, e, b, partitions=2)
    assert report.packed_key
    assert sorted((r["id"], r["time"], r["value"]) for r in result.collect()) == [
        (-2_000_000_000, 5, 3),
        (2_000_000_000, 5, 3),
    ]


@pytest.mark.parametrize("id_type", ["bigint", "string"])
def test_count_takes_values_of_any_type_and_sum_adds_decimals(spark: Any, id_type: str) -> None:
    ids = ["1", "2"] if id_type == "string" else [1, 2]
    e = spark.createDataFrame([(ids[0], 5), (ids[1], 5)], f"id {id_type}, time bigint")
    labels = spark.createDataFrame(
        [(ids[0], 0, 9, "x"), (ids[0], 2, 6, None), (ids[1], 7, 9, "y")],
        f"id {id_type}, start bigint, end bigint, label string",
    )
    result, report = _sweep(spark, e, labels, agg="count", value_col="label", partitions=2)
    assert report.packed_key == (id_type == "bigint")
    assert sorted((r["id"], r["value"]) for r in result.collect()) == [(ids[0], 2), (ids[1], 0)]
    cents = spark.createDataFrame(
        [(ids[0], 0, 9, Decimal("0.50")), (ids[0], 2, 6, Decimal("0.25"))],
        f"id {id_type}, start bigint, end bigint, points decimal(10,2)",
    )
    result, _ = _sweep(spark, e, cents, partitions=2)
    assert sorted((r["id"], r["value"]) for r in result.collect()) == [(ids[0], 0.75), (ids[1], 0)]


def test_a_partition_too_big_to_sort_in_a_worker_falls_back_to_spark(
    spark: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(packed_range, "ROWS_PER_SORTED_PARTITION", 5)
    events = [(1, t) for t in range(0, 100)]
    intervals = [(1, 0, 99, v) for v in range(1, 21)]  # each open across every partition
    e = spark.createDataFrame(events, "id bigint, time bigint")
    b = spark.createDataFrame(intervals, "id bigint, start bigint, end bigint, points bigint")
    for agg in ("sum", "max"):
        result, report = _sweep(spark, e, b, agg=agg, partitions=2)
        assert any("sorting in Spark and carrying" in note for note in report.notes)
        assert "Sort [" in result._jdf.queryExecution().executedPlan().toString()
        got = sorted((r["time"], r["value"]) for r in result.collect())
        assert got == sorted(
            zip((t for _, t in events), expected(events, intervals, agg, "both"), strict=True)
        )
