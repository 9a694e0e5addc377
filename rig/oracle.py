"""The oracle: one check, one commit, one sample, one FRESH container -> one verdict.

The oracle decides nothing about containers: a `SampleExecutor` (runner's docker
executor in practice) runs the sample and reports what happened; the oracle persists the
log, then grades it: the parser, the rig's canaries (`rig.canary`), `rig.verdict.decide`
and, when the sample looks like a rig fault or its canaries did not come out as planted,
the base's run of the same check in the same image (`rig.diagnosis`); then it writes the
record.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from rig import canary as canary_mod
from rig import diagnosis
from rig import ratchet as ratchet_mod
from rig.canary import Canary, Evidence
from rig.harness import Pinned
from rig.parsers import get_parser
from rig.parsers.base import ParseResult
from rig.persist import write_text_atomic
from rig.record import SampleCounts, SampleRecord, StackRecord
from rig.verdict import FailReason, Outcome, RigErrorReason, Verdict, decide

Z95 = 1.959963984540054


@dataclass(frozen=True)
class ServerSpec:
    """A fresh server per sample: started on a port the sample chooses, health-checked
    before the criterion runs, stopped after (`[changes.success].server`)."""

    run: str
    health: str = "/"
    port_env: str = "PORT"
    startup_timeout_s: float = 30


@dataclass(frozen=True)
class StackSpec:
    """A fresh compose project per sample (`[changes.success] stack`): the file as the
    contract froze it (its host path and sha256), and how long its health is awaited."""

    file: str
    sha256: str
    timeout_s: float = 60
    # service -> image ID, pinned (a reproduction: the record's); empty: resolved by name
    images: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class SampleSpec:
    """What to run: the identity of the sample and the command that grades it."""

    change: str
    arm: str
    check: str
    n: int
    commit: str
    base_commit: str
    command: str
    parser: str
    timeout_s: float
    protected: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    contract: str | None = None  # "v<N>:<sha256>" of the frozen contract it was graded under
    server: ServerSpec | None = None
    stack: StackSpec | None = None
    ratchet: ratchet_mod.Ratchet | None = None  # a ratchet check: graded on its metric
    # "base": the success criterion runs under the base's harness (conftest, runner
    # configuration restored, the arm's additions removed); "arm": a check runs the arm's
    # own suite with its own harness (the canaries watch it).
    harness: Literal["base", "arm"] = "arm"
    refused: str | None = None  # the arm's work was refused at import: nothing to run
    token: str | None = None  # the canaries' names (None: fresh random ones; reproduce
    #                           re-plants the recorded ones)

    @property
    def sample(self) -> str:
        return f"{self.change}/{self.arm}/{self.check}/{self.n}"

    @property
    def collect(self) -> tuple[str, ...]:
        """Files (relative to /work) the executor reads back after the command."""
        return () if self.ratchet is None else self.ratchet.collect


@dataclass(frozen=True)
class Execution:
    """What happened in the container. `infra_error` set: the rig itself failed."""

    exit_code: int | None
    log: str
    duration_s: float
    timed_out: bool = False
    oom_killed: bool = False
    program_present: bool = True
    missing_tools: tuple[str, ...] = ()
    infra_error: str | None = None
    image: str = ""
    image_id: str = ""
    image_identity: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[Mapping[str, str], ...] = ()
    limits: Mapping[str, float | int] = field(default_factory=dict)
    network: str = "none"
    db_schema: str | None = None
    protected: Mapping[str, str] = field(default_factory=dict)
    server: str = "none"  # none | healthy | unhealthy | no_http_client
    server_log: str = ""
    files: Mapping[str, str] = field(default_factory=dict)  # `SampleSpec.collect`, as read
    canary: Canary | None = None  # the canaries planted in the sample's tree
    canary_results: str | None = None  # pytest: the canary plugin's report, as read back
    pinned: Pinned = field(default_factory=Pinned)  # what the rig changed in the tree
    truncated: int = 0  # bytes of output left out between the kept head and tail
    refused: str | None = None  # the tree (or the arm's work) could not be used safely
    layout_failed: bool = False  # `infra_error` came while laying out the arm's tree
    stack: StackRecord | None = None  # the sample's stack, when it has one
    stack_detail: str = ""  # why the stack never got healthy
    stack_log: str = ""  # its services' log: kept apart, never parsed


class SampleExecutor(Protocol):
    """Where samples run, with a provider's lifecycle (as inspect_ai's sandboxes have):
    `setup` before the first sample (networks, a database server), `execute` one sample
    in a fresh environment (a failed command is a value; a broken rig an `infra_error`),
    `teardown` after the last (everything it made is gone)."""

    def setup(self) -> None: ...

    def execute(self, spec: SampleSpec) -> Execution: ...

    def teardown(self) -> None: ...


class BaseReference(Protocol):
    """The base's run of a sample's check in the same image (differential diagnosis)."""

    def __call__(self, spec: SampleSpec) -> diagnosis.BaseRun: ...


@dataclass(frozen=True)
class Graded:
    outcome: Outcome
    evidence: Evidence = canary_mod.NO_CANARIES
    causable: bool = False  # a rig error the arm's own code could have caused
    exit_code: int | None = None  # the exit status graded: the must-fail canary's taken out


def grade(spec: SampleSpec, execution: Execution) -> Outcome:
    """The verdict of an execution before any differential diagnosis."""
    return assess(spec, execution).outcome


def assess(spec: SampleSpec, execution: Execution) -> Graded:
    """The verdict of an execution, the canaries' evidence, and whether a rig error could
    be the arm's doing: infra, refusals and missing tools first, then the output."""
    if execution.refused is not None:
        return Graded(Outcome(Verdict.FAIL, FailReason.unsafe_work, execution.refused, None))
    early = _rig_state(spec, execution)
    if early is not None:
        return early
    if spec.ratchet is not None:
        outcome = ratchet_mod.grade(spec.ratchet, exit_code=execution.exit_code,
                                    log=execution.log, files=execution.files,
                                    timed_out=execution.timed_out,
                                    oom_killed=execution.oom_killed,
                                    program_present=execution.program_present)
        return Graded(outcome, causable=diagnosis.causable(outcome))
    return _tests(spec, execution)


def _rig_state(spec: SampleSpec, execution: Execution) -> Graded | None:
    """What the executor saw before any output is read."""
    if execution.infra_error is not None:
        return Graded(Outcome(Verdict.RIG_ERROR, RigErrorReason.infra,
                              execution.infra_error, None), causable=execution.layout_failed)
    image = execution.image or execution.image_id
    if execution.missing_tools:
        missing = ", ".join(execution.missing_tools)
        return Graded(Outcome(Verdict.RIG_ERROR, RigErrorReason.tool_missing,
                              f"not on PATH in image {image}: {missing}", None))
    if execution.server == "no_http_client":
        return Graded(Outcome(Verdict.RIG_ERROR, RigErrorReason.tool_missing,
                              f"no HTTP client (python3, node, wget or curl) in image {image} "
                              "for the server's health check", None), causable=True)
    if execution.server == "unhealthy":
        tail = execution.server_log.strip().splitlines()[-3:]
        return Graded(Outcome(Verdict.FAIL, FailReason.server_unhealthy,
                              "the server never answered its health check: "
                              + " | ".join(tail), None))
    return _stack_state(spec, execution)


def _stack_state(spec: SampleSpec, execution: Execution) -> Graded | None:
    """A stack that never got healthy: the base's own is the rig's fault (RIG_ERROR); an
    arm's is FAIL server_unhealthy unless the base's fails the same way (`diagnosis`)."""
    if execution.stack is None or execution.stack.health == "healthy":
        return None
    detail = f"the stack never got healthy: {execution.stack_detail}"
    if spec.commit == spec.base_commit:
        return Graded(Outcome(Verdict.RIG_ERROR, RigErrorReason.infra,
                              f"{detail}; it is the base's own stack: the rig's fault", None))
    return Graded(Outcome(Verdict.FAIL, FailReason.server_unhealthy, detail, None),
                  causable=True)


def _tests(spec: SampleSpec, execution: Execution) -> Graded:
    """A test runner's output, its canaries discounted (`rig.canary`), then `decide`."""
    parsed = get_parser(spec.parser).parse(execution.log)
    evidence = canary_mod.observe(execution.canary, parsed.tests, execution.exit_code,
                                  execution.canary_results)
    parsed = _vouched(spec.parser, parsed, evidence)
    counts = canary_mod.discount(parsed.counts, evidence)
    exit_code = canary_mod.exit_without(spec.parser, execution.exit_code, counts, evidence)
    outcome = decide(parser=spec.parser, exit_code=exit_code,
                     parsed=dataclasses.replace(parsed, counts=counts),
                     timed_out=execution.timed_out, oom_killed=execution.oom_killed,
                     program_present=execution.program_present)
    if evidence.forced:
        outcome = Outcome(Verdict.FAIL, FailReason.tampered,
                          f"the must-fail canary passed: {evidence.detail}", outcome.counts)
    elif (outcome.verdict is Verdict.PASS and evidence.plugin_counts is not None
          and counts is not None and evidence.plugin_counts != counts):
        outcome = Outcome(Verdict.FAIL, FailReason.spoofed_output,
                          f"the summary line says {counts} but pytest's own per-test reports "
                          f"add up to {evidence.plugin_counts}", counts)
    return Graded(outcome, evidence, diagnosis.causable(outcome), exit_code)


def _vouched(parser: str, parsed: ParseResult, evidence: Evidence) -> ParseResult:
    """With the canaries as planted, a single-summary runner's own summary is its LAST
    one when it holds them (the runner prints it last; a fake printed after it does not
    know them): summary-like text the tests printed before it is theirs, not a spoof.
    Otherwise the old rule stands (more than one is a spoof)."""
    if not (evidence.planted and evidence.as_planted and evidence.exit_agrees):
        return parsed
    sequence = parsed.summary_sequence
    if len(sequence) < 2 or parsed.summed:
        return parsed
    last = sequence[-1]
    if not canary_mod.in_summary(last, evidence):  # without the canaries: not the runner's
        return parsed
    note = (f"{len(sequence) - 1} summary-like line(s) before {parser}'s own last one were "
            "printed by the tests and ignored")
    return dataclasses.replace(parsed, counts=last, summaries=1, spoof_evidence=(),
                               notes=(*parsed.notes, note))


def record_of(spec: SampleSpec, execution: Execution, graded: Graded, started_at: str,
              log_name: str, base: diagnosis.BaseRun | None = None) -> SampleRecord:
    outcome = graded.outcome
    counts = outcome.counts
    rig_error = str(outcome.reason) if outcome.verdict is Verdict.RIG_ERROR else None
    return SampleRecord(
        sample=spec.sample, change=spec.change, arm=spec.arm, check=spec.check, n=spec.n,
        commit=spec.commit, base_commit=spec.base_commit, image=execution.image,
        image_id=execution.image_id, image_identity=execution.image_identity,
        command=spec.command, parser=spec.parser, env=dict(execution.env),
        mounts=[dict(m) for m in execution.mounts], limits=dict(execution.limits),
        network=execution.network, db_schema=execution.db_schema,
        protected=dict(execution.protected), requires=list(spec.requires),
        exit_code=execution.exit_code,
        exit_code_graded=execution.exit_code if execution.canary is None else graded.exit_code,
        timed_out=execution.timed_out,
        oom_killed=execution.oom_killed, program_present=execution.program_present,
        counts=None if counts is None else SampleCounts(
            passed=counts.passed, failed=counts.failed, skipped=counts.skipped,
            errors=counts.errors),
        tests_ran=0 if counts is None else counts.ran, verdict=outcome.verdict,
        reason=None if outcome.reason is None else str(outcome.reason), rig_error=rig_error,
        detail=outcome.detail, contract=spec.contract, server=execution.server,
        started_at=started_at,
        duration_s=round(execution.duration_s, 3), log=log_name,
        harness=spec.harness, pinned=execution.pinned.as_record(),
        canaries=None if execution.canary is None else {
            **execution.canary.as_record(), "seen": graded.evidence.as_record()},
        truncated_bytes=execution.truncated,
        diagnosis=None if base is None else {"base_sample": base.sample,
                                             "base_verdict": str(base.verdict),
                                             "base_reason": base.reason},
        stack=execution.stack,
        **_metric_fields(spec, execution, log_name))


def _metric_fields(spec: SampleSpec, execution: Execution, log_name: str) -> dict[str, Any]:
    """A ratchet's value, its frozen base and where the files it read are kept."""
    if spec.ratchet is None:
        return {}
    return {"metric_value": ratchet_mod.extract(spec.ratchet.metric, execution.log,
                                                execution.files),
            "metric_base": spec.ratchet.base,
            "collected": {path: collected_name(log_name, path) for path in execution.files}}


def collected_name(log_name: str, path: str) -> str:
    """``1.log`` + ``reports/cov.json`` -> ``1.files/reports__cov.json``, beside the log (a
    folder of its own: a sample's folder holds only its records as ``*.json``)."""
    return f"{log_name.removesuffix('.log')}.files/{path.replace('/', '__')}"


SAMPLES_DIR = "samples"


def sample_dir(root: Path, arm: str, check: str) -> Path:
    """The folder of one (arm, check)'s samples under a sample root (a stage directory, a
    proof, a merge verification, a reproduction): samples/ARM/CHECK. The one place the
    rig spells it; `runner.store.layout` builds on it."""
    return root / SAMPLES_DIR / arm / check


def sample_paths(root: Path, spec: SampleSpec) -> tuple[Path, Path]:
    """(record, log) of a sample under a sample root: samples/ARM/CHECK/N.{json,log}."""
    base = sample_dir(root, spec.arm, spec.check) / str(spec.n)
    return base.with_suffix(".json"), base.with_suffix(".log")


def run_sample(executor: SampleExecutor, spec: SampleSpec, stage_dir: Path,
               base: BaseReference | None = None) -> SampleRecord:
    """Execute, persist the log, grade, persist the record. Never re-runs a stored sample.

    `base` (the base's run of the same check in the same image) is asked only when the
    verdict depends on it (`rig.diagnosis.needs_base`): an arm can lose, never void."""
    record_path, log_path = sample_paths(stage_dir, spec)
    if record_path.exists():
        return SampleRecord.model_validate_json(record_path.read_text(encoding="utf-8"))
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    execution = executor.execute(spec)
    write_text_atomic(log_path, execution.log)
    if execution.server_log:  # kept apart: never parsed as the criterion's output
        write_text_atomic(log_path.with_suffix(".server.log"), execution.server_log)
    if execution.stack_log:  # the same: the stack's services, beside the sample's log
        write_text_atomic(log_path.with_suffix(".stack.log"), execution.stack_log)
    for path, text in execution.files.items():  # what a ratchet read: kept to re-grade
        write_text_atomic(log_path.parent / collected_name(log_path.name, path), text)
    if execution.canary_results is not None:  # the canary plugin's report, to re-grade
        write_text_atomic(log_path.with_suffix(".canary.jsonl"), execution.canary_results)
    graded = assess(spec, execution)
    reference = None
    if base is not None and diagnosis.needs_base(graded.outcome, graded.evidence,
                                                  graded.causable):
        reference = base(spec)
        graded = dataclasses.replace(graded, outcome=diagnosis.differential(
            graded.outcome, graded.evidence, reference))
    record = record_of(spec, execution, graded, started, log_path.name, reference)
    write_text_atomic(record_path, record.model_dump_json(indent=2) + "\n")
    return record


def base_run(record: SampleRecord) -> diagnosis.BaseRun:
    """What a base's sample record says, for `rig.diagnosis`."""
    seen = (record.canaries or {}).get("seen")
    signature = None
    if isinstance(seen, dict):
        signature = (str(seen.get("pass")), str(seen.get("fail")),
                     bool(seen.get("exit_agrees", True)))
    return diagnosis.BaseRun(record.sample, record.verdict, record.reason, signature,
                             stack="none" if record.stack is None else record.stack.health)


@dataclass(frozen=True)
class PassRate:
    passed: int
    n: int
    rate: float
    low: float
    high: float
    flaky: bool
    rig_errors: int

    def text(self) -> str:
        return f"{self.rate:.2f} [{self.low:.2f}, {self.high:.2f}] ({self.passed}/{self.n})"


def wilson(passed: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (95 % by default)."""
    if n == 0:
        return 0.0, 1.0
    p = passed / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - spread), min(1.0, centre + spread)


def pass_rate(verdicts: Iterable[Verdict]) -> PassRate:
    """Pass-rate over samples; RIG_ERROR samples are counted apart (they measure nothing)."""
    seen = list(verdicts)
    graded = [v for v in seen if v is not Verdict.RIG_ERROR]
    passed = sum(1 for v in graded if v is Verdict.PASS)
    n = len(graded)
    rate = passed / n if n else 0.0
    low, high = wilson(passed, n)
    return PassRate(passed, n, rate, low, high, flaky=0 < passed < n,
                    rig_errors=len(seen) - n)
