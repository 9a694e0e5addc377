"""One sandbox per arm: a locked-down container on its own network.

The container's root filesystem is read-only. What an agent can write is size-limited
tmpfs and nothing else: the checkout at /work and HOME are tmpfs *volumes* of the arm's
own (so a one-shot rig container can share them while the sandbox holds them), /tmp and
/var/tmp are plain tmpfs (with `exec`: toolchains run binaries from /tmp). Filling any of
them is ENOSPC for the arm, never a full host disk.

The container's main process (`KEEPER`, under docker's init) runs as ROOT with no
capabilities and no-new-privileges, so the sweep's `kill -KILL -1` as the sandbox user
cannot end it (and with it the tmpfs checkout). It reaps: in a Pod there is no init and
the keeper is PID 1, the parent of every orphan the agent leaves, which `sleep` would
keep as zombies for the sandbox's life. Everything we run inside runs as the sandbox
user: `exec_in` and every helper default to `SANDBOX_USER`.

A command that ran and failed is a value (`ExecResult`); a broken engine or a vanished
container is an exception (`SandboxUnavailableError`), as in inspect_ai's sandboxes.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from runner.containers.backend import (
    Bind,
    ContainerEngine,
    ContainerSpec,
    ContainerState,
    ExecState,
    ExecStream,
    Labels,
    Resources,
    Tmpfs,
    Volume,
)
from runner.errors import (
    EngineNotAnsweringError,
    InfraError,
    NotFoundError,
    SandboxUnavailableError,
)
from runner.manifest import MAX_FILES

WORKDIR = "/work"
HOME = "/home/agent"
SANDBOX_UID = 1000
SANDBOX_USER = f"{SANDBOX_UID}:{SANDBOX_UID}"
KEEPER_USER = "0:0"   # the main process only; see the module docstring
SCRATCH_DIRS = ("/tmp", "/var/tmp")
# sh's `wait` reaps every child it has, its own sleep's and any orphan's (dash: measured,
# a Pod-like container with this as PID 1 kept no zombie, one with `sleep` kept three).
KEEPER = ("sh", "-c", "while :; do sleep infinity & wait; done")
# Inside the container `timeout` sends TERM at the deadline and KILL this much later;
# the host waits this much more before it declares the engine stuck.
KILL_GRACE_S = 5
HOST_GRACE_S = 30
TIMEOUT_EXIT_CODES = frozenset({124, 137})
JOB_CPUS, JOB_PIDS = 1.0, 256  # a rig job's, beside the memory it asks for
CHECK_RESOURCES = Resources(cpus=1.0, memory_mb=512, pids=256)  # an image check's
CHECK_TIMEOUT_S = 120


@dataclass(frozen=True)
class SandboxLimits:
    cpus: float = 1.0
    memory_mb: int = 2048
    pids: int = 512
    disk_mb: int = 2048
    max_files: int = MAX_FILES  # entries of a sample's tree (files, links, directories)

    def as_record(self) -> dict[str, float | int]:
        return {"cpus": self.cpus, "memory_mb": self.memory_mb, "pids": self.pids,
                "disk_mb": self.disk_mb, "max_files": self.max_files}

    def resources(self) -> Resources:
        return Resources(self.cpus, self.memory_mb, self.pids)


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
    secret_env: Mapping[str, str] = field(default_factory=dict)  # its database URL: a Secret's
    home: str | None = None       # the arm's HOME volume (else a plain tmpfs)
    hostname: str = "sandbox"
    read_only: tuple[tuple[str, str], ...] = ()  # (one of our volumes, container path)


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool


def network_name(experiment: str, arm: str, run: str) -> str:
    return f"bakeoff-{experiment}-{arm}-{run}".lower()


def container_spec(spec: SandboxSpec) -> ContainerSpec:
    """The sandbox container: root's idle main process, a read-only root filesystem,
    the checkout and HOME volumes, tmpfs scratch, the arm's network and limits."""
    disk = spec.limits.disk_mb
    tmpfs = [Tmpfs(path, disk) for path in SCRATCH_DIRS]
    mounts: list[Bind | Volume] = [] if spec.checkout is None else [
        Volume(spec.checkout, WORKDIR)]
    if spec.home is not None:
        mounts.append(Volume(spec.home, HOME))
    else:
        tmpfs.append(Tmpfs(HOME, disk, "0755", owner=SANDBOX_UID))
    mounts += [Volume(source, target, read_only=True) for source, target in spec.read_only]
    return ContainerSpec(
        image=spec.image_id, command=KEEPER, labels=spec.labels,
        resources=spec.limits.resources(), user=KEEPER_USER, purpose=f"sandbox {spec.name}",
        name=spec.name, hostname=spec.hostname, working_dir=WORKDIR, read_only=True,
        tmpfs=tuple(tmpfs), mounts=tuple(mounts), network=spec.network, env=spec.env,
        secret_env=spec.secret_env, exec_users=(SANDBOX_USER,))


def create(engine: ContainerEngine, spec: SandboxSpec) -> str:
    """Create and start the sandbox container; return its id."""
    container_id = engine.create(container_spec(spec))
    try:
        engine.start(container_id, what=f"sandbox {spec.name}")
    except BaseException:
        remove(engine, container_id)
        raise
    return container_id


def pause(engine: ContainerEngine, container_id: str) -> None:
    engine.pause(container_id, what="sandbox")


def unpause(engine: ContainerEngine, container_id: str) -> None:
    engine.unpause(container_id, what="sandbox")


def resume_if_paused(engine: ContainerEngine, container_id: str) -> str:
    """Unpause a sandbox left paused (the orchestrator was stopped while it took an arm's
    work); return its state as it is now."""
    status = _container(engine, container_id).status
    if status == "paused":
        unpause(engine, container_id)
        return "running"
    return status


def under_timeout(argv: Sequence[str], timeout_s: float) -> tuple[str, ...]:
    """`argv` under `timeout` inside its container: TERM at `timeout_s`, KILL
    KILL_GRACE_S later."""
    return ("timeout", "-k", str(KILL_GRACE_S), str(max(1, int(timeout_s))), *argv)


def host_deadline(timeout_s: float, grace_s: float = HOST_GRACE_S) -> float:
    """How long the host waits for what runs `under_timeout(..., timeout_s)` before it
    declares the engine stuck: `timeout`'s own KILL, then `grace_s` more (the one place
    the host's deadline is computed; a caller with more to wait for passes its grace)."""
    return timeout_s + KILL_GRACE_S + grace_s


def workers(engine: ContainerEngine) -> int:
    """How many containers the host runs at once (samples, judges): the engine's own
    `workers` (Docker: one per CPU of its `docker info` NCPU; a cluster: its configured
    parallelism), never this machine's count, which says nothing of a remote engine's."""
    return max(1, engine.workers)


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
    mounts: list[Bind | Volume]
    env: Mapping[str, str]
    tmp_mb: int
    memory_mb: int
    timeout_s: float
    stdin: Path | None = None  # a file of this machine's streamed to the job's stdin

    def container_spec(self) -> ContainerSpec:
        argv = under_timeout(self.command, self.timeout_s)
        return ContainerSpec(
            image=self.image_id, command=argv, labels=self.labels, user=SANDBOX_USER,
            resources=Resources(JOB_CPUS, self.memory_mb, JOB_PIDS),
            purpose=self.name, name=self.name, mounts=tuple(self.mounts),
            tmpfs=(Tmpfs("/tmp", self.tmp_mb),), env=self.env, working_dir="/tmp",
            read_only=True, log_max_mb=1, stdin=self.stdin is not None)


@dataclass(frozen=True)
class RigResult:
    exit_code: int
    timed_out: bool
    duration_s: float
    stderr_tail: str   # our script's own diagnostics, for error messages; never parsed


@dataclass(frozen=True)
class Finished:
    """A one-shot container's end: its status, how long it ran, what it printed."""

    exit_code: int
    duration_s: float
    stdout: bytes      # only when asked for
    stderr_tail: str


@dataclass(frozen=True)
class Archive:
    """A tar the engine puts at `path` in a running container: the way in for inputs
    without a host path (docs/scale-out.md). `path` is in a writable volume, since the
    engine refuses a read-only root; a tmpfs volume keeps only what it gets while a
    container holds it, so the command waits for the archive's last file."""

    path: str
    data: bytes


def run_to_end(engine: ContainerEngine, spec: ContainerSpec, deadline_s: float, *,
               stdout: bool = False, archive: Archive | None = None,
               stdin: IO[bytes] | None = None) -> Finished:
    """Create, start and wait for a one-shot container (at most `deadline_s` on the host),
    read its output, and remove it, whatever happened; `archive` goes in once it runs,
    `stdin` (a spec with `stdin`) is streamed to it as it starts."""
    container_id = engine.create(spec)
    try:
        started = time.monotonic()
        engine.start(container_id, stdin, what=spec.purpose)
        if archive is not None:
            engine.put_archive(container_id, archive.path, archive.data)
        status = waited(engine, container_id, deadline_s, spec.purpose)
        duration = time.monotonic() - started
        out = engine.logs(container_id, stdout=True, stderr=False) if stdout else b""
        tail = engine.logs(container_id, stdout=False, stderr=True, tail=20)
    finally:
        remove(engine, container_id)
    return Finished(status, duration, out, tail.decode(errors="replace").strip()[-2000:])


def waited(engine: ContainerEngine, container_id: str, deadline_s: float, what: str) -> int:
    """A one-shot container's exit status; past `deadline_s` (whatever runs inside has
    its own `timeout`, well before) the engine is declared not answering."""
    status = engine.wait(container_id, deadline_s)
    if status is None:
        raise EngineNotAnsweringError(engine.address, f"wait for {what}", "no answer in time")
    return status


def run_job(engine: ContainerEngine, job: RigJob) -> RigResult:
    """Run `job` to its end and remove its container, whatever happened."""
    with contextlib.ExitStack() as stack:
        source = None if job.stdin is None else stack.enter_context(job.stdin.open("rb"))
        done = run_to_end(engine, job.container_spec(), host_deadline(job.timeout_s),
                          stdin=source)
    timed_out = done.exit_code in TIMEOUT_EXIT_CODES and done.duration_s >= job.timeout_s - 0.5
    return RigResult(done.exit_code, timed_out, round(done.duration_s, 3), done.stderr_tail)


FILL_TARGET = "/bakeoff/fill"  # where a filler or a reader mounts a volume


def fill(engine: ContainerEngine, volume: str, image_id: str, labels: Labels,
         data: bytes | IO[bytes], *, beside: str | None = None) -> None:
    """Put a tar into one of our volumes on the engine's disk, through a container of
    `image_id` that mounts it and never starts (docs/scale-out.md: files reach a
    container through the engine, never a path of this machine). A running container
    that mounts the volume read-only sees them at once.

    `beside`: a volume the filled one will be mounted with, mounted read-only by the
    filler too. On a cluster a new volume is made where its first Pod runs (a node's
    local disk, a zone's), and a Pod that mounts one a running Pod holds is put on that
    node: so the filler goes where the two will be used together, never elsewhere."""
    keeper = engine.create(_holder(volume, image_id, labels, "the filler", beside))
    try:
        engine.put_archive(keeper, FILL_TARGET, data)
    finally:
        remove(engine, keeper)


def read_volume(engine: ContainerEngine, volume: str, image_id: str, labels: Labels,
                out: IO[bytes], *, beside: str | None = None) -> None:
    """The tar of one of our volumes' content written to `out` (its members under the
    volume's own name: `FILL_TARGET`'s last part), through a container that never starts
    (`beside`: as `fill`'s, where the volume was used: no volume moved between nodes)."""
    keeper = engine.create(_holder(volume, image_id, labels, "the reader", beside))
    try:
        for chunk in engine.get_archive(keeper, FILL_TARGET):
            out.write(chunk)
    finally:
        remove(engine, keeper)


BESIDE = "/bakeoff/beside"  # where a filler mounts the volume it goes beside (`fill`)


def _holder(volume: str, image_id: str, labels: Labels, what: str,
            beside: str | None = None) -> ContainerSpec:
    mounts = (Volume(volume, FILL_TARGET),
              *(() if beside is None else (Volume(beside, BESIDE, read_only=True),)))
    return ContainerSpec(image=image_id, command=("true",), labels=labels,
                         resources=CHECK_RESOURCES, user=KEEPER_USER,
                         purpose=f"{what} of volume {volume}", mounts=mounts)


def check_image(engine: ContainerEngine, image_id: str, command: list[str], labels: Labels,
                env: Mapping[str, str] | None = None) -> str:
    """What `command` prints on stdout in a throwaway container of the image: the
    sandbox user, no network, no capability (a probe of what the image allows)."""
    spec = ContainerSpec(image=image_id, command=tuple(command), labels=labels,
                         resources=CHECK_RESOURCES, user=SANDBOX_USER,
                         purpose="check the image", env=env or {})
    done = run_to_end(engine, spec, CHECK_TIMEOUT_S, stdout=True)
    return done.stdout.decode(errors="replace")


def identity_file(engine: ContainerEngine, image_id: str, path: str, fields: Sequence[str],
                  labels: Labels, *, what: str) -> dict[str, str]:
    """The JSON object an image's build wrote at `path` (what it installed), read in a
    throwaway container (`check_image`): each of `fields` as text. A file that is missing
    or lacks a field is an `InfraError` naming `what` (the image, for the fix)."""
    text = check_image(engine, image_id, ["cat", path], labels)
    try:
        data = json.loads(text)
        return {field: str(data[field]) for field in fields}
    except (ValueError, KeyError, TypeError) as error:
        raise InfraError(f"{what} holds no readable {path}",
                         hint="rebuild it: remove the image and run the command again"
                         ) from error


DOCKER_ID = re.compile(r"[0-9a-f]{64}")


def shown_id(container_id: str) -> str:
    """A container's id as a message shows it: docker's 64 hex digits cut to 12, as
    docker shows them; any other engine's (a Pod's `name/container`) whole."""
    return container_id[:12] if DOCKER_ID.fullmatch(container_id) else container_id


def _container(engine: ContainerEngine, container_id: str) -> ContainerState:
    try:
        return engine.inspect(container_id)
    except NotFoundError as error:
        raise SandboxUnavailableError(
            f"sandbox container {shown_id(container_id)} has vanished",
            hint="run `bakeoff-sandbox up` again (or `gc` to clear leftovers)") from error


def exec_in(engine: ContainerEngine, container_id: str, command: list[str] | str, *,
            timeout_s: float, env: Mapping[str, str] | None = None,
            user: str = SANDBOX_USER, workdir: str = WORKDIR) -> ExecResult:
    """Run a command in a running sandbox under `timeout`, with a host-side deadline too.

    As the sandbox user unless told otherwise: nothing of ours runs as root in a sandbox."""
    container = _container(engine, container_id)
    if container.status != "running":
        raise SandboxUnavailableError(
            f"sandbox container {container.name} is {container.status}: the engine at "
            f"{engine.address} stopped it (no agent can: its main process is root's)",
            hint="once the engine answers, run the same command again: the experiment's "
                 "services are restored; if the sandbox is gone, `bakeoff-sandbox down`, "
                 "then `run` again")
    argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
    done = engine.exec(container.id, under_timeout(argv, timeout_s), user=user,
                       workdir=workdir, deadline_s=host_deadline(timeout_s), env=env)
    timed_out = done.exit_code in TIMEOUT_EXIT_CODES and done.duration_s >= timeout_s - 0.5
    return ExecResult(done.exit_code, done.stdout, done.stderr, done.duration_s, timed_out)


def start_exec(engine: ContainerEngine, container_id: str, argv: list[str],
               env: Mapping[str, str]) -> ExecStream:
    """Start `argv` in the sandbox as the sandbox user, in /work, streaming its output
    (stdout and stderr, as the engine sends them)."""
    return engine.exec_stream(container_id, argv, user=SANDBOX_USER, workdir=WORKDIR,
                              env=env)


def exec_state(engine: ContainerEngine, exec_id: str) -> ExecState:
    """What the engine says of an exec now."""
    return engine.exec_state(exec_id)


def kill_all(engine: ContainerEngine, container_id: str) -> None:
    """Kill every process of the sandbox user in the container (`kill -KILL -1` as that
    user: the root keeper and the init survive, so does the checkout)."""
    engine.exec(container_id, ["kill", "-KILL", "-1"], user=SANDBOX_USER, workdir=WORKDIR,
                deadline_s=host_deadline(KILL_GRACE_S))


def remove(engine: ContainerEngine, container_id: str) -> None:
    """Remove a container of ours and its anonymous volumes (one already gone is fine)."""
    engine.remove(container_id)


def describe(engine: ContainerEngine, container_id: str) -> dict[str, Any]:
    """State, image and network of a sandbox, for `status`; `missing` when gone."""
    try:
        container = engine.inspect(container_id)
    except NotFoundError:
        return {"state": "missing"}
    return {"state": container.status, "image": container.image,
            "networks": sorted(container.networks)}


def shell_join(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)
