"""``holtwinters``: Holt-Winters (multiplicative) smoothing and forecast of a column."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

from query.ops.analysis.settings import colon_settings
from query.ops.base import Op, OpArgs, Row, as_number, cell, to_long

__all__ = ["HoltWintersOp", "holt_winters_forecast"]


def _java_divide(numerator: float, denominator: float) -> float:
    """Division of doubles as Java does it: by zero gives an infinity or NaN."""
    if denominator:
        return numerator / denominator
    if numerator == 0 or math.isnan(numerator):
        return math.nan
    return math.copysign(math.inf, numerator) * math.copysign(1.0, denominator)


def _seasonal_indices(values: list[int], period: int) -> list[float]:
    """Each position's mean share of its season's average, over the whole seasons."""
    seasons = len(values) // period
    averages = [sum(values[s * period : (s + 1) * period]) / period for s in range(seasons)]
    return [
        sum(_java_divide(values[s * period + i], averages[s]) for s in range(seasons)) / seasons
        for i in range(period)
    ]


def holt_winters_forecast(
    values: list[int], alpha: float, beta: float, gamma: float, period: int, ahead: int
) -> list[float]:
    """The smoothed forecast for each position (0 where none is made), ``ahead`` extra at the end.

    Level S, trend B and season I start as NIST recommends (S = the first value,
    B = the mean per-step change between the first two seasons, I = the seasonal
    indices), as in the implementation Hydra ships.
    """
    count = len(values)
    level = [0.0] * count
    trend = [0.0] * count
    season = [0.0] * count
    forecast = [0.0] * (count + ahead)
    level[1] = float(values[0])
    trend[1] = sum(values[period + i] - values[i] for i in range(period)) / (period * period)
    season[:period] = _seasonal_indices(values, period)
    for i in range(2, count):
        earlier = i - period
        if earlier >= 0:
            level[i] = alpha * _java_divide(values[i], season[earlier]) + (1.0 - alpha) * (
                level[i - 1] + trend[i - 1]
            )
        else:
            level[i] = alpha * values[i] + (1.0 - alpha) * (level[i - 1] + trend[i - 1])
        trend[i] = gamma * (level[i] - level[i - 1]) + (1 - gamma) * trend[i - 1]
        if earlier >= 0:
            season[i] = beta * _java_divide(values[i], level[i]) + (1.0 - beta) * season[earlier]
        if i + ahead >= period:
            forecast[i + ahead] = (level[i] + ahead * trend[i]) * season[earlier + ahead]
    return forecast


_DEFAULTS: tuple[float, ...] = (0, 1, 0.1, 0.1, 0.1, 7, 3)
_WHOLE = frozenset({0, 1, 5, 6})


class HoltWintersOp(Op):
    """holtwinters=[T[:V[:ALPHA[:BETA[:GAMMA[:PERIOD[:AHEAD]]]]]]] : forecast column V.

    Smooths column V's whole numbers with Holt-Winters (multiplicative: level
    ALPHA, season BETA, trend GAMMA, each 0..1; a season is PERIOD rows) and
    gives, for each input row, T, V, the forecast made for it AHEAD rows earlier
    (0 where none was made) and the error in percent, (forecast - V) / the larger
    of the two * 100. Needs at least 2 * PERIOD rows; 1 <= AHEAD <= PERIOD.
    Defaults: ``0:1:.1:.1:.1:7:3``.
    Example: ``holtwinters=0:1:0.5:0.5:0.5:2:1`` over 4 rows ``d1 10`` / ``d2 20`` /
    ``d3 10`` / ``d4 20`` gives ``d1 10 0.0 -100.0`` / ``d2 20 0.0 -100.0`` /
    ``d3 10 0.0 -100.0`` / ``d4 20 18.333333333333332 -8.33333333333334``.
    """

    name = "holtwinters"
    table = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        settings = colon_settings(
            args, _DEFAULTS, _WHOLE, "T:V:ALPHA:BETA:GAMMA:PERIOD:AHEAD", _smoothing_factor
        )
        self.time_column, self.value_column = int(settings[0]), int(settings[1])
        self.alpha, self.beta, self.gamma = settings[2:5]
        self.period, self.ahead = int(settings[5]), int(settings[6])
        if self.period < 1 or not 1 <= self.ahead <= self.period:
            raise args.error(0, "PERIOD must be at least 1 and AHEAD between 1 and PERIOD")

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """One row per input row, after all the rows."""
        table = [list(row) for row in rows]
        if not table:
            return
        if len(table) < 2 * self.period:
            raise self.args.error(
                0,
                f"needs at least 2 * PERIOD = {2 * self.period} rows, got {len(table)}",
                hint="Use a smaller PERIOD or more rows.",
            )
        values = [to_long(as_number(cell(row, self.value_column)) or 0) for row in table]
        forecast = holt_winters_forecast(
            values, self.alpha, self.beta, self.gamma, self.period, self.ahead
        )
        for row, value, predicted in zip(table, values, forecast, strict=False):
            error = _java_divide(predicted - value, max(predicted, value)) * 100
            yield [cell(row, self.time_column), cell(row, self.value_column), predicted, error]


def _smoothing_factor(place: int, number: float) -> str | None:
    """ALPHA, BETA and GAMMA lie between 0 and 1."""
    if place not in _WHOLE and not 0 <= number <= 1:
        return "smoothing factors lie between 0 and 1"
    return None
