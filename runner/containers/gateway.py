"""The model gateway's container: one per `up`, the only door from a gateway arm to a
model API (the gateway itself is the stdlib package `gateway/`, mounted read-only).

It holds the arms' real API keys in its environment (never in a file, never in an arm's
container) and answers each gateway arm's network as `model-gateway`. Its first network
reaches the upstreams: `[gateway] upstream_network` when set (then it has no other
egress), else a network of its own with egress. Its state directory (the stage's
`gateway/`) holds the config the runner writes and the records it appends.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker.errors

from rig.persist import write_text_atomic
from runner.containers import sandbox
from runner.containers.engine import (
    Bind,
    ContainerSpec,
    Engine,
    Labels,
    Resources,
    Tmpfs,
    create_container,
    create_network,
)
from runner.errors import BadInputError, InfraError
from runner.manifest import Gateway

ALIAS = "model-gateway"
PORT = 8080
URL = f"http://{ALIAS}:{PORT}"
PACKAGE_MOUNT = "/bakeoff/gateway"
STATE_MOUNT = "/state"
CONFIG_FILE = "config.json"
RESOURCES = Resources(cpus=1.0, memory_mb=512, pids=256)
HEALTH_TIMEOUT_S = 30
TOKEN_PREFIX = "bkf-gw-"


def package_dir() -> Path:
    """The `gateway/` package of this checkout (beside `runner/`)."""
    return Path(__file__).resolve().parents[2] / "gateway"


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(24)


@dataclass(frozen=True)
class GatewaySpec:
    name: str
    image_id: str
    labels: Labels
    state_dir: Path
    network: str               # the first network: the way to the upstreams
    keys: dict[str, str]       # variable name -> the real key (the container's environment)


def _user(state_dir: Path) -> str:
    """The sandbox user when we are root (the state dir is handed to it), else our own
    uid: the records it writes are the host user's files either way."""
    if os.getuid() == 0:
        os.chown(state_dir, sandbox.SANDBOX_UID, sandbox.SANDBOX_UID)
        return sandbox.SANDBOX_USER
    return f"{os.getuid()}:{os.getgid()}"


def start(engine: Engine, spec: GatewaySpec) -> str:
    """Create and start the gateway container; return its id (it is not healthy yet:
    `wait_healthy`)."""
    spec.state_dir.mkdir(parents=True, exist_ok=True)
    package = package_dir()
    if not (package / "__main__.py").is_file():
        raise InfraError(f"the gateway package is missing from {package}",
                         hint="reinstall bakeoff-sandbox from its repository")
    container_spec = ContainerSpec(
        image=spec.image_id, labels=spec.labels, resources=RESOURCES,
        command=("python3", "-m", "gateway", "--state", STATE_MOUNT, "--port", str(PORT)),
        user=_user(spec.state_dir), purpose=f"model gateway {spec.name}", name=spec.name,
        hostname=ALIAS, read_only=True, tmpfs=(Tmpfs("/tmp", 64),), network=spec.network,
        mounts=(Bind(package, PACKAGE_MOUNT), Bind(spec.state_dir, STATE_MOUNT, read_only=False)),
        env={"PYTHONPATH": "/bakeoff", "PYTHONDONTWRITEBYTECODE": "1", **spec.keys},
        working_dir="/tmp", log_max_mb=8)
    container: Any = create_container(engine, container_spec)
    try:
        engine.call("start the model gateway", container.start)
    except BaseException:
        sandbox.remove(engine, str(container.id))
        raise
    return str(container.id)


def attach(engine: Engine, container_id: str, network: str) -> None:
    """Put the gateway on an arm's network, reachable there as `model-gateway`."""
    net = engine.call("find network", engine.client.networks.get, network, retry=True)
    engine.call("connect the model gateway", net.connect, container_id, aliases=[ALIAS])


def require_network(engine: Engine, name: str) -> None:
    """`[gateway] upstream_network` must exist: it is the user's, never created here."""
    try:
        engine.call("find the upstream network", engine.client.networks.get, name)
    except docker.errors.NotFound:
        raise BadInputError(f"[gateway] upstream_network {name!r} does not exist",
                            hint="create it (docker network create NAME) and attach the "
                                 "proxy the gateway should reach, or remove the key") from None


def wait_healthy(engine: Engine, container_id: str, timeout_s: float = HEALTH_TIMEOUT_S) -> None:
    """Poll /healthz from inside the gateway's container until it answers."""
    probe = ["python3", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request."
             f"urlopen('http://127.0.0.1:{PORT}/healthz', timeout=2).status == 200 else 1)"]
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        result = sandbox.exec_in(engine, container_id, probe, timeout_s=5, user="",
                                 workdir="/tmp")
        if result.exit_code == 0:
            return
        last = (result.stderr or result.stdout).strip()[-400:]
        time.sleep(0.2)
    raw: Any = engine.call("read the gateway's log", engine.client.api.logs, container_id,
                           tail=20)
    logs = bytes(raw).decode(errors="replace")
    raise InfraError(f"the model gateway did not answer /healthz within {timeout_s:.0f}s: "
                     f"{last}\n{logs}", hint="see its log: docker logs " + container_id[:12])


def write_config(state_dir: Path, config: dict[str, Any]) -> None:
    """The gateway re-reads it on its next request (it watches mtime and size)."""
    write_text_atomic(state_dir / CONFIG_FILE, json.dumps(config, indent=2, sort_keys=True))
    (state_dir / CONFIG_FILE).chmod(0o644)


@dataclass(frozen=True)
class Door:
    """One gateway arm's way in: its network, its token, what it may call, which of the
    gateway's variables holds its key for each provider."""

    arm: str
    network: str
    token: str
    models: tuple[str, ...]
    keys: dict[str, str]       # provider -> variable name in the gateway's environment
    role: str = "arm"          # "judge": the judge of the arm `arm` (its usage apart)


@dataclass(frozen=True)
class Budget:
    max_requests: int | None = None
    max_tokens: int | None = None
    max_usd: float | None = None


def config(upstreams: dict[str, str], stage: str, run: str, doors: list[Door], budget: Budget,
           prices: dict[str, dict[str, float | None]]) -> dict[str, Any]:
    """The gateway's config.json for one `up`."""
    tokens = {door.token: {"stage": stage, "run": run, "arm": door.arm, "role": door.role,
                           "models": list(door.models), "keys": door.keys,
                           "budget": {"max_requests": budget.max_requests,
                                      "max_tokens": budget.max_tokens,
                                      "max_usd": budget.max_usd}}
              for door in doors}
    return {"upstreams": upstreams, "tokens": tokens, "prices": prices}


@dataclass(frozen=True)
class Launch:
    spec: GatewaySpec
    own_network: bool          # False: spec.network is the user's upstream_network
    doors: list[Door]
    config: dict[str, Any]


def plan_launch(section: Gateway, name: str, image_id: str, labels: Labels, state_dir: Path,
                stage: str, doors: list[Door], keys: dict[str, str]) -> Launch:
    """The gateway of `section` for `doors`: through `[gateway] upstream_network` when set,
    else a network of its own (named after `name`); the budgets and prices of the section."""
    own = section.upstream_network is None
    network = (f"{name}-upstream".lower() if own else str(section.upstream_network))
    budget = Budget(section.max_requests_per_arm, section.max_tokens_per_arm,
                    section.max_usd_per_arm)
    prices = {model: price.model_dump() for model, price in section.prices.items()}
    settings = config({"anthropic": section.anthropic, "openai": section.openai}, stage,
                      labels.run, doors, budget, prices)
    return Launch(GatewaySpec(name, image_id, labels, state_dir, network, keys), own, doors,
                  settings)


def launch(engine: Engine, plan: Launch, network_labels: Labels) -> str:
    """The gateway up and healthy on its networks; return its container id. Its own
    network (when it needs one) is made here, with egress, labelled `network_labels`."""
    if plan.own_network:
        create_network(engine, plan.spec.network, network_labels, egress=True)
    else:
        require_network(engine, plan.spec.network)
    plan.spec.state_dir.mkdir(parents=True, exist_ok=True)
    write_config(plan.spec.state_dir, plan.config)
    container_id = start(engine, plan.spec)
    for network in dict.fromkeys(door.network for door in plan.doors):
        attach(engine, container_id, network)
    wait_healthy(engine, container_id)
    return container_id
