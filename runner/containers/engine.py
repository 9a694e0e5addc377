"""The one place every docker call goes through.

It adds our labels, a client timeout, and a bounded retry for transient engine errors
(idempotent reads only), and turns a broken engine into `SandboxUnavailableError`.
Nothing is ever removed here unless it carries our labels (`remove_labelled`).

Every container, network and volume the project makes is created here, from a typed
spec (`create_container`, `create_network`, `create_volume`), as docker-py funnels every
option through one `_create_container_args`: the policy is applied by the choke point,
so no caller can forget it. Every container gets `cap_drop=ALL` (a spec may add back only
capabilities of `ADDABLE_CAPS`), `no-new-privileges`, docker's init as PID 1, our labels
(refused without an experiment and a role) and its CPU, memory and pids limits with no
swap. The label keys are the constants below and nowhere else (a test greps).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

import docker
import docker.errors
import requests
from docker.types import LogConfig, Mount

from runner.errors import LeftoverError, SandboxUnavailableError

T = TypeVar("T")
STDIN_CHUNK = 1024 * 1024  # bytes sent to a container's stdin at a time

LABEL_PREFIX = "io.bakeoff."
LABEL_EXPERIMENT = f"{LABEL_PREFIX}experiment"
LABEL_ARM = f"{LABEL_PREFIX}arm"
LABEL_ROLE = f"{LABEL_PREFIX}role"
LABEL_RUN = f"{LABEL_PREFIX}run"
LABEL_IMAGE = f"{LABEL_PREFIX}image"
LABEL_IDENTITY = f"{LABEL_PREFIX}identity"
KINDS = ("container", "network", "volume")  # the order of removal: a network holds containers

API_TIMEOUT_S = 120
# Transient engine errors (a daemon restarting, a socket hiccup) are retried this many
# times, with linear backoff, for calls that are safe to repeat. Creates are not retried:
# a create that timed out may have happened, and a duplicate would escape our bookkeeping.
RETRIES = 2
RETRY_BACKOFF_S = 0.5
SWEEPS = 2
ENGINE_HINT = "check that `docker info` answers (make setup starts an engine when none does)"


@dataclass(frozen=True)
class Labels:
    """The labels that mark a resource as ours; every container, network and volume has them."""

    experiment: str
    role: str
    arm: str = ""
    run: str = ""

    def as_dict(self) -> dict[str, str]:
        labels = {LABEL_EXPERIMENT: self.experiment, LABEL_ROLE: self.role, LABEL_ARM: self.arm}
        if self.run:
            labels[LABEL_RUN] = self.run
        return labels


# The only capabilities a spec may add back on top of cap_drop=ALL: what the sample
# driver needs, as root, to lay a tree out and drop to the sandbox user (`setpriv`).
# A new one is a decision taken here, where a reviewer sees it.
ADDABLE_CAPS = frozenset({"CHOWN", "SETUID", "SETGID", "KILL"})
NO_NETWORK = "none"


@dataclass(frozen=True)
class Resources:
    """CPU, memory and process limits of one container; memory includes swap (none)."""

    cpus: float
    memory_mb: int
    pids: int


@dataclass(frozen=True)
class Tmpfs:
    """A size-limited tmpfs at `target`: filling it is ENOSPC, never a full host disk."""

    target: str
    size_mb: int
    mode: str = "1777"
    executable: bool = True   # toolchains run binaries from /tmp
    owner: int | None = None  # uid = gid; else root's

    def options(self) -> str:
        owner = "" if self.owner is None else f",uid={self.owner},gid={self.owner}"
        return (f"size={self.size_mb}m{',exec' if self.executable else ''},mode={self.mode}"
                f"{owner}")


@dataclass(frozen=True)
class Bind:
    """A host path; read-only unless a caller says otherwise. A missing path is refused
    by the engine (a `Mount`, never `volumes=`, which would create it)."""

    source: Path
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class Volume:
    """One of our named volumes. `no_copy`: the image's own content at `target` (a
    prepared image's setup output in /work) never leaks into the volume."""

    name: str
    target: str
    read_only: bool = False


@dataclass(frozen=True)
class ContainerSpec:
    """Everything a container of ours differs in; what they all share is the engine's."""

    image: str
    command: tuple[str, ...]
    labels: Labels
    resources: Resources
    user: str                            # "uid:gid"; stated by every caller
    purpose: str                         # names the container in errors ("sample c/A/x/1")
    name: str | None = None
    cap_add: tuple[str, ...] = ()        # on top of cap_drop=ALL; only ADDABLE_CAPS
    tmpfs: tuple[Tmpfs, ...] = ()
    mounts: tuple[Bind | Volume, ...] = ()
    network: str = NO_NETWORK            # a network of ours by name, or none
    joins: str | None = None             # a container whose network namespace it shares
    env: Mapping[str, str] = field(default_factory=dict)
    working_dir: str | None = None
    hostname: str | None = None
    read_only: bool = False              # the root filesystem
    tty: bool = False                    # an interactive terminal (stdin open too)
    log_max_mb: int | None = None        # cap the container's log (None: the engine's)
    stdin: bool = False                  # its inputs come on stdin (no TTY): `start_with`


def _is_transient(error: Exception) -> bool:
    if isinstance(error, requests.exceptions.ConnectionError | requests.exceptions.Timeout):
        return True
    return isinstance(error, docker.errors.APIError) and error.is_server_error()


@dataclass(frozen=True)
class EngineIdentity:
    """Which engine the work ran on: its address as this machine reaches it (DOCKER_HOST,
    else the local socket) and its own `docker info` ID and name."""

    host: str
    id: str
    name: str

    def as_record(self) -> dict[str, str]:
        return {"host": self.host, "id": self.id, "name": self.name}

    def shown(self) -> str:
        return f"{self.host} ({self.name}, ID {self.id[:12]})"


LOCAL_ENGINE = "unix:///var/run/docker.sock"


class Engine:
    """A docker client behind one choke point. It talks to the engine DOCKER_HOST names
    (unix, tcp or ssh), or the local socket, as every docker client does."""

    def __init__(self, client: docker.DockerClient | None = None) -> None:
        self._client = client
        self._identity: EngineIdentity | None = None

    @property
    def identity(self) -> EngineIdentity:
        """Which engine this is (asked once)."""
        if self._identity is None:
            info = self.call("ask the engine who it is", self.client.info, retry=True)
            self._identity = EngineIdentity(os.environ.get("DOCKER_HOST") or LOCAL_ENGINE,
                                            str(info.get("ID", "")), str(info.get("Name", "")))
        return self._identity

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            try:
                self._client = docker.from_env(timeout=API_TIMEOUT_S)
                self._client.ping()
            except docker.errors.DockerException as error:
                raise SandboxUnavailableError(
                    f"no Docker engine answers ({error})", hint=ENGINE_HINT
                ) from error
        return self._client

    def call(self, what: str, fn: Callable[..., T], *args: Any, retry: bool = False,
             **kwargs: Any) -> T:
        """Run one docker call; `what` names it in errors. NotFound propagates as is."""
        attempts = 1 + (RETRIES if retry else 0)
        for attempt in range(attempts):
            try:
                return fn(*args, **kwargs)
            except docker.errors.NotFound:
                raise
            except (docker.errors.DockerException, requests.exceptions.RequestException) as error:
                if attempt + 1 < attempts and _is_transient(error):
                    time.sleep(RETRY_BACKOFF_S * (attempt + 1))
                    continue
                if isinstance(error, docker.errors.APIError) and not error.is_server_error():
                    raise
                raise SandboxUnavailableError(
                    f"docker engine failed during {what}: {error}", hint=ENGINE_HINT
                ) from error
        raise AssertionError("unreachable")

    def labelled(self, kind: str, filters: dict[str, str]) -> list[Any]:
        """Containers/networks/volumes whose labels match every `filters` item."""
        label_filters = [f"{k}={v}" if v else k for k, v in filters.items()]
        collection: Any = {"container": self.client.containers,
                           "network": self.client.networks, "volume": self.client.volumes}[kind]
        query: dict[str, Any] = {"filters": {"label": label_filters}}
        if kind == "container":
            # One-shot rig containers come and go: one removed between the listing and
            # its inspection is simply not listed.
            query.update(all=True, ignore_removed=True)
        result: list[Any] = self.call(f"list {kind}s", collection.list, retry=True, **query)
        return result

    def remove_volume(self, name: str) -> None:
        """Remove one of our volumes by name (one without our labels is never touched; one
        already gone is fine)."""
        try:
            volume = self.call(f"inspect volume {name}", self.client.volumes.get, name)
        except docker.errors.NotFound:
            return
        if LABEL_EXPERIMENT not in ((volume.attrs or {}).get("Labels") or {}):
            raise ValueError(f"volume {name} does not carry our labels: never removed")
        with contextlib.suppress(docker.errors.NotFound):
            self.call(f"remove volume {name}", volume.remove, force=True)

    def remove_labelled(self, filters: dict[str, str],
                        keep: Callable[[dict[str, str]], bool] | None = None) -> dict[str, int]:
        """Remove our containers, then networks, then volumes matching `filters`.

        `filters` must name LABEL_EXPERIMENT (or at least the label key): we never remove
        anything that does not carry our labels. `keep(labels)` spares a resource. A network
        is emptied first (every container still attached is disconnected, not removed: a
        kept container of a live run goes on running). One resource that vanished meanwhile
        is skipped, one the engine refuses does not stop the sweep; if anything of ours is
        still there at the end, `LeftoverError` names each with the engine's answer.
        """
        if not any(key.startswith(LABEL_PREFIX) for key in filters):
            raise ValueError("refusing to remove resources without a bakeoff label filter")
        removed = {kind: 0 for kind in KINDS}
        refused: dict[str, str] = {}
        # A second sweep catches what the first could not yet remove (a container still
        # being removed holds its network); both sweeps are bounded, and idempotent.
        for _ in range(SWEEPS):
            for kind, item in self._ours(filters, keep):
                try:
                    if _remove(self, kind, item):
                        removed[kind] += 1
                except (docker.errors.APIError, SandboxUnavailableError) as error:
                    refused[f"{kind} {item.name}"] = str(error)
            left = [f"{kind} {item.name}" for kind, item in self._ours(filters, keep)]
            if not left:
                return removed
            time.sleep(RETRY_BACKOFF_S)
        raise LeftoverError(left, refused)

    def _ours(self, filters: dict[str, str],
              keep: Callable[[dict[str, str]], bool] | None) -> Iterator[tuple[str, Any]]:
        for kind in KINDS:
            for item in self.labelled(kind, filters):
                if keep is None or not keep(_labels_of(kind, item)):
                    yield kind, item


def _labels_of(kind: str, item: Any) -> dict[str, str]:
    if kind == "container":
        return dict(item.labels or {})
    return dict(item.attrs.get("Labels") or {})


def _remove(engine: Engine, kind: str, item: Any) -> bool:
    """Remove one resource; False when it was already gone."""
    try:
        if kind == "container":
            engine.call("remove container", item.remove, force=True, v=True)
        elif kind == "network":
            _empty_network(engine, item)
            engine.call("remove network", item.remove)
        else:
            engine.call(f"remove {kind}", item.remove)
    except docker.errors.NotFound:
        return False
    return True


def _empty_network(engine: Engine, network: Any) -> None:
    """Disconnect every container still attached (a network with endpoints is refused with
    403 "has active endpoints"): e.g. the experiment's Postgres, kept for the live run,
    still on a sample network of a run that was killed."""
    engine.call("inspect network", network.reload, retry=True)  # a listing has no endpoints
    for container_id in network.attrs.get("Containers") or {}:
        try:
            engine.call("disconnect from network", network.disconnect, container_id,
                        force=True)
        except docker.errors.NotFound:  # the container went meanwhile
            continue


def remove_network(engine: Engine, network_id: str) -> None:
    """Remove ONE network of ours (a sample's own), emptied first; one without our labels
    is refused, one already gone is fine."""
    try:
        network = engine.call("find network", engine.client.networks.get, network_id,
                              retry=True)
        if LABEL_EXPERIMENT not in (network.attrs.get("Labels") or {}):
            raise ValueError(f"refusing to remove network {network.name}: it is not ours")
        _remove(engine, "network", network)
    except docker.errors.NotFound:
        return


def require_labels(labels: Labels, what: str) -> None:
    """Refuse to make `what` without an experiment and a role: `down` and `gc` remove by
    label only, so an unlabelled resource would outlive every run."""
    if not labels.experiment or not labels.role:
        raise ValueError(f"refusing to create {what} without an experiment and a role label "
                         f"(got {labels!r}): nothing unlabelled is ever made")


def _mount(mount: Bind | Volume) -> Mount:
    if isinstance(mount, Bind):
        return Mount(mount.target, str(mount.source.resolve()), type="bind",
                     read_only=mount.read_only)
    return Mount(mount.target, mount.name, type="volume", read_only=mount.read_only,
                 no_copy=True)


def _network_args(spec: ContainerSpec) -> dict[str, str]:
    if spec.joins is not None:
        if spec.network != NO_NETWORK:
            raise ValueError(f"{spec.purpose}: a container joins another's network "
                             f"namespace or has a network ({spec.network}), not both")
        return {"network_mode": f"container:{spec.joins}"}
    if spec.network == NO_NETWORK:
        return {"network_mode": NO_NETWORK}
    return {"network": spec.network}


def container_args(spec: ContainerSpec) -> dict[str, Any]:
    """The keyword arguments of `containers.create` for `spec`: the one translation, with
    the policy every container gets whatever the spec says."""
    require_labels(spec.labels, spec.purpose)
    extra = sorted(set(spec.cap_add) - ADDABLE_CAPS)
    if extra:
        raise ValueError(f"{spec.purpose}: capabilities {extra} may not be added "
                         f"(only {sorted(ADDABLE_CAPS)})")
    targets = [t.target for t in spec.tmpfs]
    if len(set(targets)) != len(targets):
        raise ValueError(f"{spec.purpose}: two tmpfs mounts at one path: {targets}")
    limits, memory = spec.resources, f"{spec.resources.memory_mb}m"
    args: dict[str, Any] = dict(
        image=spec.image, command=list(spec.command), labels=spec.labels.as_dict(),
        user=spec.user, cap_drop=["ALL"], security_opt=["no-new-privileges"], init=True,
        nano_cpus=int(limits.cpus * 1e9), mem_limit=memory, memswap_limit=memory,
        pids_limit=limits.pids, read_only=spec.read_only, environment=dict(spec.env),
        tmpfs={t.target: t.options() for t in spec.tmpfs},
        mounts=[_mount(m) for m in spec.mounts], **_network_args(spec))
    if spec.cap_add:
        args["cap_add"] = list(spec.cap_add)
    optional = {"name": spec.name, "working_dir": spec.working_dir, "hostname": spec.hostname}
    args.update({key: value for key, value in optional.items() if value is not None})
    if spec.tty:
        args.update(tty=True, stdin_open=True)
    elif spec.stdin:  # a binary stream, closed once sent (`start_with`): docker-py
        args.update(stdin_open=True)  # sets StdinOnce itself for a stdin_open create
    if spec.log_max_mb is not None:
        args["log_config"] = LogConfig(type=LogConfig.types.JSON, config={
            "max-size": f"{spec.log_max_mb}m", "max-file": "1"})
    return args


def create_container(engine: Engine, spec: ContainerSpec) -> Any:
    """Create (not start) the container of `spec`; the docker-py container. Not retried:
    a create that timed out may have happened."""
    args = container_args(spec)
    return engine.call(f"create {spec.purpose}", engine.client.containers.create, **args)


def create_network(engine: Engine, name: str, labels: Labels, *, egress: bool) -> str:
    """A bridge network of its own; with no egress unless asked for.

    `internal` alone still lets a container reach every service on the host through the
    bridge's own address (INPUT, not FORWARD); with `inhibit_ipv4` the bridge has no
    address, so nothing outside the network answers (tests/integration prove both).
    """
    require_labels(labels, f"network {name}")
    options = {} if egress else {"com.docker.network.bridge.inhibit_ipv4": "true"}
    network = engine.call(f"create network {name}", engine.client.networks.create, name,
                          driver="bridge", internal=not egress, labels=labels.as_dict(),
                          options=options, check_duplicate=True)
    return str(network.id)


def create_volume(engine: Engine, name: str, labels: Labels, *, size_mb: int | None,
                  owner: int) -> str:
    """A size-limited tmpfs volume owned by `owner` (uid = gid): its content lives only
    while a container holds it, lost as soon as none has it mounted. `size_mb` None: a
    volume on the engine's own disk, which keeps what it holds until it is removed (the
    way files travel to and from containers through the engine, `fill` and `read`); what
    it holds is bounded by whoever fills it."""
    require_labels(labels, f"volume {name}")
    options = {} if size_mb is None else {
        "type": "tmpfs", "device": "tmpfs",
        "o": f"size={size_mb}m,uid={owner},gid={owner},mode=0755"}
    volume = engine.call(f"create volume {name}", engine.client.volumes.create, name,
                         driver="local", driver_opts=options, labels=labels.as_dict())
    return str(volume.name)


def start_with(engine: Engine, container: Any, source: IO[bytes], what: str) -> None:
    """Start a container created with `stdin` and stream `source` to its stdin, then
    close it: inputs that travel through the engine's API, never a path of this machine
    (DESIGN principle 12). A container that stops reading (or dies) ends the stream."""
    attached = engine.call(f"attach the stdin of {what}", container.attach_socket,
                           params={"stdin": 1, "stream": 1})
    raw = getattr(attached, "_sock", attached)
    try:
        engine.call(f"start {what}", container.start)
        with contextlib.suppress(OSError):
            while chunk := source.read(STDIN_CHUNK):
                raw.sendall(chunk)
            raw.shutdown(socket.SHUT_WR)
    finally:
        with contextlib.suppress(OSError):
            raw.close()


def put_archive(engine: Engine, container: Any, path: str, data: bytes | IO[bytes]) -> None:
    """A tar into `path` of a container (a volume's path, or a writable root): the way
    in for files once a container exists."""
    if not engine.call(f"put an archive at {path}", container.put_archive, path, data):
        raise SandboxUnavailableError(f"the engine refused an archive at {path}",
                                      hint=ENGINE_HINT)


def get_archive(engine: Engine, container: Any, path: str) -> Iterator[bytes]:
    """The tar of `path` in a container (running or stopped), as the engine streams it."""
    stream, _ = engine.call(f"get the archive of {path}", container.get_archive, path)
    return iter(stream)


def iter_stream(stream: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Wrap a decoded docker stream so a dropped connection becomes SandboxUnavailableError."""
    try:
        yield from stream
    except (docker.errors.DockerException, requests.exceptions.RequestException) as error:
        raise SandboxUnavailableError(f"docker stream broke: {error}", hint=ENGINE_HINT) from error

