"""The forecast model's summary."""

import pytest

from horizonui.forecast import MAX_DAYS, PROFILE, summary


def test_the_profile_reaches_the_pages_maximum():
    assert len(PROFILE) == MAX_DAYS == 90


@pytest.mark.parametrize(("days", "total", "peak", "peak_day"), [
    (1, 123.8, 123.77, 1), (45, 5411.9, 125.82, 44), (89, 10683.1, 126.92, 86)])
def test_summary(days, total, peak, peak_day):
    found = summary(days)
    assert (found["days"], found["total"], found["peak"], found["peak_day"]) == (
        days, total, peak, peak_day)


def test_the_total_grows_with_the_horizon():
    assert summary(10)["total"] < summary(20)["total"] < summary(40)["total"]
