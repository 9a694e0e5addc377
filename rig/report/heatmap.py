"""Which arm is better, and how sure, as REPORT.html draws it (issue 33): each round's pair
matrix as a heat map (a table whose cells are coloured by the difference and its verdict,
every number a `<data>` of OBSERVATION.json's `pairwise`), and the rank intervals across
changes as whiskers (geometry the template draws as inline SVG). Pure; no markup here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeVar

from rig.report.charts import LABEL_CHARS, PLOT_W, PLOT_X, ROW, TOP, Tick, cut
from rig.report.observation import Round
from rig.report.pairs import Pair, Paired, PairedPair

MATRIX_ARMS: Final = 20  # a heat map shows the first valid arms; OBSERVATION.json has all
LEVELS: Final = 4        # shades of a colour, by the size of the difference
Side = Literal["row", "column", "neither"]


@dataclass(frozen=True)
class HeatCell:
    """The pair (row arm, column arm), above the diagonal: the stored pair; on or below
    it: nothing (`pair` None), the mirror of the cell above."""

    pair: Pair | None
    better: Side  # whose success pass-rate is ahead beyond the interval
    level: int    # 0..LEVELS: the size of the difference
    title: str


@dataclass(frozen=True)
class Matrix:
    arms: tuple[str, ...]
    rows: tuple[tuple[HeatCell, ...], ...]
    left_out: int  # valid arms past MATRIX_ARMS


def _side(pair: Pair) -> Side:
    if pair.verdict == "a_better":
        return "row"
    return "column" if pair.verdict == "b_better" else "neither"


def _cell(pair: Pair) -> HeatCell:
    better = _side(pair)
    level = min(LEVELS, round(abs(pair.difference) * LEVELS))
    return HeatCell(pair, better, level, f"{pair.a} - {pair.b}: {pair.difference:+.2f} "
                                         f"[{pair.ci95[0]:+.2f}, {pair.ci95[1]:+.2f}]: "
                                         f"{pair.text()}")


def matrix(round_: Round) -> Matrix | None:
    """The round's pairs as an arms x arms matrix (row minus column); None: no pair."""
    if not round_.pairwise:
        return None
    valid = [e.arm for e in round_.arms if e.valid]
    arms = valid[:MATRIX_ARMS]
    found = {(p.a, p.b): p for p in round_.pairwise}
    rows = []
    for at, row in enumerate(arms):
        cells = []
        for to, column in enumerate(arms):
            pair = found.get((row, column)) if to > at else None
            cells.append(_cell(pair) if pair is not None else HeatCell(
                None, "neither", 0, "" if to == at else f"see {column}'s row"))
        rows.append(tuple(cells))
    return Matrix(tuple(arms), tuple(rows), len(valid) - len(arms))


Shown = TypeVar("Shown", Pair, PairedPair)


def shown(pairs: Sequence[Shown], arms: Sequence[str]) -> list[Shown]:
    """The pairs a page lists: those between the first `MATRIX_ARMS` of `arms`."""
    kept = set(arms[:MATRIX_ARMS])
    return [p for p in pairs if p.a in kept and p.b in kept]


def needed(round_: Round) -> list[Pair]:
    """The round's pairs in its matrix that the rig could not separate."""
    return [p for p in shown(round_.pairwise, [e.arm for e in round_.arms if e.valid])
            if p.verdict == "not_distinguishable"]


# -- rank intervals as whiskers ------------------------------------------------------------


@dataclass(frozen=True)
class RankRow:
    arm: str
    label: str
    y: float
    low: float   # x of the interval's ends
    high: float
    first: float  # the share of resamples it ranked first
    title: str


@dataclass(frozen=True)
class RankChart:
    key: str
    title: str
    height: float
    ticks: tuple[Tick, ...]
    rows: tuple[RankRow, ...]


def ranks(paired: Paired, key: str = "ranks") -> RankChart:
    """Each arm's rank interval across the changes (rank 1 on the left), in the order of
    its best rank, then its worst."""
    count = len(paired.arms)
    step = PLOT_W / max(1, count - 1)

    def x(rank: int) -> float:
        return round(PLOT_X + (rank - 1) * step, 2)

    ordered = sorted(paired.rank_interval.items(), key=lambda kv: (kv[1].low, kv[1].high))
    rows = tuple(RankRow(
        arm=arm, label=cut(arm, LABEL_CHARS), y=TOP + at * ROW, low=x(r.low), high=x(r.high),
        first=r.first, title=f"{arm}: rank {r.low} to {r.high} in 95 % of the resamples; "
                             f"first in {100 * r.first:.1f} %")
        for at, (arm, r) in enumerate(ordered))
    shown = sorted({1, count, *range(1, count + 1, max(1, count // 10))})
    return RankChart(
        key=key, title="Rank interval per arm across changes (95 % of bootstrap resamples)",
        height=TOP + len(rows) * ROW + 10,
        ticks=tuple(Tick(x(rank), str(rank)) for rank in shown), rows=rows)

