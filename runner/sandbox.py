"""One sandbox per arm: a locked-down container on its own network.

A command that ran and failed is a value (`ExecResult`); a broken engine or a vanished
container is an exception (`SandboxUnavailableError`), as in inspect_ai's sandboxes.
"""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker.errors
from docker.types import Mount

from runner.engine import Engine, Labels
from runner.errors import SandboxUnavailableError

WORKDIR = "/work"
# Inside the container `timeout` sends TERM at the deadline and KILL this much later;
# the host waits this much more before it declares the engine stuck.
KILL_GRACE_S = 5
HOST_GRACE_S = 30
TIMEOUT_EXIT_CODES = frozenset({124, 137})


@dataclass(frozen=True)
class SandboxLimits:
    cpus: float = 1.0
    memory_mb: int = 2048
    pids: int = 512
    disk_mb: int = 2048

    def as_record(self) -> dict[str, float | int]:
        return {"cpus": self.cpus, "memory_mb": self.memory_mb, "pids": self.pids,
                "disk_mb": self.disk_mb}


@dataclass(frozen=True)
class SandboxSpec:
    """Everything needed to create (and later re-create) one sandbox container."""

    name: str
    image_id: str
    labels: Labels
    checkout: Path | None
    network: str
    limits: SandboxLimits = SandboxLimits()
    env: Mapping[str, str] = field(default_factory=dict)
    user: str = "1000:1000"
    hostname: str = "sandbox"
    read_only_checkout: bool = False
    read_only: tuple[tuple[Path, str], ...] = ()  # (host path, container path)


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool


def network_name(experiment: str, arm: str, run: str) -> str:
    return f"bakeoff-{experiment}-{arm}-{run}".lower()


def create_network(engine: Engine, name: str, labels: Labels, *, egress: bool) -> str:
    """A bridge network of its own; with no egress unless asked for.

    `internal` alone still lets a container reach every service on the host through the
    bridge's own address (INPUT, not FORWARD); with `inhibit_ipv4` the bridge has no
    address, so nothing outside the network answers (tests/integration prove both).
    """
    options = {} if egress else {"com.docker.network.bridge.inhibit_ipv4": "true"}
    network = engine.call(f"create network {name}", engine.client.networks.create, name,
                          driver="bridge", internal=not egress, labels=labels.as_dict(),
                          options=options, check_duplicate=True)
    return str(network.id)


def create(engine: Engine, spec: SandboxSpec) -> str:
    """Create and start the sandbox container; return its id."""
    mounts = []
    if spec.checkout is not None:
        mounts.append(Mount(WORKDIR, str(spec.checkout.resolve()), type="bind",
                            read_only=spec.read_only_checkout))
    mounts += [Mount(target, str(source.resolve()), type="bind", read_only=True)
               for source, target in spec.read_only]
    memory = f"{spec.limits.memory_mb}m"
    container: Any = engine.call(
        f"create sandbox {spec.name}", engine.client.containers.run, spec.image_id,
        ["sleep", "infinity"], detach=True, name=spec.name, hostname=spec.hostname,
        labels=spec.labels.as_dict(), user=spec.user, working_dir=WORKDIR, mounts=mounts,
        environment=dict(spec.env), cap_drop=["ALL"], security_opt=["no-new-privileges"],
        nano_cpus=int(spec.limits.cpus * 1e9), mem_limit=memory, memswap_limit=memory,
        pids_limit=spec.limits.pids, network=spec.network, init=True)
    return str(container.id)


def _container(engine: Engine, container_id: str) -> Any:
    try:
        return engine.call("inspect sandbox", engine.client.containers.get, container_id,
                           retry=True)
    except docker.errors.NotFound as error:
        raise SandboxUnavailableError(
            f"sandbox container {container_id[:12]} has vanished",
            hint="run `bakeoff-sandbox up` again (or `gc` to clear leftovers)") from error


def exec_in(engine: Engine, container_id: str, command: list[str] | str, *,
            timeout_s: float, env: Mapping[str, str] | None = None, user: str | None = None,
            workdir: str = WORKDIR) -> ExecResult:
    """Run a command in a running sandbox under `timeout`, with a host-side deadline too."""
    container = _container(engine, container_id)
    if container.status != "running":
        raise SandboxUnavailableError(f"sandbox container {container.name} is {container.status}",
                                      hint="run `bakeoff-sandbox up` again")
    argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
    wrapped = ["timeout", "-k", str(KILL_GRACE_S), str(max(1, int(timeout_s))), *argv]
    api = engine.client.api
    exec_id = engine.call("exec create", api.exec_create, container.id, wrapped,
                          environment=dict(env or {}), workdir=workdir,
                          user=user or "")["Id"]
    started = time.monotonic()
    output = _start_with_deadline(engine, exec_id, timeout_s + KILL_GRACE_S + HOST_GRACE_S)
    duration = time.monotonic() - started
    code = engine.call("exec inspect", api.exec_inspect, exec_id, retry=True)["ExitCode"]
    stdout, stderr = output
    exit_code = int(code) if code is not None else -1
    timed_out = exit_code in TIMEOUT_EXIT_CODES and duration >= timeout_s - 0.5
    return ExecResult(exit_code, stdout, stderr, round(duration, 3), timed_out)


def _start_with_deadline(engine: Engine, exec_id: str, deadline_s: float) -> tuple[str, str]:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["out"] = engine.client.api.exec_start(exec_id, demux=True)
        except Exception as error:  # re-raised on the caller's thread below
            box["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(deadline_s)
    if thread.is_alive():
        raise SandboxUnavailableError(f"exec did not return within {deadline_s:.0f}s "
                                      "although `timeout` should have stopped it",
                                      hint="the engine may be wedged: check `docker info`")
    if "error" in box:
        raise SandboxUnavailableError(f"exec failed: {box['error']}") from box["error"]
    stdout, stderr = box["out"]
    return (stdout or b"").decode(errors="replace"), (stderr or b"").decode(errors="replace")


def remove(engine: Engine, container_id: str) -> None:
    try:
        container = engine.client.containers.get(container_id)
        engine.call("remove sandbox", container.remove, force=True, v=True)
    except docker.errors.NotFound:
        return


def describe(engine: Engine, container_id: str) -> dict[str, Any]:
    """State, image and network of a sandbox, for `status`; `missing` when gone."""
    try:
        container = engine.client.containers.get(container_id)
    except docker.errors.NotFound:
        return {"state": "missing"}
    return {"state": container.status, "image": container.attrs.get("Image", ""),
            "networks": sorted(container.attrs["NetworkSettings"]["Networks"])}


def shell_join(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)
