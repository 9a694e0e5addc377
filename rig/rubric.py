"""The rubric: pass-rates and judge scores in, one `ArmScore` per arm out (pure maths).

Objective dims: success = 5 x success pass-rate, checks = 5 x mean check pass-rate.
Subjective dims (diagnosis, plan, code_quality, intent) are the judge's 0..5. The
weighted total and its max run over the dims that were actually scored: with judge =
"none" (or no checks) the missing dims leave the total AND the max, and a caveat says so.

An arm with any RIG_ERROR sample is invalid and never ranked (docs/design.md principle 4):
a rig fault is not a model failure, so its numbers are shown but not compared.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from rig import headroom
from rig.errors import RigError
from rig.sample.record import SampleRecord
from rig.sample.verdict import FailReason, Verdict
from rig.stats import PassRate, pass_rate
from rig.wire import WireSummary
from runner.manifest import Arm, ArmIdentity

SUCCESS = "success"
OBJECTIVE = ("success", "checks")
SUBJECTIVE = ("diagnosis", "plan", "code_quality", "intent")
DIMENSIONS = OBJECTIVE + SUBJECTIVE
TOP = 5.0  # every dim scores 0..5
SPOOF_REASONS = frozenset({FailReason.spoofed_output.value, FailReason.exit_mismatch.value})
# The arm's run lied to the rig or broke its harness: a FAIL, flagged for the reader.
TAMPER_REASONS = frozenset({FailReason.tampered.value, FailReason.broke_harness.value,
                            FailReason.unsafe_work.value})
JUDGE_NONE_CAVEAT = "judge = none: subjective dims not scored; total over objective dims only"
NO_CHECKS_CAVEAT = "no checks: the checks dim is not scored; total excludes it"


class ScoreError(RigError):
    """The records handed to the rubric cannot belong to one arm's measurement."""


class RubricWeights(Protocol):
    """`[contract.weights]` (`runner.manifest.Weights` satisfies it)."""

    @property
    def success(self) -> int: ...
    @property
    def checks(self) -> int: ...
    @property
    def diagnosis(self) -> int: ...
    @property
    def plan(self) -> int: ...
    @property
    def code_quality(self) -> int: ...
    @property
    def intent(self) -> int: ...


@dataclass(frozen=True)
class CheckResult:
    """One check (or the success criterion) of one arm: its pass-rate and its samples."""

    name: str
    rate: PassRate
    records: tuple[SampleRecord, ...]

    @property
    def rig_errors(self) -> list[tuple[str, str]]:
        """(sample, reason) of every RIG_ERROR sample."""
        return [(r.sample, r.rig_error or r.reason or "unknown") for r in self.records
                if r.verdict is Verdict.RIG_ERROR]

    @property
    def spoofed(self) -> bool:
        """True when a sample's output lied about its result (fake summary, exit mismatch)."""
        return any(r.reason in SPOOF_REASONS for r in self.records)

    @property
    def tampered(self) -> bool:
        """True when a sample's canaries, harness or tree showed the arm working the rig."""
        return any(r.reason in TAMPER_REASONS for r in self.records)

    @property
    def samples(self) -> list[str]:
        return [r.sample for r in self.records]

    @property
    def unguarded(self) -> list[str]:
        """What its samples' grading could not check (`SampleRecord.unguarded`), once."""
        return list(dict.fromkeys(note for r in self.records for note in r.unguarded))

    @property
    def metric_base(self) -> float | None:
        """A ratchet: the frozen base value its samples were graded against."""
        return next((r.metric_base for r in self.records if r.metric_base is not None), None)

    @property
    def metric_values(self) -> list[float | None]:
        """A ratchet: the value each sample measured (None: not measured)."""
        return [r.metric_value for r in self.records]


def check_result(name: str, records: Iterable[SampleRecord]) -> CheckResult:
    """The `CheckResult` of `records` (samples of one check), ordered by sample number."""
    ordered = tuple(sorted(records, key=lambda r: r.n))
    strangers = sorted({r.check for r in ordered} - {name})
    if strangers:
        raise ScoreError(f"check {name!r} was handed samples of {', '.join(strangers)}")
    return CheckResult(name, pass_rate(r.verdict for r in ordered), ordered)


@dataclass(frozen=True)
class DimScore:
    """One subjective dim: 0..5 and the evidence the judge cites."""

    score: float
    evidence: str

    def __post_init__(self) -> None:
        if not (math.isfinite(self.score) and 0 <= self.score <= TOP):
            raise ValueError(f"a dim scores 0..5, not {self.score}")
        if not self.evidence.strip():
            raise ValueError("a dim's score needs evidence")


@dataclass(frozen=True)
class JudgeScores:
    diagnosis: DimScore
    plan: DimScore
    code_quality: DimScore
    intent: DimScore

    def dims(self) -> dict[str, DimScore]:
        return {dim: getattr(self, dim) for dim in SUBJECTIVE}


@dataclass(frozen=True)
class ArmScore:
    """One arm's identity, results and rubric scores. Build it with `score_arm`."""

    arm: str
    identity: ArmIdentity
    commit: str
    image_id: str
    success: CheckResult
    checks: dict[str, CheckResult]
    judge: JudgeScores | None
    scores: dict[str, float | None]  # 0..5 per dim; None: not scored
    total: float
    max: float
    valid: bool
    caveats: tuple[str, ...] = field(default=())
    harness_touched: tuple[str, ...] = field(default=())  # harness files its diff changed
    marks: tuple[str, ...] = field(default=())  # from its dispatch: effort_mismatch, ...
    usage: WireSummary | None = None            # its requests through the model gateway
    agent_cli: Mapping[str, str] | None = None  # the pinned CLI it ran: package, version, sha256
    retried: int = 0  # its sample attempts that were no result and ran again (retried/)

    @property
    def all_checks(self) -> list[CheckResult]:
        """The success criterion first, then every check."""
        return [self.success, *self.checks.values()]

    @property
    def rig_errors(self) -> list[tuple[str, str]]:
        return [err for check in self.all_checks for err in check.rig_errors]

    @property
    def unguarded(self) -> dict[str, list[str]]:
        """check -> what its grading could not check (only checks with something)."""
        return {check.name: check.unguarded for check in self.all_checks if check.unguarded}

    @property
    def flaky(self) -> bool:
        return any(check.rate.flaky for check in self.all_checks)

    # -- headroom (rig.headroom) --

    @property
    def headroom(self) -> headroom.ArmHeadroom:
        """Its worst memory headroom over every sample, and its CPU time."""
        return headroom.arm_headroom([r for check in self.all_checks for r in check.records])

    @property
    def infra_events(self) -> int:
        """Sample attempts the rig or its infrastructure spoiled: RIG_ERROR samples that
        stand, and attempts that were no result and ran again (`retried`)."""
        return len(self.rig_errors) + self.retried


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def objective_scores(success: CheckResult,
                     checks: Mapping[str, CheckResult]) -> dict[str, float | None]:
    """success and checks, 0..5. A result with no graded sample (all RIG_ERROR) measured
    nothing: it is left out (None), never scored as 0."""
    graded = [c.rate.rate for c in checks.values() if c.rate.n]
    checks_mean = _mean(graded)
    return {
        "success": TOP * success.rate.rate if success.rate.n else None,
        "checks": None if checks_mean is None else TOP * checks_mean,
    }


def _weighted(scores: Mapping[str, float | None], weights: RubricWeights) -> tuple[float, float]:
    """(total, max) over the dims that were scored."""
    scored = [dim for dim in DIMENSIONS if scores[dim] is not None]
    total = sum(getattr(weights, dim) * (scores[dim] or 0.0) for dim in scored)
    return total, TOP * sum(getattr(weights, dim) for dim in scored)


def _single(values: Iterable[str], what: str, arm: str) -> str:
    distinct = sorted({v for v in values if v})
    if len(distinct) > 1:
        raise ScoreError(f"arm {arm}: its samples were graded on different {what}s: "
                         + ", ".join(distinct),
                         hint="score one commit per arm; re-run `score` on a clean stage")
    return distinct[0] if distinct else ""


def _image_id(records: Sequence[SampleRecord]) -> tuple[str, list[str]]:
    """The image the samples ran on (most common), and a caveat when they differ."""
    counts = Counter(r.image_id for r in records if r.image_id)
    if not counts:
        return "", ["no sample recorded an image ID"]
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    if len(ranked) == 1:
        return ranked[0][0], []
    return ranked[0][0], ["samples ran on different images: "
                          + ", ".join(image for image, _ in ranked)]


def _caveats(arm: ArmIdentity, results: Sequence[CheckResult],
             scores: Mapping[str, float | None], judge: JudgeScores | None) -> list[str]:
    found: list[str] = []
    errors = [f"{sample} {reason}" for result in results for sample, reason in result.rig_errors]
    if errors:
        found.append("RIG_ERROR in " + ", ".join(errors) + " (a rig fault, not a model "
                     "failure: the arm is invalid and not ranked; fix the rig and re-score)")
    for result in results:
        spoofs = [f"{r.sample} {r.reason}" for r in result.records if r.reason in SPOOF_REASONS]
        if spoofs:
            found.append(f"{result.name}: output disagreed with the real result "
                         f"(never a PASS): {', '.join(spoofs)}")
        if result.rate.flaky:
            found.append(f"flaky {result.name}: {result.rate.passed}/{result.rate.n} passed")
    if arm.effort_normalized == "unknown":
        found.append("effort_normalized = unknown: effort-confounded (directional only)")
    if judge is None:
        found.append(JUDGE_NONE_CAVEAT)
    if len(results) == 1:
        found.append(NO_CHECKS_CAVEAT)
    return found


@dataclass(frozen=True)
class Dispatched:
    """What the arm's dispatch record says of it: the identity with its runtime
    evidence (the gateway's records, a probe), the marks it earned, its usage."""

    identity: ArmIdentity
    marks: tuple[str, ...] = ()
    caveats: tuple[str, ...] = ()
    usage: WireSummary | None = None
    agent_cli: Mapping[str, str] | None = None


def score_arm(arm: Arm, success: CheckResult, checks: Mapping[str, CheckResult],
              judge: JudgeScores | None, weights: RubricWeights,
              harness_touched: Sequence[str] = (), dispatched: Dispatched | None = None
              ) -> ArmScore:
    """The rubric of one arm. `judge` None: judge = "none" (subjective dims not scored).
    `harness_touched`: the harness files (conftest, runner configuration, bytecode) the
    arm's diff changed, marked for the judge and the reader."""
    misnamed = sorted(key for key, result in checks.items() if result.name != key)
    if misnamed:
        raise ScoreError(f"arm {arm.id}: checks keyed under another name: {', '.join(misnamed)}")
    results = [success, *checks.values()]
    records = [r for result in results for r in result.records]
    strangers = sorted({r.arm for r in records} - {arm.id})
    if strangers:
        raise ScoreError(f"arm {arm.id} was handed samples of arm(s) {', '.join(strangers)}")
    commit = _single((r.commit for r in records), "commit", arm.id)
    image_id, image_caveats = _image_id(records)
    scores = objective_scores(success, checks)
    scores.update({dim: None if judge is None else getattr(judge, dim).score
                   for dim in SUBJECTIVE})
    total, top = _weighted(scores, weights)
    touched = tuple(sorted(harness_touched))
    caveats = _caveats(arm, results, scores, judge) + image_caveats
    if touched:
        caveats.append(f"harness_touched: the arm changed harness files {', '.join(touched)} "
                       "(every sample ran under the base's; a merge never puts them on the "
                       "branch)")
    caveats += [] if dispatched is None else list(dispatched.caveats)
    return ArmScore(
        arm=arm.id, identity=arm.identity() if dispatched is None else dispatched.identity,
        commit=commit, image_id=image_id,
        success=success, checks=dict(checks), judge=judge, scores=scores, total=total,
        max=top, valid=not any(result.rig_errors for result in results),
        caveats=tuple(caveats), harness_touched=touched,
        marks=() if dispatched is None else tuple(sorted(dispatched.marks)),
        usage=None if dispatched is None else dispatched.usage,
        agent_cli=None if dispatched is None else dispatched.agent_cli)
