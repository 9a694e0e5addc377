"""Each arm's own stack during dispatch (`[toolchain] stack`): made at `up`, gone at `down`.

One compose project per arm (`bakeoff-<experiment>-<arm>-<run>-stack`), rendered from
the file the contract froze with the rig's policy (`runner.containers.stacks.file`): our
labels with the arm's id (role `arm-stack`), the image by ID, no pull, the limits of
`[limits]`, and the arm's own network as each service's only one, so the arm's sandbox
reaches them by name and no other arm's can. The services `x-bakeoff.tree` names run the
arm's LIVE checkout: its volume (the one the sandbox holds) mounted read-only at the
tree path, the code run as the sandbox user; the agent's edits show there at once, and
the service cannot write them. They restart on failure: the agent has no engine to
restart a service its code crashed, and it comes back (docker's backoff) once fixed.

`up` awaits every arm's stack healthy (bounded); one that never gets healthy is the
base's code or the rig's file, never an arm's doing: `ArmStackError` (exit 3) naming the
services, its log kept at the arm's directory, and `up` removes what it made. `down`
keeps each stack's log there too, then `compose down -v`; the label sweep follows, and
`gc` brings a killed run's projects down by compose's own project label first.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from rig.contract import ContractStack
from rig.persist import write_text_atomic
from rig.sample.record import StackRecord
from rig.sample.spec import StackSpec
from runner.containers import stacks as stack
from runner.containers.backend import (
    LABEL_EXPERIMENT,
    LABEL_ROLE,
    LABEL_RUN,
    ContainerEngine,
    Labels,
)
from runner.containers.sandbox import SandboxLimits
from runner.containers.stacks import file as stack_file
from runner.errors import ArmStackError, ComposeError, RunnerError
from runner.manifest import LoadedManifest
from runner.store import layout
from runner.store.state import ArmSandbox, ExperimentState

ROLE = "arm-stack"
RESERVED = stack.ARM_RESERVED  # the names the rig puts on an arm's network
RESTART = "on-failure"
PROJECT_LABEL = "com.docker.compose.project"  # compose's own labels on what it makes
SERVICE_LABEL = "com.docker.compose.service"
Progress = Callable[[str], None]


@dataclass(frozen=True)
class ArmStacks:
    """What every arm's stack of one `up` shares: the frozen file, where the arms' logs
    go (arm -> its directory), the per-container limits."""

    experiment: str
    run: str
    stack: StackSpec
    limits: SandboxLimits
    folders: Mapping[str, Path]


def start_for(engine: ContainerEngine, loaded: LoadedManifest, made: ExperimentState,
              frozen: ContractStack | None, directory: Path,
              progress: Progress) -> ExperimentState:
    """`up`, once the checkouts are made: every arm's stack as the contract froze its
    file (`frozen`: `toolchain.stack`), recorded in the state; no stack, `made` as is."""
    path = loaded.toolchain_stack_path
    if path is None or frozen is None:
        return made
    limits = made.limits
    stacks = ArmStacks(
        made.experiment, made.run, StackSpec(str(path), frozen.sha256, frozen.timeout_s),
        SandboxLimits(float(limits["cpus"]), int(limits["memory_mb"]), int(limits["pids"]),
                      int(limits["disk_mb"])),
        {arm.arm: layout.arm_dir(directory, made.change, arm.arm) for arm in made.arms})
    return made.model_copy(update={"arms": start_all(engine, stacks, made.arms, progress)})


def project_name(experiment: str, arm: str, run: str) -> str:
    """The arm's project: one per arm and run, findable by its name too."""
    return stack.valid_project(f"bakeoff-{experiment}-{arm}-{run}-stack")


def start_all(engine: ContainerEngine, stacks: ArmStacks, arms: list[ArmSandbox],
              progress: Progress) -> list[ArmSandbox]:
    """Every arm's stack up and healthy (all at once), recorded in its sandbox's state;
    when one fails, the others are brought down before its error is raised."""
    with ThreadPoolExecutor(max_workers=max(1, len(arms))) as pool:
        futures = {arm.arm: pool.submit(start, engine, stacks, arm) for arm in arms}
    made = [arm.model_copy(update={"stack": futures[arm.arm].result()}) for arm in arms
            if futures[arm.arm].exception() is None]
    failed = [error for future in futures.values()
              if (error := future.exception()) is not None]
    if failed:
        for arm in made:
            with contextlib.suppress(RunnerError):
                stop(arm, stacks.folders[arm.arm])
        raise failed[0]
    for arm in made:
        progress(f"arm {arm.arm}: its stack is healthy on its network "
                 f"({', '.join(sorted(futures[arm.arm].result().services))})")
    return made


def start(engine: ContainerEngine, stacks: ArmStacks, arm: ArmSandbox) -> StackRecord:
    """One arm's project up, its health awaited; never healthy: `ArmStackError`, the
    project down and its log kept first."""
    run = _render(engine, stacks, arm)
    try:
        health, stderr = stack.bring_up(run)
        bad = [] if health == "healthy" else unhealthy(engine, stacks.experiment, run.project)
    except BaseException:
        with contextlib.suppress(ComposeError):
            stack.stop(run)
        raise
    if health != "healthy":
        log = layout.arm_stack_log(stacks.folders[arm.arm])
        try:
            stack.stop(run)
        finally:
            _keep_log(log, run.log)
        raise ArmStackError(arm.arm, stacks.stack.file, bad, stack.tail(stderr), log)
    shutil.rmtree(run.workdir, ignore_errors=True)  # `down` finds the project by its name
    run.healthy = True
    return run.as_record()


def _render(engine: ContainerEngine, stacks: ArmStacks, arm: ArmSandbox) -> stack.StackRun:
    """The frozen file's model, refused or rendered with the arm's policy into a scratch
    directory of its own."""
    limits = stacks.limits
    policy = stack_file.Policy(
        labels=Labels(stacks.experiment, ROLE, arm.arm, stacks.run).as_dict(),
        network=arm.network, cpus=limits.cpus, memory_mb=limits.memory_mb,
        pids=limits.pids, disk_mb=limits.disk_mb, checkout=arm.checkout, restart=RESTART)
    return stack.render_run(engine, stacks.stack,
                            Path(tempfile.mkdtemp(prefix="bakeoff-arm-stack-")),
                            project_name(stacks.experiment, arm.arm, stacks.run), policy,
                            lambda model: stack_file.arm_refusals(model, RESERVED))


def unhealthy(engine: ContainerEngine, experiment: str, project: str) -> list[str]:
    """Each service of the project that is not running healthy, with its state, as the
    engine has it (`service 'redis': unhealthy`, `service 'app': exited (1)`)."""
    found = []
    for container in engine.containers({LABEL_EXPERIMENT: experiment, PROJECT_LABEL: project}):
        health, status = container.health, container.status or "missing"
        if status == "running" and health in (None, "healthy"):
            continue
        said = (f"exited ({container.exit_code})" if status == "exited"
                else health if status == "running" else status)
        found.append(f"service {container.labels.get(SERVICE_LABEL, container.name)!r}: "
                     f"{said}")
    return sorted(found)


def stop(arm: ArmSandbox, folder: Path) -> None:
    """The arm's stack down (`down -v`), its services' log kept at `folder` first; by
    its project name (another process made it)."""
    if arm.stack is None:
        return
    recorded = arm.stack
    run = stack.StackRun(recorded.file, recorded.sha256, recorded.project,
                         Path(tempfile.mkdtemp(prefix="bakeoff-arm-stack-")),
                         dict(recorded.services), recorded.timeout_s)
    try:
        stack.stop(run)
    finally:
        _keep_log(layout.arm_stack_log(folder), run.log)


def stop_all(arms: list[ArmSandbox], folders: Mapping[str, Path],
             progress: Progress) -> None:
    """`down`: every arm's stack down, its log kept; one that will not come down is
    reported (the label sweep that follows removes it)."""
    for arm in arms:
        if arm.stack is None:
            continue
        try:
            stop(arm, folders[arm.arm])
            progress(f"arm {arm.arm}: its stack {arm.stack.project} is down, its log kept")
        except RunnerError as error:
            progress(f"arm {arm.arm}: its stack did not come down ({error.message}); "
                     "removing it by label")


def stop_orphans(engine: ContainerEngine, experiment: str, keep_run: str | None) -> list[str]:
    """`gc`: the arm stacks of every other run than `keep_run` down, by compose's own
    project label (the label sweep that follows removes whatever is left)."""
    projects = sorted({str(c.labels[PROJECT_LABEL]) for c in engine.containers(
        {LABEL_EXPERIMENT: experiment, LABEL_ROLE: ROLE})
        if PROJECT_LABEL in c.labels and c.labels.get(LABEL_RUN) != keep_run})
    for project in projects:
        workdir = Path(tempfile.mkdtemp(prefix="bakeoff-arm-stack-"))
        with contextlib.suppress(ComposeError):
            stack.down(stack.StackRun("", "", project, workdir, {}, 0))
    return projects


def _keep_log(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, text)
