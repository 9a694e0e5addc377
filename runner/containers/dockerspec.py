"""The docker backend's translation between the interface's words and docker's: a
`ContainerSpec` as the keyword arguments of docker's container create, with the policy every
container gets whatever the spec says (`container_args`: docker-py funnels every option
through one `_create_container_args`, and so do we), and docker's answers as the
interface's typed results (`state_of`: an inspect as a `ContainerState`; `facts_of`:
`docker info` and `docker version` as `EngineFacts`). Pure: no call to an engine here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from docker.types import LogConfig, Mount

from runner.containers.backend import (
    NO_NETWORK,
    OWN_LOOPBACK,
    Bind,
    ContainerSpec,
    ContainerState,
    EngineFacts,
    Volume,
    require_labels,
    unaddable_caps,
)


def facts_of(info: Mapping[str, Any], version: Mapping[str, Any]) -> EngineFacts:
    """`EngineFacts` from `docker info` and `docker version` as the API returns them."""
    status = {str(k): str(v) for k, v in (info.get("DriverStatus") or [])}
    limits = {"memory": "MemoryLimit", "swap": "SwapLimit", "pids": "PidsLimit",
              "cpu": "CpuCfsQuota"}
    return EngineFacts(
        server_version=str(version.get("Version") or info.get("ServerVersion") or ""),
        api_version=str(version.get("ApiVersion") or ""),
        cgroup_version=str(info.get("CgroupVersion") or ""),
        cgroup_driver=str(info.get("CgroupDriver") or ""),
        limits={name: bool(info.get(key)) for name, key in limits.items()},
        storage_driver=str(info.get("Driver") or ""),
        backing_filesystem=status.get("Backing Filesystem", ""))


def state_of(found: Mapping[str, Any]) -> ContainerState:
    """`ContainerState` from the engine's inspect answer."""
    state, config = found.get("State") or {}, found.get("Config") or {}
    networks = (found.get("NetworkSettings") or {}).get("Networks") or {}
    exited = state.get("Status") in ("exited", "dead")
    return ContainerState(
        id=str(found.get("Id", "")), name=str(found.get("Name", "")).lstrip("/"),
        status=str(state.get("Status", "")),
        exit_code=int(state.get("ExitCode", -1)) if exited else None,
        oom_killed=bool(state.get("OOMKilled")), image=str(found.get("Image", "")),
        command=tuple(str(arg) for arg in config.get("Cmd") or ()),
        health=(state.get("Health") or {}).get("Status"),
        networks={str(k): str((v or {}).get("IPAddress") or "") for k, v in networks.items()},
        labels={str(k): str(v) for k, v in (config.get("Labels") or {}).items()})


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
    """The keyword arguments of docker's container create for `spec`: the one translation, with
    the policy every container gets whatever the spec says."""
    require_labels(spec.labels, spec.purpose)
    refused = unaddable_caps(spec)
    if refused is not None:
        raise ValueError(refused)
    targets = [t.target for t in spec.tmpfs]
    if len(set(targets)) != len(targets):
        raise ValueError(f"{spec.purpose}: two tmpfs mounts at one path: {targets}")
    limits, memory = spec.resources, f"{spec.resources.memory_mb}m"
    args: dict[str, Any] = dict(
        image=spec.image, command=list(spec.command), labels=spec.labels.as_dict(),
        user=spec.user, cap_drop=["ALL"], security_opt=["no-new-privileges"], init=True,
        nano_cpus=int(limits.cpus * 1e9), mem_limit=memory, memswap_limit=memory,
        pids_limit=limits.pids, read_only=spec.read_only,
        environment={**spec.env, **spec.secret_env},
        tmpfs={t.target: t.options() for t in spec.tmpfs},
        mounts=[_mount(m) for m in spec.mounts], **_network_args(spec))
    if spec.cap_add:
        args["cap_add"] = list(spec.cap_add)
    # Docker dials an address given as the container's DNS server inside the container's
    # network namespace (its rule for `--dns`): the engine's DNS forwards every name it
    # does not know there, where nothing of ours listens, and the forward fails at once.
    if not spec.resolve_outside and spec.joins is None and spec.network != NO_NETWORK:
        args["dns"] = [OWN_LOOPBACK]
    optional = {"name": spec.name, "working_dir": spec.working_dir, "hostname": spec.hostname}
    args.update({key: value for key, value in optional.items() if value is not None})
    if spec.tty:
        args.update(tty=True, stdin_open=True)
    elif spec.stdin:  # a binary stream, closed once sent (`Engine.start`): docker-py
        args.update(stdin_open=True)  # sets StdinOnce itself for a stdin_open create
    if spec.log_max_mb is not None:
        args["log_config"] = LogConfig(type=LogConfig.types.JSON, config={
            "max-size": f"{spec.log_max_mb}m", "max-file": "1"})
    return args
