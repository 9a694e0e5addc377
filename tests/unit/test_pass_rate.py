"""Pass-rates and their 95 % Wilson intervals (pure maths, no docker)."""

from __future__ import annotations

import pytest

from rig.sample.verdict import Verdict
from rig.stats import BOUND_PLACES, pass_rate, wilson

P, F, R = Verdict.PASS, Verdict.FAIL, Verdict.RIG_ERROR


@pytest.mark.parametrize(("passed", "n", "low", "high"), [
    (3, 3, 0.4385, 1.0),
    (0, 3, 0.0, 0.5615),
    (1, 2, 0.0945, 0.9055),
    (8, 10, 0.4902, 0.9433),
])
def test_wilson_interval_matches_the_textbook_values(passed: int, n: int, low: float,
                                                     high: float) -> None:
    got = wilson(passed, n, places=BOUND_PLACES)
    assert got == (pytest.approx(low, abs=1e-4), pytest.approx(high, abs=1e-4))


@pytest.mark.parametrize("n", range(1, 31))
def test_all_or_none_passed_has_a_bound_of_exactly_0_or_1(n: int) -> None:
    """0/3 gave a lower bound of 5.551115123125783e-17 in OBSERVATION.json."""
    assert wilson(0, n, places=BOUND_PLACES)[0] == 0.0
    assert wilson(n, n, places=BOUND_PLACES)[1] == 1.0
    assert all(0.0 <= b <= 1.0 and round(b, 6) == b for k in range(n + 1)
               for b in wilson(k, n, places=BOUND_PLACES))


def test_partial_pass_rate_is_flaky_and_full_or_none_is_not() -> None:
    assert pass_rate([P, F, P]).flaky is True
    assert pass_rate([P, P, P]).flaky is False
    assert pass_rate([F, F, F]).flaky is False


def test_rig_errors_are_counted_apart_never_as_failures() -> None:
    """A rig fault must never be scored as a model failure (principle 4)."""
    rate = pass_rate([P, R, P])
    assert (rate.passed, rate.n, rate.rate, rate.rig_errors) == (2, 2, 1.0, 1)


def test_no_graded_sample_has_the_widest_interval() -> None:
    rate = pass_rate([R, R])
    assert (rate.n, rate.low, rate.high) == (0, 0.0, 1.0)
