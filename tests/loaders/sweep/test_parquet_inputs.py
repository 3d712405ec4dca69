"""The broadcast plan reads intervals that are a bare scan of Parquet files on the driver,
and the range plan reads the counts, ranges and sample it needs there: the same answers
and counts as when Spark collects them, and Spark's way whenever the frame is anything
else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loaders.sweep.broadcast_plan as broadcast_plan
import loaders.sweep.range_plan as range_plan
from loaders.sweep.driver import SweepReport, interval_sweep
from loaders.sweep.options import CLOSED
from loaders.sweep.parquet_inputs import parquet_files, read_intervals, read_ranges
from tests.support.sweep_oracle import expected

pytestmark = pytest.mark.spark

INTERVALS = pa.table(
    {
        "id": pa.array([1, 1, 2, 1, None, 2, 1], pa.int32()),
        "start": pa.array([0, 3, 2, 9, 1, None, 4], pa.int64()),
        "end": pa.array([4, 6, 8, 2, 5, 3, 4], pa.int64()),
        "points": pa.array([2, 5, 1, 4, 3, 6, None], pa.int64()),
    }
)


@pytest.fixture
def read_on_driver(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Records, for each broadcast sweep, whether the driver read the Parquet files."""
    seen: list[bool] = []

    def recorded(*args: Any, **kwargs: Any) -> pa.Table | None:
        table = read_intervals(*args, **kwargs)
        seen.append(table is not None)
        return table

    monkeypatch.setattr(broadcast_plan, "read_intervals", recorded)
    return seen


def _sweep(spark: Any, events: Any, intervals: Any, **kwargs: Any) -> tuple[list[Any], Any]:
    report = SweepReport()
    rows = interval_sweep(spark, events, intervals, report=report, **kwargs).collect()
    values = [r["value"] for r in sorted(rows, key=lambda r: r["n"])]
    return values, (report.plan, report.intervals, report.skipped_intervals)


@pytest.mark.parametrize(
    ("agg", "closed"), [(("sum", "count")[n % 2], closed) for n, closed in enumerate(CLOSED)]
)
# Three examples per case, not the profile's count: each runs Spark jobs (seconds).
@settings(max_examples=3, suppress_health_check=list(HealthCheck))
@given(
    intervals=st.lists(
        st.tuples(
            st.sampled_from([1, 2, None]),
            st.one_of(st.none(), st.integers(0, 9)),
            st.integers(0, 9),
            st.integers(0, 5),
        ),
        max_size=12,
    ),
    events=st.lists(st.tuples(st.sampled_from([1, 2]), st.integers(0, 9)), min_size=1, max_size=8),
)
def test_read_on_the_driver_gives_what_spark_collects(
    spark: Any,
    tmp_path_factory: pytest.TempPathFactory,
    read_on_driver: list[bool],
    agg: str,
    closed: str,
    intervals: list[Any],
    events: list[Any],
) -> None:
    """Null ids and starts, start > end and empty intervals, against the oracle and against
    the same rows collected through Spark (values, plan and counts)."""
    file = tmp_path_factory.mktemp("intervals") / "intervals.parquet"
    rows = [*intervals, (1, 3, 3, 7), (2, 8, 1, 4)]
    pq.write_table(
        pa.table(
            {
                "id": pa.array([r[0] for r in rows], pa.int32()),
                "start": pa.array([r[1] for r in rows], pa.int64()),
                "end": pa.array([r[2] for r in rows], pa.int64()),
                "points": pa.array([r[3] for r in rows], pa.int64()),
            }
        ),
        file,
    )
    e = spark.createDataFrame(
        [(i, t, n) for n, (i, t) in enumerate(events)], "id bigint, time bigint, n int"
    )
    from_files = spark.read.parquet(str(file))
    collected = spark.createDataFrame(rows, "id int, start bigint, end bigint, points bigint")
    options = {"agg": agg, "closed": closed, "plan": "broadcast"}
    got, counts = _sweep(spark, e, from_files, **options)
    assert (got, counts) == _sweep(spark, e, collected, **options)
    assert read_on_driver[-2:] == [True, False]  # the list is the test's, across examples
    valid = [(i, s, t, v) for i, s, t, v in rows if i is not None and s is not None]
    assert got == expected(events, valid, agg, closed)


def test_only_a_bare_scan_of_parquet_files_is_read_on_the_driver(
    spark: Any, tmp_path: Path, read_on_driver: list[bool]
) -> None:
    from pyspark.sql import functions as F

    pq.write_table(INTERVALS, tmp_path / "one.parquet")
    (tmp_path / "parted" / "day=1").mkdir(parents=True)
    pq.write_table(INTERVALS, tmp_path / "parted" / "day=1" / "part.parquet")
    (tmp_path / "intervals.csv").write_text(
        "id,start,end,points\n1,0,4,2\n1,3,6,5\n2,2,8,1\n1,9,2,4\n,1,5,3\n2,,3,6\n1,4,4,\n"
    )
    bare = spark.read.parquet(str(tmp_path / "one.parquet"))
    assert parquet_files(bare) == [f"file://{tmp_path}/one.parquet"]
    others = {
        "filtered": bare.where(F.col("points") > 1),
        "projected": bare.select("id", "start", "end", "points"),
        "partitioned": spark.read.parquet(str(tmp_path / "parted")),
        "csv": spark.read.csv(str(tmp_path / "intervals.csv"), header=True, inferSchema=True),
    }
    assert parquet_files(others["partitioned"]) is None
    assert all(parquet_files(frame) is None for frame in others.values())
    events = spark.createDataFrame([(1, 4, 0), (2, 3, 1)], "id bigint, time bigint, n int")
    answers = {name: _sweep(spark, events, frame)[0] for name, frame in others.items()}
    assert answers["projected"] == answers["csv"] == answers["partitioned"] == [7, 1]
    assert answers["filtered"] == [7, 0]
    assert read_on_driver == [False] * 4
    assert _sweep(spark, events, bare) == ([7, 1], ("broadcast", 7, 3))
    assert read_on_driver[-1] is True


def test_times_that_are_not_whole_numbers_and_rows_past_the_limit_go_through_spark(
    spark: Any, tmp_path: Path, read_on_driver: list[bool]
) -> None:
    doubles = INTERVALS.set_column(1, "start", INTERVALS.column("start").cast(pa.float64()))
    pq.write_table(doubles, tmp_path / "doubles.parquet")
    pq.write_table(INTERVALS, tmp_path / "longs.parquet")
    events = spark.createDataFrame([(1, 4, 0), (2, 3, 1)], "id bigint, time bigint, n int")
    assert _sweep(spark, events, spark.read.parquet(str(tmp_path / "doubles.parquet")))[0] == [
        7,
        1,
    ]
    assert read_on_driver == [False]
    longs = spark.read.parquet(str(tmp_path / "longs.parquet"))
    # 7 rows, 4 valid: past a limit of 6 the footers say 7 (Spark counts the valid ones)
    assert _sweep(spark, events, longs, broadcast_limit=6) == ([7, 1], ("broadcast", 7, 3))
    assert _sweep(spark, events, longs, broadcast_limit=3) == ([7, 1], ("range", 7, 3))
    assert read_on_driver[1:] == [False, False]


def test_files_that_cannot_be_read_on_the_driver_are_left_to_spark(
    spark: Any, tmp_path: Path
) -> None:
    """A file gone or damaged after Spark listed it: the driver's read gives way (None)
    rather than failing, and Spark reads or reports the files itself."""
    from pyspark.sql.types import StructType

    columns = {"id": "id", "start": "start", "end": "end", "value": "points", "time": "start"}
    kept = StructType.fromJson(
        {
            "type": "struct",
            "fields": [
                {"name": n, "type": t, "nullable": True, "metadata": {}}
                for n, t in [("__id", "integer"), ("__start", "long"), ("__end", "long"),
                             ("__value", "long"), ("__valid", "boolean")]
            ],
        }
    )  # fmt: skip
    for damage in ("gone", "damaged"):
        file = tmp_path / f"{damage}.parquet"
        pq.write_table(INTERVALS, file)
        frame = spark.read.parquet(str(file))
        assert read_intervals(frame, columns, "both", False, kept, None) is not None
        assert read_ranges(frame, frame, columns, "both", lambda rows: 1.0) is not None
        if damage == "gone":
            file.unlink()
        else:
            file.write_bytes(file.read_bytes()[:40])
        assert read_intervals(frame, columns, "both", False, kept, None) is None
        assert read_ranges(frame, frame, columns, "both", lambda rows: 1.0) is None


COLUMNS = {"id": "id", "time": "time", "start": "start", "end": "end", "value": "points"}


def _parquet(folder: Path, name: str, columns: dict[str, pa.Array]) -> str:
    file = folder / f"{name}.parquet"
    pq.write_table(pa.table(columns), file)
    return str(file)


@pytest.mark.parametrize("closed", CLOSED)
# Three examples per case, not the profile's count: each runs Spark jobs (seconds).
@settings(max_examples=3, suppress_health_check=list(HealthCheck))
@given(
    events=st.lists(
        st.tuples(st.sampled_from([-4, 1, 2, None]), st.one_of(st.none(), st.integers(-9, 30))),
        min_size=1,
        max_size=30,
    ),
    intervals=st.lists(
        st.tuples(
            st.sampled_from([-4, 1, 2, None]),
            st.one_of(st.none(), st.integers(-9, 30)),
            st.integers(-9, 30),
            st.integers(0, 5),
        ),
        max_size=30,
    ),
)
def test_the_range_plan_counts_and_samples_on_the_driver_as_spark_does(
    spark: Any,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    closed: str,
    events: list[Any],
    intervals: list[Any],
) -> None:
    """Null ids and times, start > end and empty intervals: the driver's counts and ranges
    are the counting job's row; swept from the files (bounds from the driver's sample)
    the values and report are those of the same rows swept through Spark."""
    folder = tmp_path_factory.mktemp("ranged")
    intervals = [*intervals, (1, 3, 3, 7), (2, 8, 1, 4)]  # an empty one, one ending first
    event_file = _parquet(
        folder,
        "events",
        {
            "id": pa.array([i for i, _ in events], pa.int32()),
            "time": pa.array([t for _, t in events], pa.int64()),
            "n": pa.array(range(len(events)), pa.int32()),
        },
    )
    span_file = _parquet(
        folder,
        "intervals",
        {
            name: pa.array([r[k] for r in intervals], kind)
            for k, (name, kind) in enumerate(
                [
                    ("id", pa.int32()),
                    ("start", pa.int64()),
                    ("end", pa.int64()),
                    ("points", pa.int64()),
                ]
            )
        },
    )
    e, b = spark.read.parquet(event_file), spark.read.parquet(span_file)
    read = read_ranges(e, b, COLUMNS, closed, lambda rows: 1.0)
    assert read is not None
    assert read.counts == range_plan._counted(e, b, COLUMNS, closed)
    seen: list[bool] = []

    def recorded(*args: Any) -> Any:
        found = read_ranges(*args)
        seen.append(found is not None)
        return found

    monkeypatch.setattr(range_plan, "read_ranges", recorded)
    in_memory = (
        spark.createDataFrame(
            [(i, t, n) for n, (i, t) in enumerate(events)], "id int, time bigint, n int"
        ),
        spark.createDataFrame(intervals, "id int, start bigint, end bigint, points bigint"),
    )
    for agg in ("sum", "max"):
        answers = []
        for frames in ((e, b), in_memory):
            report = SweepReport()
            result = interval_sweep(
                spark, *frames, agg=agg, closed=closed, plan="range", partitions=3, report=report
            )
            rows = sorted(result.collect(), key=lambda r: r["n"])
            counted = (
                report.events,
                report.skipped_events,
                report.intervals,
                report.skipped_intervals,
            )
            answers.append(([r["value"] for r in rows], counted, report.packed_key))
        assert answers[0] == answers[1]
        kept = [(i, t) for i, t in events if i is not None and t is not None]
        valid = [r for r in intervals if r[0] is not None and r[1] is not None]
        if kept:
            assert answers[0][0] == expected(kept, valid, agg, closed)
    assert seen == [True, False, True, False]


def test_the_driver_samples_the_kept_rows_at_the_share_asked_for(
    spark: Any, tmp_path: Path
) -> None:
    """At a share of 1 the sample is every kept row; at a smaller share, about that share
    of them, the same rows each time; the share is asked for the rows to sweep as the
    footers count them (an interval makes two)."""
    import numpy as np

    times = np.arange(20_000, dtype=np.int64)
    event_file = _parquet(
        tmp_path,
        "events",
        {"id": pa.array(times % 7, mask=times % 10 == 0), "time": pa.array(times)},
    )
    span_file = _parquet(
        tmp_path,
        "intervals",
        {
            "id": pa.array(times[:5_000] % 3),
            "start": pa.array(times[:5_000]),
            "end": pa.array(times[:5_000] + np.where(times[:5_000] % 4 == 0, -1, 5)),
            "points": pa.array(times[:5_000]),
        },
    )
    e, b = spark.read.parquet(event_file), spark.read.parquet(span_file)
    asked: list[int] = []
    whole = read_ranges(e, b, COLUMNS, "both", lambda rows: asked.append(rows) or 1.0)
    assert whole is not None and asked == [20_000 + 2 * 5_000]
    kept = times[times % 10 != 0]
    assert sorted(zip(*whole.events, strict=True)) == sorted(zip(kept % 7, kept, strict=True))
    valid = times[:5_000][times[:5_000] % 4 != 0]
    assert (
        sorted(whole.spans[1]) == valid.tolist() and sorted(whole.spans[2]) == (valid + 5).tolist()
    )
    assert whole.counts["skipped_events"] == 2_000 and whole.counts["skipped_intervals"] == 1_250
    tenth = [read_ranges(e, b, COLUMNS, "both", lambda rows: 0.1) for _ in range(2)]
    assert tenth[0] is not None and tenth[1] is not None and tenth[0].fraction == 0.1
    assert 1_500 <= len(tenth[0].events[0]) <= 2_100 and 300 <= len(tenth[0].spans[0]) <= 450
    assert all(
        np.array_equal(a, b)
        for a, b in zip(
            tenth[0].events + tenth[0].spans, tenth[1].events + tenth[1].spans, strict=True
        )
    )


def test_times_that_are_not_whole_numbers_are_counted_by_spark(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    events = spark.createDataFrame([(1, 4)], "id bigint, time bigint")
    events.write.parquet(str(tmp_path / "longs"))
    events.select("id", F.timestamp_seconds("time").alias("time")).write.parquet(
        str(tmp_path / "stamps")
    )
    pq.write_table(INTERVALS, tmp_path / "intervals.parquet")
    b = spark.read.parquet(str(tmp_path / "intervals.parquet"))
    longs, stamps = (spark.read.parquet(str(tmp_path / name)) for name in ("longs", "stamps"))
    assert read_ranges(longs, b, COLUMNS, "both", lambda rows: 1.0) is not None
    assert read_ranges(stamps, b, COLUMNS, "both", lambda rows: 1.0) is None
    assert read_ranges(longs, b.where("id > 0"), COLUMNS, "both", lambda rows: 1.0) is None
