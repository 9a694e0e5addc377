"""A stack's compose file, checked and rewritten for one sample; pure (no docker call, no
process): the normalised model in (what `docker-compose config --format json` prints),
the refusals or the file the sample's own project runs out.

What a stack may not have is refused with the service and the key named: a service
that would be pulled or built, a published port, the host's network, PID, IPC, UTS,
user or cgroup namespace, privileges, devices, capabilities, security options, host
files (bind mounts, volume drivers, file secrets and configs), a fixed container name,
networks of its own. What every service gets is the rig's, laid over the user's file
(never written into it): our labels, `pull_policy: never`, the image by ID, cap_drop ALL,
no-new-privileges, init, the CPU, memory and pids limits of `[limits]`, no restart, a
capped json-file log, and the sample's internal network as its only network, where the
others reach it by name.

The services the top-level `x-bakeoff: {tree: {SERVICE: PATH}}` names run the arm's
code: the sample's tree (the same tar the criterion's container gets) is extracted at
PATH in a tmpfs, root-owned and read-only to the code, which runs as the sandbox user
(uid 1000) with no capability. (Top level, not per service: the JSON that
`config --format json` prints keeps top-level extensions only.) An arm's own stack
during dispatch (`Policy.checkout` set) mounts the arm's live checkout volume there
instead, read-only, and its code runs as the sandbox user from the start.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runner.containers.backend import LABEL_PREFIX

EXTENSION = "x-bakeoff"
NETWORK_KEY = "bakeoff"  # the one network of a rendered file: the sample's, external
INPUTS = "/bakeoff/in"  # where a tree service sees the rig's inputs (read-only)
ENTRY = f"{INPUTS}/stack-entry.sh"
SANDBOX_UID = 1000
CHECKOUT_KEY = "bakeoff-checkout"  # an arm stack's key of the arm's checkout volume
INPUTS_KEY = "bakeoff-inputs"  # a sample stack's key of the volume of the rig's inputs
# Set on a service, each of these reaches outside the sample or past its limits.
REFUSED_KEYS = {
    "build": "is built outside images/ (an image per project, with egress): add "
             "images/NAME/Dockerfile and write image: bakeoff/NAME",
    "ports": "publishes a port on the host (services are reached by name on the "
             "sample's network)",
    "network_mode": "leaves the sample's network",
    "privileged": "asks for privileges", "cap_add": "adds capabilities",
    "security_opt": "changes the security options", "devices": "maps host devices",
    "device_cgroup_rules": "opens host devices", "gpus": "maps host devices",
    "volumes_from": "mounts another container's volumes",
    "external_links": "links containers outside the stack",
    "container_name": "fixes a container name (two samples at once would collide)",
    "userns_mode": "changes the user namespace", "uts": "shares a UTS namespace",
    "cgroup": "shares a cgroup namespace", "cgroup_parent": "picks a cgroup parent",
    "runtime": "picks a runtime", "isolation": "picks an isolation",
    "storage_opt": "sets storage options", "oom_kill_disable": "disables the OOM killer",
    "use_api_socket": "mounts the engine's API socket", "provider": "runs a provider",
    "models": "uses models",
}
SHARED_NAMESPACES = ("pid", "ipc")  # only a value of their own (e.g. ipc: private)
# Replaced by the rig's values in a rendered file (the limits come from `[limits]`).
REPLACED_KEYS = frozenset({"networks", "restart", "pull_policy", "mem_limit",
                           "memswap_limit", "mem_reservation", "cpus", "cpu_count",
                           "cpu_percent", "cpu_quota", "cpu_period", "cpuset", "cpu_shares",
                           "pids_limit", "init", "cap_drop", "logging"})
# Each service's log on the host: json-file, one file, capped (a service printing without
# end fills neither the host's disk nor the rig's memory when the log is read back).
LOG_MAX_MB = 8
STACK_ENTRY = f"""set -eu
# A tree service: the sample's tree into its tmpfs, root-owned and read-only to the
# code, which runs as the sandbox user with no capability.
dest=$1; shift
tar -x --no-same-owner -f {INPUTS}/tree.tar -C "$dest"
chmod -R go-w "$dest"
exec setpriv --reuid={SANDBOX_UID} --regid={SANDBOX_UID} --clear-groups -- "$@"
"""


@dataclass(frozen=True)
class Policy:
    """What the rig lays over every service of one sample's stack."""

    labels: Mapping[str, str]
    network: str  # the sample's internal network, by name (ours; external to compose)
    cpus: float
    memory_mb: int
    pids: int
    disk_mb: int
    inputs: str = ""  # the volume of the rig's inputs (tree.tar, stack-entry.sh), ours
    checkout: str = ""  # an arm stack's: the arm's checkout volume, mounted read-only
    restart: str = "no"


def services(model: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    found = model.get("services") or {}
    return {str(name): dict(service or {}) for name, service in found.items()}


def trees(model: Mapping[str, Any]) -> dict[str, str]:
    """service -> where the arm's tree is laid out (`x-bakeoff.tree`)."""
    extension = model.get(EXTENSION) or {}
    tree = extension.get("tree") if isinstance(extension, Mapping) else None
    return {str(k): str(v) for k, v in tree.items()} if isinstance(tree, Mapping) else {}


def images(model: Mapping[str, Any]) -> dict[str, str]:
    """service -> the image it names (a tag of ours, a local tag or an ID)."""
    return {name: str(service["image"]) for name, service in services(model).items()
            if service.get("image")}


def refusals(model: Mapping[str, Any], *, tree_required: bool = True,
             reserved: Sequence[str] = (), on: str = "the sample's network") -> list[str]:
    """Every reason the model may not run as a stack under test, each naming where. An
    arm's own stack may have no tree service (a Redis the arm's sandbox uses, say).
    `reserved`: names the rig puts on the stack's network (the database's `db`): a
    service named or aliased so would make the name ambiguous."""
    found = [f"{EXTENSION}: {problem}" for problem in _extension_problems(model)
             if tree_required or model.get(EXTENSION) is not None]
    for name, service in services(model).items():
        found += [f"service {name!r}: {problem}" for problem in _service_problems(
            name, service, name in trees(model))]
        aliases = ((service.get("networks") or {}).get("default") or {}).get("aliases") or []
        found += [f"service {name!r}: {'its name' if alias == name else 'alias'} "
                  f"{alias!r} is the rig's on {on} (rename it)"
                  for alias in [name, *aliases] if alias in reserved]
    found += _top_level_problems(model)
    return found


def arm_refusals(model: Mapping[str, Any], reserved: Sequence[str]) -> list[str]:
    """What an arm's own stack may not have: `refusals` with no tree required and the
    names the rig puts on the arm's network reserved (`db`, `model-gateway`), and a volume
    under the key of the arm's checkout."""
    found = refusals(model, tree_required=False, reserved=reserved, on="the arm's network")
    if CHECKOUT_KEY in (model.get("volumes") or {}):
        found.append(f"volumes: {CHECKOUT_KEY!r} is the rig's (the arm's checkout)")
    return found


def _extension_problems(model: Mapping[str, Any]) -> list[str]:
    extension = model.get(EXTENSION)
    if extension is None:
        return ["names no service to run the arm's code (write x-bakeoff: {tree: {app: "
                "/work}})"]
    if not isinstance(extension, Mapping) or set(extension) - {"tree"}:
        return [f"holds only tree: {{SERVICE: PATH}} (found {extension!r})"]
    named = trees(model)
    problems = [f"tree: service {name!r} is not in the file" for name in named
                if name not in services(model)]
    problems += [f"tree: {name}: {path!r} is not an absolute path outside /bakeoff"
                 for name, path in named.items()
                 if not path.startswith("/") or path.rstrip("/") in ("", "/tmp")
                 or path.startswith("/bakeoff")]
    return problems or ([] if named else ["tree: names no service"])


def _service_problems(name: str, service: Mapping[str, Any], tree: bool) -> list[str]:
    problems = [f"{key}: {why}" for key, why in REFUSED_KEYS.items()
                if service.get(key) not in (None, False, [], {})]
    if not service.get("image"):
        problems.append("image: names none (a stack runs local images only)")
    problems += [f"{key}: {service[key]!r} shares a namespace (only a private one)"
                 for key in SHARED_NAMESPACES
                 if str(service.get(key) or "private") not in ("private", "shareable")]
    for volume in service.get("volumes") or []:
        kind = volume.get("type")
        if kind not in ("volume", "tmpfs"):
            problems.append(f"volumes: {volume.get('target')!r} is a {kind} mount "
                            "(host files are never mounted; use a named volume)")
    problems += [f"networks: {net!r} (the stack's only network is the sample's)"
                 for net in service.get("networks") or {} if net != "default"]
    problems += [f"labels: {label!r} is the rig's" for label in service.get("labels") or {}
                 if str(label).startswith(LABEL_PREFIX)]
    deploy = service.get("deploy") or {}
    if (deploy.get("resources") or {}) not in ({}, None):
        problems.append("deploy.resources: the limits are [limits]'s")
    if tree:
        problems += _tree_service_problems(service)
    return problems


def _tree_service_problems(service: Mapping[str, Any]) -> list[str]:
    problems = []
    if not service.get("command"):
        problems.append("command: a tree service must state the command that runs the "
                        "arm's code")
    if service.get("user"):
        problems.append("user: a tree service runs as the sandbox user (uid 1000)")
    return problems


def _top_level_problems(model: Mapping[str, Any]) -> list[str]:
    problems = [f"networks: {net!r} (the stack's only network is the sample's)"
                for net in model.get("networks") or {} if net != "default"]
    for name, volume in (model.get("volumes") or {}).items():
        volume = volume or {}
        if volume.get("external"):
            problems.append(f"volumes: {name!r} is external (each sample's are fresh)")
        if volume.get("driver") not in (None, "local") or volume.get("driver_opts"):
            problems.append(f"volumes: {name!r} sets a driver or driver_opts")
    for kind in ("secrets", "configs"):
        problems += [f"{kind}: {name!r} reads a host file" for name, item in
                     (model.get(kind) or {}).items() if (item or {}).get("file")]
    if model.get("models"):
        problems.append("models: a stack runs no models")
    return problems


def render(model: Mapping[str, Any], project: str, image_ids: Mapping[str, str],
           policy: Policy) -> dict[str, Any]:
    """The file one sample's project runs: the user's services with the rig's policy laid
    over each, the sample's network the only one, volumes labelled as ours."""
    named = trees(model)
    rendered = {name: _service(name, service, image_ids[name], policy, named.get(name))
                for name, service in services(model).items()}
    volumes = {name: {**{k: v for k, v in (volume or {}).items() if k not in ("name",)},
                      "labels": {**((volume or {}).get("labels") or {}), **policy.labels}}
               for name, volume in (model.get("volumes") or {}).items()}
    if policy.checkout:
        volumes[CHECKOUT_KEY] = {"name": policy.checkout, "external": True}
    if policy.inputs and named:
        volumes[INPUTS_KEY] = {"name": policy.inputs, "external": True}
    out: dict[str, Any] = {"name": project, "services": rendered,
                           "networks": {NETWORK_KEY: {"name": policy.network,
                                                      "external": True}}}
    if volumes:
        out["volumes"] = volumes
    for kind in ("secrets", "configs"):
        if model.get(kind):
            out[kind] = copy.deepcopy(model[kind])
    return out


def _service(name: str, service: Mapping[str, Any], image_id: str, policy: Policy,
             tree: str | None) -> dict[str, Any]:
    out = {k: copy.deepcopy(v) for k, v in service.items() if k not in REPLACED_KEYS}
    aliases = [name, *((service.get("networks") or {}).get("default") or {}).get(
        "aliases", [])]
    memory = f"{policy.memory_mb}m"
    out.update(image=image_id, pull_policy="never", restart=policy.restart, init=True,
               labels={**(service.get("labels") or {}), **policy.labels},
               cap_drop=["ALL"], security_opt=["no-new-privileges"], cpus=policy.cpus,
               mem_limit=memory, memswap_limit=memory, pids_limit=policy.pids,
               networks={NETWORK_KEY: {"aliases": sorted(set(aliases))}},
               logging={"driver": "json-file",
                        "options": {"max-size": f"{LOG_MAX_MB}m", "max-file": "1"}})
    if tree is not None:
        out.update(_live_tree_service(out, tree, policy) if policy.checkout
                   else _tree_service(out, tree, policy))
    return out


def _live_tree_service(service: Mapping[str, Any], path: str,
                       policy: Policy) -> dict[str, Any]:
    """An arm stack's tree service: the arm's live checkout at `path`, read-only (the
    code is the sandbox user's: the service cannot write it), run as that user."""
    return {
        "user": f"{SANDBOX_UID}:{SANDBOX_UID}", "read_only": True,
        "working_dir": service.get("working_dir") or path,
        "environment": {"HOME": "/tmp", **(service.get("environment") or {})},
        "tmpfs": [*(service.get("tmpfs") or []), f"/tmp:size={policy.disk_mb}m,mode=1777"],
        "volumes": [*(service.get("volumes") or []),
                    {"type": "volume", "source": CHECKOUT_KEY, "target": path,
                     "read_only": True, "volume": {"nocopy": True}}],
    }


def _tree_service(service: Mapping[str, Any], path: str, policy: Policy) -> dict[str, Any]:
    """The keys that lay the sample's tree out at `path` and run the command on it."""
    disk = policy.disk_mb
    command = [*(service.get("entrypoint") or []), *(service.get("command") or [])]
    environment = {"HOME": "/tmp", **(service.get("environment") or {})}
    return {
        "user": "0:0", "cap_add": ["SETUID", "SETGID"], "read_only": True,
        "entrypoint": ["sh", ENTRY, path], "command": command,
        "working_dir": service.get("working_dir") or path, "environment": environment,
        "tmpfs": [*(service.get("tmpfs") or []), f"{path}:size={disk}m,mode=0755",
                  f"/tmp:size={disk}m,mode=1777"],
        "volumes": [*(service.get("volumes") or []),
                    {"type": "volume", "source": INPUTS_KEY, "target": INPUTS,
                     "read_only": True, "volume": {"nocopy": True}}],
    }
