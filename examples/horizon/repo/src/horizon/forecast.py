"""The forecasting model: Holt's damped-trend smoothing times a seasonal profile.

Pure functions, no I/O: `forecast(series, horizon_days)` is all the HTTP layer calls.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

ALPHA = 0.5  # level smoothing
BETA = 0.3  # trend smoothing
PHI = 0.98  # trend damping per day ahead

# Multiplier for each day ahead (day 1 first): the weekly cycle of the 2023 backtest,
# widening slowly with the distance from the last observation.
SEASONAL_PROFILE: tuple[float, ...] = tuple(
    round(1.0 + 0.04 * math.sin(2 * math.pi * day / 7) * (1 + day / 180), 5)
    for day in range(1, 91)
)


@dataclass(frozen=True)
class Forecast:
    """The forecast points (one per day ahead) and the fitted state they came from."""

    points: list[float]
    level: float
    trend: float


def smooth(series: Sequence[float]) -> tuple[float, float]:
    """Holt's linear smoothing: the final (level, trend) of `series`."""
    if not series:
        raise ValueError("cannot smooth an empty series")
    if len(series) == 1:
        return float(series[0]), 0.0
    level = float(series[0])
    trend = float(series[1]) - float(series[0])
    for value in series[1:]:
        previous = level
        level = ALPHA * float(value) + (1 - ALPHA) * (level + trend)
        trend = BETA * (level - previous) + (1 - BETA) * trend
    return level, trend


def forecast(series: Sequence[float], horizon_days: int) -> Forecast:
    """Forecast the `horizon_days` days after the end of `series`."""
    level, trend = smooth(series)
    points = []
    damped = 0.0
    for day in range(1, horizon_days + 1):
        damped += PHI**day
        points.append(round((level + trend * damped) * SEASONAL_PROFILE[day - 1], 4))
    return Forecast(points=points, level=level, trend=trend)
