"""The Kubernetes API as the backend speaks it (issue 36, step 2): raw JSON over HTTP, a
session per thread, and what a Pod came to, read from its status.

Built against what the anchors hit at scale: a `kubernetes` client shared by threads is
not safe under concurrent exec (Harbor gave each environment its own), and its object
deserialization stalled many-pod runs (inspect_k8s_sandbox parses raw JSON): here no
client library, dicts in and out, one `requests.Session` per thread. A Pod is waited for
by its own name and namespace, never by "any Pod with this label" (inspect_k8s_sandbox#249
handed an agent the wrong container). What a Pod cannot become is said by its status:
an image that cannot be pulled, an eviction, its deadline, never scheduled; each is an
`EngineError` naming the Pod, never a hang.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import quote

import requests

from runner.containers.backend import LABEL_NETWORK, NO_NETWORK, ContainerState
from runner.containers.kube.config import KubeTarget
from runner.errors import (
    ConflictError,
    EngineError,
    EngineFailedError,
    EngineRefusedError,
    NotFoundError,
)

Obj = dict[str, Any]
T = TypeVar("T")
POLL_S = 0.2
REQUEST_TIMEOUT_S = 30.0
PULL_FAILURES = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName",
                           "ErrImageNeverPull"})
# The API's path of each kind this backend makes, under /namespaces/NS/.
PATHS = {"Pod": "/api/v1/namespaces/{ns}/pods",
         "Service": "/api/v1/namespaces/{ns}/services",
         "Secret": "/api/v1/namespaces/{ns}/secrets",
         "PersistentVolumeClaim": "/api/v1/namespaces/{ns}/persistentvolumeclaims",
         "NetworkPolicy": "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies"}


@dataclass(frozen=True)
class PodState:
    """What a Pod's status says: its phase, the reason the API gives, and per container
    its exit code once it ended (None while it runs or waits)."""

    phase: str
    reason: str = ""
    message: str = ""
    exit_codes: dict[str, int | None] = field(default_factory=dict)

    @property
    def ended(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


class PodFailedError(EngineError):
    """A Pod that cannot become what was asked (its image, its node, its deadline): the
    Pod's name and the API's own words."""


def pod_state(pod: Obj) -> PodState:
    """`pod`'s status, read."""
    status = pod.get("status") or {}
    codes: dict[str, int | None] = {}
    for name, container in statuses(pod).items():
        terminated = (container.get("state") or {}).get("terminated")
        codes[name] = None if terminated is None else int(terminated.get("exitCode", -1))
    return PodState(str(status.get("phase") or "Pending"), str(status.get("reason") or ""),
                    str(status.get("message") or ""), codes)


def pod_problem(pod: Obj) -> str | None:
    """Why `pod` will never run as asked, from its status; None while it still may."""
    status = pod.get("status") or {}
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in PULL_FAILURES:
            return (f"its image {container.get('image')} cannot be pulled "
                    f"({waiting['reason']}: {waiting.get('message', '')})")
    for init in status.get("initContainerStatuses") or []:
        ended = (init.get("state") or {}).get("terminated") or {}
        if ended.get("exitCode", 0) != 0:
            return (f"its init container {init.get('name')} failed (exit "
                    f"{ended['exitCode']}: {ended.get('message') or ended.get('reason', '')})")
    reason = status.get("reason")
    if status.get("phase") == "Failed" and reason == "Evicted":
        return f"the node evicted it: {status.get('message', '')}"
    if status.get("phase") == "Failed" and reason == "DeadlineExceeded":
        return f"it outlived its activeDeadlineSeconds: {status.get('message', '')}"
    return None


def statuses(pod: Obj) -> dict[str, Obj]:
    """Each container's status in `pod`, by the container's name."""
    return {str(found.get("name")): found
            for found in (pod.get("status") or {}).get("containerStatuses") or []}


def container_state(pod: Obj, name: str) -> ContainerState:
    """Container `name` of `pod`, as the engine interface says a container's state (its
    id `POD/NAME`)."""
    status = statuses(pod).get(name, {})
    state = status.get("state") or {}
    ended: Obj = state.get("terminated") or {}
    spec = next(c for c in pod["spec"]["containers"] if c["name"] == name)
    labels = dict(pod["metadata"].get("labels") or {})
    network = labels.get(LABEL_NETWORK, NO_NETWORK)
    address = str((pod.get("status") or {}).get("podIP") or "")
    container_id = f"{pod['metadata']['name']}/{name}"
    return ContainerState(
        id=container_id, name=container_id,
        status="exited" if ended else "running" if "running" in state else "created",
        exit_code=None if not ended else int(ended.get("exitCode", -1)),
        oom_killed=ended.get("reason") == "OOMKilled",
        image=str(status.get("imageID") or spec["image"]),
        # Its command as docker's `Cmd`: the arguments of the image's entrypoint, or what
        # replaced the entrypoint (a Pod made holding: `volumes.holding`).
        command=tuple(spec.get("args") or spec.get("command") or ()),
        networks={} if network == NO_NETWORK else {network: address}, labels=labels)


def unscheduled(pod: Obj) -> str | None:
    """The scheduler's words when it could not place `pod` (PodScheduled False)."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return f"{condition.get('reason', '')}: {condition.get('message', '')}"
    return None


class KubeApi:
    """The API of one cluster, for every thread of the tool (each gets its own session)."""

    def __init__(self, cluster: KubeTarget, *, timeout_s: float = REQUEST_TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.cluster, self.timeout_s = cluster, timeout_s
        self._clock, self._sleep = clock, sleep
        self._local = threading.local()

    def session(self) -> requests.Session:
        """This thread's session (made on first use)."""
        found: requests.Session | None = getattr(self._local, "session", None)
        if found is None:
            found = requests.Session()
            if self.cluster.token:
                found.headers["Authorization"] = f"Bearer {self.cluster.token}"
            found.verify = self.cluster.ca_file or self.cluster.verify
            if self.cluster.client_cert and self.cluster.client_key:
                found.cert = (self.cluster.client_cert, self.cluster.client_key)
            self._local.session = found
        return found

    def path(self, kind: str, name: str = "") -> str:
        return api_path(self.cluster.namespace, kind, name)

    def call(self, method: str, path: str, what: str, *, body: Obj | None = None,
             params: Mapping[str, str] | None = None) -> requests.Response:
        """One request; the API's refusals and failures as the project's errors."""
        try:
            answer = self.session().request(method, self.cluster.server + path, json=body,
                                            params=dict(params or {}),
                                            timeout=self.timeout_s)
        except requests.RequestException as error:
            raise EngineFailedError(f"the Kubernetes API at {self.cluster.server} did not "
                                    f"answer to {what}: {error}") from error
        return checked(answer, self.cluster.server, what)

    def create(self, obj: Obj) -> Obj:
        kind, name = obj["kind"], obj["metadata"]["name"]
        found: Obj = self.call("POST", self.path(kind), f"create {kind} {name}",
                               body=obj).json()
        return found

    def get(self, kind: str, name: str) -> Obj:
        found: Obj = self.call("GET", self.path(kind, name), f"read {kind} {name}").json()
        return found

    def listed(self, kind: str, selector: Mapping[str, str]) -> list[Obj]:
        """Every object of `kind` carrying all of `selector`'s labels."""
        answer = self.call("GET", self.path(kind), f"list {kind}s",
                           params={"labelSelector": label_selector(selector)}).json()
        return list(answer.get("items") or [])

    def delete_selected(self, kind: str, selector: Mapping[str, str]) -> None:
        """Delete every object of `kind` carrying `selector`'s labels (one request)."""
        self.call("DELETE", self.path(kind), f"delete the {kind}s of {dict(selector)}",
                  params={"labelSelector": label_selector(selector)})

    def delete(self, kind: str, name: str, *, grace_s: int | None = None) -> bool:
        """Delete one object (`grace_s`: a Pod's termination grace, 0 for at once); False
        when it was gone."""
        params = {} if grace_s is None else {"gracePeriodSeconds": str(grace_s)}
        try:
            self.call("DELETE", self.path(kind, name), f"delete {kind} {name}", params=params)
        except NotFoundError:
            return False
        return True

    def logs(self, pod: str, container: str, *, stream: str | None = None,
             tail: int | None = None) -> bytes:
        """A container's log: both streams as the kubelet keeps them, or one (`stream`:
        Stdout or Stderr, KEP-3288's `stream`; a cluster that ignores it is refused at
        preflight, `KubeEngine.split_streams`); its last `tail` lines."""
        params = {"container": container}
        if stream is not None:
            params["stream"] = stream
        if tail is not None:
            params["tailLines"] = str(tail)
        return self.call("GET", self.path("Pod", pod) + "/log", f"read the log of {pod}",
                         params=params).content

    def follow_log(self, pod: str, container: str, *, stream: str | None = None
                   ) -> Iterator[bytes]:
        """A container's log as it is written, to the container's end (no read timeout:
        a quiet container is not a dead API; the caller's deadline ends it)."""
        params = {"container": container, "follow": "true"}
        if stream is not None:
            params["stream"] = stream
        what = f"follow the log of {pod}"
        try:
            answer = self.session().get(self.cluster.server + self.path("Pod", pod) + "/log",
                                        params=params, stream=True,
                                        timeout=(self.timeout_s, None))
        except requests.RequestException as error:
            raise EngineFailedError(f"the Kubernetes API at {self.cluster.server} did not "
                                    f"answer to {what}: {error}") from error
        checked(answer, self.cluster.server, what)
        return _chunks(answer, self.cluster.server, what)

    def version(self) -> Obj:
        """The API server's version (any authenticated user may read it)."""
        found: Obj = self.call("GET", "/version", "read its version").json()
        return found

    def wait_pod(self, name: str, *, running: bool, deadline_s: float) -> PodState:
        """Poll Pod `name` until it runs (`running`) or ends; a Pod that never can (its
        image, an eviction, its deadline) or is still not there by `deadline_s` (never
        scheduled, or slow) is a `PodFailedError` naming why."""
        last: list[Obj] = []

        def answer(pod: Obj) -> PodState | None:
            last[:] = [pod]
            state = pod_state(pod)
            return state if state.ended or (running and state.phase == "Running") else None

        found = self._polled(name, deadline_s, answer)
        if found is None:
            why = unscheduled(last[0])
            raise PodFailedError(f"pod {name}: still {pod_state(last[0]).phase} after "
                                 f"{deadline_s:g} s"
                                 + (f" (never scheduled: {why})" if why else ""))
        return found

    def container_exit(self, name: str, container: str, *, deadline_s: float) -> int | None:
        """Poll Pod `name` until its `container` ended: its exit code; None when it still
        runs at `deadline_s`. A Pod that can never run it (its image, an eviction, its
        deadline) is a `PodFailedError`."""
        return self._polled(name, deadline_s,
                            lambda pod: pod_state(pod).exit_codes.get(container))

    def _polled(self, name: str, deadline_s: float,
                answer: Callable[[Obj], T | None]) -> T | None:
        """Read Pod `name` every POLL_S until `answer` says something of it (that), or
        `deadline_s` passed (None); a Pod that never can run is a `PodFailedError`."""
        ends = self._clock() + deadline_s
        while True:
            pod = self.get("Pod", name)
            problem = pod_problem(pod)
            if problem is not None:
                raise PodFailedError(f"pod {name}: {problem}")
            found = answer(pod)
            if found is not None or self._clock() >= ends:
                return found
            self._sleep(POLL_S)


def api_path(namespace: str, kind: str, name: str = "") -> str:
    """The API's path of `kind` in `namespace` (of one object, `name`)."""
    base = PATHS[kind].format(ns=quote(namespace, safe=""))
    return f"{base}/{quote(name, safe='')}" if name else base


def label_selector(labels: Mapping[str, str]) -> str:
    """`key=value,...` sorted (the same selector for the same labels); a value "" is any
    value of the key (`key`: it exists), as the engine interface's filters mean it."""
    return ",".join(f"{key}={value}" if value else key for key, value in sorted(labels.items()))


def checked(answer: requests.Response, server: str, what: str) -> requests.Response:
    """`answer`, or the API's refusal or failure as the project's error."""
    if answer.status_code >= 500:
        raise EngineFailedError(f"the Kubernetes API at {server} failed to {what} "
                                f"({answer.status_code}): {_words(answer)}")
    if answer.status_code >= 400:
        kind = {404: NotFoundError, 409: ConflictError}.get(answer.status_code,
                                                            EngineRefusedError)
        raise kind(server, what, _words(answer), status=answer.status_code)
    return answer


def _chunks(answer: requests.Response, server: str, what: str) -> Iterator[bytes]:
    """The body as it comes; a cut stream is the API's failure."""
    try:
        yield from answer.iter_content(chunk_size=None)
    except requests.RequestException as error:
        raise EngineFailedError(f"the Kubernetes API at {server} cut the stream to "
                                f"{what}: {error}") from error
    finally:
        answer.close()


def _words(answer: requests.Response) -> str:
    """The API's own message (a Status object's), else its body's head."""
    try:
        body = answer.json()
    except ValueError:
        return answer.text[:500]
    return str(body.get("message") or body)[:500] if isinstance(body, dict) else str(body)
