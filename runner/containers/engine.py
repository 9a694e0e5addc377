"""The one place every docker call goes through: the docker backend of the engine
interface (`runner.containers.backend.ContainerEngine`).

It adds our labels, a client timeout, and a bounded retry for transient engine errors
(idempotent reads only). It is also where docker's exceptions end: `translated` maps
each to the project's own (`runner.errors`: a 404 is `NotFoundError`, a 409
`ConflictError`, another refusal `EngineRefusedError`, a broken or absent engine
`SandboxUnavailableError` / `EngineUnreachableError`), each naming the engine, so no
command imports `docker.errors`. Nothing is ever removed here unless it carries our
labels (`remove_labelled`).

Every container, network and volume the project makes is created here, from a typed
spec (`Engine.create`, `create_network`, `create_volume`), as docker-py funnels every
option through one `_create_container_args`: the policy is applied by the choke point,
so no caller can forget it. Every container gets `cap_drop=ALL` (a spec may add back only
capabilities of `ADDABLE_CAPS`), `no-new-privileges`, docker's init as PID 1, our labels
(refused without an experiment and a role) and its CPU, memory and pids limits with no
swap. The specs and the label keys are the interface's (`backend`), re-exported here.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, TypeVar

import docker
import docker.errors
import requests

from runner import errors
from runner.containers import hijack, sweep
from runner.containers.backend import (
    Capabilities,
    Completed,
    ContainerSpec,
    ContainerState,
    EngineFacts,
    EngineIdentity,
    ExecState,
    ExecStream,
    HeldProcess,
    Labels,
    Resources,
    exit_after_output,
    require_labels,
)
from runner.containers.dockerclient import (
    DOCKER_ERRORS,
    ENGINE_HINT,
    address,
    client_options,
    end_of_input,
    is_transient,
    iter_stream,
    mapped,
    translated,
)
from runner.containers.dockerspec import container_args, facts_of, state_of
from runner.errors import (
    EngineError,
    EngineFailedError,
    EngineUnreachableError,
    InfraError,
    NotFoundError,
    SandboxUnavailableError,
)

if TYPE_CHECKING:
    from runner.containers.backend import ContainerEngine

T = TypeVar("T")
STDIN_CHUNK = 1024 * 1024  # bytes sent to a container's stdin at a time


API_TIMEOUT_S = 120
# Transient engine errors (a daemon restarting, a socket hiccup) are retried this many
# times, with linear backoff, for calls that are safe to repeat. Creates are not retried:
# a create that timed out may have happened, and a duplicate would escape our bookkeeping.
RETRIES = 2
RETRY_BACKOFF_S = 0.5
WAIT_SLACK_S = 1.0  # a wait cut this much before its deadline is not the deadline
# runc freezes a cgroup v1 by "a game of chances" (its own words): a cgroup whose processes
# are still exiting (a sweep has just killed them) or forking may stay FREEZING, and runc
# thaws it back and answers "unable to freeze" (seen at a load of 8 to 10 on 2 cores, in
# CI too). Such a pause is asked again, these many seconds apart; anything else is not.
UNABLE_TO_FREEZE = "unable to freeze"
PAUSE_RETRY_S = (0.5, 1.0, 2.0, 4.0)

# What a local docker engine enforces: internal networks with no address on the bridge,
# `container:` network modes, pids limits, no-new-privileges, tmpfs volumes with a size.
DOCKER_CAPABILITIES = Capabilities(no_egress=True, shared_network_namespace=True,
                                   pids_limit=True, no_new_privileges=True,
                                   sized_volumes=True)
class Engine:
    """A docker client behind one choke point. It talks to the engine DOCKER_HOST names
    (unix, tcp or ssh), or the local socket, as every docker client does."""

    def __init__(self, client: docker.DockerClient | None = None) -> None:
        self._client = client
        self._identity: EngineIdentity | None = None
        self._cpus: int | None = None

    @property
    def address(self) -> str:
        """The engine's address as this machine reaches it: its client's (a remote engine
        handed in), else DOCKER_HOST, else the local socket."""
        base = str(getattr(getattr(self._client, "api", None), "base_url", "") or "")
        if base.startswith(("http://", "https://")):
            return "tcp://" + base.split("://", 1)[1]
        return address()

    @property
    def identity(self) -> EngineIdentity:
        """Which engine this is (asked once)."""
        if self._identity is None:
            self._ask()
        assert self._identity is not None
        return self._identity

    @property
    def cpus(self) -> int:
        """The CPUs the engine has (its `docker info` NCPU, asked once): a container's
        CPU limit can be no more (the engine refuses it), and this machine's count says
        nothing of a remote engine's."""
        if self._cpus is None:
            self._ask()
        assert self._cpus is not None
        return self._cpus

    @property
    def workers(self) -> int:
        return self.cpus  # one container per CPU (`cpus` is at least 1)

    def image_ref(self, image: str) -> str:
        return image

    def _ask(self) -> None:
        info = self.call("ask the engine who it is", self.client.info, retry=True)
        self._identity = EngineIdentity(self.address,
                                        str(info.get("ID", "")), str(info.get("Name", "")))
        self._cpus = max(1, int(info.get("NCPU") or 1))

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            try:
                self._client = docker.from_env(timeout=API_TIMEOUT_S, **client_options())
                self._client.ping()
            except DOCKER_ERRORS as error:
                raise EngineUnreachableError(
                    f"no Docker engine answers at {self.address} ({error})", hint=ENGINE_HINT
                ) from error
        return self._client

    def call(self, what: str, fn: Callable[..., T], *args: Any, retry: bool = False,
             **kwargs: Any) -> T:
        """Run one docker call; `what` names it in errors, which are the project's own
        (`translated`). Only a transient failure is retried, and only with `retry`."""
        attempts = 1 + (RETRIES if retry else 0)
        for attempt in range(attempts):
            try:
                return fn(*args, **kwargs)
            except DOCKER_ERRORS as error:
                if attempt + 1 < attempts and is_transient(error):
                    time.sleep(RETRY_BACKOFF_S * (attempt + 1))
                    continue
                raise translated(error, what, self.address) from error
        raise AssertionError("unreachable")

    def ping(self) -> None:
        """The engine answers, or one `EngineUnreachableError` naming its address."""
        try:
            self.call("answer a ping", self.client.ping)
        except EngineUnreachableError:
            raise
        except SandboxUnavailableError as error:
            raise EngineUnreachableError(f"no Docker engine answers at {self.address}",
                                         hint=ENGINE_HINT) from error

    def facts(self) -> EngineFacts:
        """Its `docker info` and `docker version`, as `doctor` reads them."""
        info = self.call("ask the engine who it is", self.client.info, retry=True)
        version = self.call("ask the engine its version", self.client.version, retry=True)
        return facts_of(info, version)

    def down(self) -> str | None:
        """Why the engine does not answer right now (one ping, no retry), or None: what a
        failed call is asked after the fact, to tell an outage from a refusal."""
        try:
            self.call("answer a ping", self.client.ping)
        except EngineError as error:  # named with its cause (`failures`): one line
            return str(error).splitlines()[0]
        return None

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

    def containers(self, filters: dict[str, str]) -> list[ContainerState]:
        return [state_of(item.attrs) for item in self.labelled("container", filters)]


    def remove_volume(self, name: str) -> None:
        """Remove one of our volumes by name (one without our labels is never touched; one
        already gone is fine)."""
        sweep.remove_volume(self, name)

    def remove_labelled(self, filters: dict[str, str],
                        keep: Callable[[dict[str, str]], bool] | None = None) -> dict[str, int]:
        """Remove our containers, then networks, then volumes matching `filters`
        (`sweep.remove_labelled`)."""
        return sweep.remove_labelled(self, filters, keep)

    def remove_network(self, network_id: str) -> None:
        sweep.remove_network(self, network_id)

    # -- the engine interface (backend.ContainerEngine), containers named by id ----------

    @property
    def capabilities(self) -> Capabilities:
        return DOCKER_CAPABILITIES

    def create(self, spec: ContainerSpec) -> str:
        """Create (not start) the container of `spec`; its id. Not retried: a create that
        timed out may have happened."""
        args = container_args(spec)
        unmet = self.capabilities.unmet(spec)
        if unmet:
            raise InfraError(f"{spec.purpose} needs {', '.join(unmet)}, which the engine at "
                             f"{self.address} cannot enforce",
                             hint="run it on an engine that can")
        container = self.call(f"create {spec.purpose}", self.client.containers.create, **args)
        return str(container.id)

    def start(self, container_id: str, stdin: IO[bytes] | None = None, *,
              what: str = "the container") -> None:
        if stdin is None:
            self.call(f"start {what}", self.client.api.start, container_id)
            return
        attached = self.call(f"attach the stdin of {what}", self.client.api.attach_socket,
                             container_id, params={"stdin": 1, "stream": 1})
        raw = getattr(attached, "_sock", attached)
        try:
            self.call(f"start {what}", self.client.api.start, container_id)
            with contextlib.suppress(OSError):  # it stopped reading (or died): the end
                while chunk := stdin.read(STDIN_CHUNK):
                    raw.sendall(chunk)
                end_of_input(raw)
        finally:
            with contextlib.suppress(OSError):
                raw.close()

    def exec(self, container_id: str, argv: Sequence[str], *, user: str, workdir: str,
             deadline_s: float, env: Mapping[str, str] | None = None) -> Completed:
        api = self.client.api
        exec_id = self.call("create an exec", api.exec_create, container_id, list(argv),
                            environment=dict(env or {}), workdir=workdir, user=user)["Id"]
        started = time.monotonic()
        stdout, stderr = self._exec_output(exec_id, deadline_s)
        duration = time.monotonic() - started
        state = exit_after_output(self, exec_id)
        code = -1 if state.running or state.exit_code is None else state.exit_code
        return Completed(code, stdout, stderr, round(duration, 3))

    def _exec_output(self, exec_id: str, deadline_s: float) -> tuple[str, str]:
        """The exec's output, on a thread of its own: past `deadline_s` the engine is
        declared stuck (whatever runs inside has its own `timeout`, well before)."""
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["out"] = hijack.output(hijack.start(self.client.api, exec_id))
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
            error = box["error"]
            if isinstance(error, DOCKER_ERRORS):
                raise translated(error, "run an exec", self.address) from error
            raise SandboxUnavailableError(f"exec failed: {error}") from error
        stdout, stderr = box["out"]
        return (stdout or b"").decode(errors="replace"), (stderr or b"").decode(errors="replace")

    def put_archive(self, container_id: str, path: str, data: bytes | IO[bytes]) -> None:
        if not self.call(f"put an archive at {path}", self.client.api.put_archive,
                         container_id, path, data):
            raise SandboxUnavailableError(f"the engine at {self.address} refused an archive "
                                          f"at {path}", hint=ENGINE_HINT)

    def get_archive(self, container_id: str, path: str) -> Iterator[bytes]:
        what = f"get the archive of {path}"
        stream, _ = self.call(what, self.client.api.get_archive, container_id, path)
        return iter_stream(stream, what, self.address)

    def logs(self, container_id: str, *, stdout: bool = True, stderr: bool = False,
             tail: int | None = None) -> bytes:
        out: Any = self.call("read a container's log", self.client.api.logs, container_id,
                             stdout=stdout, stderr=stderr, tail="all" if tail is None else tail)
        return bytes(out)

    def follow_logs(self, container_id: str, *, follow: bool = True) -> Iterator[bytes]:
        """A container's stdout as it streams (to its end with `follow`)."""
        what = "follow a container's log"
        stream = self.call(what, self.client.api.logs, container_id, stdout=True,
                           stderr=False, stream=True, follow=follow)
        return iter_stream(stream, what, self.address)

    def wait(self, container_id: str, deadline_s: float) -> int | None:
        """The container's exit status; None when `deadline_s` passed first. The client
        says both a read timeout and a cut connection as a ConnectionError: only one that
        came at the deadline, from an engine that still answers, is the deadline (a cut
        one is the engine's failure, never a sample that outlived its time)."""
        began = time.monotonic()
        try:
            status = self.client.api.wait(container_id, timeout=math.ceil(deadline_s))
        except requests.exceptions.RequestException as error:
            if time.monotonic() - began >= deadline_s - WAIT_SLACK_S and self.down() is None:
                return None
            raise translated(error, "wait for a container", self.address) from error
        except docker.errors.DockerException as error:
            raise translated(error, "wait for a container", self.address) from error
        return int(status.get("StatusCode", -1))

    def inspect(self, container_id: str) -> ContainerState:
        found: dict[str, Any] = self.call("inspect a container",
                                          self.client.api.inspect_container, container_id,
                                          retry=True)
        return state_of(found)

    def pause(self, container_id: str, *, what: str = "a container") -> None:
        for wait_s in (*PAUSE_RETRY_S, None):
            try:
                self.call(f"pause {what}", self.client.api.pause, container_id)
                return
            except EngineFailedError as error:
                if wait_s is None or UNABLE_TO_FREEZE not in str(error.__cause__):
                    raise
            time.sleep(wait_s)

    def unpause(self, container_id: str, *, what: str = "a container") -> None:
        self.call(f"unpause {what}", self.client.api.unpause, container_id)

    def kill(self, container_id: str, *, what: str = "a container") -> None:
        self.call(f"stop {what}", self.client.api.kill, container_id)

    def stop(self, container_id: str, *, grace_s: int, what: str = "a container") -> None:
        self.call(f"stop {what}", self.client.api.stop, container_id, timeout=grace_s)

    def create_network(self, name: str, labels: Labels, *, egress: bool) -> str:
        """A bridge network of its own; with no egress unless asked for.

        `internal` alone still lets a container reach every service on the host through
        the bridge's own address (INPUT, not FORWARD); with `inhibit_ipv4` the bridge has
        no address, so nothing outside the network answers (tests/integration prove both).
        """
        require_labels(labels, f"network {name}")
        options = {} if egress else {"com.docker.network.bridge.inhibit_ipv4": "true"}
        network = self.call(f"create network {name}", self.client.networks.create, name,
                            driver="bridge", internal=not egress, labels=labels.as_dict(),
                            options=options, check_duplicate=True)
        return str(network.id)

    def create_volume(self, name: str, labels: Labels, *, size_mb: int | None,
                      owner: int) -> str:
        """A size-limited tmpfs volume owned by `owner` (uid = gid): its content lives only
        while a container holds it, lost as soon as none has it mounted. `size_mb` None: a
        volume on the engine's own disk, which keeps what it holds until it is removed (the
        way files travel to and from containers through the engine, `fill` and `read`);
        what it holds is bounded by whoever fills it."""
        require_labels(labels, f"volume {name}")
        options = {} if size_mb is None else {
            "type": "tmpfs", "device": "tmpfs",
            "o": f"size={size_mb}m,uid={owner},gid={owner},mode=0755"}
        volume = self.call(f"create volume {name}", self.client.volumes.create, name,
                           driver="local", driver_opts=options, labels=labels.as_dict())
        return str(volume.name)

    def find_network(self, name: str, *, what: str = "find network",
                     retry: bool = True) -> str:
        network = self.call(what, self.client.networks.get, name, retry=retry)
        return str(network.id)

    def connect(self, network: str, container_id: str, *, aliases: Sequence[str] = (),
                what: str = "connect a container") -> None:
        net = self.call("find network", self.client.networks.get, network, retry=True)
        self.call(what, net.connect, container_id, aliases=list(aliases))

    def disconnect(self, network: str, container_id: str, *,
                   what: str = "disconnect a container") -> None:
        net = self.call("find network", self.client.networks.get, network)
        self.call(what, net.disconnect, container_id, force=True)

    def exec_stream(self, container_id: str, argv: Sequence[str], *, user: str,
                    workdir: str, env: Mapping[str, str]) -> ExecStream:
        api = self.client.api
        exec_id = str(self.call("create an exec", api.exec_create, container_id, list(argv),
                                environment=dict(env), workdir=workdir, user=user)["Id"])
        output = hijack.stream(self.call("start the exec", hijack.start, api, exec_id))

        def close() -> None:
            with contextlib.suppress(OSError, EngineError), mapped("close an exec's output"):
                output.close()
        return ExecStream(exec_id, output, close)

    def hold_exec(self, container_id: str, argv: Sequence[str], *, user: str,
                  env: Mapping[str, str] | None = None,
                  what: str = "exec") -> contextlib.AbstractContextManager[HeldProcess]:
        from runner.containers import held_exec  # it builds on this module
        return held_exec.hold_exec(self, container_id, argv, user=user, env=env, what=what)

    def exec_state(self, exec_id: str) -> ExecState:
        found = self.call("inspect an exec", self.client.api.exec_inspect, exec_id,
                          retry=True)
        code = found.get("ExitCode")
        return ExecState(bool(found.get("Running")), None if code is None else int(code))

    def remove(self, container_id: str) -> bool:
        try:
            self.call("remove a container", self.client.api.remove_container, container_id,
                      force=True, v=True)
        except NotFoundError:
            return False
        return True


def docker_engine(engine: ContainerEngine) -> Engine:
    """The docker engine behind `engine`, for what only docker's API does today: the image
    store (builds, tags, imports, the inventory): a cluster's is the docker engine that
    pushes to its registry (`image_store`). Another backend is refused, saying so."""
    if isinstance(engine, Engine):
        return engine
    store = getattr(engine, "image_store", None)  # a cluster's: this machine's docker
    found = store() if callable(store) else None
    if isinstance(found, Engine):
        return found
    raise InfraError(f"the engine at {engine.address} has no docker image store: images are "
                     "built, tagged and listed through docker's API only",
                     hint="run this command against a docker engine (DOCKER_HOST)")


def disk_full(engine: ContainerEngine, image: str,
              labels: Labels) -> errors.EngineDiskFullError | None:
    """The engine's disk full, in its own words, else None: a container created (never
    started) from `image` and removed. Asked when a container's output went missing: the
    engine writes a container's log on that disk, and when it is full the log is simply
    empty (measured: no error anywhere in the API, the container exits 0)."""
    probe = ContainerSpec(image=image, command=("true",), labels=labels,
                          resources=Resources(cpus=1, memory_mb=16, pids=4),
                          user="65534:65534", purpose="a probe of the engine's disk")
    try:
        made = engine.create(probe)
    except errors.EngineDiskFullError as full:
        return full
    engine.remove(made)
    return None


if TYPE_CHECKING:
    def _docker_is_a_container_engine(engine: Engine) -> ContainerEngine:
        return engine  # mypy proves the docker Engine implements the interface
