"""What the Kubernetes backend sends (issue 36), as plain dicts made from the engine
interface's words (`ContainerSpec`, `Labels`): Pods, PersistentVolumeClaims,
NetworkPolicies, Services, Secrets and the Role the tool needs. Pure: no client, no
cluster. Every object validates strictly against the Kubernetes 1.37 schemas
(tests/unit/test_kube_objects.py, from golden files reviewed once).

The hardening is the conformance suite's list, as the docker backend's
(`runner.containers.dockerspec.container_args`): the spec's uid, every capability dropped
but the driver's few, no privilege escalation, a read-only root when asked, the
runtime's seccomp profile, size-limited memory volumes for every tmpfs, CPU and memory
limits equal to their requests, no service account token, no host namespace. What a Pod
cannot say is refused here, never dropped: a host path (`Bind`), an image by tag (a tag
can move: a Pod names its image by digest). A named volume is a PersistentVolumeClaim of
its name (`claim`), mounted by name, its owner the `fsGroup` of the Pods that write to
it. The pids limit has no field in the Pod spec (the kubelet's `podPidsLimit`,
node-wide): the backend's `Capabilities` say so, and the engine refuses a spec unless the
manifest accepts it.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from runner.containers.backend import (
    LABEL_EXPERIMENT,
    LABEL_NETWORK,
    LABEL_OWNER,
    LABEL_POD,
    NO_NETWORK,
    OWN_LOOPBACK,
    Bind,
    ContainerSpec,
    Labels,
    Tmpfs,
    Volume,
    unaddable_caps,
)

LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
LABEL_VALUE_MAX = 63
NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")  # an RFC 1123 label: Pods, Services
NAME_MAX = 63
DIGEST = re.compile(r"[^@\s]+@sha256:[0-9a-f]{64}")
GRACE_S = 10  # a stopped container's SIGTERM before its SIGKILL, as docker's default
Obj = dict[str, Any]


class KubeRefusal(ValueError):
    """A spec a Pod cannot carry as the docker backend would: refused, never degraded."""


def by_digest(image: str) -> str:
    """An image as a Pod names it: already `repo@sha256:...` (the registry step pushes
    and resolves a local image; until then a spec must name its image by digest)."""
    return image


def labels(found: Labels, network: str = NO_NETWORK) -> dict[str, str]:
    """Our labels, as Kubernetes labels (the same keys: valid label names), and the
    network a Pod is on (its NetworkPolicies select it by that); a value a label cannot
    hold is refused (a selector would miss the object and `down` leave it)."""
    values = found.as_dict()
    if network != NO_NETWORK:
        values[LABEL_NETWORK] = network
    for key, value in values.items():
        if len(value) > LABEL_VALUE_MAX or not LABEL_VALUE.fullmatch(value):
            raise KubeRefusal(f"label {key}={value!r} is not a Kubernetes label value "
                              f"(at most {LABEL_VALUE_MAX} of [A-Za-z0-9_.-], alphanumeric "
                              "at both ends)")
    return values


def is_name(text: str) -> bool:
    """An RFC 1123 label (lower case, digits, '-'), at most 63: an object's name, a host's."""
    return len(text) <= NAME_MAX and NAME.fullmatch(text) is not None


def name_checked(name: str) -> str:
    """An object's name (`is_name`), else refused."""
    if not is_name(name):
        raise KubeRefusal(f"{name!r} is not a Kubernetes object name (at most {NAME_MAX} of "
                          "[a-z0-9-], alphanumeric at both ends)")
    return name


def metadata(name: str, namespace: str, found: Labels, network: str = NO_NETWORK) -> Obj:
    return {"name": name_checked(name), "namespace": namespace,
            "labels": labels(found, network)}


def pod(name: str, namespace: str, containers: Sequence[tuple[str, ContainerSpec, str]], *,
        deadline_s: float, hosts: Mapping[str, str] | None = None,
        claims: Mapping[str, int] | None = None, node: str | None = None,
        holds: bool = False) -> Obj:
    """One Pod of `containers` (name, spec, image by digest), which share its network
    namespace and nothing else (a sample's server and its criterion: `joins`). The first
    container's labels are the Pod's; `deadline_s` its `activeDeadlineSeconds`, behind the
    driver's own deadline. `hosts` (name -> address): names every container reaches by
    `hostAliases`, the only ones for a Pod that does not resolve outside its network (a
    Pod's DNS is the Pod's: one such container makes it so for all,
    `ContainerSpec.resolve_outside`). `claims` (name -> owner uid): the claims its
    containers' named volumes are; `node`: the node it must run on (where a claim it
    mounts is held already). A container's command is its image's entrypoint's `args`, as
    docker's `Cmd` is (the experiment's Postgres initialises its data in its entrypoint);
    `holds`: a Pod made to hold for an archive, whose command replaces the entrypoint."""
    if not containers:
        raise KubeRefusal(f"pod {name}: no container")
    first = containers[0][1]
    volumes: list[Obj] = []
    made = [_container(cname, spec, image, volumes, claims or {}, env_secret(name, cname),
                       holds) for cname, spec, image in containers]
    found: Obj = {
        "restartPolicy": "Never", "activeDeadlineSeconds": max(1, math.ceil(deadline_s)),
        "terminationGracePeriodSeconds": GRACE_S, "automountServiceAccountToken": False,
        "enableServiceLinks": False, "hostNetwork": False, "hostPID": False,
        "hostIPC": False, "shareProcessNamespace": False,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"},
                            **_group(containers, claims or {})},
        "containers": made}
    if volumes:
        found["volumes"] = volumes
    owned = _owned(containers, claims or {}, volumes)
    if owned is not None:
        found["initContainers"] = [owned]
    if node is not None:
        found["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    if not all(spec.resolve_outside for _, spec, _ in containers):
        found["dnsPolicy"] = "None"  # no cluster DNS: it forwards what it cannot answer
        found["dnsConfig"] = {"nameservers": [OWN_LOOPBACK]}
    if is_name(first.hostname or ""):
        found["hostname"] = first.hostname  # else the Pod's name, as Kubernetes gives it
    if hosts:
        found["hostAliases"] = [{"ip": address, "hostnames": [host]}
                                for host, address in sorted(hosts.items())]
    meta = metadata(name, namespace, first.labels, first.network)
    meta["labels"][LABEL_POD] = name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": found}


def _container(name: str, spec: ContainerSpec, image: str, volumes: list[Obj],
               claims: Mapping[str, int], secret_name: str, holds: bool = False) -> Obj:
    """One container of a Pod from `spec`; its tmpfs and claims appended to `volumes`;
    its `secret_env` read from the Secret `secret_name` (`env_secrets`)."""
    if not DIGEST.fullmatch(image):
        raise KubeRefusal(f"{spec.purpose}: the image {image!r} is not named by digest "
                          "(repo@sha256:...): a tag can move under a run")
    binds = [m.target for m in spec.mounts if isinstance(m, Bind)]
    if binds:
        raise KubeRefusal(f"{spec.purpose}: a Pod gets no host path ({', '.join(binds)})")
    refused = None if holds and set(spec.cap_add) <= FILLER_CAPS else unaddable_caps(spec)
    if refused is not None:
        raise KubeRefusal(refused)
    uid, gid = user_ids(spec.user)
    if not numeric(spec.user):
        raise KubeRefusal(f"{spec.purpose}: the user {spec.user!r} is not uid:gid: a Pod runs "
                          "as numbers (runAsUser), never a name its image resolves")
    cpu, memory = f"{round(spec.resources.cpus * 1000)}m", f"{spec.resources.memory_mb}Mi"
    caps = capabilities(spec)
    security: Obj = {
        "runAsUser": int(uid), "runAsGroup": int(gid), "runAsNonRoot": int(uid) != 0,
        "allowPrivilegeEscalation": False, "privileged": False,
        "readOnlyRootFilesystem": spec.read_only, "procMount": "Default",
        "capabilities": {"drop": ["ALL"], **({"add": sorted(caps)} if caps else {})}}
    found: Obj = {
        "name": name_checked(name), "image": image,
        "command" if holds else "args": list(spec.command),
        "resources": {"limits": {"cpu": cpu, "memory": memory},
                      "requests": {"cpu": cpu, "memory": memory}},
        "securityContext": security, "imagePullPolicy": "IfNotPresent"}
    env: list[Obj] = [{"name": key, "value": value} for key, value in sorted(spec.env.items())
                      if key not in spec.secret_env]
    env += [{"name": key, "valueFrom": {"secretKeyRef": {"name": secret_name, "key": key}}}
            for key in sorted(spec.secret_env)]
    if env:
        found["env"] = env
    if spec.working_dir:
        found["workingDir"] = spec.working_dir
    if spec.stdin or spec.tty:  # inputs on stdin through attach, once (`ContainerEngine.start`)
        found.update(stdin=True, stdinOnce=True, tty=spec.tty)
    mounts = [_tmpfs(name, tmpfs, volumes) for tmpfs in spec.tmpfs]
    mounts += [_claimed(spec, mount, volumes, claims) for mount in spec.mounts
               if isinstance(mount, Volume)]
    if mounts:
        found["volumeMounts"] = mounts
    return found


def with_ids(spec: ContainerSpec, user_of: Callable[[str, str], str] | None
             ) -> ContainerSpec:
    """`spec` with its user as numbers, a name resolved in its image by `user_of`
    (`images.registry.Registered.user`); without one, `pod` refuses the name."""
    if user_of is None or numeric(spec.user):
        return spec
    return replace(spec, user=user_of(spec.image, spec.user))


def exec_as(spec: ContainerSpec, user: str, argv: list[str]) -> list[str] | None:
    """`argv` run as `user` in the container of `spec`: as it is when that is its user (an
    empty `user` is the container's own, as docker's exec means it), through `setpriv`
    from a root container that may change ids; None: it cannot."""
    own, asked = user_ids(spec.user), user_ids(user or spec.user)
    if own == asked:
        return argv
    if own[0] == "0" and capabilities(spec) >= SWITCH:
        return ["setpriv", f"--reuid={asked[0]}", f"--regid={asked[1]}", "--clear-groups",
                "--", *argv]
    return None


SWITCH = frozenset({"SETUID", "SETGID"})  # what `setpriv` needs to change ids
# What a Pod made to hold for an archive (`volumes.holding`) runs tar with, as docker's
# daemon unpacks one as root: CHOWN keeps the archive's owners, FOWNER then sets the
# modes of what it gave away (GNU tar chowns before it chmods, and a directory it made is
# 0700 until then). Only the backend's own holder (`holds`), never a spec's.
FILLER_CAPS = frozenset({"CHOWN", "FOWNER"})


def capabilities(spec: ContainerSpec) -> frozenset[str]:
    """The container's capabilities: its own, and SWITCH for a root container that an exec
    runs in as another user (`ContainerSpec.exec_users`)."""
    own = user_ids(spec.user)
    switches = own[0] == "0" and any(user_ids(user) != own for user in spec.exec_users)
    return frozenset(spec.cap_add) | (SWITCH if switches else frozenset())


def numeric(user: str) -> bool:
    """Whether `user` is `uid[:gid]` in numbers (what a Pod's securityContext holds)."""
    return all(part.isdigit() for part in user_ids(user))


def user_ids(user: str) -> tuple[str, str]:
    """`uid:gid` as the spec says it (a bare uid is its own group)."""
    uid, _, gid = user.partition(":")
    return uid, gid or uid


def _tmpfs(container: str, tmpfs: Tmpfs, volumes: list[Obj]) -> Obj:
    """A tmpfs as a memory `emptyDir` of its size (charged to the Pod's memory, as
    docker's tmpfs is to the container's)."""
    volume = f"{container}-tmp-{len(volumes)}"
    volumes.append({"name": volume, "emptyDir": {"medium": "Memory",
                                                 "sizeLimit": f"{tmpfs.size_mb}Mi"}})
    return {"name": volume, "mountPath": tmpfs.target}


def _claimed(spec: ContainerSpec, mount: Volume, volumes: list[Obj],
             claims: Mapping[str, int]) -> Obj:
    """A named volume as its claim, one Pod volume per claim whichever containers mount it."""
    if mount.name not in claims:
        raise KubeRefusal(f"{spec.purpose}: the volume {mount.name!r} is no claim of ours "
                          "(create_volume makes one)")
    volume = next((v["name"] for v in volumes if (v.get("persistentVolumeClaim") or {})
                   .get("claimName") == mount.name), None)
    if volume is None:
        volume = f"claim-{len(volumes)}"
        volumes.append({"name": volume, "persistentVolumeClaim": {"claimName": mount.name}})
    return {"name": volume, "mountPath": mount.target, "readOnly": mount.read_only}


OWNED = "owners"  # the init container that gives a claim's root to its owner
OWNED_AT = "/bakeoff/claims"
OWN_SCRIPT = ('for pair; do d="${pair%=*}"; o="${pair##*=}"; '
              '[ "$(stat -c %u "$d")" = "$o" ] || chown "$o:$o" "$d" || exit 1; done')


def _owned(containers: Sequence[tuple[str, ContainerSpec, str]], claims: Mapping[str, int],
           volumes: Sequence[Obj]) -> Obj | None:
    """The init container that makes each claim the Pod writes to its owner's at its root,
    as docker makes a volume its owner's: a provisioner gives the root to root, `fsGroup`
    changes only its group, and git refuses a checkout whose top is not its user's
    ("dubious ownership"). Root with CHOWN alone, the root directory only (never what is
    in it), and nothing when it is its owner's already; None when no such claim."""
    owners = {m.name: claims[m.name] for _, spec, _ in containers for m in spec.mounts
              if isinstance(m, Volume) and not m.read_only and claims.get(m.name)}
    if not owners:
        return None
    named = {str((v.get("persistentVolumeClaim") or {}).get("claimName")): str(v["name"])
             for v in volumes}
    pairs = [f"{OWNED_AT}/{named[claim]}={uid}" for claim, uid in sorted(owners.items())]
    return {
        "name": OWNED, "image": containers[0][2], "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", OWN_SCRIPT, OWNED, *pairs],
        "resources": {"limits": {"cpu": "100m", "memory": "32Mi"},
                      "requests": {"cpu": "100m", "memory": "32Mi"}},
        "securityContext": {
            "runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": False,
            "allowPrivilegeEscalation": False, "privileged": False,
            "readOnlyRootFilesystem": True, "procMount": "Default",
            "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]}},
        "volumeMounts": [{"name": named[claim], "mountPath": f"{OWNED_AT}/{named[claim]}"}
                         for claim in sorted(owners)]}


def _group(containers: Sequence[tuple[str, ContainerSpec, str]],
           claims: Mapping[str, int]) -> Obj:
    """The Pod's `fsGroup`: the owner of the claims it writes to (the volume is that
    user's, as docker makes it); none when only root's; two owners cannot be one group."""
    owners = {claims[m.name] for _, spec, _ in containers for m in spec.mounts
              if isinstance(m, Volume) and not m.read_only and m.name in claims} - {0}
    if len(owners) > 1:
        raise KubeRefusal(f"{containers[0][1].purpose}: it writes to volumes of owners "
                          f"{sorted(owners)}: a Pod has one fsGroup")
    return {"fsGroup": owners.pop(), "fsGroupChangePolicy": "OnRootMismatch"} if owners else {}


def claim(name: str, namespace: str, owner: Labels, *, size_mb: int, uid: int,
          storage_class: str | None) -> Obj:
    """A named volume of ours as a PersistentVolumeClaim of `size_mb` (its cap: the
    engine refuses a class that gives more, `KubeEngine.start`), on one node at a time
    (ReadWriteOnce: the engine puts every Pod that mounts it where it is held), its owner
    `uid` in a label (the fsGroup of the Pods that write to it)."""
    meta = metadata(name, namespace, owner)
    meta["labels"][LABEL_OWNER] = str(uid)
    spec: Obj = {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
                 "resources": {"requests": {"storage": f"{size_mb}Mi"}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
            "spec": spec}


def deny_all(namespace: str, experiment: Labels) -> Obj:
    """Every Pod of the experiment: no ingress, no egress (the rules below open what a
    role needs). Enforced only by a CNI that enforces policies: preflight proves it."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": metadata(f"{experiment.experiment}-deny-all", namespace, experiment),
            "spec": {"podSelector": {"matchLabels": {
                LABEL_EXPERIMENT: experiment.experiment}},
                "policyTypes": ["Ingress", "Egress"]}}


def network(name: str, namespace: str, owner: Labels, *, egress: bool) -> Obj:
    """A network of ours: its Pods (labelled with it) reach each other on every port, and
    nothing else under `deny_all`, unless `egress` (then anywhere: the gateway's way out)."""
    members = {"podSelector": {"matchLabels": {LABEL_NETWORK: name}}}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": metadata(name, namespace, owner),
            "spec": {"podSelector": {"matchLabels": {LABEL_NETWORK: name}},
                     "policyTypes": ["Ingress", "Egress"],
                     "ingress": [{"from": [members]}],
                     "egress": [{"to": [members]}, *([{}] if egress else [])]}}


def joined_names(pod: str, network: str) -> tuple[str, str]:
    """The two policies of `joined`: by a digest of both names (each may be 63 long)."""
    digest = hashlib.sha256(f"{pod}/{network}".encode()).hexdigest()[:16]
    return f"join-{digest}-pod", f"join-{digest}-net"


def joined(pod: str, network: str, namespace: str, owner: Labels) -> list[Obj]:
    """Pod `pod` on `network` after it was made (`connect`: the database, the gateway):
    it and the network's Pods reach each other on every port, as a network's own members
    do (`network`); one policy selects each side (both are needed under `deny_all`)."""
    one = {"podSelector": {"matchLabels": {LABEL_POD: pod}}}
    members = {"podSelector": {"matchLabels": {LABEL_NETWORK: network}}}
    return [{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
             "metadata": metadata(name, namespace, owner),
             "spec": {**side, "policyTypes": ["Ingress", "Egress"],
                      "ingress": [{"from": [peer]}], "egress": [{"to": [peer]}]}}
            for name, side, peer in zip(joined_names(pod, network), (one, members),
                                        (members, one), strict=True)]


def allow(name: str, namespace: str, owner: Labels, source: Mapping[str, str],
          target: Mapping[str, str], port: int) -> list[Obj]:
    """`source` Pods may reach `target` Pods on TCP `port`, and nothing else is opened: an
    egress rule on the source and an ingress rule on the target (both are needed under
    `deny_all`)."""
    peer = [{"port": port, "protocol": "TCP"}]
    return [
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
         "metadata": metadata(f"{name}-egress", namespace, owner),
         "spec": {"podSelector": {"matchLabels": dict(source)}, "policyTypes": ["Egress"],
                  "egress": [{"to": [{"podSelector": {"matchLabels": dict(target)}}],
                              "ports": peer}]}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
         "metadata": metadata(f"{name}-ingress", namespace, owner),
         "spec": {"podSelector": {"matchLabels": dict(target)}, "policyTypes": ["Ingress"],
                  "ingress": [{"from": [{"podSelector": {"matchLabels": dict(source)}}],
                               "ports": peer}]}}]


def service(name: str, namespace: str, owner: Labels, target: Mapping[str, str],
            port: int) -> Obj:
    """A ClusterIP Service in front of `target` Pods (the database, the gateway)."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata(name, namespace, owner),
            "spec": {"type": "ClusterIP", "selector": dict(target),
                     "ports": [{"name": "main", "port": port, "targetPort": port,
                                "protocol": "TCP"}]}}


def env_secret(pod: str, container: str) -> str:
    """The name of the Secret a container of `pod` reads its `secret_env` from."""
    return f"{pod}-{container}-env"


def env_secrets(pod: str, namespace: str,
                containers: Sequence[tuple[str, ContainerSpec]]) -> list[Obj]:
    """A Secret per container with a `secret_env` (an API key: in the Pod's spec it would
    be read by whoever may read Pods), made before the Pod, labelled with the Pod's name
    (removed with it) and the container's labels (and by them)."""
    found = []
    for container, spec in containers:
        if spec.secret_env:
            made = secret(env_secret(pod, container), namespace, spec.labels, spec.secret_env)
            made["metadata"]["labels"][LABEL_POD] = pod
            found.append(made)
    return found


def secret(name: str, namespace: str, owner: Labels, data: Mapping[str, str]) -> Obj:
    """A Secret of `data` (the gateway's keys), immutable: a key is never edited in place."""
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata(name, namespace, owner),
            "type": "Opaque", "immutable": True,
            "data": {key: base64.b64encode(value.encode()).decode()
                     for key, value in sorted(data.items())}}


# What the tool does in its namespace, and nothing else (docs/scale-out.md's run book).
RULES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("", ("pods",), ("create", "get", "list", "watch", "delete", "deletecollection")),
    ("", ("pods/attach", "pods/exec"), ("create", "get")),
    ("", ("pods/log",), ("get",)),
    ("", ("services", "secrets", "persistentvolumeclaims"),
     ("create", "get", "list", "delete", "deletecollection")),
    ("networking.k8s.io", ("networkpolicies",),
     ("create", "get", "list", "delete", "deletecollection")),
)


def role(namespace: str, owner: Labels) -> Obj:
    """The Role the tool needs in its namespace: `RULES`, no cluster-wide verb."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": metadata("bakeoff-sandbox", namespace, owner),
            "rules": [{"apiGroups": [group], "resources": list(resources),
                       "verbs": list(verbs)} for group, resources, verbs in RULES]}
