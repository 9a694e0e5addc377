"""The arm record (`stages/<change>/arms/<arm>/arm.json`) and the effort probe.

The record is written when an agent starts (state `running`) and again when it is done;
it carries what the measurement needs: final commit, diffstat, duration, exit code,
state, the brief's sha256 and the effort identity (docs/design.md principle 9). Secrets are
redacted in the text written to disk, whatever field they might have reached.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from rig import wire
from rig.persist import write_text_atomic
from rig.sample.record import StackRecord
from runner.commands.dispatch.redact import Redactor
from runner.manifest import ArmIdentity, EffortProvenance
from runner.store import layout
from runner.store.files import read_model

RECORD_FILE = layout.ARM_RECORD  # in the arm's directory (`layout.arm_dir`)
LOG_FILE = layout.DISPATCH_LOG
RECORD_SCHEMA: Literal["bakeoff-arm-dispatch/v1"] = "bakeoff-arm-dispatch/v1"


class ArmState(StrEnum):
    """Where an arm's dispatch stands. Only the DONE states are skipped on resume."""

    RUNNING = "running"
    FINISHED = "finished"        # the agent exited 0
    FAILED = "failed"            # the agent exited non-zero: the model's result, not ours
    TIMED_OUT = "timed_out"      # stopped at dispatch_timeout_s; its work is kept
    INTERRUPTED = "interrupted"  # the orchestrator was stopped (Ctrl-C): redone on resume
    RIG_ERROR = "rig_error"      # the sandbox or engine broke: never scored, redone


DONE_STATES = frozenset({ArmState.FINISHED, ArmState.FAILED, ArmState.TIMED_OUT})


class _Dispatched(BaseModel):
    """What was dispatched and what came back: the keys of arm.json before the identity."""

    model_config = ConfigDict(frozen=True)
    record: Literal["bakeoff-arm-dispatch/v1"] = RECORD_SCHEMA
    experiment: str
    change: str
    arm: str
    attempt: int
    state: ArmState
    run: str
    container: str
    image_id: str
    network: str
    egress: bool
    adapter: str
    command: str
    env: dict[str, str]
    secrets: list[str]
    brief_path: str
    brief_sha256: str          # of the brief as the agent reads it (file + guardrails)
    brief_file_sha256: str     # of the change's brief file alone (what the contract pins)
    dispatch_timeout_s: float
    base_commit: str
    started_at: str
    finished_at: str | None = None
    duration_s: float | None = None
    exit_code: int | None = None
    timed_out: bool = False
    commit: str | None = None
    branch: str | None = None
    commits: int | None = None
    orchestrator_commit: str | None = None
    diffstat: str | None = None
    files_changed: int | None = None
    insertions: int | None = None
    deletions: int | None = None


class ArmRecord(ArmIdentity, _Dispatched):
    """arm.json: the dispatch, the arm's identity (as `up` froze it, the effort evidence
    replaced by the probe's match), then the probe and the outcome notes."""

    model_config = ConfigDict(frozen=True)
    effort_probe: str | None = None
    effort_runtime: Literal["matched", "missing"] | None = None
    effort_observed: str | None = None
    model_observed: str | None = None
    agent_cli: dict[str, str] | None = None    # the pinned CLI the arm ran (`InstalledCli`)
    # Its own stack during dispatch (`[toolchain] stack`), as `up` made it: the file by
    # path and sha256, the project, each service's image ID.
    stack: StackRecord | None = None
    gateway: wire.WireSummary | None = None    # its requests through the model gateway
    # effort_mismatch, model_mismatch, budget_exhausted, unrestricted_network: each flags
    # the round in every report (the arm is still scored).
    marks: list[str] = []
    log: str = LOG_FILE
    last_line: str = ""
    caveats: list[str] = []
    error: str | None = None
    interrupted_work: list[str] = []
    # Why the arm's work was refused unseen (an fsck error, "does not descend from the
    # base", "bundle over N MiB"): its branch is the base; scoring makes it FAIL unsafe_work.
    work_refused: str | None = None


def record_dir(directory: Path, change: str, arm: str) -> Path:
    """The arm's directory of the stage (`layout.arm_dir`): its record, log, kept work."""
    return layout.arm_dir(directory, change, arm)


def interrupted_branch(experiment: str, change: str, arm: str, attempt: int) -> str:
    return f"bakeoff-interrupted/{experiment}/{change}/{arm}/attempt-{attempt}"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def load_record(path: Path) -> ArmRecord | None:
    try:
        return read_model(path, ArmRecord)
    except ValueError:  # a record from another version: treat the arm as not done
        return None


def save_record(path: Path, record: ArmRecord, redactor: Redactor) -> None:
    write_text_atomic(path, redactor.redact(record.model_dump_json(indent=2)) + "\n")


def apply_effort_probe(record: ArmRecord, log_text: str) -> ArmRecord:
    """First non-blank line of the log the probe matches -> effort_evidence, provenance
    runtime_log.

    No match: the declared values stand and the record says the evidence is missing.
    """
    if record.effort_probe is None:
        return record
    pattern = re.compile(record.effort_probe)
    for line in log_text.splitlines():
        if not line.strip():  # evidence is a line of text: a blank one would not reload
            continue
        match = pattern.search(line)
        if match is None:
            continue
        observed = match.group(1) if pattern.groups else None
        caveats, marks = list(record.caveats), list(record.marks)
        if observed is not None and observed.lower() != record.effort.lower():
            caveats.append(f"effort_mismatch: the runtime log says {observed!r}, "
                           f"the arm declares {record.effort!r}")
            marks = sorted({*marks, "effort_mismatch"})
        return record.model_copy(update={
            "effort_runtime": "matched", "effort_observed": observed, "marks": marks,
            "effort_evidence": line.strip(), "caveats": caveats,
            "effort_provenance": EffortProvenance.RUNTIME_LOG})
    missing = (f"runtime evidence missing: effort_probe {record.effort_probe!r} matched no "
               f"line of {LOG_FILE}; the declared effort stands")
    return record.model_copy(update={"effort_runtime": "missing",
                                     "caveats": [*record.caveats, missing]})


def apply_gateway(record: ArmRecord, lines: list[dict[str, object]], records: str) -> ArmRecord:
    """What the gateway saw of the arm: totals, the model and effort on the wire (the
    evidence now cites the gateway's records), and the marks the comparison earns."""
    summary = wire.summarize(lines, records)
    seen = wire.observe(record.model, record.effort, lines)
    caveats = [*record.caveats, *seen.caveats]
    missing = wire.unpriced(lines)
    if missing:
        caveats.append(wire.NO_PRICE.format(models=", ".join(missing)))
    update: dict[str, object] = {
        "gateway": summary, "model_observed": seen.model_observed,
        "effort_observed": seen.effort_observed, "caveats": caveats,
        "marks": sorted({*record.marks, *seen.marks})}
    if seen.model_observed is not None:  # the wire is the evidence once it carried the model
        update |= {"effort_evidence": seen.evidence, "effort_runtime": "matched",
                   "effort_provenance": EffortProvenance.RUNTIME_LOG}
    else:
        update["caveats"] = [*caveats, f"runtime evidence missing: {seen.evidence}; the "
                             "declared effort stands"]
    return record.model_copy(update=update)
