"""The forecasting model (pure functions)."""

from itertools import pairwise

import pytest

from horizon.forecast import SEASONAL_PROFILE, forecast, smooth


def test_flat_series_forecasts_the_level_times_the_profile():
    result = forecast([10.0] * 14, 7)
    assert result.trend == pytest.approx(0.0)
    assert result.points == [round(10.0 * SEASONAL_PROFILE[d], 4) for d in range(7)]


def test_one_point_per_day_ahead():
    assert len(forecast([1, 2, 3, 4], 30).points) == 30


def test_rising_series_has_a_positive_trend():
    level, trend = smooth([1, 2, 3, 4, 5, 6])
    assert trend > 0
    assert level == pytest.approx(5.94, abs=0.1)


def test_trend_is_damped():
    points = forecast([0, 10, 20, 30, 40], 60).points
    steps = [b - a for a, b in pairwise(points)]
    assert steps[-1] < steps[0]


def test_single_point_series():
    assert smooth([7]) == (7.0, 0.0)


def test_empty_series_is_an_error():
    with pytest.raises(ValueError):
        smooth([])
