"""REPORT.html: one self-contained page, drawn from an `Observation` and the stored
evidence (`rig.report.evidence`), that opens from disk with no network and no script.

The rule for what a contestant wrote (diffs, test ids, output, commit messages, even a
reason's detail): it is only ever text. The Jinja2 environment autoescapes every
template, no template marks anything safe, and the page's Content-Security-Policy
forbids every script, frame, font and remote image (`CSP`); the only links are fragments
of the page and files of the run directory the runner named.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import jinja2
from pydantic import BaseModel, ConfigDict, ValidationError

from rig.report import charts, heatmap
from rig.report.evidence import PageEvidence, RoundEvidence
from rig.report.observation import Observation, Round
from rig.rubric import DIMENSIONS, OBJECTIVE
from rig.sample.record import SampleRecord
from rig.standings import TIE_RULE, describe_flag

CSP: Final = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
TESTS_SHOWN: Final = 20  # a sample's tests that did not pass, listed by id


class Terms(BaseModel):
    """What the page reads of OBSERVATION.json's contract: the threshold and the weights."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    threshold: float = 1.0
    weights: dict[str, float] = {}


def terms_of(obs: Observation) -> Terms:
    try:
        return Terms.model_validate(obs.contract)
    except ValidationError:
        return Terms()


@dataclass(frozen=True)
class Cell:
    """One sample in the grid: its verdict and reason, and where its details are."""

    sample: str
    anchor: str | None  # None: no stored record
    verdict: str
    reason: str


@dataclass(frozen=True)
class GridRow:
    arm: str
    checks: tuple[tuple[Cell, ...], ...]  # in the grid's check order


@dataclass(frozen=True)
class Grid:
    checks: tuple[tuple[str, int], ...]  # (check, samples) column groups
    rows: tuple[GridRow, ...]


@dataclass(frozen=True)
class RoundView:
    index: int
    round: Round
    evidence: RoundEvidence
    flags: tuple[str, ...]  # each kind of flag, described, with the arms it names
    flag_summary: str
    rates: charts.RateChart
    rubric: charts.StackChart
    tokens: charts.Scatter | None
    cost: charts.Scatter | None
    grid: Grid
    anchors: Mapping[str, str]  # sample -> the id of its details
    marks: Mapping[str, tuple[str, ...]]  # arm -> what its chart row says


def check_names(round_: Round) -> list[str]:
    """"success", then every check in the order the arms list them."""
    names = ["success"]
    for entry in round_.arms:
        names.extend(name for name in entry.results.checks if name not in names)
    return names


def samples_of(round_: Round, arm: str, check: str) -> list[str]:
    entry = next(e for e in round_.arms if e.arm == arm)
    rate = (entry.results.success if check == "success"
            else entry.results.checks.get(check))
    return [] if rate is None else list(rate.samples)


def _cell(name: str, evidence: RoundEvidence, anchors: Mapping[str, str]) -> Cell:
    found = evidence.samples.get(name)
    if found is None:
        return Cell(name, None, "missing", "no stored record")
    record = found.record
    return Cell(name, anchors[name], str(record.verdict), record.rig_error or record.reason or "")


def grid(round_: Round, evidence: RoundEvidence, anchors: Mapping[str, str]) -> Grid:
    names = check_names(round_)
    widths = {name: max(len(samples_of(round_, e.arm, name)) for e in round_.arms)
              for name in names}
    rows = tuple(GridRow(entry.arm, tuple(
        tuple(_cell(s, evidence, anchors) for s in samples_of(round_, entry.arm, name))
        for name in names)) for entry in round_.arms)
    return Grid(tuple((name, widths[name]) for name in names), rows)


def anchors_of(index: int, evidence: RoundEvidence) -> dict[str, str]:
    """An id per stored sample of the round, made of numbers only (never of a name)."""
    return {name: f"r{index}-s{at}" for at, name in enumerate(sorted(evidence.samples))}


def flag_groups(round_: Round) -> dict[str, list[str]]:
    """The round's flags by kind (its own first, then those naming arms), each with what
    it names: `{"flaky": ["B", "C"], "harness_touched": ["B (conftest.py)"], ...}`."""
    whole, per_arm = charts.flags_by_arm(round_)
    groups: dict[str, list[str]] = {flag: [] for flag in whole}
    for arm, found in per_arm.items():
        for flag in found:
            kind, _, more = flag.partition(" ")
            groups.setdefault(kind, []).append(f"{arm} {more}".strip())
    return groups


def flag_lines(round_: Round) -> tuple[str, ...]:
    """Each kind of flag once, with its meaning and the arms it names."""
    return tuple(describe_flag(kind) + (f" ({len(arms)} arm(s)): {', '.join(arms)}"
                                        if arms else "")
                 for kind, arms in flag_groups(round_).items())


def flag_summary(round_: Round) -> str:
    """``effort_confounded, flaky (2 arms)``: the round's flags, one word per kind."""
    return ", ".join(kind + (f" ({len(arms)} arm{'s' * (len(arms) > 1)})" if arms else "")
                     for kind, arms in flag_groups(round_).items()) or "none"


def round_view(index: int, round_: Round, terms: Terms, evidence: RoundEvidence) -> RoundView:
    anchors = anchors_of(index, evidence)
    _, per_arm = charts.flags_by_arm(round_)
    key = f"r{index}"
    return RoundView(
        index=index, round=round_, evidence=evidence,
        flags=flag_lines(round_), flag_summary=flag_summary(round_),
        rates=charts.rates(round_, terms.threshold, f"{key}-rates"),
        rubric=charts.rubric(round_, terms.weights, f"{key}-rubric"),
        tokens=charts.usage(round_, terms.threshold, f"{key}-tokens", "tokens"),
        cost=charts.usage(round_, terms.threshold, f"{key}-cost", "cost"),
        grid=grid(round_, evidence, anchors), anchors=anchors,
        marks={e.arm: tuple(charts.arm_marks(round_, e, per_arm[e.arm])) for e in round_.arms})


def not_passed(record: SampleRecord) -> list[tuple[str, str]]:
    """(test id, status) of the sample's tests that did not pass."""
    return [(str(t.get("id", "?")), str(t.get("status", "?"))) for t in record.tests
            if t.get("status") != "passed"]


def shown(value: object) -> str:
    """A record's value as one line of text (the template escapes it): a list of names
    joined, a mapping as `key: value` pairs (empty ones left out), anything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return "; ".join(value)
    if isinstance(value, dict):
        return "; ".join(f"{key}: {shown(item)}" for key, item in value.items()
                         if item not in (None, "", [], {}))
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def environment() -> jinja2.Environment:
    """The templates shipped in `rig/report/templates`, every one autoescaped."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("rig.report", "templates"),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
        lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["shown"] = shown
    env.globals.update(charts=charts, heat=heatmap, CSP=CSP, DIMENSIONS=DIMENSIONS,
                       OBJECTIVE=OBJECTIVE,
                       TIE_RULE=TIE_RULE, TESTS_SHOWN=TESTS_SHOWN, not_passed=not_passed,
                       samples_of=samples_of, check_names=check_names)
    return env


def rounds_of(obs: Observation, evidence: PageEvidence) -> list[RoundView]:
    terms = terms_of(obs)
    return [round_view(at, r, terms, evidence.rounds.get(r.change, RoundEvidence()))
            for at, r in enumerate(obs.rounds, 1)]


def render_page(obs: Observation, evidence: PageEvidence | None = None,
                env: jinja2.Environment | None = None) -> str:
    """REPORT.html of `obs`; without `evidence`, from OBSERVATION.json alone."""
    evidence = evidence or PageEvidence()
    template = (env or environment()).get_template("report.html.j2")
    return template.render(obs=obs, terms=terms_of(obs), evidence=evidence,
                           rounds=rounds_of(obs, evidence), judged=_judged(obs.rounds))


def _judged(rounds: Sequence[Round]) -> bool:
    return any(r.judge_usage for r in rounds)
