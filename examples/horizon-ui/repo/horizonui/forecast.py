"""The forecast behind the summary: a baseline times a seasonal profile of 90 days ahead."""

from __future__ import annotations

import math

MAX_DAYS = 90  # how far ahead the profile reaches; the page's input stops there
BASELINE = 120.0
# Multiplier for each day ahead (day 1 first): the weekly cycle, widening slowly.
PROFILE: tuple[float, ...] = tuple(
    round(1.0 + 0.04 * math.sin(2 * math.pi * day / 7) * (1 + day / 180), 5)
    for day in range(1, MAX_DAYS + 1)
)


def summary(days: int) -> dict[str, float | int]:
    """Expected demand over the next `days` days: the total, the peak and its day, and
    the demand on the last day."""
    points = [round(BASELINE * PROFILE[day - 1], 2) for day in range(1, days + 1)]
    peak = max(range(days), key=points.__getitem__)
    return {
        "days": days,
        "total": round(sum(points), 1),
        "peak": points[peak],
        "peak_day": peak + 1,
        "last_day": round(BASELINE * PROFILE[days], 2),
    }
