"""The charts of REPORT.html as geometry: the positions, sizes and labels the template
draws as inline SVG (`templates/charts.html.j2`). Pure, and no markup here: every label
is text the template escapes, every number comes from an `Observation`.

- `rates`: per arm, the success pass-rate as a bar, its 95 % Wilson interval as a
  whisker, the threshold as a line, the winner and every flag marked on the arm's row;
- `rubric`: per arm, the weighted rubric total stacked by dimension (objective, judge);
- `usage`: per arm, tokens or cost (x) against the success pass-rate (y); an arm whose
  cost has no price sits in a lane of its own, never at 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from rig.report.observation import ArmEntry, Round
from rig.rubric import DIMENSIONS, OBJECTIVE

WIDTH: Final = 900
LABEL_X: Final = 8          # arm labels start here
PLOT_X: Final = 200         # the plot's left edge
PLOT_W: Final = 380         # its width
NOTE_X: Final = PLOT_X + PLOT_W + 14
ROW: Final = 24             # one arm's row
TOP: Final = 46             # the round's flags, then the axis labels
LABEL_CHARS: Final = 26
NOTE_CHARS: Final = 46
LABELLED_POINTS: Final = 12  # a scatter names its points up to this many arms
ROUND_FLAGS: Final = frozenset({"no_separation", "rig_asymmetric", "infra_asymmetric",
                                 "effort_confounded", "tie"})
Kind = Literal["winner", "valid", "invalid"]


def cut(text: str, limit: int) -> str:
    """`text` in at most `limit` characters (the whole of it goes in the element's title)."""
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


@dataclass(frozen=True)
class Tick:
    at: float  # x (or y) in the SVG
    label: str


def nice_top(value: float) -> tuple[float, float]:
    """(axis maximum, tick step) for data up to `value`: 1, 2 or 5 times a power of ten,
    at most five steps."""
    top = value if value > 0 else 1.0
    step = 10.0 ** math.floor(math.log10(top / 5))
    step = next(step * m for m in (1, 2, 5, 10) if top / (step * m) <= 5)
    return math.ceil(top / step - 1e-9) * step, step


def _ticks(top: float, step: float, place: Callable[[float], float],
           label: Callable[[float], str]) -> tuple[Tick, ...]:
    count = round(top / step)
    return tuple(Tick(place(i * step), label(i * step)) for i in range(count + 1))


def compact(value: float) -> str:
    """An axis label: 0, 250, 1.5k, 2M."""
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:g}{unit}"
    return f"{value:g}"


def kind_of(round_: Round, entry: ArmEntry) -> Kind:
    if round_.winner == entry.arm:
        return "winner"
    return "valid" if entry.valid else "invalid"


def flags_by_arm(round_: Round) -> tuple[list[str], dict[str, list[str]]]:
    """The round's flags split: those about the round (no_separation, effort_confounded,
    a tie, ...) and, per arm, the kinds of those that name it (`flaky:B`,
    `harness_touched:B (conftest.py)` -> B: flaky, harness_touched (conftest.py))."""
    per_arm: dict[str, list[str]] = {entry.arm: [] for entry in round_.arms}
    whole: list[str] = []
    for flag in round_.flags:
        kind, _, rest = flag.partition(":")
        arm, _, more = rest.partition(" ")
        if kind in ROUND_FLAGS or arm not in per_arm:
            whole.append(flag)
        else:
            per_arm[arm].append(f"{kind} {more}".strip())
    return whole, per_arm


def arm_marks(round_: Round, entry: ArmEntry, flagged: Sequence[str]) -> list[str]:
    """What the chart writes beside an arm: winner, invalid, control, an unknown effort
    (what makes the round effort-confounded), then its flags."""
    marks = ["\u2605 winner"] if round_.winner == entry.arm else []
    marks += [] if entry.valid else ["invalid (rig error)"]
    marks += ["control"] if entry.control else []
    marks += ["effort unknown"] if entry.effort_normalized == "unknown" else []
    return marks + list(flagged)


def arm_label(entry: ArmEntry) -> str:
    return f"{entry.arm} ({entry.model} @ {entry.effort})"


# -- pass-rates -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RateBar:
    arm: str
    label: str
    full: str  # the arm's label and every mark, for the row's title
    y: float
    width: float
    low: float   # the whisker's ends (x)
    high: float
    kind: Kind
    value: str
    note: str


@dataclass(frozen=True)
class RateChart:
    key: str
    title: str
    height: float
    flags: str  # the round's own flags, written above the plot
    threshold: float  # x
    threshold_label: str
    ticks: tuple[Tick, ...]
    bars: tuple[RateBar, ...]


def _x(rate: float) -> float:
    return round(PLOT_X + PLOT_W * rate, 2)


def rates(round_: Round, threshold: float, key: str) -> RateChart:
    """The round's success pass-rates, one row per arm in the round's order."""
    whole, per_arm = flags_by_arm(round_)
    bars = []
    for at, entry in enumerate(round_.arms):
        rate = entry.results.success
        marks = arm_marks(round_, entry, per_arm[entry.arm])
        bars.append(RateBar(
            arm=entry.arm, label=cut(entry.arm, LABEL_CHARS),
            full=f"{arm_label(entry)}: pass-rate {rate.pass_rate:.2f}, 95 % interval "
                 f"[{rate.ci95[0]:.2f}, {rate.ci95[1]:.2f}]" + "".join(f"; {m}" for m in marks),
            y=TOP + at * ROW, width=round(PLOT_W * rate.pass_rate, 2), low=_x(rate.ci95[0]),
            high=_x(rate.ci95[1]), kind=kind_of(round_, entry),
            value=f"{rate.pass_rate:.2f}", note=cut(" \u00b7 ".join(marks), NOTE_CHARS)))
    return RateChart(
        key=key, title=f"Success pass-rate per arm with its 95 % Wilson interval, change "
                       f"{round_.change}",
        height=TOP + len(bars) * ROW + 10,
        flags="flags: " + ", ".join(whole) if whole else "no round flag",
        threshold=_x(threshold), threshold_label=f"threshold {threshold:.2f}",
        ticks=_ticks(1.0, 0.25, _x, lambda v: f"{v:.2f}"), bars=tuple(bars))


# -- the rubric -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    x: float
    width: float
    dim: str  # a rubric dim, or "total" when the weights cannot split it
    side: Literal["objective", "judge", "total"]
    title: str


@dataclass(frozen=True)
class StackRow:
    arm: str
    label: str
    y: float
    segments: tuple[Segment, ...]
    max_x: float
    kind: Kind
    note: str


@dataclass(frozen=True)
class StackChart:
    key: str
    title: str
    height: float
    ticks: tuple[Tick, ...]
    rows: tuple[StackRow, ...]
    note: str  # why some bars are not split by dim ("" when all are)


def _side(dim: str) -> Literal["objective", "judge"]:
    return "objective" if dim in OBJECTIVE else "judge"


def _segments(entry: ArmEntry, weights: Mapping[str, float], scale: float
              ) -> tuple[tuple[Segment, ...], bool]:
    """The arm's total split by dim (weight x score), and whether the split adds up to its
    total (it does not when the round was frozen with other weights than the first's)."""
    scores = entry.scores.model_dump()
    parts = [(dim, weights[dim] * scores[dim]) for dim in DIMENSIONS
             if scores[dim] is not None and dim in weights]
    if abs(sum(part for _, part in parts) - entry.total) > 1e-6:
        parts = []
    segments, x = [], float(PLOT_X)
    for dim, part in parts:
        width = round(part * scale, 2)
        title = f"{entry.arm}: {dim} {scores[dim]:.2f} x weight {weights[dim]:g} = {part:.2f}"
        segments.append(Segment(round(x, 2), width, dim, _side(dim), title))
        x += part * scale
    if parts or entry.total == 0:
        return tuple(segments), True
    return (Segment(float(PLOT_X), round(entry.total * scale, 2), "total", "total",
                    f"{entry.arm}: total {entry.total:.2f}"),), False


def rubric(round_: Round, weights: Mapping[str, float], key: str) -> StackChart:
    """The round's weighted totals, stacked by dim; each arm's max as a tick."""
    top, step = nice_top(max((entry.max for entry in round_.arms), default=1.0))
    scale = PLOT_W / top
    rows, unsplit = [], []
    for at, entry in enumerate(round_.arms):
        segments, split = _segments(entry, weights, scale)
        unsplit += [] if split else [entry.arm]
        rows.append(StackRow(
            arm=entry.arm, label=cut(entry.arm, LABEL_CHARS), y=TOP + at * ROW,
            segments=segments, max_x=round(PLOT_X + entry.max * scale, 2),
            kind=kind_of(round_, entry),
            note=f"{entry.total:.2f} / {entry.max:g}" + ("" if entry.valid else " invalid")
                 + (" \u2605 winner" if round_.winner == entry.arm else "")))
    note = ("" if not unsplit else "not split by dim (the weights in OBSERVATION.json's "
            f"contract do not give its total): {', '.join(unsplit)}")
    return StackChart(
        key=key, title=f"Rubric total per arm, stacked by dimension (objective, judge), "
                       f"change {round_.change}",
        height=TOP + len(rows) * ROW + 10,
        ticks=_ticks(top, step, lambda v: round(PLOT_X + v * scale, 2), compact),
        rows=tuple(rows), note=note)


# -- usage against pass-rate -------------------------------------------------------------------

SCATTER_X: Final = 150      # the plot's left edge; the no-price lane is left of it
SCATTER_W: Final = 560
SCATTER_TOP: Final = 20
SCATTER_H: Final = 220
LANE_X: Final = 62          # the no-price lane's centre, left of the axis labels


@dataclass(frozen=True)
class Point:
    arm: str
    label: str  # "" when the chart has too many arms to name them
    x: float
    y: float
    kind: Kind
    title: str


@dataclass(frozen=True)
class Scatter:
    key: str
    title: str
    x_label: str
    height: float
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    threshold: float  # y
    points: tuple[Point, ...]
    unpriced: tuple[Point, ...]  # in the "no price" lane


def _y(rate: float) -> float:
    return round(SCATTER_TOP + SCATTER_H * (1 - rate), 2)


Measure = Callable[[ArmEntry], float | None]


def usage(round_: Round, threshold: float, key: str, what: Literal["tokens", "cost"]
          ) -> Scatter | None:
    """Tokens (input + output) or cost in USD against the success pass-rate, per arm
    that used the gateway; None when none did. A cost without a price is None: that arm
    goes in the "no price" lane."""
    used = [entry for entry in round_.arms if entry.usage is not None]
    if not used:
        return None
    measure: Measure = ((lambda e: None if e.usage is None else float(e.usage.tokens))
                        if what == "tokens" else
                        (lambda e: None if e.usage is None else e.usage.cost_usd))
    known = [value for e in used if (value := measure(e)) is not None]
    top, step = nice_top(max(known, default=1.0))
    scale = SCATTER_W / top
    named = len(used) <= LABELLED_POINTS
    points: list[Point] = []
    unpriced: list[Point] = []
    for entry in used:
        value, rate = measure(entry), entry.results.success.pass_rate
        shown = "no price" if value is None else (
            f"{value:g} tokens" if what == "tokens" else f"${value:.4f}")
        point = Point(entry.arm, cut(entry.arm, 16) if named else "",
                      LANE_X if value is None else round(SCATTER_X + value * scale, 2),
                      _y(rate), kind_of(round_, entry),
                      f"{entry.arm}: {shown}, pass-rate {rate:.2f}")
        (unpriced if value is None else points).append(point)
    money = what == "cost"
    return Scatter(
        key=key, title=f"{'Cost' if money else 'Tokens'} against success pass-rate per arm, "
                       f"change {round_.change}",
        x_label="cost (USD)" if money else "tokens (input + output)",
        height=SCATTER_TOP + SCATTER_H + 44,
        x_ticks=_ticks(top, step, lambda v: round(SCATTER_X + v * scale, 2),
                       (lambda v: f"${v:g}") if money else compact),
        y_ticks=_ticks(1.0, 0.25, _y, lambda v: f"{v:.2f}"), threshold=_y(threshold),
        points=tuple(points), unpriced=tuple(unpriced))
