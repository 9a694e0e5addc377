"""rig.stats against published values: Newcombe (1998) Table II, method 10; exact binomial
tail probabilities; the bootstrap reproducible from its seed."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from rig import stats

# Newcombe RG (1998) Statistics in Medicine 17:873-890, Table II, method 10 (score
# interval without continuity correction): (a) to (f), 95 % limits to 4 places.
NEWCOMBE_METHOD_10 = [
    ((56, 70), (48, 80), 0.2000, 0.0524, 0.3339),
    ((9, 10), (3, 10), 0.6000, 0.1705, 0.8090),
    ((6, 7), (2, 7), 0.5714, 0.0582, 0.8062),
    ((5, 56), (0, 29), 0.0893, -0.0381, 0.1926),
    ((0, 10), (0, 20), 0.0000, -0.1611, 0.2775),
    ((10, 10), (0, 20), 1.0000, 0.6791, 1.0000),
]


@pytest.mark.parametrize(("a", "b", "difference", "low", "high"), NEWCOMBE_METHOD_10)
def test_newcombe_method_10_gives_the_papers_table(
        a: stats.Counts, b: stats.Counts, difference: float, low: float, high: float) -> None:
    found = stats.newcombe(a, b)
    assert (round(found.difference, 4), round(found.low, 4), round(found.high, 4)) == (
        difference, low, high)


def test_newcombe_swapped_arms_mirror_the_interval_and_the_verdict() -> None:
    ahead, behind = stats.newcombe((9, 10), (3, 10)), stats.newcombe((3, 10), (9, 10))
    assert (round(behind.difference, 12), round(behind.low, 12), round(behind.high, 12)) == (
        round(-ahead.difference, 12), round(-ahead.high, 12), round(-ahead.low, 12))
    assert (ahead.verdict, behind.verdict) == ("a_better", "b_better")


def test_three_samples_separate_all_from_nothing_but_not_all_from_two_of_three() -> None:
    """The issue's example: at the default 3 samples, 3/3 against 2/3 is not
    distinguishable; 3/3 against 0/3 is."""
    close, apart = stats.newcombe((3, 3), (2, 3)), stats.newcombe((3, 3), (0, 3))
    assert close.verdict == "not_distinguishable"
    assert (round(close.low, 4), round(close.high, 4)) == (-0.2905, 0.7923)
    assert apart.verdict == "a_better"
    assert (round(apart.low, 4), apart.high) == (0.2059, 1.0)
    same = stats.newcombe((3, 3), (3, 3))
    assert (same.difference, round(same.low, 4), round(same.high, 4), same.verdict) == (
        0.0, -0.5615, 0.5615, "not_distinguishable")


def test_nothing_graded_is_the_whole_interval() -> None:
    assert stats.newcombe((0, 0), (3, 3)) == stats.Difference(0.0, -1.0, 1.0)


def test_the_reported_wilson_bounds_are_the_unrounded_ones_rounded() -> None:
    """One Wilson interval (issue 35: the oracle had its own copy): what a pass-rate
    reports is `wilson`'s bounds to `BOUND_PLACES`."""
    for passed, n in [(0, 3), (1, 3), (2, 3), (3, 3), (7, 19), (0, 1)]:
        low, high = stats.wilson(passed, n)
        assert (round(low, 6), round(high, 6)) == stats.wilson(passed, n, places=6)
        rate = stats.pass_rate(["PASS"] * passed + ["FAIL"] * (n - passed))
        assert (rate.low, rate.high) == (round(low, 6), round(high, 6))


@pytest.mark.parametrize(("wins", "losses", "p"), [
    (1, 9, 0.021484375),           # 2 * (1 + 10) / 2^10
    (9, 1, 0.021484375),
    (5, 15, 0.04138946533203125),  # 2 * 21700 / 2^20 (binom.test(5, 20): 0.04139)
    (0, 5, 0.0625),                # 2 / 2^5
    (1, 7, 0.0703125),             # 2 * 9 / 2^8
    (3, 3, 1.0),
    (2, 0, 0.5),
    (0, 0, 1.0),
])
def test_the_sign_test_is_the_exact_two_sided_binomial_tail(
        wins: int, losses: int, p: float) -> None:
    assert stats.sign_test(wins, losses) == p


def test_samples_needed_by_the_normal_approximation_stated() -> None:
    # p 0.5 vs 0.2 (Fleiss): (1.96 sqrt(2 .35 .65) + .8416 sqrt(.25 + .16))^2 / .09 = 38.0
    assert stats.samples_needed((10, 20), (4, 20)) == 39
    pbar = 0.35
    expected = (stats.Z95 * math.sqrt(2 * pbar * (1 - pbar)) +
                stats.Z80 * math.sqrt(0.25 + 0.16)) ** 2 / 0.09
    assert math.ceil(expected) == 39
    # an observed 1 or 0 is moved off by half a sample: 3/3 -> 3.5/4, 0/3 -> 0.5/4
    assert stats.samples_needed((3, 3), (0, 3)) == 6
    assert stats.samples_needed((3, 3), (2, 3)) == 63
    assert stats.samples_needed((3, 3), (3, 3)) is None  # equal rates: never separated
    assert stats.samples_needed((0, 3), (0, 5)) is None
    assert stats.samples_needed((2, 3), (1, 3)) == stats.samples_needed((1, 3), (2, 3)) == 35


CHANGES = [{"a": (3, 3), "b": (3, 3), "c": (0, 3)},
           {"a": (3, 3), "b": (2, 3), "c": (1, 3)},
           {"a": (2, 3), "b": (1, 3), "c": (0, 3)}]


def test_the_bootstrap_is_reproducible_from_its_seed() -> None:
    first = stats.bootstrap(CHANGES, ["a", "b", "c"], seed=7, resamples=200)
    again = stats.bootstrap(CHANGES, ["a", "b", "c"], seed=7, resamples=200)
    other = stats.bootstrap(CHANGES, ["a", "b", "c"], seed=8, resamples=200)
    assert first == again and first.means != other.means
    assert len(first.means) == 200 and first.seed == 7
    assert first.ranks() == again.ranks()
    assert stats.paired(CHANGES, first) == stats.paired(CHANGES, again)


def test_the_bootstrap_ranks_and_pairs() -> None:
    boot = stats.bootstrap(CHANGES, ["a", "b", "c"])
    ranks = boot.ranks()
    assert (ranks["a"].low, ranks["c"].high) == (1, 3)
    assert ranks["c"].first == 0.0 and 0 < ranks["b"].first < ranks["a"].first <= 1
    assert sum(boot.means[0]) > 0
    ab, ac, _ = stats.paired(CHANGES, boot)
    assert (ab.a, ab.b, ab.wins, ab.losses, ab.ties, ab.sign_p) == ("a", "b", 2, 0, 1, 0.5)
    assert (ac.wins, ac.losses, ac.ties, ac.sign_p) == (3, 0, 0, 0.25)
    assert round(ac.mean_difference, 12) == round((1 + 2 / 3 + 2 / 3) / 3, 12)
    assert ac.low > 0 and ac.verdict == "a_better"
    assert ab.low <= ab.mean_difference <= ab.high


def test_the_bootstrap_of_certain_outcomes_has_no_spread() -> None:
    """All or nothing on every change: every resample is the observation itself."""
    changes = [{"x": (3, 3), "y": (0, 3)}] * 2
    boot = stats.bootstrap(changes, ["x", "y"], resamples=50)
    assert set(boot.means) == {(1.0, 0.0)}
    assert boot.ranks() == {"x": stats.Rank(1, 1, 1.0), "y": stats.Rank(2, 2, 0.0)}


def test_equal_arms_share_first_place() -> None:
    boot = stats.bootstrap([{"x": (3, 3), "y": (3, 3)}], ["x", "y"], resamples=10)
    assert boot.ranks() == {"x": stats.Rank(1, 1, 1.0), "y": stats.Rank(1, 1, 1.0)}


def test_the_bootstrap_refuses_unbounded_or_empty_work() -> None:
    with pytest.raises(ValueError, match=r"resamples must be 1\.\.10000, not 10001"):
        stats.bootstrap(CHANGES, ["a"], resamples=10_001)
    with pytest.raises(ValueError, match="every arm needs graded samples"):
        stats.bootstrap([{"a": (0, 0)}], ["a"])


def test_the_statistics_module_imports_nothing_but_the_standard_library() -> None:
    code = ("import sys; import rig.stats; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('rig', 'runner', 'pydantic', 'numpy', 'scipy', 'docker')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "['rig', 'rig.stats']"
