"""What `up` made, recorded so `status`, `exec`, `down` and `gc` can find it again."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from rig import contract as contract_mod
from rig.sample.record import StackRecord
from runner.errors import NotUpError
from runner.manifest import LoadedManifest
from runner.store import layout, records
from runner.store.files import read_model, write_model


class DbState(BaseModel):
    """The experiment's Postgres, found again by its container id (`database.find_server`):
    it publishes no port. A state file written before (with `host_port`) still reads; the
    field is ignored."""

    model_config = ConfigDict(frozen=True)
    container_id: str
    admin_password: str
    network: str
    url_env: str


class GatewayState(BaseModel):
    """The model gateway of this `up` (`runner.containers.gateway`)."""

    model_config = ConfigDict(frozen=True)
    container_id: str
    container_name: str
    network: str                  # its way to the upstreams (ours, or upstream_network)
    state_dir: str                # the stage's gateway/: config.json, its records read back


class ArmSandbox(BaseModel):
    model_config = ConfigDict(frozen=True)
    arm: str
    container_id: str
    container_name: str
    network: str
    egress: bool
    checkout: str                 # the arm's checkout volume (mounted at /work)
    home: str | None = None       # the arm's HOME volume (mounted at /home/agent)
    # The arm's Postgres database and its owner role: one name (a field name of the
    # schema era, kept so a state file written before issue 11 still reads).
    schema_name: str | None = None
    schema_password: str | None = None
    image_id: str | None = None   # the arm's own image (an agent layer), when not the stage's
    agent_cli: dict[str, str] | None = None   # the installed CLI's identity (`InstalledCli`)
    gateway_token: str | None = None          # a gateway arm's token: never its real key
    stack: StackRecord | None = None          # its own stack during dispatch (`arm_stack`)


class ExperimentState(BaseModel):
    """One experiment's live sandboxes. `run` labels every resource `up` created."""

    model_config = ConfigDict(frozen=True)
    experiment: str
    run: str
    change: str
    phase: Literal["starting", "up"]
    base_commit: str
    image: str
    image_id: str
    image_identity: str
    limits: dict[str, float | int]
    arms: list[ArmSandbox] = []
    db: DbState | None = None
    gateway: GatewayState | None = None
    engine: dict[str, str] = {}  # the engine it runs on: host, id, name

    def arm(self, arm_id: str) -> ArmSandbox | None:
        return next((a for a in self.arms if a.arm == arm_id), None)


def load(directory: Path) -> ExperimentState | None:
    return read_model(layout.state_file(directory), ExperimentState)


def save(directory: Path, state: ExperimentState) -> None:
    write_model(layout.state_file(directory), state)


def clear(directory: Path) -> None:
    (layout.state_file(directory)).unlink(missing_ok=True)


def current_change(loaded: LoadedManifest) -> str:
    """The change in progress: the one that is up; else the first frozen change not yet
    merged; else the last frozen one; else the first change."""
    directory = layout.experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    current = load(directory)
    if current is not None and current.phase == "up":
        return current.change
    frozen = [c.id for c in loaded.manifest.changes
              if contract_mod.load_lock(layout.stage_dir(directory, c.id)) is not None]
    open_ = [c for c in frozen if not records.merged(layout.stage_dir(directory, c))]
    return (open_ or frozen[-1:] or [loaded.manifest.changes[0].id])[0]


def require_up(loaded: LoadedManifest) -> tuple[Path, ExperimentState]:
    directory = layout.experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    current = load(directory)
    if current is None or current.phase != "up":
        raise NotUpError(f"experiment {loaded.manifest.experiment.name!r} is not up",
                         hint=f"run `bakeoff-sandbox up -f {loaded.path}` first")
    return directory, current
