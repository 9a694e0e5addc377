"""One arm's sandbox: made at `up` (network, volumes, container, checkout), its work kept
at `down`.

Per arm: its own network, a size-limited tmpfs volume for the checkout and one for HOME
(role `arm-checkout`, `arm-home`, labelled like every resource), the hardened container
of `runner.containers.sandbox` holding both; `up` then makes the checkout INSIDE the
volume with a rig container from a bundle of the base (`runner.containers.checkout`).
The host never runs git in it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runner.containers import sandbox
from runner.containers.checkout import ArmBox
from runner.containers.engine import Engine, Labels, create_network, create_volume
from runner.manifest import Arm, Limits
from runner.store.state import ArmSandbox, ExperimentState

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
    create_network(engine, network, setup.labels("arm-network", arm.id), egress=egress)
    disk, owner = setup.limits.disk_mb, sandbox.SANDBOX_UID
    volume = create_volume(engine, f"{setup.name(arm.id)}-work",
                           setup.labels("arm-checkout", arm.id), size_mb=disk, owner=owner)
    home = create_volume(engine, f"{setup.name(arm.id)}-home",
                         setup.labels("arm-home", arm.id), size_mb=disk, owner=owner)
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
