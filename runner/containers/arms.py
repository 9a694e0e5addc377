"""One arm's sandbox: made at `up` (network, volumes, container, checkout), its work kept
at `down`.

Per arm: its own network, a size-limited tmpfs volume for the checkout and one for HOME
(role `arm-checkout`, `arm-home`, labelled like every resource), the hardened container
of `runner.sandbox` holding both; `up` then makes the checkout INSIDE the volume with a
rig container from a bundle of the base (`runner.checkout`). The host never runs git in
it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import docker.errors

from runner.commands.dispatch import work
from runner.commands.dispatch.record import (
    DONE_STATES,
    RECORD_FILE,
    interrupted_branch,
    load_record,
    record_dir,
)
from runner.containers import sandbox
from runner.containers.checkout import ArmBox
from runner.containers.engine import Engine, Labels
from runner.errors import RunnerError
from runner.manifest import Arm, Limits, LoadedManifest
from runner.store.state import ArmSandbox, ExperimentState
from runner.workspace import git as workspace

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ArmSetup:
    """What every arm's sandbox of one `up` shares."""

    experiment: str
    run: str
    image_id: str
    limits: Limits
    read_only: tuple[tuple[Path, str], ...]   # (host path, container path)
    url_env: str | None = None

    def labels(self, role: str, arm: str) -> Labels:
        return Labels(self.experiment, role, arm, self.run)

    def name(self, arm: str) -> str:
        return f"bakeoff-{self.experiment}-{arm}-{self.run}".lower()


@dataclass(frozen=True)
class PreparedArm:
    arm: str
    network: str
    egress: bool
    box: ArmBox


def prepare(engine: Engine, setup: ArmSetup, arm: Arm) -> PreparedArm:
    """The arm's network and its two volumes (checkout, HOME)."""
    egress = arm.network == "egress"
    network = sandbox.network_name(setup.experiment, arm.id, setup.run)
    sandbox.create_network(engine, network, setup.labels("arm-network", arm.id), egress=egress)
    disk = setup.limits.disk_mb
    volume = sandbox.create_volume(engine, f"{setup.name(arm.id)}-work",
                                   setup.labels("arm-checkout", arm.id), size_mb=disk)
    home = sandbox.create_volume(engine, f"{setup.name(arm.id)}-home",
                                 setup.labels("arm-home", arm.id), size_mb=disk)
    box = ArmBox(setup.experiment, arm.id, setup.run, setup.image_id, volume, home, disk,
                 setup.limits.memory_mb)
    return PreparedArm(arm.id, network, egress, box)


def start(engine: Engine, setup: ArmSetup, arm: PreparedArm, db_url: str | None,
          progress: Progress) -> ArmSandbox:
    """The arm's container, holding its volumes (the checkout is made in them later:
    `checkout.make`)."""
    env: dict[str, str] = {"BAKEOFF_EXPERIMENT": setup.experiment, "BAKEOFF_ARM": arm.arm,
                           "HOME": sandbox.HOME}
    if db_url is not None and setup.url_env is not None:
        env[setup.url_env] = db_url
    limits = setup.limits
    spec = sandbox.SandboxSpec(
        name=setup.name(arm.arm), image_id=setup.image_id, labels=setup.labels("arm", arm.arm),
        checkout=arm.box.volume, home=arm.box.home, network=arm.network, env=env,
        limits=sandbox.SandboxLimits(limits.cpus, limits.memory_mb, limits.pids,
                                      limits.disk_mb),
        hostname=arm.arm.lower(), read_only=setup.read_only)
    container_id = sandbox.create(engine, spec)
    progress(f"arm {arm.arm}: sandbox {spec.name} up")
    return ArmSandbox(arm=arm.arm, container_id=container_id, container_name=spec.name,
                      network=arm.network, egress=arm.egress, checkout=arm.box.volume,
                      home=arm.box.home)


def arm_box(current: ExperimentState, arm: ArmSandbox) -> ArmBox:
    """How the rig reaches an arm's checkout, from what `up` recorded."""
    defaults = sandbox.SandboxLimits()
    disk = int(current.limits.get("disk_mb", defaults.disk_mb))
    memory = int(current.limits.get("memory_mb", defaults.memory_mb))
    return ArmBox(current.experiment, arm.arm, current.run, current.image_id, arm.checkout,
                  arm.home, disk, memory)


def keep_all(engine: Engine, loaded: LoadedManifest, directory: Path,
             current: ExperimentState, progress: Progress) -> None:
    """`down`: keep every arm's work not kept yet. An arm whose work cannot be kept is
    reported and never stops the others, nor the removal that follows."""
    lock = threading.Lock()

    def one(arm: ArmSandbox) -> None:
        try:
            _keep_one(engine, loaded, directory, current, arm, progress, lock)
        except (RunnerError, docker.errors.DockerException) as error:
            progress(f"arm {arm.arm}: its work could not be kept ({error}); "
                     "removing its sandbox anyway")

    with ThreadPoolExecutor(max_workers=max(1, len(current.arms))) as pool:
        list(pool.map(one, current.arms))


def _keep_one(engine: Engine, loaded: LoadedManifest, directory: Path,
              current: ExperimentState, arm: ArmSandbox, progress: Progress,
              lock: threading.Lock) -> None:
    folder = record_dir(directory, current.change, arm.arm)
    record = load_record(folder / RECORD_FILE)
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
    how = work.Keeping(loaded.repo_path, arm_box(current, arm), arm.container_id,
                       current.base_commit, branch, message,
                       list(loaded.arm(arm.arm).commit_ignored), folder / "keep", lock,
                       branch_on_base=False)
    kept = work.keep(engine, how)
    if kept.work_refused is not None:
        progress(f"arm {arm.arm}: its work was refused ({kept.work_refused})")
    elif kept.no_work is not None:
        progress(f"arm {arm.arm}: no work to keep ({kept.no_work})")
    elif kept.new_work:
        progress(f"arm {arm.arm}: kept its work as {branch}")
