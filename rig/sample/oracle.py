"""The oracle: one check, one commit, one sample, one FRESH container -> one verdict.

The oracle decides nothing about containers: a `SampleExecutor` (runner's docker
executor in practice) runs the sample and reports what happened; the oracle persists the
log and the observer's records, then grades them: `evidence` gathers what the rules read
(the parser's reading of the output, the rig's observer for pytest, the canaries) and
`rig.sample.verdict.judge` applies the rules in their order, asking for the base's run of the
same check in the same image when a rule depends on it (the success criterion's tests by
id, a would-be rig error, canaries or an observer that look wrong); then it writes the
record.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from rig.errors import SampleInterruptedError
from rig.guards import canary as canary_mod
from rig.guards import observer as observer_mod
from rig.guards.harness import Pinned, is_test_file
from rig.persist import write_bytes_atomic, write_text_atomic
from rig.sample import metric
from rig.sample.evidence import Evidence, evidence
from rig.sample.record import (
    BrowserRan,
    RealPath,
    SampleCounts,
    SampleRecord,
)
from rig.sample.recorded import Base, BaseReference
from rig.sample.spec import Execution, SampleExecutor, SampleSpec
from rig.sample.tree import shown
from rig.sample.verdict import FailReason, Judged, Outcome, Verdict, judge


def assess(spec: SampleSpec, execution: Execution, base: Base | None = None) -> Judged:
    """The verdict of an execution (`rig.sample.verdict.judge`), with the base's run when given."""
    return judge(evidence(spec, execution), base)


def grade(spec: SampleSpec, execution: Execution) -> Outcome:
    """The verdict of an execution before the base is asked."""
    return assess(spec, execution).outcome


def record_of(spec: SampleSpec, execution: Execution, graded: Judged, started_at: str,
              log_name: str, base: Base | None = None,
              seen: Evidence | None = None) -> SampleRecord:
    outcome = graded.outcome
    seen = seen or evidence(spec, execution)
    counts = outcome.counts
    rig_error = str(outcome.reason) if outcome.verdict is Verdict.RIG_ERROR else None
    return SampleRecord(
        sample=spec.sample, change=spec.change, arm=spec.arm, check=spec.check, n=spec.n,
        commit=spec.commit, base_commit=spec.base_commit, image=execution.image,
        image_id=execution.image_id, image_identity=execution.image_identity,
        image_ref=execution.image_ref or None,
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
        detail=_harness_said(outcome, execution.pinned), contract=spec.contract,
        server=execution.server,
        started_at=started_at,
        duration_s=round(execution.duration_s, 3), log=log_name,
        harness=spec.harness, pinned=_pinned(execution.pinned),
        canaries=_canaries(spec, execution, graded),
        truncated_bytes=execution.truncated, outlived=execution.outlived,
        unguarded=list(graded.unguarded), **_tests_fields(execution, seen),
        diagnosis=None if base is None else {"base_sample": base.sample,
                                             "base_verdict": str(base.verdict),
                                             "base_reason": base.reason},
        stack=execution.stack, build=list(spec.build), build_exit=execution.build_exit,
        browser=spec.browser, browser_run=_browser_run(execution, log_name),
        engine=dict(execution.engine), usage=execution.usage,
        server_usage=execution.server_usage,
        real_path=[RealPath(expectation=str(f.expectation), met=f.met, detail=f.detail,
                            test=f.test) for f in seen.real_path.findings],
        **_metric_fields(spec, execution, log_name))


def _canaries(spec: SampleSpec, execution: Execution, graded: Judged) -> dict[str, object] | None:
    """The canaries planted and how they came out; an exit-code check's tripwire (planted
    here, or what the check's tripwire run showed)."""
    if execution.canary is not None:
        return {**execution.canary.as_record(), "seen": graded.canaries.as_record()}
    if spec.tripwire is not None:
        return {"tripwire": {**spec.tripwire.as_record(),
                             "named": spec.tripwire.named(execution.log)}}
    if spec.guard is not None:
        return {"tripwire": spec.guard.as_record()}
    return None


def _tests_fields(execution: Execution, seen: Evidence) -> dict[str, Any]:
    """The tests by id (the observer's for pytest, else the runner's per-test lines),
    the canaries left out, bounded; and what the observer saw."""
    canary = execution.canary
    names = () if canary is None else tuple(n for n in (canary.pass_name, canary.fail_name)
                                            if n)
    def mine(test_id: str) -> bool:
        return not any(name in test_id for name in names)
    if not execution.observed:
        cases = canary_mod.split(canary, seen.parsed.tests)[1]  # the canaries left out
        rows = [{"id": c.id, "status": str(c.status)} for c in cases[:TESTS_KEPT]]
        dupes = len({c.id for c in cases}) < len({(c.id, c.status) for c in cases})
        return {"tests": rows, "duplicated": dupes} if rows else {}
    observed = seen.observation
    return {"tests": [row for row in observer_mod.summary(observed, TESTS_KEPT)
                      if mine(str(row["id"]))],
            "observer": {"present": observed.present, "sessions": observed.sessions,
                         "nested": observed.nested, "finished": observed.finished,
                         "status": observed.status, "overflow": observed.overflow,
                         "plugins": list(observed.plugins), "inipath": observed.inipath,
                         "anomalies": [{"kind": a.kind, "detail": a.detail}
                                       for a in observed.anomalies]}}


TESTS_KEPT = 20000
PINNED_KEPT = 1000  # paths a record names per list of what pinning changed; then a count


def _harness_said(outcome: Outcome, pinned: Pinned) -> str:
    """A sample that ran under the base's harness says what of the arm's was not obeyed:
    a failure names it (a conftest, an ini file the brief lists as the base's: an honest
    arm's test that needed it failed for that reason, not for its code), and any verdict
    names a test file of the arm's that the harness removed (a Go test file defining
    TestMain in a package of the base's): its tests did not run, whatever the verdict."""
    dropped = [p for p in pinned.removed if is_test_file(p)]
    said = [f"removed {shown(p)}" for p in pinned.removed[:3]] + \
        [f"restored {shown(p)}" for p in pinned.restored[:3]]
    if outcome.verdict is Verdict.FAIL and outcome.reason in (
            FailReason.tests_failed, FailReason.build_failed) and said:
        return f"{outcome.detail}; under the base's harness: {', '.join(said[:3])}" + (
            " and more" if len(pinned.removed) + len(pinned.restored) > 3 else "")
    if not dropped:
        return outcome.detail
    return (f"{outcome.detail}; under the base's harness: {len(dropped)} test file(s) of "
            f"the arm's removed, their tests did not run: "
            f"{', '.join(shown(p) for p in dropped[:3])}" +
            (" and more" if len(dropped) > 3 else ""))


def _pinned(pinned: Pinned) -> dict[str, list[str]]:
    """What pinning changed, as the record keeps it: a tree of 90,000 harness files is
    named by its first PINNED_KEPT and a count, never 90,000 names in every record."""
    return {what: paths[:PINNED_KEPT] + ([f"[and {len(paths) - PINNED_KEPT} more]"]
                                         if len(paths) > PINNED_KEPT else [])
            for what, paths in pinned.as_record().items()}


def _metric_fields(spec: SampleSpec, execution: Execution, log_name: str) -> dict[str, Any]:
    """A ratchet's value, its frozen base and where the files it read are kept."""
    if spec.ratchet is None:
        return {}
    return {"metric_value": metric.extract(spec.ratchet.metric, execution.log,
                                                execution.files),
            "metric_base": spec.ratchet.base,
            "collected": {path: collected_name(log_name, path) for path in execution.files}}


def _browser_run(execution: Execution, log_name: str) -> BrowserRan | None:
    """The browser's facts with its files named where `run_sample` keeps them."""
    ran = execution.browser_run
    if ran is None:
        return None
    folder = browser_folder(log_name)
    return ran.model_copy(update={
        "files": {what: f"{folder}/{name}" for what, name in ran.files.items()},
        "screenshots": [f"{folder}/{name}" for name in ran.screenshots],
        "trace": None if ran.trace is None else f"{folder}/{ran.trace}"})


def browser_folder(log_name: str) -> str:
    """``1.log`` -> ``1.browser``: a browser sample's files beside its log."""
    return f"{log_name.removesuffix('.log')}.browser"


def collected_name(log_name: str, path: str) -> str:
    """``1.log`` + ``reports/cov.json`` -> ``1.files/reports__cov.json``, beside the log (a
    folder of its own: a sample's folder holds only its records as ``*.json``)."""
    return f"{log_name.removesuffix('.log')}.files/{path.replace('/', '__')}"


SAMPLES_DIR = "samples"
RETRIED_DIR = "retried"  # under a sample folder: attempts that were no result, run again


def sample_dir(root: Path, arm: str, check: str) -> Path:
    """The folder of one (arm, check)'s samples under a sample root (a stage directory, a
    proof, a merge verification, a reproduction): samples/ARM/CHECK. The one place the
    rig spells it; `runner.store.layout` builds on it."""
    return root / SAMPLES_DIR / arm / check


def sample_paths(root: Path, spec: SampleSpec | SampleRecord) -> tuple[Path, Path]:
    """(record, log) of a sample under a sample root: samples/ARM/CHECK/N.{json,log}."""
    base = sample_dir(root, spec.arm, spec.check) / str(spec.n)
    return base.with_suffix(".json"), base.with_suffix(".log")


def retried_dir(root: Path, arm: str, check: str) -> Path:
    """Where (arm, check)'s sample attempts that were no result are kept, for the log:
    cut by an outage, or a rig error set aside to run again (`set_aside`). Beside its
    records, never read as one (`N-ATTEMPT.json`, `N-ATTEMPT.log`)."""
    return sample_dir(root, arm, check) / RETRIED_DIR


def next_attempt(root: Path, arm: str, check: str, n: int) -> Path:
    """The record path of sample `n`'s next attempt under `retried_dir`."""
    folder = retried_dir(root, arm, check)
    return folder / f"{n}-{1 + sum(1 for _ in folder.glob(f'{n}-*.json'))}.json"


def set_aside(root: Path, record: SampleRecord) -> Path:
    """Move a stored record (and its log) under `retried_dir`: no longer a result, so
    the sample runs again. Where it went."""
    record_path, log_path = sample_paths(root, record)
    target = next_attempt(root, record.arm, record.check, record.n)
    target.parent.mkdir(parents=True, exist_ok=True)
    if log_path.exists():
        log_path.replace(target.with_suffix(".log"))
    record_path.replace(target)
    return target


def keep_interrupted(stage_dir: Path, spec: SampleSpec, execution: Execution,
                     started: str) -> SampleInterruptedError:
    """The cut attempt's log and record under `retried_dir`, and the error that says
    so (`execution.interrupted` is set)."""
    assert execution.interrupted is not None
    record_path = next_attempt(stage_dir, spec.arm, spec.check, spec.n)
    write_text_atomic(record_path.with_suffix(".log"), execution.log)
    seen = evidence(spec, execution)
    record = record_of(spec, execution, judge(seen), started,
                       record_path.with_suffix(".log").name, None, seen)
    write_text_atomic(record_path, record.model_dump_json(indent=2) + "\n")
    return SampleInterruptedError(spec.sample, execution.interrupted, str(record_path))


def run_sample(executor: SampleExecutor, spec: SampleSpec, stage_dir: Path,
               base: BaseReference | None = None) -> SampleRecord:
    """Execute, persist the log, grade, persist the record. Never re-runs a stored sample.

    `base` (the base's run of the same check in the same image) is asked only when the
    verdict depends on it (`rig.sample.verdict.Judged.needs_base`): an arm can lose, never void.
    A sample an outage cut (or whose base's run one cut) is no result: its attempt is
    kept aside and `SampleInterruptedError` raised; no record, so it runs again."""
    record_path, log_path = sample_paths(stage_dir, spec)
    if record_path.exists():
        return SampleRecord.model_validate_json(record_path.read_text(encoding="utf-8"))
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    execution = executor.execute(spec)
    if execution.interrupted is not None:
        raise keep_interrupted(stage_dir, spec, execution, started)
    write_text_atomic(log_path, execution.log)
    if execution.server_log:  # kept apart: never parsed as the criterion's output
        write_text_atomic(log_path.with_suffix(".server.log"), execution.server_log)
    if execution.stack_log:  # the same: the stack's services, beside the sample's log
        write_text_atomic(log_path.with_suffix(".stack.log"), execution.stack_log)
    if execution.build_log:  # the same: `[toolchain] build`'s output
        write_text_atomic(log_path.with_suffix(".build.log"), execution.build_log)
    for name, data in execution.browser_files.items():  # requests, screenshots, the trace
        write_bytes_atomic(log_path.parent / browser_folder(log_path.name) / name, data)
    for path, text in execution.files.items():  # what a ratchet read: kept to re-grade
        write_text_atomic(log_path.parent / collected_name(log_path.name, path), text)
    if execution.observation is not None:  # the observer's records, to re-grade
        write_text_atomic(log_path.with_suffix(".observer.jsonl"), execution.observation)
    seen = evidence(spec, execution)
    graded = judge(seen)
    reference = None
    if base is not None and graded.needs_base:
        reference = base(spec)
        graded = judge(seen, reference)
    record = record_of(spec, execution, graded, started, log_path.name, reference, seen)
    write_text_atomic(record_path, record.model_dump_json(indent=2) + "\n")
    return record
