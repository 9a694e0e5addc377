"""The Kubernetes backend of the engine interface (issue 36): `KubeEngine`, a
`ContainerEngine` over the objects (`objects`), the API's calls (`api`) and its streams
(`channel`).

A container is one container of a Pod, named `POD/CONTAINER`. `create` only plans: the
Pod is made at the first `start` of one of its containers, and a container that `joins`
another (a server's criterion: one network namespace) is a second container of the
joined one's Pod, so it must be created before that Pod is made. A container's inputs
come on its stdin through attach (`stdinOnce`), its result on its log. What Kubernetes
does not do as docker does (no pids limit per Pod, no single container killed, an exec
as its container's user only, no pause, a named volume one node's at a time, one stream
of a log only where the cluster proved it) and what it does instead: docs/scale-out.md,
each refused with its reason where nothing can stand in, never degraded. A named volume
is a claim (`volumes`); a container given an archive before it started (how files reach
a volume) is its Pod made to hold (`volumes.holding`), never started after.
"""

from __future__ import annotations

import contextlib
import io
import secrets
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import IO, TYPE_CHECKING, Any

from runner.containers.backend import (
    LABEL_POD,
    LABEL_PREFIX,
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
    require_labels,
)
from runner.containers.kube import channel, objects
from runner.containers.kube.about import About
from runner.containers.kube.api import KubeApi, container_state
from runner.containers.kube.execs import PodExecs
from runner.containers.kube.networks import PodNetworks
from runner.containers.kube.volumes import DEFAULT_VOLUME_MB, PodVolumes, claimed, holding
from runner.errors import (
    ConflictError,
    EngineError,
    EngineRefusedError,
    InfraError,
    NotFoundError,
)

if TYPE_CHECKING:
    from runner.containers.backend import ContainerEngine

MAIN = "main"                # the container a Pod is made for
POD_DEADLINE_S = 6 * 3600    # a Pod's activeDeadlineSeconds when nothing shorter is known
START_DEADLINE_S = 300.0     # scheduled, pulled and running, or the start failed
STREAM_DEADLINE_S = 300.0    # an attach's stdin, an archive's exec


@dataclass
class _Planned:
    """A Pod as created so far: its containers, made at its first start."""

    containers: list[tuple[str, ContainerSpec]]
    made: bool = False
    removed: set[str] = field(default_factory=set)
    holds: bool = False  # made to hold for an archive (never started as asked)


class KubeEngine:
    """The engine interface on one namespace of a cluster. `cpus`: the most a container
    may ask (the configured size of a node's share, never this machine's count);
    `parallelism`: how many containers of ours run at once (the manifest's); `image_ref`:
    an image's `repo@sha256:...` (`images.registry.Registered` pushes it); `user_of`: a
    user named in an image as `uid:gid` (`Registered.user`); `volume_mb` and
    `storage_class`: the claims' (`volumes`); `image_store()`: the docker engine that builds
    and pushes the images (`engine.docker_engine` returns it)."""

    def __init__(self, api: KubeApi, *, cpus: int, parallelism: int = 1,
                 image_ref: Callable[[str], str] = objects.by_digest,
                 accept_node_pids: bool = False, user_of: Callable[[str, str], str] | None = None,
                 volume_mb: int = DEFAULT_VOLUME_MB, storage_class: str | None = None,
                 pod_deadline_s: float = POD_DEADLINE_S,
                 start_deadline_s: float = START_DEADLINE_S,
                 stream_deadline_s: float = STREAM_DEADLINE_S,
                 image_store: Callable[[], object] | None = None) -> None:
        self.api, self._cpus, self._ref, self.image_store = api, cpus, image_ref, image_store
        self.parallelism, self._user_of = parallelism, user_of
        self.accept_node_pids = accept_node_pids
        self.pod_deadline_s, self.start_deadline_s = pod_deadline_s, start_deadline_s
        self.stream_deadline_s = stream_deadline_s
        self._plans: dict[str, _Planned] = {}
        self._lock = threading.Lock()
        self.split_proved = False  # one stream of a log is the cluster's (preflight)
        self.policies = PodNetworks(api, self._refused)
        self.claims = PodVolumes(api, self._refused, volume_mb=volume_mb,
                                  storage_class=storage_class)
        self.execs = PodExecs(api.cluster, self.address, stream_deadline_s)
        self.about = About(api, self.address, accept_node_pids)

    @property
    def address(self) -> str:
        return f"{self.api.cluster.server} (namespace {self.api.cluster.namespace})"

    @property
    def identity(self) -> EngineIdentity:
        return self.about.identity()

    def ping(self) -> None:
        self.about.ping()

    def down(self) -> str | None:
        return self.about.down()

    def facts(self) -> EngineFacts:
        return self.about.facts()

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(no_egress=True, shared_network_namespace=True, pids_limit=False,
                            no_new_privileges=True, sized_volumes=True, freeze=False)

    @property
    def cpus(self) -> int:
        return self._cpus

    @property
    def workers(self) -> int:
        return self.parallelism

    def image_ref(self, image: str) -> str:
        return self._ref(image)

    def create(self, spec: ContainerSpec) -> str:
        """Plan the container of `spec` (its Pod is made at its first start); its id.
        What the cluster cannot enforce, or a Pod cannot carry, is refused here."""
        require_labels(spec.labels, spec.purpose)
        unmet = [need for need in self.capabilities.unmet(spec)
                 if not (need == "pids_limit" and self.accept_node_pids)]
        if unmet:
            raise InfraError(f"{spec.purpose} needs {', '.join(unmet)}, which the cluster at "
                             f"{self.address} cannot enforce per Pod (a pids limit is the "
                             "kubelet's, node-wide)",
                             hint="accept the nodes' own pids limit explicitly, or run it "
                                  "on a docker engine")
        with self._lock:
            if spec.joins is not None:
                pod, _ = split(spec.joins)
                plan = self._plans.get(pod)
                if plan is None or plan.made:
                    raise self._refused(f"create {spec.purpose}", f"it joins {spec.joins}, "
                                        "whose Pod is already made or unknown: a Pod takes "
                                        "no container once made (create the joining "
                                        "container before starting the one it joins)")
                name = f"c{len(plan.containers)}"
                trial = [*plan.containers, (name, spec)]
            else:
                pod, name = self._pod_name(spec), MAIN
                if pod in self._plans:
                    raise ConflictError(self.address, f"create {spec.purpose}",
                                        f"a Pod named {pod} is already planned", status=None)
                trial = [(name, spec)]
            self._pod(pod, trial, f"create {spec.purpose}")  # refused now, not at start
            if spec.joins is not None:
                self._plans[pod].containers.append((name, spec))
            else:
                self._plans[pod] = _Planned(trial)
        return f"{pod}/{name}"

    def _pod_name(self, spec: ContainerSpec) -> str:
        name = spec.name or ""
        return name if objects.is_name(name) else f"bk-{secrets.token_hex(6)}"

    def _pod(self, pod: str, containers: Sequence[tuple[str, ContainerSpec]],
             what: str, hosts: Mapping[str, str] | None = None, *,
             placed: bool = False, holds: bool = False) -> dict[str, Any]:
        """The Pod's object; `placed`: its claims' owners and node asked of the cluster
        (when it is made), else every claim taken as root's (a check of the spec)."""
        claims = claimed(containers)
        owners, node = dict.fromkeys(claims, 0), None
        if placed and claims:
            owners = self.claims.owners(claims)
            node = self.claims.node(claims, containers[0][1].labels.experiment, what)
        try:
            return objects.pod(pod, self.api.cluster.namespace,
                               [(name, objects.with_ids(spec, self._user_of),
                                 self._ref(spec.image)) for name, spec in containers],
                               deadline_s=self.pod_deadline_s,
                               hosts=hosts, claims=owners, node=node, holds=holds)
        except objects.KubeRefusal as refusal:
            raise self._refused(what, str(refusal)) from refusal

    def _refused(self, what: str, why: str) -> EngineRefusedError:
        return EngineRefusedError(self.address, what, why, status=None)

    def start(self, container_id: str, stdin: IO[bytes] | None = None, *,
              what: str = "the container") -> None:
        """Make the container's Pod (its first start) and wait until it runs; `stdin`
        given whole to the container through attach."""
        pod, container = split(container_id)
        with self._lock:
            plan = self._plans.get(pod)
            if plan is None:
                raise NotFoundError(self.address, f"start {what}", f"no container "
                                    f"{container_id} was created here", status=None)
            if plan.holds:
                raise self._refused(f"start {what}", f"{container_id} holds for the archive "
                                    "it was given before it started: it never runs its own "
                                    "command (a container that is filled is not started)")
            make = not plan.made
            plan.made = True
            hosts = self.policies.hosts(plan.containers[0][1].network)  # as of its making
        if make:
            self._make(pod, plan.containers, f"start {what}", hosts)
        if stdin is not None:
            channel.send_stdin(self.api.cluster, pod, container, stdin,
                               deadline_s=self.stream_deadline_s)

    def _make(self, pod: str, containers: Sequence[tuple[str, ContainerSpec]], what: str,
              hosts: Mapping[str, str], *, holds: bool = False) -> None:
        """Make the Pod, wait until it runs; a claim bound larger than asked: refused."""
        self.policies.deny_all(containers[0][1].labels)
        obj = self._pod(pod, containers, what, hosts, placed=True, holds=holds)
        for secret in objects.env_secrets(pod, self.api.cluster.namespace, containers):
            self.api.create(secret)
        self.api.create(obj)
        self.api.wait_pod(pod, running=True, deadline_s=self.start_deadline_s)
        self.claims.sized(claimed(containers), what, undo=lambda: self.api.delete(
            "Pod", pod, grace_s=0))

    def _held(self, container_id: str, what: str, *, putting: bool) -> None:
        """A container not started yet, asked for an archive (docker's "created, never
        started"): its Pod made holding (`volumes.holding`), never started after."""
        pod, _ = split(container_id)
        with self._lock:
            plan = self._plans.get(pod)
            if plan is None or plan.made:
                return
            plan.made = plan.holds = True
            hosts = self.policies.hosts(plan.containers[0][1].network)
        plan.containers = holding(plan.containers, self.claims.owners(claimed(
            plan.containers)), self.pod_deadline_s, putting=putting)
        self._make(pod, plan.containers, what, hosts, holds=True)

    def wait(self, container_id: str, deadline_s: float) -> int | None:
        pod, container = split(container_id)
        return self.api.container_exit(pod, container, deadline_s=deadline_s)

    def inspect(self, container_id: str) -> ContainerState:
        pod, container = split(container_id)
        if self._unmade(pod):
            spec = dict(self._plans[pod].containers)[container]
            return ContainerState(container_id, container_id, "created", None, False,
                                  spec.image, spec.command, labels=objects.labels(
                                      spec.labels, spec.network))
        found = self.api.get("Pod", pod)
        if container not in {c["name"] for c in found["spec"]["containers"]}:
            raise NotFoundError(self.address, "inspect a container",
                                f"pod {pod} has no container {container}", status=404)
        state = container_state(found, container)
        return replace(state, networks={**state.networks, **self.policies.joined(pod)})

    def _one_stream(self, what: str) -> None:
        if not self.split_proved:
            raise self._refused(what, "one stream of a log is trusted only once the cluster "
                                "proved it gives one (kube.preflight.prove_split)")

    def logs(self, container_id: str, *, stdout: bool = True, stderr: bool = False,
             tail: int | None = None) -> bytes:
        pod, container = split(container_id)
        if not (stdout or stderr) or self._unmade(pod):
            return b""
        stream = None if stdout and stderr else "Stdout" if stdout else "Stderr"
        if stream is not None:
            self._one_stream(f"read the {stream.lower()} of {container_id}")
        return self.api.logs(pod, container, stream=stream, tail=tail)

    def follow_logs(self, container_id: str, *, follow: bool = True) -> Iterator[bytes]:
        """The container's stdout (to its end with `follow`)."""
        pod, container = split(container_id)
        if self._unmade(pod):
            return iter(())
        self._one_stream(f"read the stdout of {container_id}")
        if not follow:
            return iter((self.api.logs(pod, container, stream="Stdout"),))
        return self.api.follow_log(pod, container, stream="Stdout")

    def _unmade(self, pod: str) -> bool:
        plan = self._plans.get(pod)
        return plan is not None and not plan.made

    def kill(self, container_id: str, *, what: str = "a container") -> None:
        """The API kills no single container: its Pod goes, at once."""
        pod, _ = split(container_id)
        self.api.delete("Pod", pod, grace_s=0)

    def stop(self, container_id: str, *, grace_s: int, what: str = "a container") -> None:
        """SIGTERM to the container's PID 1 (by exec, as its own user), its Pod killed
        when it has not ended `grace_s` later."""
        pod, container = split(container_id)
        with contextlib.suppress(EngineError):  # it may have ended already
            channel.stream(self.api.cluster, pod, container, command=["kill", "-TERM", "1"],
                           stdin=None, deadline_s=self.stream_deadline_s)
        if self.api.container_exit(pod, container, deadline_s=grace_s) is None:
            self.kill(container_id, what=what)

    def remove(self, container_id: str) -> bool:
        """Forget the container; its Pod goes (at once) with its last container, and the
        Secrets of its containers' keys (a Pod of another process: by label, at `down`)."""
        pod, container = split(container_id)
        with self._lock:
            plan = self._plans.get(pod)
            if plan is not None:
                plan.removed.add(container)
                if plan.removed < {name for name, _ in plan.containers}:
                    return True
                del self._plans[pod]
                if not plan.made:
                    return True
        self.policies.leave(pod)
        gone = self.api.delete("Pod", pod, grace_s=0)
        if plan is not None and any(spec.secret_env for _, spec in plan.containers):
            self.api.delete_selected("Secret", {LABEL_POD: pod})
        return gone

    def containers(self, filters: dict[str, str]) -> list[ContainerState]:
        return [container_state(pod, c["name"]) for pod in self.api.listed("Pod", filters)
                for c in pod["spec"]["containers"]]

    def remove_labelled(self, filters: dict[str, str],
                        keep: Callable[[dict[str, str]], bool] | None = None
                        ) -> dict[str, int]:
        """Our Pods, Services, Secrets and NetworkPolicies matching `filters`, each
        deleted by name (a kept one stays); how many of each (containers: the Pods')."""
        if not any(key.startswith(LABEL_PREFIX) for key in filters):
            raise ValueError("refusing to remove resources without a bakeoff label filter")
        removed = {"container": 0, "network": 0, "volume": 0, "service": 0, "secret": 0}
        self.policies.undenied()
        for kind, counted in (("Pod", "container"), ("Service", "service"),
                              ("Secret", "secret"), ("NetworkPolicy", "network"),
                              ("PersistentVolumeClaim", "volume")):
            for obj in self.api.listed(kind, filters):
                if keep is not None and keep(dict(obj["metadata"].get("labels") or {})):
                    continue
                name = obj["metadata"]["name"]
                if self.api.delete(kind, name, grace_s=0 if kind == "Pod" else None):
                    removed[counted] += (len(obj["spec"]["containers"]) if kind == "Pod"
                                         else 1)
                if kind == "Pod":
                    self._plans.pop(name, None)
                    self.policies.forget(name)  # its policies: labelled, gone too
                if kind == "PersistentVolumeClaim":
                    self.claims.forget([name])
        return removed

    def exec(self, container_id: str, argv: Sequence[str], *, user: str, workdir: str,
             deadline_s: float, env: Mapping[str, str] | None = None) -> Completed:
        return self.execs.run(*split(container_id), self._command(
            container_id, user, argv, workdir, env, "run an exec"), deadline_s)

    def _command(self, container_id: str, user: str, argv: Sequence[str], workdir: str,
                 env: Mapping[str, str] | None, what: str) -> channel.ExecCommand:
        """`argv` in `workdir` with `env` (on stdin: `channel.in_dir`), as `user`."""
        try:
            made = channel.in_dir(argv, workdir, env)
        except ValueError as error:
            raise self._refused(what, str(error)) from error
        return replace(made, argv=self._as(container_id, user, made.argv))

    def _as(self, container_id: str, user: str, argv: list[str]) -> list[str]:
        """`argv` run as `user` in the container: as it is when that is the container's
        user, through `setpriv` from a root container that may change ids, else refused."""
        pod, container = split(container_id)
        plan = self._plans.get(pod)
        spec = None if plan is None else dict(plan.containers).get(container)
        if spec is None:
            raise self._refused("run an exec", f"{container_id} is not a container this "
                                "engine made: its user is unknown")
        found = objects.exec_as(spec, user, argv)
        if found is None:
            raise self._refused("run an exec", f"an exec runs as its container's user "
                                f"({spec.user}) on Kubernetes, not {user}")
        return found

    def put_archive(self, container_id: str, path: str, data: bytes | IO[bytes]) -> None:
        """`data` unpacked at `path` by tar in the container (one not started yet holds
        for it: `_held`)."""
        self._held(container_id, f"put an archive in {container_id}", putting=True)
        pod, container = split(container_id)
        channel.untar(self.api.cluster, pod, container, path,
                      io.BytesIO(data) if isinstance(data, bytes) else data,
                      deadline_s=self.stream_deadline_s)

    def get_archive(self, container_id: str, path: str) -> Iterator[bytes]:
        """The tar of `path` (a running container's, or one not started yet made to hold:
        no exec reaches an ended one)."""
        self._held(container_id, f"get an archive of {container_id}", putting=False)
        pod, container = split(container_id)
        done = channel.tar(self.api.cluster, pod, container, path,
                           deadline_s=self.stream_deadline_s)
        if done.exit_code == 0:
            return iter((done.stdout,))
        said = done.stderr.decode(errors="replace")[:500].strip()
        # A path that is not there is docker's 404; one the container's user may not read
        # is a refusal, never an absence (docker's daemon reads as root: it has none).
        refusal = NotFoundError if channel.MISSING in said else EngineRefusedError
        raise refusal(self.address, f"get the archive of {path}",
                      f"tar exit {done.exit_code}: {said}", status=None)

    def create_network(self, name: str, labels: Labels, *, egress: bool) -> str:
        """A NetworkPolicy over the Pods labelled with `name` (`objects.network`)."""
        return self.policies.create(name, labels, egress=egress)

    def remove_network(self, network_id: str) -> None:
        self.api.delete("NetworkPolicy", network_id)

    def find_network(self, name: str, *, what: str = "find network",
                     retry: bool = True) -> str:
        return self.policies.find(name, what)

    def pause(self, container_id: str, *, what: str = "a container") -> None:
        raise self._refused(f"pause {what}", "a Pod cannot be frozen (Kubernetes)")

    def unpause(self, container_id: str, *, what: str = "a container") -> None:
        raise self._refused(f"unpause {what}", "a Pod cannot be frozen (Kubernetes)")

    def create_volume(self, name: str, labels: Labels, *, size_mb: int | None,
                      owner: int) -> str:
        """A claim of `size_mb` (None: the manifest's `volume_mb`) owned by `owner`."""
        require_labels(labels, f"volume {name}")
        try:
            return self.claims.create(name, labels, size_mb=size_mb, owner=owner)
        except objects.KubeRefusal as refusal:
            raise self._refused(f"create volume {name}", str(refusal)) from refusal

    def remove_volume(self, name: str) -> None:
        self.claims.remove(name)

    def connect(self, network: str, container_id: str, *, aliases: Sequence[str] = (),
                what: str = "connect a container") -> None:
        """The running Pod of `container_id` joins `network` (the database, the gateway),
        its aliases in the hosts of the network's Pods made from now on (`PodNetworks`).
        Refused: a Pod not running (it has no address), a network with a Pod of ours
        already made (it would not resolve the names), an alias already taken there."""
        pod, _ = split(container_id)
        with self._lock:
            plan = self._plans.get(pod)
        if plan is None or not plan.made:
            raise self._refused(what, f"{container_id} is not running: a name on a network "
                                "is its Pod's address (connect it once started)")
        address = self.policies.address(pod, network, aliases, what)
        with self._lock:  # no Pod is made between the check of those made and the record
            early = sorted(name for name, other in self._plans.items()
                           if other.made and name != pod
                           and other.containers[0][1].network == network)
            self.policies.record(pod, network, aliases, address, early=early, what=what)
        self.policies.open(pod, network, plan.containers[0][1].labels)

    def disconnect(self, network: str, container_id: str, *,
                   what: str = "disconnect a container") -> None:
        """Its two policies deleted: the network's Pods no longer reach it."""
        self.policies.leave(split(container_id)[0], network)

    def exec_stream(self, container_id: str, argv: Sequence[str], *, user: str,
                    workdir: str, env: Mapping[str, str]) -> ExecStream:
        return self.execs.stream(*split(container_id), self._command(
            container_id, user, argv, workdir, env, "run an exec"))

    def exec_state(self, exec_id: str) -> ExecState:
        return self.execs.state(exec_id)

    def hold_exec(self, container_id: str, argv: Sequence[str], *, user: str,
                  env: Mapping[str, str] | None = None,
                  what: str = "exec") -> AbstractContextManager[HeldProcess]:
        return self.execs.held(*split(container_id), self._command(
            container_id, user, argv, "/", env, f"run {what}"), what)


def split(container_id: str) -> tuple[str, str]:
    """`POD/CONTAINER` (a bare Pod name is its main container)."""
    pod, _, container = container_id.partition("/")
    return pod, container or MAIN


if TYPE_CHECKING:
    def _kube_is_a_container_engine(engine: KubeEngine) -> ContainerEngine:
        return engine  # mypy proves the Kubernetes backend implements the interface
