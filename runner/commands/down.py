"""`down`, `gc`, `status`, `exec`: an experiment's sandboxes after `up`.

`down` keeps the arms' work not kept yet (taken out as checked bundles), drops every
database and role of the experiment, then removes everything that carries the
experiment's label, whatever state an arm left its checkout in. `gc` removes the
leftovers of a run that never finished (labelled with another run id than the live
`up`'s), and the databases a killed `score` left. Nothing without our labels is ever
touched.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rig.sample.record import SampleRecord
from rig.sample.verdict import Verdict
from runner import workspace
from runner.commands.dispatch import work
from runner.commands.dispatch.record import (
    DONE_STATES,
    ArmRecord,
    interrupted_branch,
    load_record,
)
from runner.containers import arms as arms_mod
from runner.containers import database, gateway, sandbox
from runner.containers.backend import LABEL_EXPERIMENT, LABEL_RUN, ContainerEngine
from runner.containers.stacks import arm as arm_stack
from runner.errors import (
    DatabaseError,
    EngineError,
    InfraError,
    RunnerError,
    UnknownArmError,
)
from runner.manifest import LoadedManifest
from runner.store import layout
from runner.store import state as state_mod
from runner.store.files import experiment_lock
from runner.store.layout import experiment_dir, stage_dir
from runner.store.state import ArmSandbox, ExperimentState, current_change, require_up

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


@dataclass(frozen=True)
class DownReport:
    removed: dict[str, int]
    dropped: list[str]  # databases, each with its owner role of the same name
    databases_left: list[str]
    roles_left: list[str]


def down(engine: ContainerEngine, loaded: LoadedManifest,
         progress: Progress = _quiet) -> DownReport:
    """Keep the arms' work not kept yet, drop databases and roles, remove by label.

    Whatever state an arm left its checkout in, everything of the experiment is removed:
    an arm whose work cannot be kept is reported, never a reason to stop."""
    repo = loaded.repo_path
    name = loaded.manifest.experiment.name
    directory = experiment_dir(repo, name)
    dropped: list[str] = []
    left: tuple[list[str], list[str]] = ([], [])
    with experiment_lock(directory, name, "down"):
        current = state_mod.load(directory)
        try:
            if current is not None and current.phase == "up":
                keep_all(engine, loaded, directory, current, progress)
                dropped, left = _drop_databases(engine, current, progress)
        finally:
            if current is not None:  # the gateway's records; the arms' own stacks' logs
                _keep_gateway_records(engine, directory, current, progress)
                arm_stack.stop_all(current.arms, {arm.arm: layout.arm_dir(
                    directory, current.change, arm.arm) for arm in current.arms}, progress)
            arm_stack.stop_orphans(engine, name, keep_run=None)
            removed = engine.remove_labelled({LABEL_EXPERIMENT: name})
            state_mod.clear(directory)
    progress(f"removed {removed['container']} containers, {removed['network']} networks, "
             f"dropped {len(dropped)} databases and their roles")
    return DownReport(removed, dropped, *left)


def _keep_gateway_records(engine: ContainerEngine, directory: Path, current: ExperimentState,
                          progress: Progress) -> None:
    """The gateway's last records, read back from its volume before it is removed."""
    if current.gateway is None:
        return
    try:
        gateway.read_records(engine, current.gateway.container_id,
                             layout.gateway_dir(stage_dir(directory, current.change)))
    except InfraError as error:
        progress(f"could not read the model gateway's records back ({error.message}); "
                 "removing it anyway")


def _drop_databases(engine: ContainerEngine, current: ExperimentState,
                    progress: Progress) -> tuple[list[str], tuple[list[str], list[str]]]:
    """Drop every arm's database and role, then any other of the experiment's (a sample's,
    orphaned by a killed `score`); then list what is left under our prefix."""
    if current.db is None:
        return [], ([], [])
    prefix = database.role_name(current.experiment, "")
    dropped: list[str] = []
    try:
        server = database.find_server(engine, current.db.container_id,
                                      current.db.admin_password)
        with database.HeldAdmin(engine, server) as admin:  # one psql for every drop
            for arm in current.arms:
                if arm.schema_name:
                    database.drop_schema(admin, arm.schema_name)
                    dropped.append(arm.schema_name)
            databases, roles = database.list_owned(admin, prefix)
            for orphan in sorted(set(databases) | set(roles)):
                database.drop_schema(admin, orphan)
                dropped.append(orphan)
            left = database.list_owned(admin, prefix)
    except DatabaseError as error:
        progress(f"could not drop databases ({error.message}); removing the server anyway")
        return dropped, ([], [])
    return dropped, left


def gc(engine: ContainerEngine, loaded: LoadedManifest | None) -> dict[str, int]:
    """Remove orphans: labelled resources of a run that never finished `up`.

    Without a manifest (`--all`), every resource carrying our experiment label goes.
    """
    if loaded is None:
        return engine.remove_labelled({LABEL_EXPERIMENT: ""})
    name = loaded.manifest.experiment.name
    directory = experiment_dir(loaded.repo_path, name)
    with experiment_lock(directory, name, "gc"):
        current = state_mod.load(directory)
        keep = current.run if current is not None and current.phase == "up" else None
        if current is not None and keep is not None:
            _drop_orphan_databases(engine, current)
        return remove_orphans(engine, directory, name, keep_run=keep)


def _drop_orphan_databases(engine: ContainerEngine, current: ExperimentState) -> list[str]:
    """The databases and roles in the live Postgres that no arm owns: a killed `score`'s
    samples left them (an arm's stays)."""
    if current.db is None:
        return []
    mine = {arm.schema_name for arm in current.arms if arm.schema_name}
    try:
        server = database.find_server(engine, current.db.container_id,
                                      current.db.admin_password)
        with database.HeldAdmin(engine, server) as admin:
            databases, roles = database.list_owned(
                admin, database.role_name(current.experiment, ""))
            orphans = sorted((set(databases) | set(roles)) - mine)
            for orphan in orphans:
                database.drop_schema(admin, orphan)
    except DatabaseError:
        return []  # the server itself is gone or broken: `down` removes it
    return orphans


def remove_orphans(engine: ContainerEngine, directory: Path, name: str,
                    keep_run: str | None) -> dict[str, int]:
    arm_stack.stop_orphans(engine, name, keep_run)  # compose down, then the label sweep
    removed = engine.remove_labelled(
        {LABEL_EXPERIMENT: name},
        keep=lambda labels: keep_run is not None and labels.get(LABEL_RUN) == keep_run)
    if keep_run is None:
        state_mod.clear(directory)
    return removed


NOT_DISPATCHED = "not dispatched"


def status_rows(engine: ContainerEngine, loaded: LoadedManifest) -> list[dict[str, Any]]:
    """One row per arm: sandbox state, dispatch state, image, commit, schema (and
    verdicts, once scored). `dispatch` is the state of the arm record of the run that is
    up (running, finished, failed, timed_out, interrupted, rig_error, or "not dispatched");
    None when no run is up."""
    directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    current = state_mod.load(directory)
    change = current_change(loaded)
    rows = []
    for arm in loaded.manifest.arms:
        live = current.arm(arm.id) if current is not None and current.phase == "up" else None
        row: dict[str, Any] = {"arm": arm.id, "model": arm.model, "control": arm.control,
                               "state": "down", "dispatch": None, "image": None,
                               "commit": None, "schema": None, "change": change,
                               "verdicts": verdicts(directory, change, arm.id)}
        if live is not None and current is not None:
            try:
                described = sandbox.describe(engine, live.container_id)
            except EngineError:
                described = {"state": "unknown"}
            record = current_record(directory, current, arm.id)
            row.update(state=described["state"],
                       dispatch=NOT_DISPATCHED if record is None else str(record.state),
                       image=current.image_id,
                       commit=record.commit if record and record.commit else current.base_commit,
                       schema=live.schema_name, container=live.container_name)
        if current is not None and current.engine:
            row["engine"] = current.engine
        rows.append(row)
    return rows


def current_record(directory: Path, current: ExperimentState, arm: str) -> ArmRecord | None:
    """The arm's dispatch record of the run that is up, or None (never dispatched in it:
    a record of an earlier `up` is not this run's). The commit is read from it, never from
    the checkout."""
    record = load_record(layout.arm_record(directory, current.change, arm))
    return record if record is not None and record.run == current.run else None


def verdicts(directory: Path, change: str, arm: str) -> dict[str, str]:
    """`passed/samples` per scored check of an arm (from the stored sample records)."""
    shown: dict[str, str] = {}
    stage = stage_dir(directory, change)
    for check in layout.sample_checks(stage, arm):
        records = [SampleRecord.model_validate_json(p.read_text(encoding="utf-8"))
                   for p in layout.sample_records(stage, arm, check)]
        if records:
            passed = sum(r.verdict is Verdict.PASS for r in records)
            errors = sum(r.verdict is Verdict.RIG_ERROR for r in records)
            shown[check] = f"{passed}/{len(records)}" + (f" ({errors} rig)" if errors
                                                         else "")
    return shown


def exec_arm(engine: ContainerEngine, loaded: LoadedManifest, arm_id: str,
             command: list[str]) -> sandbox.ExecResult:
    _, current = require_up(loaded)
    arm = current.arm(arm_id)
    if arm is None:
        raise UnknownArmError(f"no arm {arm_id!r} in experiment {current.experiment!r}",
                              hint=f"arms: {', '.join(a.arm for a in current.arms)}")
    return sandbox.exec_in(engine, arm.container_id, command,
                           timeout_s=loaded.manifest.limits.check_timeout_s)


def keep_all(engine: ContainerEngine, loaded: LoadedManifest, directory: Path,
             current: ExperimentState, progress: Progress) -> None:
    """`down`: keep every arm's work not kept yet. An arm whose work cannot be kept is
    reported and never stops the others, nor the removal that follows."""
    lock = threading.Lock()

    def one(arm: ArmSandbox) -> None:
        try:
            _keep_one(engine, loaded, directory, current, arm, progress, lock)
        except RunnerError as error:
            progress(f"arm {arm.arm}: its work could not be kept ({error}); "
                     "removing its sandbox anyway")

    with ThreadPoolExecutor(max_workers=max(1, len(current.arms))) as pool:
        list(pool.map(one, current.arms))


def _keep_one(engine: ContainerEngine, loaded: LoadedManifest, directory: Path,
              current: ExperimentState, arm: ArmSandbox, progress: Progress,
              lock: threading.Lock) -> None:
    folder = layout.arm_dir(directory, current.change, arm.arm)
    record = load_record(layout.arm_record(directory, current.change, arm.arm))
    if record is not None and record.run != current.run:
        record = None
    if record is not None and record.state in DONE_STATES:
        return  # dispatch kept it
    state = sandbox.describe(engine, arm.container_id)["state"]
    if state != "missing":
        state = sandbox.resume_if_paused(engine, arm.container_id)
    if state != "running":
        progress(f"arm {arm.arm}: its sandbox is {state}; no work to keep")
        return
    if record is None:
        branch = workspace.arm_branch(current.experiment, current.change, arm.arm)
    else:
        branch = interrupted_branch(current.experiment, current.change, arm.arm,
                                    record.attempt)
    message = (f"Uncommitted work of arm {arm.arm}, committed by the orchestrator at "
               "`down`\n\nThe experiment was taken down before this arm's work was kept.")
    how = work.Keeping(loaded.repo_path, arms_mod.arm_box(current, arm), arm.container_id,
                       current.base_commit, branch, message,
                       list(loaded.arm(arm.arm).commit_ignored), layout.keep_dir(folder), lock,
                       branch_on_base=False)
    kept = work.keep(engine, how)
    if kept.work_refused is not None:
        progress(f"arm {arm.arm}: its work was refused ({kept.work_refused})")
    elif kept.no_work is not None:
        progress(f"arm {arm.arm}: no work to keep ({kept.no_work})")
    elif kept.new_work:
        progress(f"arm {arm.arm}: kept its work as {branch}")
