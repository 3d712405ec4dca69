"""``changepoints``: peaks and lasting changes in a column (Hydra's FindChangePoints)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from query.ops.analysis.settings import colon_settings
from query.ops.base import Op, OpArgs, Row, as_number, cell, to_long

__all__ = ["ChangePointsOp", "find_change_points"]


@dataclass(frozen=True)
class ChangePoint:
    """A change at row ``index``: its kind (PEAK, RISE, FALL, START, STOP) and size."""

    index: int
    kind: str
    size: int


def _mean(values: list[int]) -> float:
    return sum(values) / len(values) if values else math.nan


def _spread(values: list[int]) -> float:
    """Hydra's 'sd': the root of the summed squared residuals (not divided by n), at least 1e-4."""
    mean = _mean(values)
    return max(math.sqrt(sum((mean - v) ** 2 for v in values)), 0.0001)


def _predict_next(values: list[int]) -> float:
    """The next value on the least-squares line through ``values``."""
    count = len(values)
    mean_x = 0.5 * (count - 1)
    mean_xx = _mean([i * i for i in range(count)])
    mean_xy = _mean([i * v for i, v in enumerate(values)])
    denominator = mean_xx - mean_x**2
    slope = (mean_xy - mean_x * _mean(values)) / denominator if denominator else math.nan
    intercept = _mean(values) - slope * mean_x
    return slope * count + intercept


def _smooth_peaks(data: list[int], min_change: int, min_z: float, width: int) -> list[ChangePoint]:
    """Peaks: values far from their neighbourhood, which are then smoothed away in ``data``."""
    points = []
    for i in range(len(data)):
        left, right = max(0, i - width), min(i + width, len(data))
        around = data[left:right]
        without = data[left:i] + data[i + 1 : right]
        if _spread(around) > min_z * _spread(without):
            change = data[i] - _mean(without)
            if abs(change) > min_change:
                points.append(ChangePoint(i, "PEAK", to_long(change)))
                data[i] = to_long(_mean(without))
    return points


def _kind(before: int, after: int, inactive: int) -> str:
    if before > after:
        return "FALL" if after > inactive else "STOP"
    return "START" if before < inactive else "RISE"


def _lasting_changes(
    data: list[int], min_change: int, min_ratio: float, min_z: float, inactive: int, window: int
) -> list[ChangePoint]:
    points = []
    for i in range(2, len(data)):
        recent = data[max(i - window + 1, 0) : i]
        predicted = _predict_next(recent)
        difference = data[i] - predicted
        z_score = difference / _spread(recent)
        ratio = -1 + data[i] / max(predicted, 1.0)
        if abs(z_score) > min_z and abs(difference) > min_change and abs(ratio) > min_ratio:
            kind = _kind(to_long(_mean(recent)), data[i], inactive)
            points.append(ChangePoint(i, kind, to_long(difference)))
    return points


def find_change_points(
    data: list[int],
    min_change: int = 10,
    min_ratio: float = 0.3,
    min_z: float = 1.5,
    inactive: int = 1,
    window: int = 5,
) -> list[ChangePoint]:
    """Peaks first (smoothed out of ``data``), then lasting changes, as Hydra lists them."""
    smoothed = list(data)
    peaks = _smooth_peaks(smoothed, min_change, min_z, window)
    return peaks + _lasting_changes(smoothed, min_change, min_ratio, min_z, inactive, window)


_DEFAULTS = (0, 1, 10, 0.3, 1.5, 1, 5)


class ChangePointsOp(Op):
    """changepoints=[T[:V[:MINCHANGE[:MINRATIO[:MINZ[:INACTIVE[:WINDOW]]]]]]] : significant changes.

    Reads column V's whole numbers down the rows and gives one row per change:
    column T of the row where it happened, its kind and its size. A PEAK is a
    value that stands out from the WINDOW values on each side (its spread more
    than MINZ times theirs, by more than MINCHANGE); peaks are smoothed away,
    then a RISE, FALL, START or STOP (from or to INACTIVE or less) is a value
    more than MINCHANGE, MINRATIO and MINZ away from the line through the
    WINDOW-1 values before it. Defaults: ``0:1:10:0.3:1.5:1:5``.
    Example: ``changepoints=0:1`` on ``MONDAY 10`` / ``TUESDAY 10`` /
    ``WEDNESDAY 10`` / ``THURSDAY 1000`` / ``FRIDAY 10`` / ``SATURDAY 10`` gives
    ``THURSDAY PEAK 990``.
    """

    name = "changepoints"
    table = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        settings = colon_settings(
            args,
            _DEFAULTS,
            frozenset({0, 1, 2, 5, 6}),
            "T:V:MINCHANGE:MINRATIO:MINZ:INACTIVE:WINDOW",
        )
        self.time_column, self.value_column = int(settings[0]), int(settings[1])
        self.settings = settings

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """The change rows, after all the rows."""
        table = [list(row) for row in rows]
        data = [to_long(as_number(cell(row, self.value_column)) or 0) for row in table]
        _, _, min_change, min_ratio, min_z, inactive, window = self.settings
        points = find_change_points(
            data, int(min_change), float(min_ratio), float(min_z), int(inactive), int(window)
        )
        for point in points:
            yield [cell(table[point.index], self.time_column), point.kind, point.size]
