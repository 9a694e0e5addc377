"""OBSERVATION.json: the abc-comparison/v2 artifact, exactly as docs/design.md "Records" lays out.

    {"schema": "abc-comparison/v2", experiment, contract {..., sha256}, rounds[]}
    round: {change, base_commit, baseline {pass_rate, verdicts}, arms[], winner,
            grafts[] {from, what, rationale, verified}, flags[],
            tie_break {arms[], total, rule, decided_by} | null (optional)}
    arm:   {arm, model, effort, effort_normalized, effort_provenance, effort_evidence, mode,
            control, commit, image_id, results {success {pass_rate, ci95, samples[]},
            checks {NAME: {...}}}, scores {success, checks, diagnosis, plan, code_quality,
            intent}, total, max, valid, caveats[], ... headroom {samples, measured,
            worst_sample, peak_mib, limit_mib, headroom, near_limit[], cpu_s_max}
            (optional: absent when no sample's use was read)}

Every model forbids unknown keys; `write_observation` validates what it is about to write
(a reload of its own dump) before it replaces the file atomically.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from rig.persist import write_text_atomic
from rig.report import pairs as pairs_mod
from rig.report.pairs import Pair, Paired, RankInterval
from rig.rubric import ArmScore, CheckResult
from rig.sample.verdict import Verdict
from rig.standings import TIE_RULE, Tie, TieBreaker
from rig.stats import PassRate
from rig.wire import WireSummary
from runner.manifest import ArmIdentity

SCHEMA: Final = "abc-comparison/v2"
MIB: Final = 1024 * 1024
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Baseline(_Model):
    """The success criterion on the untouched base (it must fail: principle 2)."""

    pass_rate: float = Field(ge=0, le=1)
    verdicts: list[Verdict]


class Rate(_Model):
    """A pass-rate over fresh-container samples, its 95 % Wilson interval, its samples."""

    pass_rate: float = Field(ge=0, le=1)
    ci95: tuple[float, float]
    samples: list[str]

    @model_validator(mode="after")
    def _interval_holds_the_rate(self) -> Rate:
        low, high = self.ci95
        if not 0 <= low <= high <= 1:
            raise ValueError(f"ci95 {list(self.ci95)} is not an interval within [0, 1]")
        return self


class Results(_Model):
    success: Rate
    checks: dict[str, Rate]


class Scores(_Model):
    """0..5 per dim; null: not scored (judge = "none", no checks, or nothing graded)."""

    success: float | None = Field(ge=0, le=5)
    checks: float | None = Field(ge=0, le=5)
    diagnosis: float | None = Field(ge=0, le=5)
    plan: float | None = Field(ge=0, le=5)
    code_quality: float | None = Field(ge=0, le=5)
    intent: float | None = Field(ge=0, le=5)


class _Keyed(_Model):
    arm: str


# written only when they say something
OPTIONAL_KEYS = ("marks", "usage", "agent_cli", "unguarded", "retried", "headroom")


class Headroom(_Model):
    """An arm's worst memory headroom over its samples (`rig.headroom.arm_headroom`):
    the sample closest to its memory limit, how close, and the samples within 10 % of
    it or OOM-killed; the most CPU time one sample used. Absent: no sample's use read."""

    samples: int = Field(ge=0)
    measured: int = Field(ge=0)  # samples whose use was read (or the OOM killer ended)
    worst_sample: str | None
    peak_mib: float | None = Field(ge=0)  # MiB (bytes / 2^20: exact, a page is 4 KiB)
    limit_mib: float | None = Field(ge=0)  # its memory limit, the kill threshold
    headroom: float | None = Field(ge=0, le=1)  # share of the limit left (0: OOM-killed)
    near_limit: list[str] = []  # samples within 10 % of the limit, or OOM-killed
    cpu_s_max: float | None = Field(default=None, ge=0)


class ArmEntry(ArmIdentity, _Keyed):
    """One arm of a round: its id, its identity (`runner.manifest.ArmIdentity`), then what
    it scored (keys in that order: pydantic lists the last base's fields first)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    commit: str
    image_id: str
    results: Results
    scores: Scores
    total: float = Field(ge=0)
    max: float = Field(ge=0)
    valid: bool
    caveats: list[str]
    harness_touched: list[str] = []  # harness files the arm's diff changed
    marks: list[str] = []            # effort_mismatch, model_mismatch, ... (its dispatch)
    usage: WireSummary | None = None  # its requests through the model gateway
    agent_cli: dict[str, str] | None = None  # the pinned CLI: cli, package, version, sha256
    unguarded: dict[str, list[str]] = {}  # check -> what its grading could not check
    retried: int = Field(default=0, ge=0)  # sample attempts that were no result, run again
    headroom: Headroom | None = None  # its worst memory headroom (issue 33)

    @model_serializer(mode="wrap")
    def _omit_unused(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """An arm that had no gateway and earned no mark is written as before issue 13."""
        data: dict[str, Any] = handler(self)
        for key in OPTIONAL_KEYS:
            if not data.get(key):
                data.pop(key, None)
        return data

    @model_validator(mode="after")
    def _total_within_max(self) -> ArmEntry:
        if self.total > self.max + 1e-9:
            raise ValueError(f"arm {self.arm}: total {self.total} exceeds max {self.max}")
        return self


class Graft(_Model):
    """A change of another arm applied onto the winner, re-verified; kept iff verified."""

    from_arm: str = Field(alias="from")
    what: str
    rationale: str
    verified: bool


class TieBreak(_Model):
    """Arms of equal total competed for the win: how `rig.standings.TIE_RULE` settled it."""

    arms: list[str] = Field(min_length=2)  # in the tie-break's order: the first won, if any
    total: float = Field(ge=0)
    rule: str
    decided_by: TieBreaker | None  # None: still equal, no winner by the rule


class JudgeUsage(_Model):
    """An agent judge's run on one arm's work, from its gateway's records: what it
    really called and spent, apart from the arms' own usage."""

    arm: str                           # the arm whose work was judged
    judge: str                         # as [contract] judge names it
    version: str
    model_observed: str | None
    effort_observed: str | None
    evidence: str
    marks: list[str] = []              # effort_mismatch, model_mismatch, budget_exhausted, ...
    usage: WireSummary


class Round(_Model):
    change: str
    base_commit: str
    baseline: Baseline
    arms: list[ArmEntry]
    winner: str | None
    grafts: list[Graft]
    flags: list[str]
    tie_break: TieBreak | None = None  # absent from observations written before ties
    judge_usage: list[JudgeUsage] = []  # an agent judge's; absent for any other judge
    # issue 33 (rig.report.pairs): every pair of valid arms, each one's rank interval
    pairwise: list[Pair] = []
    rank_interval: dict[str, RankInterval] = {}

    @model_serializer(mode="wrap")
    def _omit_unused(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A round without an agent judge (or pairs) is written as before issue 13 (33)."""
        data: dict[str, Any] = handler(self)
        for key in ("judge_usage", "pairwise", "rank_interval"):
            if not data.get(key):
                data.pop(key, None)
        return data

    @model_validator(mode="after")
    def _winner_is_a_valid_arm(self) -> Round:
        ids = [a.arm for a in self.arms]
        if len(set(ids)) != len(ids):
            raise ValueError(f"round {self.change}: duplicate arm ids in {ids}")
        valid = {a.arm for a in self.arms if a.valid}
        if self.winner is not None and self.winner not in valid:
            raise ValueError(f"round {self.change}: winner {self.winner!r} is not a valid arm "
                             "of the round")
        strangers = [] if self.tie_break is None else sorted(set(self.tie_break.arms) - valid)
        if strangers:
            raise ValueError(f"round {self.change}: tie_break names arms that are not valid "
                             f"arms of the round: {', '.join(strangers)}")
        return self


class Observation(_Model):
    schema_name: Literal["abc-comparison/v2"] = Field(default=SCHEMA, alias="schema")
    experiment: str
    contract: dict[str, Any]
    rounds: list[Round]
    paired: Paired | None = None  # issue 33: the arms across the changes (rig.report.pairs)

    @model_serializer(mode="wrap")
    def _omit_unpaired(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("paired") is None:
            data.pop("paired", None)
        return data

    @field_validator("contract")
    @classmethod
    def _contract_has_its_hash(cls, value: dict[str, Any]) -> dict[str, Any]:
        sha = value.get("sha256")
        if not isinstance(sha, str) or not _SHA256.match(sha):
            raise ValueError("the contract must carry its sha256 (64 lowercase hex digits)")
        return value

    @model_validator(mode="after")
    def _one_round_per_change(self) -> Observation:
        changes = [r.change for r in self.rounds]
        if len(set(changes)) != len(changes):
            raise ValueError(f"one round per change, found {changes}")
        return self

    def dump(self) -> str:
        """The JSON text, keys as docs/design.md names them ("schema", "from")."""
        return self.model_dump_json(by_alias=True, indent=2) + "\n"


def rate_of(result: CheckResult) -> Rate:
    return _rate(result.rate, result.samples)


def _rate(rate: PassRate, samples: Sequence[str]) -> Rate:
    return Rate(pass_rate=rate.rate, ci95=(rate.low, rate.high), samples=list(samples))


def arm_entry(arm: ArmScore) -> ArmEntry:
    """One arm of a round, from its `ArmScore`."""
    results = Results(success=rate_of(arm.success),
                      checks={name: rate_of(check) for name, check in arm.checks.items()})
    return ArmEntry(
        arm=arm.arm, **dict(arm.identity), commit=arm.commit, image_id=arm.image_id,
        results=results,
        scores=Scores.model_validate(arm.scores), total=arm.total, max=arm.max,
        valid=arm.valid, caveats=list(arm.caveats), harness_touched=list(arm.harness_touched),
        marks=list(arm.marks), usage=arm.usage,
        agent_cli=None if arm.agent_cli is None else dict(arm.agent_cli),
        unguarded=arm.unguarded, retried=arm.retried, headroom=headroom_of(arm))


def headroom_of(arm: ArmScore) -> Headroom | None:
    """The arm's `Headroom` entry; None when no sample's use was read."""
    found = arm.headroom
    if not found.measured:
        return None
    worst = found.worst
    return Headroom(
        samples=found.samples, measured=found.measured,
        worst_sample=None if worst is None else worst.sample,
        peak_mib=None if worst is None or worst.peak_bytes is None
        else worst.peak_bytes / MIB,
        limit_mib=None if worst is None or worst.limit_bytes is None
        else worst.limit_bytes / MIB,
        headroom=None if found.headroom is None else round(found.headroom, 4),
        near_limit=list(found.near),
        cpu_s_max=None if found.cpu_s is None else round(found.cpu_s, 3))


def round_of(change: str, base_commit: str, baseline_rate: float,
             baseline_verdicts: Sequence[Verdict | str], arms: Sequence[ArmScore],
             winner: str | None, grafts: Sequence[Mapping[str, Any] | Graft],
             flags: Sequence[str], tie: Tie | None = None,
             judge_usage: Sequence[JudgeUsage] = ()) -> Round:
    """One change's round. `grafts`: {from, what, rationale, verified} each; `tie`: the
    tie `standings.decide_winner` broke (or could not); `judge_usage`: an agent judge's."""
    return Round(
        change=change, base_commit=base_commit,
        baseline=Baseline(pass_rate=baseline_rate,
                          verdicts=[Verdict(v) for v in baseline_verdicts]),
        arms=[arm_entry(arm) for arm in arms], winner=winner,
        grafts=[g if isinstance(g, Graft) else Graft.model_validate(dict(g)) for g in grafts],
        flags=list(flags), tie_break=None if tie is None else TieBreak(
            arms=list(tie.arms), total=tie.total, rule=TIE_RULE, decided_by=tie.decided_by),
        judge_usage=list(judge_usage), **compared(arms))


def compared(arms: Sequence[ArmScore]) -> dict[str, Any]:
    """A round's `pairwise` and `rank_interval` (issue 33), over its valid arms."""
    counts = pairs_mod.success_counts(arms)
    return {"pairwise": pairs_mod.pairwise(counts),
            "rank_interval": pairs_mod.rank_interval(counts)}


def entry_counts(round_: Round) -> dict[str, tuple[int, int]]:
    """(passed, graded) of every valid arm's success criterion, read back from a round
    (a valid arm has no RIG_ERROR sample: every sample was graded)."""
    found = {}
    for entry in round_.arms:
        if entry.valid:
            n = len(entry.results.success.samples)
            found[entry.arm] = (round(entry.results.success.pass_rate * n), n)
    return found


def observation(experiment: str, contract: Mapping[str, Any],
                rounds: Sequence[Round]) -> Observation:
    """The artifact. `contract`: the frozen contract with its sha256 (e.g. the lock's
    latest `LockVersion.model_dump(mode="json")`)."""
    return Observation(experiment=experiment, contract=dict(contract), rounds=list(rounds),
                       paired=pairs_mod.paired([r.change for r in rounds],
                                               [entry_counts(r) for r in rounds]))


def write_observation(path: Path, obs: Observation) -> None:
    """Validate the dump by reloading it, then replace `path` atomically."""
    text = obs.dump()
    Observation.model_validate_json(text)
    write_text_atomic(path, text)


def read_observation(path: Path) -> Observation:
    return Observation.model_validate_json(path.read_text(encoding="utf-8"))
