"""Which arm is better, and how sure (issue 33): the pairwise and rank fields of
OBSERVATION.json, from `rig.stats`, over the success criterion's pass-rate.

- per round, `pairwise`: every pair of valid arms (in the round's order), the difference
  of their pass-rates with Newcombe's 95 % interval, the verdict and, when the rig could
  not separate two different rates, the samples per arm that would; `rank_interval`: each
  valid arm's ranks over the round's bootstrap (its samples resampled);
- across rounds, `paired`: the arms valid in every round, compared on the same changes
  (wins, the sign test, the mean difference with its bootstrap interval), their rank
  intervals, the seed and the resamples.

An invalid arm (a rig error) is never compared. The raw per-sample outcomes stay the
source of truth: all of this is recomputed from them by `bakeoff-sandbox report`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from rig import stats
from rig.rubric import ArmScore

VERDICT_TEXT = {"a_better": "{a} better", "b_better": "{b} better",
                "not_distinguishable": "not distinguishable at these samples"}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Pair(_Model):
    """Two valid arms of one change: success pass-rate of a minus b, Newcombe's 95 %."""

    a: str
    b: str
    difference: float = Field(ge=-1, le=1)
    ci95: tuple[float, float]
    verdict: stats.Comparison
    samples_needed: int | None = None  # per arm, to separate the rates; None: not asked

    def text(self) -> str:
        """``fixer better``, or ``not distinguishable at these samples``."""
        return VERDICT_TEXT[self.verdict].format(a=self.a, b=self.b)


class RankInterval(_Model):
    """An arm's rank in 95 % of the bootstrap's resamples, and how often it ranked first."""

    low: int = Field(ge=1)
    high: int = Field(ge=1)
    first: float = Field(ge=0, le=1)


class PairedPair(_Model):
    """Two arms across the changes: per change who had the higher pass-rate, the exact
    sign test of wins against losses, the mean difference with its bootstrap 95 %."""

    a: str
    b: str
    wins: int = Field(ge=0)
    losses: int = Field(ge=0)
    ties: int = Field(ge=0)
    sign_p: float = Field(ge=0, le=1)
    mean_difference: float = Field(ge=-1, le=1)
    ci95: tuple[float, float]
    verdict: stats.Comparison

    def text(self) -> str:
        return VERDICT_TEXT[self.verdict].format(a=self.a, b=self.b).replace(
            "at these samples", "across these changes")


class Paired(_Model):
    """The arms valid in every round, compared on the same changes."""

    arms: list[str]
    changes: list[str]
    seed: int
    resamples: int = Field(ge=1)
    pairs: list[PairedPair]
    rank_interval: dict[str, RankInterval]


def success_counts(arms: Sequence[ArmScore]) -> dict[str, stats.Counts]:
    """(passed, graded) of every valid arm's success criterion, in the arms' order."""
    return {a.arm: (a.success.rate.passed, a.success.rate.n) for a in arms if a.valid}


def _bound(value: float) -> float:
    return round(value, 6)


def pairwise(counts: Mapping[str, stats.Counts]) -> list[Pair]:
    """Every pair of the arms of `counts` (valid arms, in order: passed, graded)."""
    arms = list(counts)
    found = []
    for at, a in enumerate(arms):
        for b in arms[at + 1:]:
            diff = stats.newcombe(counts[a], counts[b])
            low, high = _bound(diff.low), _bound(diff.high)
            verdict = stats.verdict_of(low, high)
            found.append(Pair(
                a=a, b=b, difference=_bound(diff.difference), ci95=(low, high),
                verdict=verdict,
                samples_needed=stats.samples_needed(counts[a], counts[b])
                if verdict == "not_distinguishable" else None))
    return found


def ranks(boot: stats.Bootstrap) -> dict[str, RankInterval]:
    return {arm: RankInterval(low=rank.low, high=rank.high, first=rank.first)
            for arm, rank in boot.ranks().items()}


def rank_interval(counts: Mapping[str, stats.Counts]) -> dict[str, RankInterval]:
    """The round's bootstrap (its samples resampled): each valid arm's rank interval."""
    graded = [arm for arm, (_, n) in counts.items() if n > 0]
    if len(graded) < 2:
        return {}
    return ranks(stats.bootstrap([counts], graded))


def paired(changes: Sequence[str], counts: Sequence[Mapping[str, stats.Counts]]
           ) -> Paired | None:
    """The arms valid (graded) in every one of `changes`, compared on them; None when
    fewer than two such arms."""
    if not counts:
        return None
    arms = [arm for arm in counts[0] if all(c.get(arm, (0, 0))[1] > 0 for c in counts)]
    if len(arms) < 2:
        return None
    boot = stats.bootstrap(counts, arms)
    pairs = [PairedPair(
        a=p.a, b=p.b, wins=p.wins, losses=p.losses, ties=p.ties, sign_p=p.sign_p,
        mean_difference=_bound(p.mean_difference), ci95=(_bound(p.low), _bound(p.high)),
        verdict=stats.verdict_of(_bound(p.low), _bound(p.high)))
        for p in stats.paired(counts, boot)]
    return Paired(arms=arms, changes=list(changes), seed=boot.seed,
                  resamples=boot.resamples, pairs=pairs, rank_interval=ranks(boot))
