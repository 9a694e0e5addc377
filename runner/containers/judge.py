"""An agent judge's containers: the pinned CLI behind a model gateway of its own.

`session` starts, for one `score`, a network with no egress and no host address, and a
gateway on it (alias `model-gateway`) holding the judge's real key, with one token per
judged arm (role `judge`: its records say whose work was judged, apart from the arms'
own). `run` runs the CLI once in a fresh, read-only container on that network: the
prompt read-only at /judge, HOME and /tmp as size-limited tmpfs, the sandbox user, no
capabilities. Everything carries the session's labels and is removed when the session
ends (or by `down`/`gc`, after a crash).
"""

from __future__ import annotations

import contextlib
import io
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from runner.containers import gateway as gateway_mod
from runner.containers import sandbox
from runner.containers.backend import (
    LABEL_EXPERIMENT,
    LABEL_RUN,
    ContainerEngine,
    ContainerSpec,
    Labels,
    Resources,
    Tmpfs,
)
from runner.manifest import Gateway

RESOURCES = Resources(cpus=1.0, memory_mb=2048, pids=256)
SCRATCH_MB = 512


@dataclass(frozen=True)
class JudgeGateway:
    """What `session` hands back: the network the judges run on, a token per judged arm,
    the session's run id (its labels), the gateway's container and the directory its
    records are read back into (`read_records`)."""

    network: str
    tokens: dict[str, str]
    run: str
    state_dir: Path
    gateway: str

    def read_records(self, engine: ContainerEngine) -> None:
        gateway_mod.read_records(engine, self.gateway, self.state_dir)


@dataclass(frozen=True)
class SessionSpec:
    experiment: str
    stage: str
    section: Gateway
    gateway_base_id: str      # the python toolchain the gateway's image is built on
    state_dir: Path
    model: str
    provider: str
    key_name: str
    key_value: str


@contextlib.contextmanager
def session(engine: ContainerEngine, spec: SessionSpec, arms: list[str]) -> Iterator[JudgeGateway]:
    """A gateway for the judges of `arms`, removed (with its networks and its volume) at
    the end, its records read back first."""
    run = secrets.token_hex(3)
    network = sandbox.network_name(spec.experiment, "judge", run)
    try:
        engine.create_network(network, Labels(spec.experiment, "judge-network", "", run),
                       egress=False)
        doors = [gateway_mod.Door(arm, network, gateway_mod.new_token(), (spec.model,),
                                  {spec.provider: spec.key_name}, role="judge")
                 for arm in arms]
        name = f"bakeoff-{spec.experiment}-judge-gateway-{run}"
        plan = gateway_mod.plan_launch(spec.section, name, spec.gateway_base_id,
                                       Labels(spec.experiment, "judge-gateway", "", run),
                                       spec.state_dir, spec.stage, doors,
                                       {spec.key_name: spec.key_value})
        gateway = gateway_mod.launch(engine, plan, Labels(spec.experiment,
                                                          "judge-gateway-network", "", run))
        judges = JudgeGateway(network, {door.arm: door.token for door in doors}, run,
                              spec.state_dir, gateway)
        yield judges
        judges.read_records(engine)  # the last of them (each judge's were read already)
    finally:
        engine.remove_labelled({LABEL_EXPERIMENT: spec.experiment, LABEL_RUN: run})


@dataclass(frozen=True)
class JudgeRun:
    """One judge's run: the agent layer, the shell command, its environment."""

    image_id: str
    command: str
    env: Mapping[str, str]
    arm: str
    timeout_s: float


def run(engine: ContainerEngine, judges: JudgeGateway, experiment: str, job: JudgeRun,
        prompt: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr's tail) of the judge's CLI on `prompt` (its stdin)."""
    argv = sandbox.under_timeout(("sh", "-c", job.command), job.timeout_s)
    spec = ContainerSpec(
        image=job.image_id, command=argv,
        labels=Labels(experiment, "judge", job.arm, judges.run), resources=RESOURCES,
        user=sandbox.SANDBOX_USER, purpose=f"the judge of {job.arm}",
        name=f"bakeoff-{experiment}-judge-{job.arm}-{judges.run}-{secrets.token_hex(2)}",
        network=judges.network, stdin=True,
        tmpfs=(Tmpfs("/tmp", SCRATCH_MB),
               Tmpfs(sandbox.HOME, SCRATCH_MB, "0755", owner=sandbox.SANDBOX_UID)),
        env={"HOME": sandbox.HOME, **job.env}, working_dir="/tmp", read_only=True,
        log_max_mb=16, resolve_outside=False)
    container_id = engine.create(spec)
    try:
        engine.start(container_id, io.BytesIO(prompt.encode()), what=spec.purpose)
        status = sandbox.waited(engine, container_id, sandbox.host_deadline(job.timeout_s),
                                spec.purpose)
        out = engine.logs(container_id, stdout=True, stderr=False)
        tail = engine.logs(container_id, stdout=False, stderr=True, tail=20)
    finally:
        sandbox.remove(engine, container_id)
    return (status, out.decode(errors="replace"),
            tail.decode(errors="replace").strip()[-2000:])

