"""One sandbox per arm: a locked-down container on its own network.

The container's root filesystem is read-only. What an agent can write is size-limited
tmpfs and nothing else: the checkout at /work and HOME are tmpfs *volumes* of the arm's
own (so a one-shot rig container can share them while the sandbox holds them), /tmp and
/var/tmp are plain tmpfs (with `exec`: toolchains run binaries from /tmp). Filling any of
them is ENOSPC for the arm, never a full host disk.

The container's main process (`sleep infinity` under docker's init) runs as ROOT with no
capabilities and no-new-privileges, so the sweep's `kill -KILL -1` as the sandbox user
cannot end it (and with it the tmpfs checkout). Everything we run inside runs as the
sandbox user: `exec_in` and every helper default to `SANDBOX_USER`.

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
from docker.types import LogConfig, Mount

from runner.containers.engine import Engine, Labels
from runner.errors import SandboxUnavailableError

WORKDIR = "/work"
HOME = "/home/agent"
SANDBOX_UID = 1000
SANDBOX_USER = f"{SANDBOX_UID}:{SANDBOX_UID}"
KEEPER_USER = "0:0"   # the main process only; see the module docstring
SCRATCH_DIRS = ("/tmp", "/var/tmp")
# Inside the container `timeout` sends TERM at the deadline and KILL this much later;
# the host waits this much more before it declares the engine stuck.
KILL_GRACE_S = 5
HOST_GRACE_S = 30
TIMEOUT_EXIT_CODES = frozenset({124, 137})
HARDENING: dict[str, Any] = {"cap_drop": ["ALL"], "security_opt": ["no-new-privileges"],
                             "read_only": True}


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
    checkout: str | None          # the arm's checkout volume, mounted at /work
    network: str
    limits: SandboxLimits = SandboxLimits()
    env: Mapping[str, str] = field(default_factory=dict)
    home: str | None = None       # the arm's HOME volume (else a plain tmpfs)
    hostname: str = "sandbox"
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


def tmpfs_options(size_mb: int, mode: str = "1777") -> str:
    return f"size={size_mb}m,exec,mode={mode}"


def create_volume(engine: Engine, name: str, labels: Labels, *, size_mb: int) -> str:
    """A size-limited tmpfs volume owned by the sandbox user. Its content lives only while
    a container holds it: it is lost as soon as no container has it mounted."""
    options = {"type": "tmpfs", "device": "tmpfs",
               "o": f"size={size_mb}m,uid={SANDBOX_UID},gid={SANDBOX_UID},mode=0755"}
    volume = engine.call(f"create volume {name}", engine.client.volumes.create, name,
                         driver="local", driver_opts=options, labels=labels.as_dict())
    return str(volume.name)


def volume_mount(target: str, volume: str, *, read_only: bool = False) -> Mount:
    # no_copy: the image's own /work (a prepared image's setup output) never leaks in.
    return Mount(target, volume, type="volume", read_only=read_only, no_copy=True)


def create(engine: Engine, spec: SandboxSpec) -> str:
    """Create and start the sandbox container; return its id."""
    disk = spec.limits.disk_mb
    mounts = [] if spec.checkout is None else [volume_mount(WORKDIR, spec.checkout)]
    tmpfs = {path: tmpfs_options(disk) for path in SCRATCH_DIRS}
    if spec.home is not None:
        mounts.append(volume_mount(HOME, spec.home))
    else:
        tmpfs[HOME] = tmpfs_options(disk, "0755") + f",uid={SANDBOX_UID},gid={SANDBOX_UID}"
    mounts += [Mount(target, str(source.resolve()), type="bind", read_only=True)
               for source, target in spec.read_only]
    memory = f"{spec.limits.memory_mb}m"
    container: Any = engine.call(
        f"create sandbox {spec.name}", engine.client.containers.run, spec.image_id,
        ["sleep", "infinity"], detach=True, name=spec.name, hostname=spec.hostname,
        labels=spec.labels.as_dict(), user=KEEPER_USER, working_dir=WORKDIR, mounts=mounts,
        tmpfs=tmpfs, environment=dict(spec.env), **HARDENING,
        nano_cpus=int(spec.limits.cpus * 1e9), mem_limit=memory, memswap_limit=memory,
        pids_limit=spec.limits.pids, network=spec.network, init=True)
    return str(container.id)


def pause(engine: Engine, container_id: str) -> None:
    engine.call("pause sandbox", engine.client.api.pause, container_id)


def unpause(engine: Engine, container_id: str) -> None:
    engine.call("unpause sandbox", engine.client.api.unpause, container_id)


def resume_if_paused(engine: Engine, container_id: str) -> str:
    """Unpause a sandbox left paused (the orchestrator was stopped while it took an arm's
    work); return its state as it is now."""
    status = str(_container(engine, container_id).status)
    if status == "paused":
        unpause(engine, container_id)
        return "running"
    return status


@dataclass(frozen=True)
class RigJob:
    """A one-shot rig container that runs only our own script on an arm's data.

    The arm's image as the sandbox user, no network, no capabilities, no-new-privileges,
    a read-only root filesystem and a size-limited /tmp; none of the arm's environment;
    under `timeout` inside and a host deadline outside; labelled like everything else.
    """

    name: str
    image_id: str
    labels: Labels
    command: list[str]
    mounts: list[Mount]
    env: Mapping[str, str]
    tmp_mb: int
    memory_mb: int
    timeout_s: float


@dataclass(frozen=True)
class RigResult:
    exit_code: int
    timed_out: bool
    duration_s: float
    stderr_tail: str   # our script's own diagnostics, for error messages; never parsed


JOB_LOGS = LogConfig(type=LogConfig.types.JSON, config={"max-size": "1m", "max-file": "1"})


def run_job(engine: Engine, job: RigJob) -> RigResult:
    """Run `job` to its end and remove its container, whatever happened."""
    argv = ["timeout", "-k", str(KILL_GRACE_S), str(max(1, int(job.timeout_s))), *job.command]
    memory = f"{job.memory_mb}m"
    container: Any = engine.call(
        f"create {job.name}", engine.client.containers.create, job.image_id, argv,
        name=job.name, labels=job.labels.as_dict(), user=SANDBOX_USER, network_mode="none",
        mounts=job.mounts, tmpfs={"/tmp": tmpfs_options(job.tmp_mb)},
        environment=dict(job.env), working_dir="/tmp", mem_limit=memory,
        memswap_limit=memory, pids_limit=256, nano_cpus=int(1e9), log_config=JOB_LOGS,
        **HARDENING)
    try:
        started = time.monotonic()
        engine.call(f"start {job.name}", container.start)
        deadline = job.timeout_s + KILL_GRACE_S + HOST_GRACE_S
        status = engine.call(f"wait for {job.name}", container.wait, timeout=deadline)
        duration = time.monotonic() - started
        tail = engine.call("read its log", container.logs, stdout=False, stderr=True, tail=20)
    finally:
        remove(engine, str(container.id))
    code = int(status.get("StatusCode", -1))
    timed_out = code in TIMEOUT_EXIT_CODES and duration >= job.timeout_s - 0.5
    return RigResult(code, timed_out, round(duration, 3),
                     bytes(tail).decode(errors="replace").strip()[-2000:])


def _container(engine: Engine, container_id: str) -> Any:
    try:
        return engine.call("inspect sandbox", engine.client.containers.get, container_id,
                           retry=True)
    except docker.errors.NotFound as error:
        raise SandboxUnavailableError(
            f"sandbox container {container_id[:12]} has vanished",
            hint="run `bakeoff-sandbox up` again (or `gc` to clear leftovers)") from error


def exec_in(engine: Engine, container_id: str, command: list[str] | str, *,
            timeout_s: float, env: Mapping[str, str] | None = None,
            user: str = SANDBOX_USER, workdir: str = WORKDIR) -> ExecResult:
    """Run a command in a running sandbox under `timeout`, with a host-side deadline too.

    As the sandbox user unless told otherwise: nothing of ours runs as root in a sandbox."""
    container = _container(engine, container_id)
    if container.status != "running":
        raise SandboxUnavailableError(f"sandbox container {container.name} is {container.status}",
                                      hint="run `bakeoff-sandbox up` again")
    argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
    wrapped = ["timeout", "-k", str(KILL_GRACE_S), str(max(1, int(timeout_s))), *argv]
    api = engine.client.api
    exec_id = engine.call("exec create", api.exec_create, container.id, wrapped,
                          environment=dict(env or {}), workdir=workdir,
                          user=user)["Id"]
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
