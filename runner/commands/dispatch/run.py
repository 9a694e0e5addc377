"""`dispatch`: every arm's agent in its own sandbox, all at once, on the same brief.

Everything that can be wrong with the input (an unknown adapter or arm, a missing
secret, an unreadable brief) is found before any agent starts; the brief is written
once, read-only for every sandbox. Then each arm runs in its own thread: sweep
leftovers, stream the agent under its timeout, keep its work (stopped, paused, bundled
in a fresh rig container and imported checked: `runner.commands.dispatch.work`), write its
record. Arms whose record (from this `up`) says finished, failed or timed_out are
skipped: a re-run after an interrupted dispatch finishes only the others, each redone
from the base commit after the interrupted attempt's work is kept the same way.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from rig import wire
from runner import contract, workspace
from runner.commands import services
from runner.commands.dispatch import process, work
from runner.commands.dispatch.agents import adapter_for, cli_env, gateway_env
from runner.commands.dispatch.brief import (
    BRIEF_PATH,
    TEST_USER_ENV,
    Brief,
    arm_test_user,
    compose_brief,
    write_brief,
)
from runner.commands.dispatch.record import (
    DONE_STATES,
    LOG_FILE,
    RECORD_FILE,
    ArmRecord,
    ArmState,
    apply_effort_probe,
    apply_gateway,
    interrupted_branch,
    load_record,
    now_iso,
    record_dir,
    save_record,
)
from runner.commands.dispatch.redact import MASK, Redactor, forms_of
from runner.containers import arms, checkout, gateway, sandbox
from runner.containers.arms import put_brief
from runner.containers.backend import ContainerEngine
from runner.containers.images.prepared import ResolvedImages
from runner.errors import BadInputError, InfraError, NotUpError, RunnerError
from runner.manifest import Arm, LoadedManifest
from runner.store import layout
from runner.store import state as state_mod
from runner.store.files import experiment_lock
from runner.store.layout import stage_dir
from runner.store.state import ArmSandbox, ExperimentState


class DispatchReporter(Protocol):
    """What a view is told; called from the arms' threads."""

    def state(self, arm: str, state: str, detail: str = "") -> None: ...

    def line(self, arm: str, text: str) -> None: ...


class QuietReporter:
    def state(self, arm: str, state: str, detail: str = "") -> None:
        return None

    def line(self, arm: str, text: str) -> None:
        return None


class SecretMissingError(BadInputError):
    """An arm names a secret that is not set in the orchestrator's environment."""


@dataclass(frozen=True)
class ArmPlan:
    arm: Arm
    sandbox: ArmSandbox
    box: checkout.ArmBox
    adapter: str
    command: str
    env: dict[str, str]        # holds secret values: never written anywhere
    directory: Path            # stages/<change>/arms/<arm>/
    previous: ArmRecord | None  # an unfinished attempt of this same `up`


@dataclass
class DispatchContext:
    engine: ContainerEngine
    loaded: LoadedManifest
    current: ExperimentState
    brief: Brief
    redactor: Redactor
    secrets: dict[str, str]
    reporter: DispatchReporter
    timeout_s: float
    current_dir: Path
    cancel: threading.Event = field(default_factory=threading.Event)
    repo_lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class ArmOutcome:
    record: ArmRecord
    skipped: bool


# The shell's exit codes for a program it could not start: 126 cannot execute, 127 not
# found. An agent that exits so never ran: not a result of the model's.
NOT_STARTED_EXITS = frozenset({126, 127})


class NoAgentStartedError(RunnerError):
    """Every arm this dispatch ran failed to start its agent (exit 126 or 127): the
    manifest's commands are wrong, not the agents. Exit code 3, as for a rig error."""

    exit_code = 3


@dataclass(frozen=True)
class DispatchReport:
    change: str
    brief_sha256: str
    outcomes: list[ArmOutcome]
    wall_s: float

    @property
    def rig_errors(self) -> list[ArmRecord]:
        return [o.record for o in self.outcomes if o.record.state == ArmState.RIG_ERROR]

    @property
    def none_started(self) -> bool:
        """True when every arm this dispatch ran (none skipped as done earlier) failed
        with the shell's 126/127: no agent started at all. One arm that started is a
        result (the others' 127 stays each arm's own failure)."""
        ran = [o.record for o in self.outcomes if not o.skipped]
        return bool(ran) and all(r.state == ArmState.FAILED and r.exit_code in
                                 NOT_STARTED_EXITS for r in ran)

    def require_started(self, manifest: Path) -> None:
        """`NoAgentStartedError` (exit 3) when no arm's agent started."""
        if not self.none_started:
            return
        arms = ", ".join(f"{o.record.arm} (exit {o.record.exit_code})" for o in self.outcomes
                         if not o.skipped)
        raise NoAgentStartedError(
            f"no arm's agent started (126: cannot execute, 127: not found): {arms}",
            hint=f"correct each arm's command in {manifest} (its dispatch log says what the "
                 f"shell could not run), then `bakeoff-sandbox down -f {manifest}` and run "
                 "again")


def dispatch(engine: ContainerEngine, loaded: LoadedManifest, arms: Sequence[str] | None = None,
             reporter: DispatchReporter | None = None,
             environ: Mapping[str, str] | None = None,
             toolchain: ResolvedImages | None = None,
             say: Callable[[str], None] | None = None) -> DispatchReport:
    """Run the selected arms (all when None) in parallel; skip the ones already done.
    `toolchain`: the images of the command that calls it (`run`), else its own. The
    experiment's services are restored first (`services.restore`: an engine restart
    stopped them), each line restored told to `say`."""
    name = loaded.manifest.experiment.name
    directory, _ = state_mod.require_up(loaded)
    with experiment_lock(directory, name, "dispatch"):
        services.restore(engine, loaded, say or _quiet)
        directory, current = state_mod.require_up(loaded)
        # A changed contract: exit 4.
        contract.verify(toolchain or ResolvedImages(engine, loaded), current.change)
        selected = _select(loaded, current, arms)
        previous = {arm.id: _previous(directory, current, arm.id) for arm in selected}
        pending = [arm for arm in selected if not _done(previous[arm.id])]
        secrets = _secrets(loaded, pending, os.environ if environ is None else environ)
        brief = compose_brief(loaded, current.change, current.base_commit)
        written = write_brief(stage_dir(directory, current.change), brief)
        put_brief(engine, name, current.run, current.image_id, written.name,
                           written.read_bytes())
        plans = [_plan(loaded, current, directory, arm, secrets, previous[arm.id])
                 for arm in selected]
        tokens = [box.gateway_token for box in current.arms if box.gateway_token]
        ctx = DispatchContext(engine, loaded, current, brief,
                              Redactor([*secrets.values(), *tokens]),
                              secrets, reporter or QuietReporter(),
                              loaded.manifest.limits.dispatch_timeout_s, directory)
        return _run_all(ctx, plans)


def _quiet(_: str) -> None:
    return None


def _select(loaded: LoadedManifest, current: ExperimentState,
            ids: Sequence[str] | None) -> list[Arm]:
    chosen = list(loaded.manifest.arms) if not ids else [loaded.arm(i) for i in dict.fromkeys(ids)]
    missing = [arm.id for arm in chosen if current.arm(arm.id) is None]
    if missing:
        raise NotUpError(f"arm(s) {', '.join(missing)} of {loaded.path} have no sandbox in "
                         f"run {current.run}", hint="the manifest changed since `up`: run "
                         "`bakeoff-sandbox down`, then `up` again")
    return chosen


def _secrets(loaded: LoadedManifest, arms: list[Arm], environ: Mapping[str, str]
             ) -> dict[str, str]:
    """Every secret the selected arms name, from the environment; all missing ones at once."""
    # A gateway arm's secrets are keys the gateway holds (`up` read them), never passed.
    found, missing = loaded.secret_values([arm for arm in arms if arm.network != "gateway"],
                                          environ)
    if missing:
        raise SecretMissingError(
            "secret(s) not set (or empty) in the environment: " + "; ".join(missing),
            hint="export each variable before `dispatch` (its value is passed to that "
                 "arm's agent only and redacted everywhere), or remove it from `secrets`")
    return found


def _previous(directory: Path, current: ExperimentState, arm: str) -> ArmRecord | None:
    """The arm's record from this same `up` (an earlier `up` made a fresh checkout)."""
    found = load_record(record_dir(directory, current.change, arm) / RECORD_FILE)
    return found if found is not None and found.run == current.run else None


def _done(record: ArmRecord | None) -> bool:
    return record is not None and record.state in DONE_STATES


def _plan(loaded: LoadedManifest, current: ExperimentState, directory: Path, arm: Arm,
          secrets: dict[str, str], previous: ArmRecord | None) -> ArmPlan:
    where = loaded.where(arm)
    adapter = adapter_for(arm, where)
    sandbox = current.arm(arm.id)
    assert sandbox is not None  # _select checked it
    program = (sandbox.agent_cli or {}).get("program")
    command = adapter.render(arm, BRIEF_PATH, where, program)
    env = {"BAKEOFF_CHANGE": current.change, "BAKEOFF_BRIEF": BRIEF_PATH,
           TEST_USER_ENV: arm_test_user(current.experiment, arm.id),
           "BAKEOFF_MODEL": arm.model, "BAKEOFF_EFFORT": arm.effort, **cli_env(arm),
           **{name: secrets[name] for name in arm.secrets if name in secrets}}
    if arm.network == "gateway":
        if sandbox.gateway_token is None:
            raise NotUpError(f"{where}: network = \"gateway\", and run {current.run} has no "
                             "gateway token for it", hint="the manifest changed since `up`: "
                             "run `bakeoff-sandbox down`, then `up` again")
        env |= gateway_env(sandbox.gateway_token)
    folder = record_dir(directory, current.change, arm.id)
    box = arms.arm_box(current, sandbox)
    return ArmPlan(arm, sandbox, box, adapter.name, command, env, folder, previous)


def _run_all(ctx: DispatchContext, plans: list[ArmPlan]) -> DispatchReport:
    started = time.monotonic()
    outcomes: dict[str, ArmOutcome] = {}
    todo = []
    for plan in plans:
        if plan.previous is not None and _done(plan.previous):
            outcomes[plan.arm.id] = ArmOutcome(plan.previous, skipped=True)
            ctx.reporter.state(plan.arm.id, "skipped", f"{plan.previous.state} earlier")
        else:
            todo.append(plan)
    with ThreadPoolExecutor(max_workers=max(1, len(todo))) as pool:
        futures = {pool.submit(run_arm, ctx, plan): plan for plan in todo}
        try:
            for future in as_completed(futures):
                outcomes[futures[future].arm.id] = ArmOutcome(future.result(), skipped=False)
        except BaseException:
            ctx.cancel.set()  # Ctrl-C: every running agent is stopped, its record says so
            raise
    ordered = [outcomes[plan.arm.id] for plan in plans]
    return DispatchReport(ctx.current.change, ctx.brief.sha256, ordered,
                          round(time.monotonic() - started, 3))


def run_arm(ctx: DispatchContext, plan: ArmPlan) -> ArmRecord:
    """One arm, start to record; a broken sandbox or git step is a rig_error, not a result."""
    record = _starting_record(ctx, plan)
    save_record(plan.directory / RECORD_FILE, record, ctx.redactor)
    ctx.reporter.state(plan.arm.id, "preparing")
    try:
        record = _prepare(ctx, plan, record)
        record = _run_agent(ctx, plan, record)
        if record.state != ArmState.INTERRUPTED:
            record = _keep_work(ctx, plan, record)
    except RunnerError as error:  # the engine's errors too (runner.errors.EngineError)
        record = record.model_copy(update={"state": ArmState.RIG_ERROR, "error": str(error),
                                           "finished_at": now_iso()})
    save_record(plan.directory / RECORD_FILE, record, ctx.redactor)
    ctx.reporter.state(plan.arm.id, record.state, _summary(record))
    return record


def _starting_record(ctx: DispatchContext, plan: ArmPlan) -> ArmRecord:
    arm, box, current = plan.arm, plan.sandbox, ctx.current
    return ArmRecord(
        experiment=current.experiment, change=current.change, arm=arm.id,
        attempt=1 if plan.previous is None else plan.previous.attempt + 1,
        state=ArmState.RUNNING, run=current.run, container=box.container_name,
        image_id=box.image_id or current.image_id, network=box.network, egress=box.egress,
        adapter=plan.adapter, command=plan.command,
        env={k: MASK if k in arm.secrets or v == box.gateway_token else v
             for k, v in plan.env.items()},
        secrets=list(arm.secrets), brief_path=BRIEF_PATH, brief_sha256=ctx.brief.sha256,
        brief_file_sha256=ctx.brief.file_sha256,
        dispatch_timeout_s=ctx.timeout_s, base_commit=current.base_commit,
        started_at=now_iso(), model=arm.model, effort=arm.effort,
        effort_normalized=arm.effort_normalized, effort_provenance=arm.effort_provenance,
        effort_evidence=arm.effort_evidence, mode=arm.mode, control=arm.control,
        effort_probe=arm.effort_probe, agent_cli=box.agent_cli, stack=box.stack,
        marks=["unrestricted_network"] if arm.network == "egress" else [])


def _prepare(ctx: DispatchContext, plan: ArmPlan, record: ArmRecord) -> ArmRecord:
    """No process left from an earlier attempt, and the checkout at the base: a redo (an
    earlier attempt of this `up`, or a HEAD moved by `exec`) keeps that work, then makes
    the checkout again from the base."""
    engine, container = ctx.engine, plan.sandbox.container_id
    sandbox.resume_if_paused(engine, container)  # a dispatch killed while keeping work
    process.sweep(engine, container)
    base = ctx.current.base_commit
    redo = plan.previous is not None or checkout.head_in_sandbox(engine, container) != base
    if not redo:
        return record
    kept, caveats = _keep_interrupted(ctx, plan, record.attempt - 1)
    work.reset_to_base(engine, plan.box, ctx.loaded.repo_path, base, _scratch(plan),
                       ctx.repo_lock)
    return record.model_copy(update={"interrupted_work": kept,
                                     "caveats": [*record.caveats, *caveats]})


def _scratch(plan: ArmPlan) -> Path:
    return layout.keep_dir(plan.directory)


def _keeping(ctx: DispatchContext, plan: ArmPlan, branch: str, message: str, *,
             branch_on_base: bool = True) -> work.Keeping:
    return work.Keeping(ctx.loaded.repo_path, plan.box, plan.sandbox.container_id,
                        ctx.current.base_commit, branch, message, list(plan.arm.commit_ignored),
                        _scratch(plan), ctx.repo_lock, branch_on_base,
                        ctx.loaded.manifest.limits.max_files)


def _keep_interrupted(ctx: DispatchContext, plan: ArmPlan,
                      attempt: int) -> tuple[list[str], list[str]]:
    """An unfinished attempt's work is kept on a branch of its own before the redo."""
    message = (f"Interrupted attempt {attempt} of arm {plan.arm.id}, committed by the "
               "orchestrator\n\nThe dispatch was stopped before this attempt finished; "
               "the orchestrator committed what it left, before redoing the arm from the base.")
    branch = interrupted_branch(ctx.current.experiment, ctx.current.change, plan.arm.id,
                                attempt)
    kept = work.keep(ctx.engine, _keeping(ctx, plan, branch, message, branch_on_base=False))
    if kept.work_refused is not None:
        return [], [f"interrupted attempt {attempt}: its work was refused ({kept.work_refused})"]
    return ([branch] if kept.new_work else []), []


def _run_agent(ctx: DispatchContext, plan: ArmPlan, record: ArmRecord) -> ArmRecord:
    arm = plan.arm.id
    sink = process.LogSink(plan.directory / LOG_FILE, ctx.redactor,
                           lambda text: ctx.reporter.line(arm, text))
    ctx.reporter.state(arm, "running")
    try:
        ran = process.run_agent(ctx.engine, plan.sandbox.container_id, plan.command,
                                plan.env, ctx.timeout_s, sink, ctx.cancel)
    finally:
        sink.close()
    if ran.interrupted:
        state = ArmState.INTERRUPTED
    elif ran.timed_out:
        state = ArmState.TIMED_OUT
    else:
        state = ArmState.FINISHED if ran.exit_code == 0 else ArmState.FAILED
    caveats = list(record.caveats)
    if ran.stopped_by_host:
        caveats.append("stopped by the host deadline: `timeout` inside the sandbox did not end "
                       "the agent's output")
    return record.model_copy(update={
        "state": state, "exit_code": ran.exit_code, "duration_s": ran.duration_s,
        "timed_out": ran.timed_out, "finished_at": now_iso(), "last_line": sink.last_line,
        "caveats": caveats})


def _keep_work(ctx: DispatchContext, plan: ArmPlan, record: ArmRecord) -> ArmRecord:
    """Stop leftovers, take the work out checked, probe the log."""
    current = ctx.current
    ctx.reporter.state(plan.arm.id, "committing")
    branch = workspace.arm_branch(current.experiment, current.change, plan.arm.id)
    kept = work.keep(ctx.engine, _keeping(ctx, plan, branch, _stranded_message(plan, record)))
    caveats = [*record.caveats, *kept.caveats]
    if kept.left_running:
        caveats.append(f"{len(kept.left_running)} process(es) still running after the agent "
                       "exited were killed before its work was taken")
    if kept.no_work is not None:
        caveats.append(f"no_work: {kept.no_work}; the arm stands on the base commit")
    leaked = sorted(name for name, value in ctx.secrets.items()
                    if kept.commit != current.base_commit and work.secret_files(
                        ctx.loaded.repo_path, kept.commit, sorted(forms_of(value))))
    if leaked:
        caveats.append(f"secret_in_commit: the arm committed the value of {', '.join(leaked)}")
    log_text = (plan.directory / LOG_FILE).read_text(encoding="utf-8", errors="replace")
    updated = record.model_copy(update={
        "commit": kept.commit, "branch": kept.branch, "commits": kept.commits,
        "orchestrator_commit": kept.orchestrator_commit, "diffstat": kept.diffstat,
        "files_changed": kept.files_changed, "insertions": kept.insertions,
        "deletions": kept.deletions, "caveats": caveats, "work_refused": kept.work_refused})
    if plan.arm.network == "gateway":
        updated = _wire(ctx, plan, updated)
    return apply_effort_probe(updated, log_text)


def _wire(ctx: DispatchContext, plan: ArmPlan, record: ArmRecord) -> ArmRecord:
    """The gateway's records of this arm in this `up` (its token's), read back from its
    volume into the stage, then into the record."""
    stage = stage_dir(ctx.current_dir, ctx.current.change)
    path = layout.gateway_requests(stage, ctx.current.change)
    if ctx.current.gateway is not None:
        try:
            gateway.read_records(ctx.engine, ctx.current.gateway.container_id,
                                 layout.gateway_dir(stage))
        except InfraError as error:
            record = record.model_copy(update={"caveats": [
                *record.caveats, f"gateway_records_unread: {error.message}"]})
    lines = [line for line in wire.read_lines(path, plan.arm.id)
             if line.get("run", ctx.current.run) == ctx.current.run]
    return apply_gateway(record, lines, str(path.relative_to(stage)))


def _stranded_message(plan: ArmPlan, record: ArmRecord) -> str:
    forced = ", ".join(plan.arm.commit_ignored) or "none"
    return (f"Uncommitted work of arm {plan.arm.id}, committed by the orchestrator\n\n"
            f"The agent ({record.state}, exit {record.exit_code}) did not commit these "
            "changes; the orchestrator committed them after it stopped (git add -A; "
            f"force-added when present: {forced}).")


def _summary(record: ArmRecord) -> str:
    if record.state == ArmState.RIG_ERROR:
        return record.error or ""
    commit = (record.commit or "-")[:12]
    return f"exit {record.exit_code}, {record.duration_s or 0:.1f}s, commit {commit}"
