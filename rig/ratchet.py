"""Ratchet checks: a metric (coverage, lint or type-error counts) that must not get worse
than the base (issue 8). Pure: no docker, no git.

- `extract`: the metric's value from a check's output (a regex with a named group
  ``value``) or from a file the command wrote (``coverage-json:<path>``: coverage.py's
  ``totals.percent_covered``).
- `readings`, `passes`, `worse_by`: what `rig.sample.verdict`'s ratchet rule (8) grades with.
- `baseline`: the base's value at ``up``: every sample measured it and all agree, else
  the rig is at fault (`RatchetError`, exit 3).
- `move`: after a verified merge, the next change's baseline moves only in the better
  direction, and only when every other check of the merged result passed in full.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from rig.errors import RigError
from rig.sample.outcome import Verdict
from rig.sample.record import SampleRecord

COVERAGE_JSON: Final = "coverage-json:"
EPSILON: Final = 1e-9  # relative: float noise in a comparison is never a regression
Better = Literal["higher", "lower"]


class RatchetError(RigError):
    """The base's value cannot be measured, or not stably: the rig's problem (exit 3)."""


@dataclass(frozen=True)
class Ratchet:
    """What a ratchet sample is graded on. `base` None: the base itself is being measured."""

    metric: str
    better: Better
    tolerance: float = 0.0
    base: float | None = None

    @property
    def collect(self) -> tuple[str, ...]:
        """The files (repo-relative) the executor must read back after the command."""
        path = coverage_path(self.metric)
        return () if path is None else (path,)


def coverage_path(metric: str) -> str | None:
    """``coverage-json:cov.json`` -> ``cov.json``; None for a regex metric."""
    if not metric.startswith(COVERAGE_JSON):
        return None
    return metric.removeprefix(COVERAGE_JSON).strip()


def readings(metric: str, text: str, files: Mapping[str, str]) -> list[float]:
    """Every finite value the metric finds: one per regex match, or the coverage total."""
    path = coverage_path(metric)
    if path is not None:
        value = _coverage_total(files.get(path))
        return [] if value is None else [value]
    found = []
    for match in re.finditer(metric, text, re.MULTILINE):
        value = _number(match.group("value"))
        if value is not None:
            found.append(value)
    return found


def extract(metric: str, text: str, files: Mapping[str, str]) -> float | None:
    """The metric's value, or None when it is absent or reported with different values."""
    found = readings(metric, text, files)
    return found[0] if found and len(set(found)) == 1 else None


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        return None
    return value if math.isfinite(value) else None


JSON_PARSED: Final = 4 * 1024 * 1024  # a coverage file parsed whole; a larger one: its totals
_TOTALS = re.compile(r'"totals"\s*:\s*')


def _coverage_total(text: str | None) -> float | None:
    """coverage.py's `totals.percent_covered`. A file past JSON_PARSED is not parsed whole
    (a JSON of a million tiny objects is a gigabyte of them): its last `totals` object
    alone is (coverage.py writes it last, flat)."""
    if text is None:
        return None
    try:
        if len(text) <= JSON_PARSED:
            totals = json.loads(text).get("totals", {})
        else:
            at = [m.end() for m in _TOTALS.finditer(text, len(text) - 64 * 1024)]
            totals = json.JSONDecoder().raw_decode(text[at[-1]:at[-1] + 16 * 1024])[0] \
                if at else {}
        value = totals.get("percent_covered")
    except (ValueError, AttributeError):
        return None
    return _number(str(value)) if isinstance(value, int | float) else None


def worse_by(value: float, base: float, better: Better) -> float:
    """How much worse than `base` `value` is (negative: better)."""
    return base - value if better == "higher" else value - base


def passes(value: float, base: float, better: Better, tolerance: float) -> bool:
    """Not worse than `base` beyond `tolerance` (float noise is not a regression)."""
    return worse_by(value, base, better) <= tolerance + EPSILON * max(1.0, abs(base))


def show(value: float | None) -> str:
    """``3`` for a count, ``80.32`` for a percentage, ``?`` for no value."""
    if value is None:
        return "?"
    return f"{value:.0f}" if value == int(value) else f"{value:.2f}"


def describe(metric: str) -> str:
    path = coverage_path(metric)
    return f"coverage.py JSON {path}" if path is not None else f"the metric /{metric}/"


def missing(metric: str, files: Mapping[str, str]) -> str:
    """Why a ratchet found no value (its verdict is `rig.sample.verdict`'s rule 8)."""
    path = coverage_path(metric)
    if path is None:
        return f"{describe(metric)} matched nothing in the output"
    if path not in files:
        return f"the command wrote no regular file {path} (coverage-json:{path})"
    return f"{path} holds no totals.percent_covered (not a coverage.py JSON report)"


def baseline(check: str, records: Sequence[SampleRecord]) -> float:
    """The base's value of ratchet `check`: every sample measured it, all agree."""
    if not records:
        raise RatchetError(f"ratchet {check!r}: no sample measured the base")
    failed = [r for r in records if r.verdict is not Verdict.PASS or r.metric_value is None]
    if failed:
        shown = "; ".join(f"{r.sample} {r.verdict}({r.reason}): {r.detail}" for r in failed)
        raise RatchetError(f"ratchet {check!r} cannot be measured on the base: {shown}",
                           hint="fix the ratchet's run or metric until it reports one value "
                                "(read the sample logs under stages/<change>/proofs/)")
    values = [r.metric_value for r in records if r.metric_value is not None]
    if len(set(values)) > 1:
        raise RatchetError(
            f"ratchet {check!r} is unstable on the base: its {len(values)} samples gave "
            + ", ".join(repr(v) for v in values),
            hint="an unstable metric is the rig's problem: make the command deterministic "
                 "(seed, fixed file order) before it can guard anything")
    return values[0]


@dataclass(frozen=True)
class Movement:
    """What happened to one ratchet's baseline after a merge, and why."""

    check: str
    before: float
    after: float
    measured: float | None  # the merged result's value (None: not measured)
    why: str

    @property
    def moved(self) -> bool:
        return self.after != self.before

    def as_dict(self) -> dict[str, object]:
        return {"from": self.before, "to": self.after, "measured": self.measured,
                "moved": self.moved, "why": self.why}

    def text(self) -> str:
        if self.moved:
            return f"{self.check}: {show(self.before)} -> {show(self.after)} ({self.why})"
        return f"{self.check}: stays {show(self.before)} ({self.why})"


def _not_in_full(merged: Mapping[str, Sequence[SampleRecord]], check: str) -> list[str]:
    """The other checks of the merged result that did not pass every sample."""
    short = []
    for name, records in sorted(merged.items()):
        passed = sum(r.verdict is Verdict.PASS for r in records)
        if name != check and (not records or passed < len(records)):
            seen = sorted({f"{r.verdict}({r.reason})" for r in records
                           if r.verdict is not Verdict.PASS})
            short.append(f"{name} {passed}/{len(records)}" + (f" {', '.join(seen)}"
                                                              if seen else ""))
    return short


def move(check: str, better: Better, before: float,
         merged: Mapping[str, Sequence[SampleRecord]]) -> Movement:
    """The next change's baseline of ratchet `check` (frozen value `before`).

    `merged` maps every check of the merged result (the success criterion included) to
    its samples. The baseline moves only to a better, stably measured value, and only
    when every other check passed every sample: a value that improved because tests were
    skipped or failed is not accepted."""
    own = list(merged.get(check, ()))
    values = {r.metric_value for r in own}
    if not own or None in values or len(values) != 1:
        return Movement(check, before, before, None, "kept: the merged result's value was "
                        "not measured consistently (" + (", ".join(
                            f"{r.verdict}({r.reason})" for r in own) or "no sample") + ")")
    value = own[0].metric_value
    assert value is not None
    short = _not_in_full(merged, check)
    if short:
        return Movement(check, before, before, value, "kept: not every other check of the "
                        "merged result passed in full (" + "; ".join(short) + ")")
    if worse_by(value, before, better) >= 0:
        word = "unchanged" if value == before else f"{show(value)} is worse"
        return Movement(check, before, before, value, f"kept: {word} ({better} is better)")
    return Movement(check, before, value, value, f"moved: {show(value)} is better "
                    f"({better} is better) and every other check passed in full")
