"""A ratchet's per-sample half: a metric (coverage, lint or type-error counts) read from
one sample and graded against the base's frozen value (issue 8). Pure: no docker, no git.

- `extract`: the metric's value from a check's output (a regex with a named group
  ``value``) or from a file the command wrote (``coverage-json:<path>``: coverage.py's
  ``totals.percent_covered``).
- `readings`, `passes`, `worse_by`: what `rig.sample.verdict`'s ratchet rule (8) grades with.

The base's value and its movement after a merge are `rig.ratchet`'s.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

COVERAGE_JSON: Final = "coverage-json:"
EPSILON: Final = 1e-9  # relative: float noise in a comparison is never a regression
Better = Literal["higher", "lower"]


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
        return (f"the command wrote no regular file {path} that was read back whole "
                f"(coverage-json:{path})")
    return f"{path} holds no totals.percent_covered (not a coverage.py JSON report)"
