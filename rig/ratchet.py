"""Ratchet checks: a metric (coverage, lint or type-error counts) that must not get worse
than the base (issue 8). Pure: no docker, no git.

One sample's half (the metric read from its output and graded against the base) is
`rig.sample.metric`; this module is the half across samples and changes:

- `baseline`: the base's value at ``up``: every sample measured it and all agree, else
  the rig is at fault (`RatchetError`, exit 3).
- `move`: after a verified merge, the next change's baseline moves only in the better
  direction, and only when every other check of the merged result passed in full.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rig.errors import RigError
from rig.sample.metric import Better, show, worse_by
from rig.sample.outcome import Verdict
from rig.sample.record import SampleRecord


class RatchetError(RigError):
    """The base's value cannot be measured, or not stably: the rig's problem (exit 3)."""


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
