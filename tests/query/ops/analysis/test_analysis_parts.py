"""The analysis ops' own parts, without an op string: Hydra's frequency table, the
histogram's power buckets, change points, date patterns and the Holt-Winters forecast."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from query.ops.analysis.buckets import power_bucket
from query.ops.analysis.changepoints import ChangePoint, find_change_points
from query.ops.analysis.dates import DatePattern
from query.ops.analysis.distributions import FrequencyTable
from query.ops.analysis.forecast import holt_winters_forecast


def test_frequency_table_single() -> None:
    """TestOpFrequencyTable.java:53 (ftableTestSingle)."""
    table = FrequencyTable()
    table.update(1, 1)
    assert table.nearest_percentile(0.5) == 1
    table.update(2, 1)
    table.update(3, 1)
    assert table.nearest_percentile(0.5) == 2


def test_frequency_table_multi() -> None:
    """TestOpFrequencyTable.java:64 (ftableTestMulti)."""
    table = FrequencyTable()
    table.update(1, 1000)
    assert table.nearest_percentile(0.99) == 1
    table.update(2, 1)
    table.update(3, 1)
    assert table.nearest_percentile(0.5) == 1
    table.update(10, 10000)
    assert table.nearest_percentile(0.01) == 1
    assert table.nearest_percentile(0.5) == 10
    table.update(1, 1000000)
    assert table.nearest_percentile(0.5) == 1


@pytest.mark.parametrize(
    ("value", "scale", "bucket"),
    [(1, 10, 1), (10, 10, 1), (11, 10, 10), (100, 10, 10), (101, 10, 100), (2, 2, 1), (3, 2, 2),
     (5, 2, 4), (0, 10, 1)],
)  # fmt: skip
def test_a_value_falls_into_the_largest_power_below_it(value: int, scale: int, bucket: int) -> None:
    assert power_bucket(value, scale) == bucket


def test_a_lone_spike_is_a_peak_and_smoothed_away() -> None:
    data = [10] * 11
    data[5] = 100
    assert find_change_points(data) == [ChangePoint(5, "PEAK", 90)]


def test_a_step_is_one_lasting_rise_and_a_flat_column_has_no_change() -> None:
    assert find_change_points([10] * 6 + [100] * 6) == [ChangePoint(6, "RISE", 90)]
    assert find_change_points([7] * 12) == []


def test_a_date_pattern_prints_and_reads_the_same_moment() -> None:
    pattern = DatePattern("yyyy-MM-dd HH:mm")
    moment = datetime(2014, 12, 24, 17, 5, tzinfo=UTC)
    assert pattern.format(moment) == "2014-12-24 17:05"
    assert pattern.parse("2014-12-24 17:05") == moment
    assert DatePattern("yyMMdd").parse("141224") == datetime(2014, 12, 24, tzinfo=UTC)
    assert DatePattern("dd MMM yyyy").parse("03 Feb 2015") == datetime(2015, 2, 3, tzinfo=UTC)
    with pytest.raises(ValueError, match="unknown pattern letter 'Q'"):
        DatePattern("yyyy-QQ")
    with pytest.raises(ValueError, match="does not match"):
        pattern.parse("24.12.2014")


def test_a_constant_column_is_forecast_as_itself() -> None:
    """Level the value, trend 0, every seasonal index 1: each forecast made is the value
    (none before the first season ends)."""
    forecast = holt_winters_forecast([5] * 6, 0.5, 0.5, 0.5, period=2, ahead=1)
    assert forecast == [0.0, 0.0, 0.0, 5.0, 5.0, 5.0, 5.0]
