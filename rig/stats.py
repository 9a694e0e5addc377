"""Which arm is better, and how sure: the statistics of pass-rates (pure, standard library).

- `newcombe`: the difference of two independent proportions with its 95 % interval,
  Newcombe's hybrid score interval (method 10 of Newcombe 1998, "Interval estimation for
  the difference between independent proportions: comparison of eleven methods",
  Statistics in Medicine 17: 873-890), built from the two Wilson intervals;
- `sign_test`: the exact two-sided sign (binomial) test of wins against losses;
- `bootstrap`: arms compared on the same changes, resampling the changes and, within each,
  every arm's samples (seeded: `random.Random(seed)`, a bounded number of resamples), for
  the paired mean differences, the rank intervals and the share of resamples each arm
  ranks first;
- `samples_needed`: samples per arm that would separate two observed rates;
- `pass_rate`: one check's samples counted (`PassRate`), with the Wilson interval
  (`wilson`) the reports give, rounded to `BOUND_PLACES`.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Final, Literal

Z95: Final = 1.959963984540054     # two-sided 95 %
Z80: Final = 0.8416212335729143    # one-sided 80 % (power)
SEED: Final = 33                   # the bootstrap's default seed: reproducible numbers
RESAMPLES: Final = 1000            # its default (and most) resamples
MAX_RESAMPLES: Final = 10_000
_DIGITS: Final = 9                 # rates equal to 9 digits are equal (ranks)
BOUND_PLACES: Final = 6            # a reported Wilson bound's decimals (`pass_rate`)

Comparison = Literal["a_better", "b_better", "not_distinguishable"]  # which of two is better
Counts = tuple[int, int]  # (passed, graded samples)


def wilson(passed: int, n: int, z: float = Z95, places: int | None = None
           ) -> tuple[float, float]:
    """The Wilson score interval of passed/n, clamped to [0, 1]; rounded to `places` when
    given: at 0 or n passed the formula's bound is 0 or 1 up to a float's error (0/3 gave
    5.55e-17), and a report must say 0."""
    if n <= 0:
        return 0.0, 1.0
    p = passed / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    low, high = max(0.0, centre - spread), min(1.0, centre + spread)
    return (low, high) if places is None else (round(low, places), round(high, places))


@dataclass(frozen=True)
class PassRate:
    """One check's samples counted: passed of n graded, the rate and its 95 % interval."""

    passed: int
    n: int
    rate: float
    low: float
    high: float
    flaky: bool
    rig_errors: int

    def text(self) -> str:
        return f"{self.rate:.2f} [{self.low:.2f}, {self.high:.2f}] ({self.passed}/{self.n})"


def pass_rate(verdicts: Iterable[str]) -> PassRate:
    """Pass-rate over samples' verdicts (`rig.sample.outcome.Verdict`, a string: this
    module imports nothing of rig); RIG_ERROR samples are counted apart (they measure
    nothing)."""
    seen = list(verdicts)
    graded = [v for v in seen if v != "RIG_ERROR"]
    passed = sum(1 for v in graded if v == "PASS")
    n = len(graded)
    rate = passed / n if n else 0.0
    low, high = wilson(passed, n, places=BOUND_PLACES)
    return PassRate(passed, n, rate, low, high, flaky=0 < passed < n,
                    rig_errors=len(seen) - n)


@dataclass(frozen=True)
class Difference:
    """rate_a - rate_b and its 95 % interval; the verdict is whether it excludes 0."""

    difference: float
    low: float
    high: float

    @property
    def verdict(self) -> Comparison:
        return verdict_of(self.low, self.high)


def verdict_of(low: float, high: float) -> Comparison:
    """"a_better" when the interval lies above 0, "b_better" below, else neither."""
    if low > 0:
        return "a_better"
    return "b_better" if high < 0 else "not_distinguishable"


def newcombe(a: Counts, b: Counts, z: float = Z95) -> Difference:
    """Newcombe's hybrid score interval (method 10) for p_a - p_b, from the Wilson
    intervals (l, u) of each: d - sqrt((p_a - l_a)^2 + (u_b - p_b)^2) to
    d + sqrt((u_a - p_a)^2 + (p_b - l_b)^2). An arm with no graded sample measured
    nothing: the interval is the whole [-1, 1]."""
    (x_a, n_a), (x_b, n_b) = a, b
    if n_a <= 0 or n_b <= 0:
        return Difference(0.0, -1.0, 1.0)
    p_a, p_b = x_a / n_a, x_b / n_b
    (l_a, u_a), (l_b, u_b) = wilson(x_a, n_a, z), wilson(x_b, n_b, z)
    d = p_a - p_b
    low = d - math.sqrt((p_a - l_a) ** 2 + (u_b - p_b) ** 2)
    high = d + math.sqrt((u_a - p_a) ** 2 + (p_b - l_b) ** 2)
    return Difference(d, max(-1.0, low), min(1.0, high))


def sign_test(wins: int, losses: int) -> float:
    """The exact two-sided sign test: P(a split at least this uneven) under
    Binomial(wins + losses, 1/2), i.e. min(1, 2 * P(X <= min(wins, losses))). Ties are
    left out by the caller; no comparison at all gives 1."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail: int = sum(math.comb(n, k) for k in range(min(wins, losses) + 1))
    return min(1.0, float(Fraction(2 * tail, 2 ** n)))  # exact, for any n


def samples_needed(a: Counts, b: Counts, z_alpha: float = Z95,
                   z_beta: float = Z80) -> int | None:
    """Samples per arm that would separate the two observed rates at 95 % (two-sided)
    with 80 % power, by the normal approximation for two proportions (Fleiss 1981):

        n = (z_a * sqrt(2 * pbar * (1 - pbar)) + z_b * sqrt(p1 q1 + p2 q2))^2 / (p1 - p2)^2

    with pbar = (p1 + p2) / 2, rounded up. An observed rate of 0 or 1 claims no variance
    (3/3 is not a certainty), and the formula would then promise too few samples: such a
    rate is taken as (passed + 0.5) / (n + 1) instead. Equal observed rates: None (no
    number of samples separates them)."""
    (x_a, n_a), (x_b, n_b) = a, b
    if n_a <= 0 or n_b <= 0 or x_a * n_b == x_b * n_a:
        return None
    p1, p2 = _inside(x_a, n_a), _inside(x_b, n_b)
    pbar = (p1 + p2) / 2
    root = (z_alpha * math.sqrt(2 * pbar * (1 - pbar))
            + z_beta * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2)))
    return math.ceil(round(root * root / (p1 - p2) ** 2, _DIGITS))


def _inside(passed: int, n: int) -> float:
    """The observed rate, moved off 0 and 1 by half a sample."""
    return (passed + 0.5) / (n + 1) if passed in (0, n) else passed / n


# --- the bootstrap over changes and samples ----------------------------------------------


@dataclass(frozen=True)
class Rank:
    """An arm's ranks over the resamples: the 2.5 % and 97.5 % ones, and the share of
    resamples it ranked first (sharing first place counts)."""

    low: int
    high: int
    first: float


@dataclass(frozen=True)
class Bootstrap:
    """What `bootstrap` found: each arm's mean rate per resample, in the arms' order."""

    arms: tuple[str, ...]
    means: tuple[tuple[float, ...], ...]  # per resample, per arm
    seed: int
    resamples: int

    def ranks(self) -> dict[str, Rank]:
        """Each arm's rank interval (competition ranks: 1 + arms strictly better)."""
        per_arm: dict[str, list[int]] = {arm: [] for arm in self.arms}
        for means in self.means:
            keys = [round(m, _DIGITS) for m in means]
            ordered = sorted(keys)
            for arm, key in zip(self.arms, keys, strict=True):
                per_arm[arm].append(1 + len(ordered) - bisect.bisect_right(ordered, key))
        return {arm: Rank(int(percentile(sorted(seen), 0.025)),
                          int(percentile(sorted(seen), 0.975)),
                          sum(r == 1 for r in seen) / len(seen))
                for arm, seen in per_arm.items()}

    def interval(self, a: str, b: str) -> tuple[float, float]:
        """The 95 % percentile interval of mean_a - mean_b over the resamples."""
        at, bt = self.arms.index(a), self.arms.index(b)
        found = sorted(means[at] - means[bt] for means in self.means)
        return percentile(found, 0.025), percentile(found, 0.975)


def percentile(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank q-quantile of a sorted, non-empty sequence."""
    at = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[at]


def bootstrap(changes: Sequence[Mapping[str, Counts]], arms: Sequence[str],
              seed: int = SEED, resamples: int = RESAMPLES) -> Bootstrap:
    """Resample the changes with replacement and, within each drawn change, every arm's
    samples with replacement (a sample passes with its arm's observed share); each arm's
    statistic is its mean pass-rate over the drawn changes. Every arm must have graded
    samples in every change. Deterministic: `random.Random(seed)`, at most
    `MAX_RESAMPLES` resamples."""
    if not 0 < resamples <= MAX_RESAMPLES:
        raise ValueError(f"resamples must be 1..{MAX_RESAMPLES}, not {resamples}")
    if not changes or any(change[arm][1] <= 0 for change in changes for arm in arms):
        raise ValueError("every arm needs graded samples in every change")
    rng = random.Random(seed)
    drawn = []
    for _ in range(resamples):
        picked = [changes[rng.randrange(len(changes))] for _ in changes]
        drawn.append(tuple(
            sum(_resampled(rng, *change[arm]) for change in picked) / len(picked)
            for arm in arms))
    return Bootstrap(tuple(arms), tuple(drawn), seed, resamples)


def _resampled(rng: random.Random, passed: int, n: int) -> float:
    """The pass-rate of n samples drawn with replacement from passed/n."""
    if passed in (0, n):
        return passed / n
    return sum(rng.randrange(n) < passed for _ in range(n)) / n


@dataclass(frozen=True)
class PairedResult:
    """Two arms over the changes both were graded on: who beat whom per change, the sign
    test, the mean difference (a - b) and its bootstrap interval."""

    a: str
    b: str
    wins: int
    losses: int
    ties: int
    sign_p: float
    mean_difference: float
    low: float
    high: float

    @property
    def verdict(self) -> Comparison:
        return verdict_of(self.low, self.high)


def paired(changes: Sequence[Mapping[str, Counts]], boot: Bootstrap) -> list[PairedResult]:
    """Every pair of `boot`'s arms (in its order), across `changes` (those it resampled)."""
    found = []
    for a, b in itertools.combinations(boot.arms, 2):
        diffs = [_rate(change[a]) - _rate(change[b]) for change in changes]
        wins = sum(round(d, _DIGITS) > 0 for d in diffs)
        losses = sum(round(d, _DIGITS) < 0 for d in diffs)
        low, high = boot.interval(a, b)
        found.append(PairedResult(a, b, wins, losses, len(diffs) - wins - losses,
                                  sign_test(wins, losses), sum(diffs) / len(diffs),
                                  low, high))
    return found


def _rate(counts: Counts) -> float:
    passed, n = counts
    return passed / n
