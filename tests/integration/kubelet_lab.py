"""A node for the emulator of the Kubernetes API (tests/unit/kube_emulator.py): every Pod
the tool makes there runs on this machine's docker engine, as a kubelet would run it, so
a command on a cluster measures real processes (issue 36).

What it plays, from the Pod's spec only (never from the tool's own objects): the image
by the digest the Pod names, pulled from the registry when it is not here (the registry
must hold what the Pod names); `command`/`args`, `env` (a Secret's key read from the
Secret the tool made), `workingDir`, the user, the group and the `fsGroup` as a
supplementary group, the capabilities, a read-only root, `allowPrivilegeEscalation:
false`, the CPU and memory limits, the hostname, the DNS servers, `hostAliases`; its
init containers first, each to its end (one that fails fails the Pod). A memory
`emptyDir` is a tmpfs of its `sizeLimit`. A claim is what a provisioner gives: a docker
volume on a tmpfs of the claim's size (a class that caps, as the volume proof asks),
kept from Pod to Pod (a keeper container holds it mounted), its root root's with the
first Pod's `fsGroup` as its group (setgid, group-writable), nothing of the image copied
in. A Pod's network is its `io.bakeoff.network` label: a docker internal network of the
lab's own whose bridge has no address (the NetworkPolicies as this tool writes them:
members reach each other, nothing else, not this machine); a Pod with none has no
network at all. A container with `stdin` starts when the tool's attach gave its input
(stdinOnce: the attach's end is its end), any other when its Pod is made; a running
container's log is read as it grows (a listener's "listening"); its end, exit code and
each stream's log go back to the emulator; an exec runs by docker's exec, its input and
output as they come. A Pod joined to a network after it was made (the policies
`objects.joined` writes) is connected to it and has an address of its own there, which
the aliases of the Pods made on that network later name (where a cluster's flat network
gives one address). A Pod of two containers (a sample's server and its criterion) is a
sandbox container first, as a kubelet's pause container: it holds the Pod's network
namespace (its network, hostname, DNS, aliases and address), which each of the Pod's
containers joins, so they reach each other on localhost and nothing else is shared (each
its own emptyDirs; a claim is one volume whichever containers mount it). Deleting a Pod
removes its containers; `close` removes all the lab made, by its own labels.
"""

from __future__ import annotations

import base64
import contextlib
import io
import secrets
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker.errors
import pytest
from docker.types import Mount

from runner.containers import hijack
from runner.containers.backend import (
    LABEL_EXPERIMENT,
    LABEL_NETWORK,
    LABEL_POD,
    LABEL_ROLE,
    exit_after_output,
)
from runner.containers.dockerclient import end_of_input
from runner.containers.engine import Engine
from runner.errors import EngineError
from tests.unit.kube_emulator import Emulator, emulated

Obj = dict[str, Any]
UNITS = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}


def size_of(quantity: str) -> int:
    """Bytes of a Kubernetes quantity as the tool writes them (`512Mi`, `1Gi`)."""
    for unit, factor in UNITS.items():
        if quantity.endswith(unit):
            return int(quantity[: -len(unit)]) * factor
    return int(quantity)


class Kubelet:
    """The emulator's node: `attach(emulator)` hooks it in; `close()` removes all it made."""

    def __init__(self, engine: Engine) -> None:
        self.engine, self.run = engine, secrets.token_hex(3)
        self.label = {LABEL_EXPERIMENT: f"kubelet{self.run}"}
        self.containers: dict[str, str] = {}  # POD/CONTAINER -> docker container id
        self.holders: dict[str, str] = {}     # pod -> the container of its network namespace
        self.networks: dict[str, str] = {}    # network label -> docker network name
        self.volumes: dict[str, str] = {}     # claim -> docker volume name
        self.pulled: set[str] = set()
        self.addresses: dict[tuple[str, str], str] = {}  # (pod, network) -> its address there
        self.pod_ips: dict[str, str] = {}  # pod -> its address (its own network's)
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.played: list[tuple[str, str]] = []  # every Pod run (name, role), in order

    def attach(self, emulator: Emulator) -> None:
        emulator.autorun = True
        emulator.on_create = self.created
        emulator.on_attach = self.attached
        emulator.on_delete = self.deleted
        emulator.on_stream = self.executed
        emulator.on_object = self.policy
        emulator.on_log = self.log

    # The emulator's hooks.
    def created(self, emulator: Emulator, pod: str) -> None:
        obj = emulator.pod(pod)
        containers = obj["spec"]["containers"]
        for init in obj["spec"].get("initContainers") or []:  # each to its end, in order
            made = self.make(emulator, obj, init, init=True)
            code = int(self.engine.client.api.wait(made)["StatusCode"])
            self.engine.remove(made)
            if code != 0:
                obj["status"] = {"phase": "Failed", "initContainerStatuses": [{
                    "name": init["name"], "state": {"terminated": {"exitCode": code}}}]}
                return
        holder = self.pause(obj) if len(containers) > 1 else None
        for container in containers:
            made = self.make(emulator, obj, container, joins=holder)
            if not container.get("stdin"):
                self.begin(emulator, pod, container["name"], made, None)

    def attached(self, emulator: Emulator, pod: str, container: str, stdin: bytes) -> None:
        with self.lock:
            made = self.containers[f"{pod}/{container}"]
        self.begin(emulator, pod, container, made, stdin)

    def executed(self, emulator: Emulator, pod: str, container: str, command: list[str],
                 read: Callable[[], bytes | None], send: Callable[[int, bytes], None]) -> int:
        """An exec in the Pod's container, as its own user, by docker's exec: its input as
        the tool's messages come (a held psql sends a script, reads its answer, sends the
        next), its output as the process writes it, then its exit code."""
        with self.lock:
            made = self.containers[f"{pod}/{container}"]
        api = self.engine.client.api
        exec_id = str(api.exec_create(made, command, stdin=True, stdout=True,
                                      stderr=True)["Id"])
        hijacked = hijack.start(api, exec_id)

        raw = getattr(hijacked.sock, "_sock", hijacked.sock)

        def forward() -> None:  # the tool's input, to its end (or the process's)
            with contextlib.suppress(OSError):
                while (data := read()) is not None:
                    raw.sendall(data)
                end_of_input(raw)
        threading.Thread(target=forward, daemon=True).start()
        for stream, data in hijack.frames(hijacked.file):
            send(stream, data)
        hijacked.response.close()
        state = exit_after_output(self.engine, exec_id)
        return -1 if state.exit_code is None else state.exit_code

    def policy(self, emulator: Emulator, obj: Obj) -> None:
        """A Pod joined to a network after it was made (`objects.joined`: the database,
        the gateway): the node connects its container to that network, where it has an
        address of its own; a Pod made on that network later reaches it there by the
        aliases that name its Pod's address (`make`)."""
        if obj["kind"] != "NetworkPolicy" or not obj["metadata"]["name"].endswith("-pod") \
                or not obj["metadata"]["name"].startswith("join-"):
            return
        pod = obj["spec"]["podSelector"]["matchLabels"][LABEL_POD]
        network = obj["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"][
            LABEL_NETWORK]
        with self.lock:
            made = self.holders[pod]
        api = self.engine.client.api
        api.connect_container_to_network(made, self.network(network))
        found = api.inspect_container(made)["NetworkSettings"]["Networks"]
        with self.lock:
            self.addresses[(pod, network)] = found[self.networks[network]]["IPAddress"]

    def log(self, emulator: Emulator, pod: str, container: str, stream: str) -> bytes | None:
        """A running container's log so far (a listener's "listening"); None once it
        ended (its log is then the emulator's, as `begin` gave it)."""
        with self.lock:
            made = self.containers.get(f"{pod}/{container}")
        if made is None:
            return None
        api = self.engine.client.api
        try:
            if not api.inspect_container(made)["State"]["Running"]:
                return None
            return bytes(api.logs(made, stdout=stream in ("", "Stdout"),
                                  stderr=stream in ("", "Stderr")))
        except docker.errors.NotFound:
            return None

    def deleted(self, emulator: Emulator, pod: str) -> None:
        with self.lock:
            gone = [self.containers.pop(key) for key in list(self.containers)
                    if key.partition("/")[0] == pod]
            holder = self.holders.pop(pod, None)
        for made in gone:
            self.engine.remove(made)
        if holder is not None and holder not in gone:
            self.engine.remove(holder)

    # A Pod on docker.
    def make(self, emulator: Emulator, obj: Obj, container: Obj, *, init: bool = False,
             joins: str | None = None) -> str:
        """`container` of the Pod `obj` created (and started, unless it waits for its
        stdin); `init`: an init container (run to its end by the caller); `joins`: the
        container holding the Pod's network namespace (`pause`), else its own."""
        spec = obj["spec"]
        pod, name = obj["metadata"]["name"], container["name"]
        image = self.pulled_image(container["image"])
        context = container.get("securityContext") or {}
        pod_context = spec.get("securityContext") or {}
        caps = context.get("capabilities") or {}
        mounts, tmpfs = self.mounts(emulator, spec, container, image)
        limits = (container.get("resources") or {}).get("limits") or {}
        api = self.engine.client.api
        host = api.create_host_config(
            cap_drop=caps.get("drop") or [], cap_add=caps.get("add") or [],
            read_only=bool(context.get("readOnlyRootFilesystem")), tmpfs=tmpfs, mounts=mounts,
            security_opt=(["no-new-privileges"] if context.get(
                "allowPrivilegeEscalation") is False else []),
            mem_limit=size_of(limits["memory"]) if "memory" in limits else None,
            nano_cpus=int(limits["cpu"].removesuffix("m")) * 1_000_000 if "cpu" in limits
            else None, init=False,
            group_add=[str(g) for g in ([pod_context["fsGroup"]] if "fsGroup" in pod_context
                                        else []) + pod_context.get("supplementalGroups", [])],
            **(self.namespace(obj) if joins is None else {"network_mode": f"container:{joins}"}))
        made = str(api.create_container(
            image, command=container.get("args"), entrypoint=container.get("command"),
            environment=self.env(emulator, obj, container),
            hostname=spec.get("hostname") if joins is None else None,
            working_dir=container.get("workingDir"), user=f"{context.get('runAsUser', 0)}:"
                                    f"{context.get('runAsGroup', 0)}",
            stdin_open=bool(container.get("stdin")),  # docker-py sets StdinOnce with it
            labels={**self.label, "pod": f"{pod}/{name}"}, host_config=host)["Id"])
        main = not init and container is spec["containers"][0]
        with self.lock:
            if not init:
                self.containers[f"{pod}/{name}"] = made
            if main and joins is None:
                self.holders[pod] = made
            self.played.append((pod if main else f"{pod}/{name}", (
                obj["metadata"].get("labels") or {}).get(LABEL_ROLE, "")))
        if not container.get("stdin"):  # started now: its address is the Pod's
            api.start(made)
            if main and joins is None:
                self.addressed(obj, made)
        return made

    def namespace(self, obj: Obj) -> dict[str, Any]:
        """The network namespace of the Pod `obj`, as docker's host config says it: the
        network of its label (none without), its DNS servers, its aliases."""
        spec = obj["spec"]
        network = (obj["metadata"].get("labels") or {}).get(LABEL_NETWORK)
        return {"network_mode": self.network(network) if network else "none",
                "dns": (spec.get("dnsConfig") or {}).get("nameservers"),
                "extra_hosts": {name: self.address(alias["ip"], network)
                                for alias in spec.get("hostAliases") or []
                                for name in alias["hostnames"]}}

    def pause(self, obj: Obj) -> str:
        """The container that holds a Pod's network namespace for its containers (a
        kubelet's sandbox): it sleeps, as nobody, with no capability and a read-only root;
        its address is the Pod's."""
        pod = obj["metadata"]["name"]
        api = self.engine.client.api
        made = str(api.create_container(
            self.pulled_image(obj["spec"]["containers"][0]["image"]),
            command=["sleep", "infinity"], entrypoint=[], user="65534:65534",
            hostname=obj["spec"].get("hostname"), labels={**self.label, "pod": f"{pod}/pause"},
            host_config=api.create_host_config(read_only=True, cap_drop=["ALL"], init=False,
                                               **self.namespace(obj)))["Id"])
        api.start(made)
        with self.lock:
            self.holders[pod] = made
        self.addressed(obj, made)
        return made

    def addressed(self, obj: Obj, made: str) -> None:
        """The Pod's address: that of `made` (its namespace's) on its network, if any."""
        network = (obj["metadata"].get("labels") or {}).get(LABEL_NETWORK)
        if not network:
            return
        found = self.engine.client.api.inspect_container(made)["NetworkSettings"]["Networks"]
        obj["status"]["podIP"] = found[self.networks[network]]["IPAddress"]
        with self.lock:
            self.pod_ips[obj["metadata"]["name"]] = obj["status"]["podIP"]

    def address(self, pod_ip: str, network: str | None) -> str:
        """Where a Pod on `network` reaches the Pod whose address is `pod_ip`: there, if
        that Pod was joined to it, else at its own."""
        with self.lock:
            owner = next((pod for pod, ip in self.pod_ips.items() if ip == pod_ip), None)
            return self.addresses.get((owner or "", network or ""), pod_ip)

    def begin(self, emulator: Emulator, pod: str, container: str, made: str,
              stdin: bytes | None) -> None:
        def run() -> None:
            try:
                if stdin is not None:
                    self.engine.start(made, io.BytesIO(stdin))
                code = int(self.engine.client.api.wait(made)["StatusCode"])
                out = self.engine.client.api.logs(made, stdout=True, stderr=False)
                err = self.engine.client.api.logs(made, stdout=False, stderr=True)
            except (docker.errors.APIError, EngineError):
                with self.lock:
                    if self.containers.get(f"{pod}/{container}") != made:
                        return  # its Pod was deleted while it ran (a listener)
                raise
            with self.lock:
                if self.containers.get(f"{pod}/{container}") != made:
                    return  # deleted meanwhile
            emulator.end(pod, container, code, stdout=out, stderr=err)
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.threads.append(thread)

    def pulled_image(self, reference: str) -> str:
        """The image a Pod names by digest, pulled from its registry (loopback: ours) when
        it is not here (`imagePullPolicy: IfNotPresent`; a push's untag may have taken the
        reference since)."""
        repo, digest = reference.split("@", 1)
        with self.lock:
            try:
                self.engine.client.api.inspect_image(reference)
            except docker.errors.ImageNotFound:
                said = str(self.engine.client.api.pull(repo, tag=digest))
                assert '"error"' not in said, f"the node could not pull {reference}: {said}"
            self.pulled.add(reference)
        return reference

    def network(self, name: str) -> str:
        with self.lock:
            if name not in self.networks:
                made = f"kubelet{self.run}-{name}"[:60]
                self.engine.client.api.create_network(  # the bridge has no address: the
                    made, driver="bridge", internal=True, labels=self.label,  # host is apart
                    options={"com.docker.network.bridge.inhibit_ipv4": "true"})
                self.networks[name] = made
            return self.networks[name]

    def mounts(self, emulator: Emulator, spec: Obj, container: Obj, image: str
               ) -> tuple[list[Any], dict[str, str]]:
        volumes = {volume["name"]: volume for volume in spec.get("volumes") or []}
        mounts, tmpfs = [], {}
        for mount in container.get("volumeMounts") or []:
            volume = volumes[mount["name"]]
            if "emptyDir" in volume:
                size = size_of(volume["emptyDir"].get("sizeLimit", "64Mi"))
                tmpfs[mount["mountPath"]] = f"size={size},mode=1777"
                continue
            claim = volume["persistentVolumeClaim"]["claimName"]
            group = (spec.get("securityContext") or {}).get("fsGroup", 0)
            mounts.append(Mount(mount["mountPath"], self.volume(emulator, claim, group, image),
                                type="volume", read_only=bool(mount.get("readOnly")),
                                no_copy=True))  # a node copies nothing of the image in
        return mounts, tmpfs

    def volume(self, emulator: Emulator, claim: str, group: int, image: str) -> str:
        """A claim as a node gives it: its root root's, the first Pod's `fsGroup` its group
        (setgid, group-writable), its size capped (a tmpfs), and what it holds kept from Pod
        to Pod (a keeper container holds the tmpfs mounted for the claim's life)."""
        with self.lock:
            if claim not in self.volumes:
                found = next(obj for (collection, name), obj in emulator.objects.items()
                             if name == claim and collection.endswith(
                                 "/persistentvolumeclaims"))
                size = size_of(found["spec"]["resources"]["requests"]["storage"])
                made = f"kubelet{self.run}-{claim}"[:60]
                api = self.engine.client.api
                api.create_volume(made, driver="local", driver_opts={
                    "type": "tmpfs", "device": "tmpfs",
                    "o": f"size={size},uid=0,gid={group},mode=2775"}, labels=self.label)
                keeper = api.create_container(
                    image, command=["sleep", "infinity"], entrypoint=[], user="65534:65534",
                    labels={**self.label, "claim": claim}, host_config=api.create_host_config(
                        network_mode="none", cap_drop=["ALL"], mounts=[Mount(
                            "/claim", made, type="volume", read_only=True, no_copy=True)]))
                api.start(keeper)
                self.volumes[claim] = made
            return self.volumes[claim]

    def env(self, emulator: Emulator, obj: Obj, container: Obj) -> dict[str, str]:
        found = {}
        for variable in container.get("env") or []:
            if "value" in variable:
                found[variable["name"]] = variable["value"]
                continue
            ref = variable["valueFrom"]["secretKeyRef"]
            secret = next(o for (collection, name), o in emulator.objects.items()
                          if name == ref["name"] and collection.endswith("/secrets"))
            found[variable["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()
        return found

    def close(self) -> None:
        """Everything the lab made: containers, networks, volumes, pulled references."""
        self.engine.remove_labelled(self.label)
        for thread in self.threads:
            thread.join(10)
        for reference in self.pulled:  # the digest's reference only: the image stays
            with contextlib.suppress(docker.errors.APIError):
                self.engine.client.api.remove_image(reference, noprune=True)


@contextlib.contextmanager
def on_a_node(engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
              ) -> Iterator[tuple[Emulator, Kubelet]]:
    """The emulator of the API with this lab's node, KUBECONFIG naming it (its context
    `lab`, namespace `bakeoff`); everything the node made removed after."""
    from tests.unit.test_kube_doctor import kubeconfig
    with emulated() as emulator:
        node = Kubelet(engine)
        node.attach(emulator)
        for key, value in kubeconfig(tmp_path, emulator.url).items():
            monkeypatch.setenv(key, value)
        try:
            yield emulator, node
        finally:
            node.close()
