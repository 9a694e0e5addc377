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
from typing import Literal, Protocol

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


FLAG_MEANINGS = {
    "no_separation": "every valid arm passed the success criterion: the task does not "
                     "separate the arms",
    "rig_asymmetric": "rig errors hit arms unequally: the comparison is not valid until the "
                      "rig is fixed",
    "effort_confounded": "an arm's effort_normalized is unknown: the comparison is "
                         "effort-confounded (directional only)",
    "flaky": "0 < pass-rate < 1 on the success criterion or a check",
    "spoofed": "the output disagreed with the real result (fake summary or exit mismatch); "
               "never scored as a PASS",
    "tampered": "the arm's run did not report the rig's canaries as planted, broke the "
                "harness, or handed in work that could not be imported safely: a FAIL",
    "harness_touched": "the arm's diff changed harness files (conftest, runner "
                       "configuration, bytecode; the first five named): every sample ran "
                       "under the base's, and a merge never puts them on the branch",
    "effort_mismatch": "the effort the gateway saw on the wire is not the effort the arm "
                       "declares",
    "model_mismatch": "the model the gateway saw on the wire is not the model the arm "
                      "declares",
    "budget_exhausted": "the arm ran past a [gateway] budget; requests past it were refused",
    "server_tools": "the arm was granted allow_server_tools and its model used provider-side "
                    "tools that reach the internet (web search, fetch, grounding): it could "
                    "look outside its sandbox",
    "unrestricted_network": "the arm had network = \"egress\": the whole internet, its key "
                            "inside the sandbox, nothing on the wire recorded",
    "continued_past_rig_errors": "`run --continue-on-rig-error` went on past this round's "
                                 "rig errors: its merge and every later change rest on a "
                                 "round that is not valid",
    "tie": "arms of equal total competed for the win: the tie-break (success pass-rate, "
           "then checks score) decided or, still equal, there is no winner",
    # headroom (rig.headroom)
    "near_limit": "a sample of the arm came within 10 % of its memory limit, or the OOM "
                  "killer ended it: the limit, not only the code, may have decided its "
                  "result",
    "infra_asymmetric": "the infrastructure's trouble (RIG_ERROR samples and sample "
                        "attempts that were no result and ran again) hit arms unequally: "
                        "the arms did not run under the same conditions, even where every "
                        "retry then ran (rig_asymmetric: the rig errors that remain make "
                        "the comparison itself invalid)",
}


def describe_flag(flag: str) -> str:
    """A flag and what it means, e.g. ``flaky:fixer: 0 < pass-rate < 1 ...``."""
    meaning = FLAG_MEANINGS.get(flag.split(":", 1)[0], "")
    return f"{flag}: {meaning}" if meaning else flag


FLAG_FILES = 5  # harness files a flag names


def harness_flag(arm: ArmScore) -> str:
    """`harness_touched:B (tests/conftest.py, vitest.config.mts)`: the arm and the first
    `FLAG_FILES` harness files its diff changed, `+N more` for the rest."""
    named = ", ".join(arm.harness_touched[:FLAG_FILES])
    more = len(arm.harness_touched) - FLAG_FILES
    return f"harness_touched:{arm.arm} ({named}{f', +{more} more' if more > 0 else ''})"


def flags(arms: Sequence[ArmScore], decision: WinnerDecision | None = None) -> list[str]:
    """The round's integrity flags, sorted: no_separation, rig_asymmetric,
    infra_asymmetric, near_limit:<arm>, effort_confounded, flaky:<arm>, spoofed:<arm>,
    tampered:<arm>,
    `harness_touched:<arm> (<file>, ...)` (`harness_flag`), and tie:<arm>,<arm>... when
    `decision` had to break a tie (or could not)."""
    found: set[str] = set()
    valid = [a for a in arms if a.valid]
    if valid and all(a.success.rate.n and a.success.rate.rate == 1.0 for a in valid):
        found.add("no_separation")
    if len({len(a.rig_errors) for a in arms}) > 1:
        found.add("rig_asymmetric")
    if any(a.identity.effort_normalized == "unknown" for a in arms):
        found.add("effort_confounded")
    found.update(f"flaky:{a.arm}" for a in arms if a.flaky)
    found.update(f"spoofed:{a.arm}" for a in arms
                 if any(check.spoofed for check in a.all_checks))
    found.update(f"tampered:{a.arm}" for a in arms
                 if any(check.tampered for check in a.all_checks))
    found.update(harness_flag(a) for a in arms if a.harness_touched)
    found.update(f"{mark}:{a.arm}" for a in arms for mark in a.marks)
    if decision is not None and decision.tie is not None:
        found.add("tie:" + ",".join(sorted(decision.tie.arms)))
    found.update(headroom_flags(arms))
    return sorted(found)


def headroom_flags(arms: Sequence[ArmScore]) -> set[str]:
    """near_limit:<arm> (a sample within 10 % of its memory limit, or OOM-killed) and
    infra_asymmetric (rig errors and retried attempts per arm differ)."""
    found = {f"near_limit:{a.arm}" for a in arms if a.headroom.near_limit}
    if headroom.asymmetric(a.infra_events for a in arms):
        found.add("infra_asymmetric")
    return found


# --- rank and winner ----------------------------------------------------------------------
#
# Ranks go by total; equal totals share a rank. A tie is never broken by the arm id (that
# would be arbitrary): only by measurements, objective first, and a tie they cannot break
# has no winner.

TIE_RULE = ("equal totals share a rank; the winner is the best-ranked valid arm whose "
            "success pass-rate reaches the threshold; between arms of equal total the higher "
            "success pass-rate wins, then the higher checks score; still equal: no winner "
            "(never the arm id)")
TieBreaker = Literal["success_pass_rate", "checks"]
TIE_BREAKER_TEXT: dict[TieBreaker, str] = {"success_pass_rate": "the success pass-rate",
                                           "checks": "the checks score"}
_DIGITS = 9  # totals and rates are sums of float products: equal to 9 digits is equal


@dataclass(frozen=True)
class Tie:
    """Arms of equal total in the winner decision, in the tie-break's order."""

    arms: tuple[str, ...]
    total: float
    decided_by: TieBreaker | None  # None: still equal after every tie-breaker: no winner


@dataclass(frozen=True)
class WinnerDecision:
    """The round's winner by the stated rule (`TIE_RULE`), and the tie it broke, if any."""

    winner: str | None
    tie: Tie | None = None

    @property
    def no_winner_reason(self) -> str:
        """Why there is no winner ("" when there is one)."""
        if self.winner is not None:
            return ""
        if self.tie is not None:
            return (f"{', '.join(self.tie.arms)} tie at {self.tie.total:.2f} and the "
                    "tie-break (success pass-rate, then checks score) cannot separate them")
        return "no valid arm reached the threshold"


def total_key(total: float) -> float:
    """A total as ranks compare it: two totals with the same key are a tie."""
    return round(total, _DIGITS)


def _tie_keys(arm: ArmScore) -> tuple[float, float]:
    """The tie-breakers, in order: success pass-rate, then checks score (unscored: lowest)."""
    checks = arm.scores["checks"]
    checks_key = -1.0 if checks is None else round(checks, _DIGITS)
    return round(arm.success.rate.rate, _DIGITS), checks_key


def standings(arms: Sequence[ArmScore]) -> list[list[ArmScore]]:
    """Valid arms grouped by total, best first; each group in the tie-break's order (arms
    equal on every tie-breaker are listed by id, which decides nothing)."""
    ordered = sorted((a for a in arms if a.valid), key=lambda a: (
        -total_key(a.total), *(-key for key in _tie_keys(a)), a.arm))
    groups: list[list[ArmScore]] = []
    for arm in ordered:
        if groups and total_key(groups[-1][0].total) == total_key(arm.total):
            groups[-1].append(arm)
        else:
            groups.append([arm])
    return groups


def rank(arms: Sequence[ArmScore]) -> list[str]:
    """Valid arms, best first: total, then success pass-rate, then checks score. Invalid
    arms are not ranked until the rig is fixed."""
    return [a.arm for group in standings(arms) for a in group]


def places(arms: Sequence[ArmScore]) -> dict[str, int]:
    """Each valid arm's rank by total; equal totals share it (1, 1, 3)."""
    found: dict[str, int] = {}
    for group in standings(arms):
        found.update({a.arm: len(found) + 1 for a in group})
    return found


def _broken_by(first: ArmScore, second: ArmScore) -> TieBreaker | None:
    (success_1, checks_1), (success_2, checks_2) = _tie_keys(first), _tie_keys(second)
    if success_1 > success_2:
        return "success_pass_rate"
    return "checks" if checks_1 > checks_2 else None


def decide_winner(arms: Sequence[ArmScore], threshold: float) -> WinnerDecision:
    """The first group of equal total (best first) holding an arm whose success pass-rate
    reaches `threshold` decides: alone, that arm wins; tied, the tie-break decides, and a
    tie it cannot break has no winner (a lower total never wins for it)."""
    for group in standings(arms):
        best = group[0]  # the group's highest success pass-rate
        if best.success.rate.rate < threshold:
            continue
        if len(group) == 1:
            return WinnerDecision(best.arm)
        tie = Tie(tuple(a.arm for a in group), best.total, _broken_by(best, group[1]))
        return WinnerDecision(best.arm if tie.decided_by else None, tie)
    return WinnerDecision(None)


def winner(arms: Sequence[ArmScore], threshold: float) -> str | None:
    """The winner by `decide_winner`, or None."""
    return decide_winner(arms, threshold).winner
