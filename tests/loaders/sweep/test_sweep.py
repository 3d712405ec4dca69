"""The interval sweep on Spark: the seed's example, every aggregation and closedness
against the brute-force oracle, and a hot id spread over many partitions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loaders.sweep.driver import SweepReport, interval_sweep
from loaders.sweep.options import AGGREGATIONS, CLOSED
from tests.support.sweep_oracle import expected
from treestore.errors import LoadError

pytestmark = pytest.mark.spark


def _at(hhmm: str) -> datetime:
    return datetime.fromisoformat(f"2024-01-01 {hhmm}:00")


SEED_EVENTS = [(1, _at("10:00")), (1, _at("10:15")), (2, _at("10:01"))]
SEED_INTERVALS = [
    (1, _at("09:30"), _at("10:30"), 10),
    (1, _at("10:01"), _at("10:05"), 20),
    (1, _at("10:08"), _at("10:20"), 30),
    (1, _at("10:30"), _at("10:45"), 40),
    (2, _at("09:30"), _at("10:30"), 50),
]


def _frames(
    spark: Any, events: list[Any], intervals: list[Any], time_type: str = "bigint"
) -> tuple[Any, Any]:
    e = spark.createDataFrame(
        [(i, t, n) for n, (i, t) in enumerate(events)], f"id bigint, time {time_type}, n int"
    )
    b = spark.createDataFrame(
        intervals, f"id bigint, start {time_type}, end {time_type}, points bigint"
    )
    return e, b


def _run(spark: Any, events: list[Any], intervals: list[Any], **kwargs: Any) -> list[Any]:
    e, b = _frames(spark, events, intervals)
    rows = interval_sweep(spark, e, b, **kwargs).collect()
    return [r["value"] for r in sorted(rows, key=lambda r: r["n"])]


def test_seed_example(spark: Any) -> None:
    e, b = _frames(spark, SEED_EVENTS, SEED_INTERVALS, "timestamp")
    report = SweepReport()
    rows = interval_sweep(spark, e, b, report=report).collect()
    assert {(r["id"], str(r["time"])[11:16], r["value"]) for r in rows} == {
        (1, "10:00", 10),
        (1, "10:15", 40),
        (2, "10:01", 50),
    }
    assert report.events == 3 and report.intervals == 5 and report.skipped_intervals == 0


PLANNED = [(agg, "range") for agg in AGGREGATIONS] + [("sum", "broadcast"), ("count", "broadcast")]
COVERED = [
    (agg, plan, CLOSED[(number + turn) % len(CLOSED)])
    for number, (agg, plan) in enumerate(PLANNED)
    for turn in (0, 2)
]
"""Each aggregation with two closednesses, each plan with every closedness (the kernels'
own test covers every aggregation with every closedness, without Spark)."""


@pytest.mark.parametrize(("agg", "plan", "closed"), COVERED)
# One example per case, not the profile's count: each runs a sweep on Spark (seconds), and
# the kernels' own test tries the profile's count of data sets without Spark.
@settings(max_examples=1, suppress_health_check=list(HealthCheck))
@given(
    events=st.lists(st.tuples(st.sampled_from([1, 2]), st.integers(0, 9)), min_size=1, max_size=15),
    intervals=st.lists(
        st.tuples(st.sampled_from([1, 2]), st.integers(0, 9), st.integers(0, 9), st.integers(0, 5)),
        max_size=15,
    ),
)
def test_every_aggregation_and_closedness_matches_the_oracle(
    spark: Any, agg: str, plan: str, closed: str, events: list[Any], intervals: list[Any]
) -> None:
    # equal times, zero-length, nested and identical intervals, start > end
    intervals = [*intervals, (1, 3, 3, 7), (1, 2, 6, 1), (1, 2, 6, 1), (1, 3, 4, 2), (2, 8, 1, 4)]
    events = [*events, (1, 3), (1, 2), (1, 6)]
    report = SweepReport()
    got = _run(
        spark, events, intervals, agg=agg, closed=closed, partitions=3, plan=plan, report=report
    )
    assert report.plan == plan
    assert [list(v) if isinstance(v, list) else v for v in got] == expected(
        events, intervals, agg, closed
    )


def test_a_hot_id_spread_over_many_partitions(spark: Any) -> None:
    intervals = [(7, s, s + 40, s % 5) for s in range(0, 400, 3)] + [(8, 0, 1000, 100)]
    events = [(7, t) for t in range(0, 440, 2)] + [(8, 5), (9, 5)]
    report = SweepReport()
    got = _run(spark, events, intervals, agg="sum", partitions=8, plan="range", report=report)
    assert got == expected(events, intervals, "sum", "both")
    assert report.partitions == 8 and report.max_partition_rows < 0.3 * (
        len(events) + 2 * len(intervals)
    )
    got_sets = _run(spark, events, intervals, agg="set", closed="left", partitions=8)
    assert got_sets == expected(events, intervals, "set", "left")


def test_custom_merge_and_bad_input(spark: Any) -> None:
    e, b = _frames(
        spark, [(1, 5), (None, 5)], [(1, 0, 9, 3), (1, 2, 7, 4), (1, 9, 0, 4), (None, 0, 9, 1)]
    )
    report = SweepReport()
    pair = (lambda state, v: state * 10 + v, lambda state, v: (state - v) / 10)
    rows = interval_sweep(
        spark, e, b, agg=pair, initial=0, value_type="double", report=report
    ).collect()
    assert sorted(r["value"] for r in rows) == [34.0]  # 3 added at time 0, then 4 at time 2
    assert report.skipped_events == 1 and report.skipped_intervals == 2
    with pytest.raises(ValueError, match="closed must be"):
        interval_sweep(spark, e, b, closed="sideways")


def test_sweep_command_keeps_results_in_the_store(spark: Any, tmp_path: Any, capsys: Any) -> None:
    from shell.cli import main

    (tmp_path / "events.csv").write_text("id,time\n1,10:00\n1,10:15\n2,10:01\n")
    (tmp_path / "intervals.csv").write_text(
        "id,start,end,points\n1,9:30,10:30,10\n1,10:01,10:05,20\n1,10:08,10:20,30\n"
        "1,10:30,10:45,40\n2,9:30,10:30,50\n3,10:00,9:00,5\n"
    )
    store, out = tmp_path / "store", tmp_path / "out"
    args = [
        "sweep",
        "--events",
        str(tmp_path / "events.csv"),
        "--intervals",
        str(tmp_path / "intervals.csv"),
        "--store",
        str(store),
        "--name",
        "seed",
        "--time-format",
        "H:mm",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "skipped 1: null id or time, start after end" in printed
    assert "plan broadcast" in printed
    assert main(["query", str(store), "seed/+/+/+", "--format", "json"]) == 0
    import json

    rows = json.loads(capsys.readouterr().out)
    cells = [list(r.values()) if isinstance(r, dict) else r for r in rows]  # objects or lists
    assert sorted((r[0], r[1], r[2]) for r in cells) == [
        ("1", "10:00:00", "10"),
        ("1", "10:15:00", "40"),
        ("2", "10:01:00", "50"),
    ]
    assert sorted(r["value"] for r in spark.read.parquet(str(out)).collect()) == [10, 40, 50]
    assert main(args) == 2
    assert "already holds a sweep called 'seed'" in capsys.readouterr().err
    # the same options (the time format is honoured: '10:00' is not today's 10:00)
    ranged = [*args[: args.index("--name")], "--name", "ranged", "--plan", "range",
              "--time-format", "H:mm"]  # fmt: skip
    assert main(ranged) == 0
    assert "plan range: partitions" in capsys.readouterr().out
    assert main(["query", str(store), "ranged/+/+/+", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == rows
    refused = [*ranged[:-6], "--name", "sets", "--agg", "set", "--plan", "broadcast"]
    assert main(refused) == 2
    assert "only sum and count have a broadcast plan" in capsys.readouterr().err
    missing = [
        "sweep",
        "--events",
        str(tmp_path / "nope.csv"),
        "--intervals",
        str(tmp_path / "intervals.csv"),
        "--store",
        str(store),
        "--name",
        "other",
    ]
    assert main(missing) == 2
    assert "does not exist" in capsys.readouterr().err


def test_auto_plan_broadcasts_sum_and_count_within_the_limit(spark: Any) -> None:
    events = [(1, 5), (2, 5), (1, 50)]
    intervals = [(1, 0, 9, 3), (1, 2, 7, 4), (2, 5, 5, 1), (1, 40, 60, 8)]
    chosen = {}
    for limit in (4, 3):
        report = SweepReport()
        got = _run(spark, events, intervals, agg="sum", broadcast_limit=limit, report=report)
        assert got == [7, 1, 8]
        chosen[limit] = report.plan
    assert chosen == {4: "broadcast", 3: "range"}
    # more rows than the limit, but only as many valid ones: still broadcast
    report = SweepReport()
    got = _run(spark, events, [*intervals, (1, 9, 0, 4)], broadcast_limit=4, report=report)
    assert (got, report.plan, report.intervals, report.skipped_intervals) == (
        [7, 1, 8],
        "broadcast",
        5,
        1,
    )
    report = SweepReport()
    assert _run(spark, events, intervals, agg="max", report=report) == [4, 1, 8]
    assert report.plan == "range"
    with pytest.raises(LoadError, match="only sum and count have a broadcast plan"):
        _run(spark, events, intervals, agg="set", plan="broadcast")
    with pytest.raises(ValueError, match="plan must be one of"):
        _run(spark, events, intervals, plan="hash")


def test_broadcast_plan_with_string_ids_double_values_and_mixed_id_types(spark: Any) -> None:
    e = spark.createDataFrame(
        [("x", 5, 0), ("y", 5, 1), (None, 5, 2)], "id string, time int, n int"
    )
    b = spark.createDataFrame(
        [("x", 0, 9, 0.5), ("x", 5, 9, 0.25), ("y", 6, 9, 1.0)],
        "id string, start bigint, end bigint, points double",
    )
    report = SweepReport()
    rows = interval_sweep(spark, e, b, plan="broadcast", report=report).collect()
    assert sorted((r["id"], r["value"]) for r in rows) == [("x", 0.75), ("y", 0.0)]
    # the events are counted when the report is read, the skipped one (a null id) too
    assert (report.events, report.skipped_events, report.intervals) == (3, 1, 3)
    assert "events 3 (skipped 1 with a null id or time)" in report.lines()[0]
    narrow = spark.createDataFrame([(1, 5.5)], "id int, time double")
    wide = spark.createDataFrame([(1, 5, 6, 2)], "id bigint, start bigint, end bigint, points int")
    rows = interval_sweep(spark, narrow, wide, plan="broadcast").collect()
    assert [(r["id"], r["value"]) for r in rows] == [(1, 2)]


def test_a_report_counts_events_once_when_read_and_takes_counts_set_instead() -> None:
    calls = []

    def count() -> tuple[int, int]:
        calls.append(1)
        return 10, 2

    report = SweepReport()
    report.count_events_when_read(count)
    assert calls == []
    assert (report.events, report.skipped_events, report.events) == (10, 2, 10)
    assert calls == [1]
    report.count_events_when_read(count)
    report.events, report.skipped_events = 5, 0  # set by a plan: the pending count never runs
    assert (report.events, report.skipped_events, calls) == (5, 0, [1])


@pytest.mark.parametrize("agg", ["sum", "set"])
def test_string_ids_sweep_with_carries_between_partitions(spark: Any, agg: str) -> None:
    # no packed key: Spark sorts, and a hot id's open intervals are carried
    intervals = [(7, s, s + 40, s % 5) for s in range(0, 400, 3)] + [(8, 0, 1000, 100)]
    events = [(7, t) for t in range(0, 440, 2)] + [(8, 5), (9, 5)]
    e = spark.createDataFrame(
        [(str(i), t, n) for n, (i, t) in enumerate(events)], "id string, time bigint, n int"
    )
    b = spark.createDataFrame(
        [(str(i), s, x, v) for i, s, x, v in intervals],
        "id string, start bigint, end bigint, points bigint",
    )
    report = SweepReport()
    rows = interval_sweep(spark, e, b, agg=agg, partitions=6, plan="range", report=report)
    got = [r["value"] for r in sorted(rows.collect(), key=lambda r: r["n"])]
    assert not report.packed_key and report.partitions == 6
    assert [list(v) if isinstance(v, list) else v for v in got] == expected(
        events, intervals, agg, "both"
    )
