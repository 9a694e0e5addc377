"""The engine interface: what every command asks of a container engine, and the words it
asks in. Modelled on inspect_ai's `SandboxEnvironment` and Harbor's `BaseEnvironment`,
kept to what this project uses: create and start (inputs on stdin), exec under a host
deadline, a tar in and out, logs, wait with a deadline, remove one container or all that
carry some of our labels; and `Capabilities`, the isolation a backend enforces (a spec
asking for more is refused: `Capabilities.unmet`). Two backends: Docker, local or remote
(`runner.containers.engine`), and Kubernetes (`runner.containers.kube.engine`).

Errors are the project's own (`runner.errors.EngineError` and its subclasses): a backend
maps its client's exceptions at its edge. Plain Python: no client library is imported.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

# The label keys: spelled here and nowhere else (tests/unit/test_container_choke_point.py).
LABEL_PREFIX = "io.bakeoff."
LABEL_EXPERIMENT = f"{LABEL_PREFIX}experiment"
LABEL_ARM = f"{LABEL_PREFIX}arm"
LABEL_ROLE = f"{LABEL_PREFIX}role"
LABEL_RUN = f"{LABEL_PREFIX}run"
LABEL_IMAGE = f"{LABEL_PREFIX}image"
LABEL_IDENTITY = f"{LABEL_PREFIX}identity"
# Kubernetes: a Pod's network (a NetworkPolicy selects it by it), a Pod's own name (what
# a network it joined once made selects), a claim's owner uid (its Pods' fsGroup).
LABEL_NETWORK, LABEL_POD = f"{LABEL_PREFIX}network", f"{LABEL_PREFIX}pod"
LABEL_OWNER = f"{LABEL_PREFIX}owner"
# A build stage's image (left dangling by the classic builder): the tag it was built for.
LABEL_BUILD_OF = f"{LABEL_PREFIX}build-of"


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


NO_NETWORK = "none"  # a container with no network at all
EXIT_LAG_S = 3.0     # how long an engine may still call an exec running once its output ended
EXIT_POLL_S = 0.05


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
    secret_env: Mapping[str, str] = field(default_factory=dict)  # env's keys: a Secret on k8s
    working_dir: str | None = None
    hostname: str | None = None
    read_only: bool = False              # the root filesystem
    tty: bool = False                    # an interactive terminal (stdin open too)
    log_max_mb: int | None = None        # cap the container's log (None: the engine's)
    stdin: bool = False                  # its inputs come on stdin (no TTY): `start`
    # False: only its own network's names resolve; any other lookup ends at once, inside
    # (`OWN_LOOPBACK`), never held by the engine's DNS on an upstream it cannot reach.
    resolve_outside: bool = True
    # Users an exec runs as besides its own: where an exec runs as its container's user (a
    # Pod), a root one gets SETUID and SETGID for `setpriv` (docker's daemon switches itself).
    exec_users: tuple[str, ...] = ()


# The only capabilities a spec may add back on top of dropping them all: what the sample
# driver needs, as root, to lay a tree out and drop to the sandbox user (`setpriv`). A new
# one is a decision taken here, where a reviewer sees it; the rest is refused (`unaddable_caps`).
ADDABLE_CAPS = frozenset({"CHOWN", "SETUID", "SETGID", "KILL"})
# The DNS server of a container that does not resolve outside its network: its own loopback
# (nothing of ours listens). On Docker, from a network with no way out, the engine's forward
# of an unknown name waited 4 s and held the container's end that long; here it fails at once.
OWN_LOOPBACK = "127.0.0.1"


def unaddable_caps(spec: ContainerSpec) -> str | None:
    """Why `spec` may not have its capabilities (one beyond `ADDABLE_CAPS`), else None."""
    extra = sorted(set(spec.cap_add) - ADDABLE_CAPS)
    return None if not extra else (f"{spec.purpose}: capabilities {extra} may not be "
                                   f"added (only {sorted(ADDABLE_CAPS)})")


def require_labels(labels: Labels, what: str) -> None:
    """Refuse to make `what` without an experiment and a role: `down` and `gc` remove by
    label only, so an unlabelled resource would outlive every run."""
    if not labels.experiment or not labels.role:
        raise ValueError(f"refusing to create {what} without an experiment and a role label "
                         f"(got {labels!r}): nothing unlabelled is ever made")


@dataclass(frozen=True)
class Capabilities:
    """The isolation a backend enforces, each a structural guarantee: one it lacks is refused."""

    no_egress: bool                 # networks with no way out, not even to the host
    shared_network_namespace: bool  # a container joins another's (a browser beside its app)
    pids_limit: bool                # a cap on the processes a container may start
    no_new_privileges: bool         # setuid binaries gain nothing
    sized_volumes: bool             # volumes with a size limit (tmpfs), ENOSPC when full
    freeze: bool = True             # a container's processes frozen (`pause`); a Pod's: never

    def unmet(self, spec: ContainerSpec) -> list[str]:
        """What `spec` needs that this backend cannot enforce (every container needs the
        pids limit and no-new-privileges: the choke point applies both to all)."""
        needs = {"pids_limit": True, "no_new_privileges": True,
                 "shared_network_namespace": spec.joins is not None}
        return [name for name, needed in needs.items() if needed and not getattr(self, name)]


@dataclass(frozen=True)
class EngineIdentity:
    """Which engine the work ran on: its address as this machine reaches it (DOCKER_HOST,
    else the local socket) and its own `docker info` ID and name."""

    host: str
    id: str
    name: str

    accepted: tuple[tuple[str, str], ...] = ()  # limit -> how the manifest accepted it

    def as_record(self) -> dict[str, str]:
        return {"host": self.host, "id": self.id, "name": self.name,
                **{f"accepted_{limit}": how for limit, how in self.accepted}}

    def shown(self) -> str:
        return f"{self.host} ({self.name}, ID {self.id[:12]})"


@dataclass(frozen=True)
class EngineFacts:
    """What `doctor` asks of an engine: its versions (the server's and the API's), its
    cgroup version and driver, the limits it can enforce, its storage driver and the
    filesystem under it."""

    server_version: str
    api_version: str
    cgroup_version: str
    cgroup_driver: str
    limits: dict[str, bool]  # memory, swap, pids, cpu: enforced or not
    storage_driver: str
    backing_filesystem: str


@dataclass(frozen=True)
class Completed:
    """A command run to its end in a container: a failed command is a value; a broken
    sandbox is an exception (`SandboxUnavailableError`)."""

    exit_code: int      # -1 when the engine reported none
    stdout: str
    stderr: str
    duration_s: float


@dataclass(frozen=True)
class ContainerState:
    """What the engine says of one container now: the typed answer of `inspect`."""

    id: str
    name: str
    status: str                      # created, running, paused, exited, dead
    exit_code: int | None            # None while it has not exited
    oom_killed: bool                 # the memory limit ended it
    image: str                       # the image's id
    command: tuple[str, ...] = ()    # as it was created
    health: str | None = None        # its healthcheck's verdict, when it has one
    networks: Mapping[str, str] = field(default_factory=dict)  # name: its address there
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ExecState:
    """An exec's state now: running, or its exit code (None when the engine kept none)."""

    running: bool
    exit_code: int | None


@dataclass(frozen=True)
class ExecStream:
    """A command started in a running container, its output as the engine streams it;
    `close` frees the connection (a no-op once the output ended by itself)."""

    exec_id: str
    output: Iterator[bytes]
    close: Callable[[], None]


@dataclass(frozen=True)
class ExecOutput:
    """What one exec left: its exit code (None while it runs) and both streams."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes


class HeldProcess(Protocol):
    """A process started by exec whose stdin stays open: scripts go in one after the other
    (`send`), each answer read up to a marker line it prints (`until`). A broken stream
    or a deadline passed is `SandboxUnavailableError`; the process ending is a value."""

    @property
    def ended(self) -> bool:
        """Whether its output ended (the process with it)."""
        ...

    def send(self, data: bytes) -> None:
        ...

    def close_input(self) -> None:
        """The end of its input."""
        ...

    def until(self, marker: bytes | None, timeout_s: float) -> ExecOutput:
        """What it said up to a stdout line equal to `marker` (None: to its end)."""
        ...


class ContainerEngine(Protocol):
    """What the commands ask of an engine, through the docker wing. Containers are named
    by id; every error is a `runner.errors.EngineError`."""

    @property
    def address(self) -> str:
        """Where the engine is, as this machine reaches it (named in errors)."""
        ...

    @property
    def identity(self) -> EngineIdentity:
        """Which engine this is (asked once)."""
        ...

    def ping(self) -> None:
        """The engine answers, or one `EngineUnreachableError` naming its address."""
        ...

    def down(self) -> str | None:
        """Why the engine does not answer right now (one ping, no retry), or None."""
        ...

    def facts(self) -> EngineFacts:
        """Its versions, cgroups, limits and storage, as `doctor` reads them."""
        ...

    @property
    def capabilities(self) -> Capabilities:
        """The isolation this engine enforces."""
        ...

    @property
    def cpus(self) -> int:
        """The CPUs the engine has: no container's CPU limit may pass it."""
        ...

    @property
    def workers(self) -> int:
        """How many containers of ours it runs at once: a CPU's worth each, or as set."""
        ...

    def image_ref(self, image: str) -> str:
        """`image` as its containers name it (a cluster: the registry's `repo@sha256:`)."""
        ...

    def create(self, spec: ContainerSpec) -> str:
        """Create (not start) the container of `spec`, the policy applied; its id."""
        ...

    def start(self, container_id: str, stdin: IO[bytes] | None = None, *,
              what: str = "the container") -> None:
        """Start it; `stdin` (a spec with `stdin`) streamed to it, then closed."""
        ...

    def exec(self, container_id: str, argv: Sequence[str], *, user: str, workdir: str,
             deadline_s: float, env: Mapping[str, str] | None = None) -> Completed:
        """Run `argv` in a running container; past `deadline_s` the engine is declared
        stuck (`SandboxUnavailableError`): a command's own timeout is the caller's."""
        ...

    def inspect(self, container_id: str) -> ContainerState:
        """Its state now; `NotFoundError` when it is gone."""
        ...

    def pause(self, container_id: str, *, what: str = "a container") -> None:
        """Freeze every process in it (an arm waiting its turn)."""
        ...

    def unpause(self, container_id: str, *, what: str = "a container") -> None:
        """Thaw it."""
        ...

    def kill(self, container_id: str, *, what: str = "a container") -> None:
        """Stop it at once (SIGKILL): a container past its deadline."""
        ...

    def stop(self, container_id: str, *, grace_s: int, what: str = "a container") -> None:
        """Stop it (SIGTERM, SIGKILL `grace_s` later)."""
        ...

    def create_network(self, name: str, labels: Labels, *, egress: bool) -> str:
        """A network of ours, with no way out unless `egress`; its id."""
        ...

    def create_volume(self, name: str, labels: Labels, *, size_mb: int | None,
                      owner: int) -> str:
        """A volume of ours, a tmpfs of `size_mb` (None: on disk) owned by `owner`."""
        ...

    def remove_volume(self, name: str) -> None:
        """Remove one of our volumes (one already gone is fine)."""
        ...

    def remove_network(self, network_id: str) -> None:
        """Remove ONE network of ours, emptied first (one already gone is fine)."""
        ...

    def find_network(self, name: str, *, what: str = "find network",
                     retry: bool = True) -> str:
        """The id of the network `name`; `NotFoundError` when there is none."""
        ...

    def connect(self, network: str, container_id: str, *, aliases: Sequence[str] = (),
                what: str = "connect a container") -> None:
        """Put a running container on `network` too, reachable there by `aliases`."""
        ...

    def disconnect(self, network: str, container_id: str, *,
                   what: str = "disconnect a container") -> None:
        """Take a container off `network`."""
        ...

    def exec_stream(self, container_id: str, argv: Sequence[str], *, user: str,
                    workdir: str, env: Mapping[str, str]) -> ExecStream:
        """Start `argv` in a running container, its output streamed (no deadline)."""
        ...

    def exec_state(self, exec_id: str) -> ExecState:
        """What the engine says of an exec now."""
        ...

    def hold_exec(self, container_id: str, argv: Sequence[str], *, user: str,
                  env: Mapping[str, str] | None = None,
                  what: str = "exec") -> AbstractContextManager[HeldProcess]:
        """`argv` started, its stdin held open for the block (many scripts, one exec)."""
        ...

    def put_archive(self, container_id: str, path: str, data: bytes | IO[bytes]) -> None:
        """A tar into `path` of the container."""
        ...

    def get_archive(self, container_id: str, path: str) -> Iterator[bytes]:
        """The tar of `path` in the container (running or stopped), as it streams."""
        ...

    def logs(self, container_id: str, *, stdout: bool = True, stderr: bool = False,
             tail: int | None = None) -> bytes:
        """What the container printed so far (the last `tail` lines)."""
        ...

    def follow_logs(self, container_id: str, *, follow: bool = True) -> Iterator[bytes]:
        """Its stdout as it streams (to its end with `follow`)."""
        ...

    def wait(self, container_id: str, deadline_s: float) -> int | None:
        """The container's exit status, or None when it still runs at the deadline."""
        ...

    def remove(self, container_id: str) -> bool:
        """Remove one container and its anonymous volumes; False when it was gone."""
        ...

    def containers(self, filters: dict[str, str]) -> list[ContainerState]:
        """Our containers whose labels match every `filters` item ("" matches any)."""
        ...

    def remove_labelled(self, filters: dict[str, str],
                        keep: Callable[[dict[str, str]], bool] | None = None
                        ) -> dict[str, int]:
        """Remove all of ours matching `filters` (never unlabelled); counts by kind."""
        ...


@dataclass
class HeldOutput:
    """A held process's output as it comes (`HeldProcess`), handed out answer by answer:
    what came before a marker line, or at its end all that is left."""

    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)

    def before(self, marker: bytes | None) -> ExecOutput | None:
        """What came before a stdout line equal to `marker`, taken; None until it came."""
        line = None if marker is None else marker + b"\n"
        at = -1 if line is None else line_at(self.out, line)
        if line is None or at < 0:
            return None
        found = ExecOutput(None, bytes(self.out[:at]), bytes(self.err))
        del self.out[:at + len(line)]
        self.err.clear()
        return found

    def rest(self, exit_code: int | None) -> ExecOutput:
        """All that is left, with the process's exit code."""
        found = ExecOutput(exit_code, bytes(self.out), bytes(self.err))
        self.out.clear()
        self.err.clear()
        return found


def line_at(buffer: bytearray, line: bytes) -> int:
    """Where `line` starts as a whole line of `buffer`, else -1 (a held process's answer
    ends at its marker line)."""
    if buffer.startswith(line):
        return 0
    at = buffer.find(b"\n" + line)
    return -1 if at < 0 else at + 1


def exit_after_output(engine: ContainerEngine, exec_id: str) -> ExecState:
    """An exec's state once its output ended. The engine records the exit a moment after
    the output closes, longer under load or on a remote engine (a second engine once said
    `running` there, and a process listing read as failed), so it is asked again for up
    to EXIT_LAG_S; what it says then is the answer, and the caller decides what a process
    still running means."""
    until = time.monotonic() + EXIT_LAG_S
    state = engine.exec_state(exec_id)
    while state.running and time.monotonic() < until:
        time.sleep(EXIT_POLL_S)
        state = engine.exec_state(exec_id)
    return state
