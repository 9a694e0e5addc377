"""One arm's sandbox: made at `up` (network, volumes, container, checkout), its work kept
at `down`.

Per arm: its own network, a size-limited tmpfs volume for the checkout and one for HOME
(role `arm-checkout`, `arm-home`, labelled like every resource), the hardened container
of `runner.containers.sandbox` holding both; `up` then makes the checkout INSIDE the
volume with a rig container from a bundle of the base (`runner.containers.checkout`).
The host never runs git in it.
"""

from __future__ import annotations

import io
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from runner.containers import sandbox
from runner.containers.backend import ContainerEngine, Labels
from runner.containers.checkout import ArmBox
from runner.containers.images import BuiltImage, agent_cli, reporters
from runner.containers.images.agent_cli import InstalledCli
from runner.manifest import Arm, Limits
from runner.store.state import ArmSandbox, ExperimentState

Progress = Callable[[str], None]


@dataclass(frozen=True)
class AgentImage:
    """An arm's agent layer and the CLI it holds."""

    image: BuiltImage
    cli: InstalledCli


def agent_images(engine: ContainerEngine, base: BuiltImage, arms: list[Arm],
                 labels: Labels) -> dict[str, AgentImage]:
    """The agent layer of every arm that installs a CLI, one per (CLI, version)."""
    made: dict[tuple[str, str], AgentImage] = {}
    found: dict[str, AgentImage] = {}
    for arm in arms:
        if arm.installs is None or arm.agent_version is None:
            continue
        key = (arm.installs, arm.agent_version)
        if key not in made:
            image = agent_cli.layer(engine, base, agent_cli.cli_for(arm.installs),
                                    arm.agent_version, reporters.current_reporter())
            made[key] = AgentImage(image, agent_cli.installed(engine, image, labels))
        found[arm.id] = made[key]
    return found


@dataclass(frozen=True)
class ArmSetup:
    """What every arm's sandbox of one `up` shares."""

    experiment: str
    run: str
    image_id: str
    limits: Limits
    read_only: tuple[tuple[str, str], ...]   # (one of our volumes, container path)
    url_env: str | None = None
    agents: dict[str, AgentImage] = field(default_factory=dict)  # arm -> its agent layer

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


SHARED_ROLE = "arm-inputs"  # the role label of what every arm's sandbox reads


def shared_volume(experiment: str, run: str, what: str) -> str:
    """The name of a volume every arm's sandbox of one `up` mounts read-only (`agents`:
    the scripted contestants; `brief`: the stage's brief)."""
    return f"bakeoff-{experiment}-{run}-{what}".lower()


def shared_inputs(engine: ContainerEngine, experiment: str, run: str, image_id: str,
                  agents: Path | None) -> tuple[str, str]:
    """The volumes of `up` that every arm's sandbox reads (no host path in a sandbox): the
    agents directory's files (filled now, through the engine) and the brief's (filled at
    dispatch, `put_brief`); (agents, brief), agents "" when there is none."""
    labels = Labels(experiment, SHARED_ROLE, "", run)
    brief = engine.create_volume(shared_volume(experiment, run, "brief"), labels,
                          size_mb=None, owner=0)
    if agents is None:
        return "", brief
    made = engine.create_volume(shared_volume(experiment, run, "agents"), labels,
                         size_mb=None, owner=0)
    with tempfile.TemporaryFile() as archive:
        with tarfile.open(fileobj=archive, mode="w") as tar:
            for path in sorted(agents.rglob("*")):
                if path.is_symlink() or not (path.is_file() or path.is_dir()):
                    continue
                info = tar.gettarinfo(str(path), arcname=path.relative_to(agents).as_posix())
                info.uid = info.gid = 0
                info.mode = 0o755 if path.is_dir() or path.stat().st_mode & 0o111 else 0o644
                if path.is_dir():
                    tar.addfile(info)
                else:
                    with path.open("rb") as handle:
                        tar.addfile(info, handle)
        archive.seek(0)
        sandbox.fill(engine, made, image_id, labels, archive)
    return made, brief


def put_brief(engine: ContainerEngine, experiment: str, run: str, image_id: str, name: str,
              text: bytes) -> None:
    """The stage's brief into the volume every sandbox mounts read-only: they see the new
    file at once."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(text), 0o444
        tar.addfile(info, io.BytesIO(text))
    sandbox.fill(engine, shared_volume(experiment, run, "brief"), image_id,
                 Labels(experiment, SHARED_ROLE, "", run), out.getvalue())


def prepare(engine: ContainerEngine, setup: ArmSetup, arm: Arm) -> PreparedArm:
    """The arm's network and its two volumes (checkout, HOME)."""
    egress = arm.network == "egress"  # a gateway arm's network is internal too
    network = sandbox.network_name(setup.experiment, arm.id, setup.run)
    engine.create_network(network, setup.labels("arm-network", arm.id), egress=egress)
    disk, owner = setup.limits.disk_mb, sandbox.SANDBOX_UID
    volume = engine.create_volume(f"{setup.name(arm.id)}-work",
                           setup.labels("arm-checkout", arm.id), size_mb=disk, owner=owner)
    home = engine.create_volume(f"{setup.name(arm.id)}-home",
                         setup.labels("arm-home", arm.id), size_mb=disk, owner=owner)
    box = ArmBox(setup.experiment, arm.id, setup.run, setup.image_id, volume, home, disk,
                 setup.limits.memory_mb)
    return PreparedArm(arm.id, network, egress, box)


def start(engine: ContainerEngine, setup: ArmSetup, arm: PreparedArm, db_url: str | None,
          progress: Progress, token: str | None = None) -> ArmSandbox:
    """The arm's container, holding its volumes (the checkout is made in them later:
    `checkout.make`). Its database URL (its role's password) is a secret variable: on a
    cluster a Secret's, never in the Pod's spec; on docker its environment."""
    env: dict[str, str] = {"BAKEOFF_EXPERIMENT": setup.experiment, "BAKEOFF_ARM": arm.arm,
                           "HOME": sandbox.HOME}
    secret_env = ({setup.url_env: db_url} if db_url is not None and setup.url_env is not None
                  else {})
    limits = setup.limits
    agent = setup.agents.get(arm.arm)
    spec = sandbox.SandboxSpec(
        name=setup.name(arm.arm), labels=setup.labels("arm", arm.arm),
        image_id=agent.image.image_id if agent else setup.image_id,
        checkout=arm.box.volume, home=arm.box.home, network=arm.network, env=env,
        secret_env=secret_env,
        limits=sandbox.SandboxLimits(limits.cpus, limits.memory_mb, limits.pids,
                                      limits.disk_mb),
        hostname=arm.arm.lower(), read_only=setup.read_only)
    container_id = sandbox.create(engine, spec)
    progress(f"arm {arm.arm}: sandbox {spec.name} up")
    return ArmSandbox(arm=arm.arm, container_id=container_id, container_name=spec.name,
                      network=arm.network, egress=arm.egress, checkout=arm.box.volume,
                      home=arm.box.home, image_id=agent.image.image_id if agent else None,
                      agent_cli=agent.cli.as_record() if agent else None,
                      gateway_token=token)


def arm_box(current: ExperimentState, arm: ArmSandbox) -> ArmBox:
    """How the rig reaches an arm's checkout, from what `up` recorded."""
    defaults = sandbox.SandboxLimits()
    disk = int(current.limits.get("disk_mb", defaults.disk_mb))
    memory = int(current.limits.get("memory_mb", defaults.memory_mb))
    return ArmBox(current.experiment, arm.arm, current.run, current.image_id, arm.checkout,
                  arm.home, disk, memory)
