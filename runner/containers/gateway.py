"""The model gateway's container: one per `up`, the only door from a gateway arm to a
model API.

Nothing of it is a path of this machine (docs/scale-out.md), so it runs the same on a
remote engine. The program, the stdlib package `gateway/`, is an image of ours (`image`:
the python toolchain plus `COPY gateway/`, identified by the package's hash, built on
first use on the engine that runs it). Its state is a volume on the engine's disk
(`state_volume`, labelled like the container and removed with it by `down`/`gc`): the
runner puts `config.json` (root's, read-only to the gateway) and an empty `records/` (the
sandbox user's) into it through the archive API before the gateway starts, and reads the
records back with `read_records` into the stage's `gateway/` directory, where the rest
of the runner finds them (`layout.gateway_requests`).

It holds the arms' real API keys in its environment (never in a file, never in an arm's
container; `secret_env`: on a cluster, from a Secret, never in its Pod's spec) and
answers each gateway arm's network as `model-gateway`. Its first network reaches the
upstreams: `[gateway] upstream_network` when set (then it has no other egress), else a
network of its own with egress.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rig.persist import write_text_atomic
from runner.containers import archive, images, sandbox
from runner.containers.backend import (
    ContainerEngine,
    ContainerSpec,
    Labels,
    Resources,
    Tmpfs,
    Volume,
)
from runner.containers.images import BuiltImage, catalog, reporters
from runner.containers.images.identity import tar_of
from runner.errors import BadInputError, InfraError, NotFoundError, SandboxUnavailableError
from runner.install import resources
from runner.manifest import Gateway

ALIAS = "model-gateway"
PORT = 8080
URL = f"http://{ALIAS}:{PORT}"
PACKAGE_ROOT = "/bakeoff"          # the image's PYTHONPATH: the package at /bakeoff/gateway
STATE_MOUNT = "/state"
CONFIG_FILE = "config.json"
RECORDS = "records"
IMAGE = "gateway"
FORMAT = 1  # of the image's recipe below
RESOURCES = Resources(cpus=1.0, memory_mb=512, pids=256)
HEALTH_TIMEOUT_S = 30
TOKEN_PREFIX = "bkf-gw-"
# One read-back at a time: two arms' reads of one gateway write the same files, and a
# snapshot taken first must never land after a later one.
_READING = threading.Lock()


def package_dir() -> Path:
    """The gateway package the tool ships (beside `runner`)."""
    return resources.gateway_dir()


def package_files() -> dict[str, bytes]:
    """The package's files by relative path (no bytecode), as the image gets them."""
    root = package_dir()
    files = {path.relative_to(root).as_posix(): path.read_bytes()
             for path in sorted(root.rglob("*"))
             if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"}
    if "__main__.py" not in files:
        raise InfraError(f"the gateway package is missing from {root}",
                         hint="reinstall bakeoff-sandbox from its repository")
    return files


def image_identity(base_id: str, files: dict[str, bytes]) -> str:
    """The gateway image's identity: the exact base image and the package's bytes."""
    package = hashlib.sha256()
    for name, data in sorted(files.items()):
        package.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    blob = json.dumps({"base": base_id, "package": package.hexdigest(), "format": FORMAT})
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def image(engine: ContainerEngine, base_id: str) -> BuiltImage:
    """The image the gateway runs: `base_id` (the python toolchain) plus the package,
    built from a context streamed to `engine` when it has no image of this identity."""
    files = package_files()
    identity = image_identity(base_id, files)

    def context() -> bytes:
        dockerfile = (f"FROM {base_id}\nCOPY {IMAGE} {PACKAGE_ROOT}/{IMAGE}\n"
                      f"ENV PYTHONPATH={PACKAGE_ROOT} PYTHONDONTWRITEBYTECODE=1\n"
                      f"USER {sandbox.SANDBOX_UID}\nWORKDIR /tmp\n")
        return tar_of({"Dockerfile": dockerfile.encode(),
                       **{f"{IMAGE}/{name}": data for name, data in files.items()}})

    return images.cached_or_built(
        engine, IMAGE, f"bakeoff/{IMAGE}:{identity.removeprefix('sha256:')[:16]}", identity,
        context, reporters.current_reporter(),
        hint="the gateway's image is bakeoff/python plus gateway/: rebuild it with "
             f"`{catalog.BUILD_CMD} python`")


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(24)


@dataclass(frozen=True)
class GatewaySpec:
    name: str
    base_id: str               # the python toolchain its image is built on (`image`)
    labels: Labels
    state_dir: Path            # the run directory's copy: config.json, the records read back
    network: str               # the first network: the way to the upstreams
    keys: dict[str, str]       # variable name -> the real key (the container's environment)


def state_volume(name: str) -> str:
    """The volume of the gateway `name`: its config and records, on the engine's disk."""
    return f"{name}-state"


def state_archive(settings: dict[str, Any]) -> bytes:
    """What the state volume starts with: the config, root's and read-only to the
    gateway (a fresh mtime: the gateway re-reads it when its mtime or size moves), and
    `records/`, the only place the gateway (the sandbox user) can write."""
    text = json.dumps(settings, indent=2, sort_keys=True).encode()
    return archive.pack([archive.Member(CONFIG_FILE, text, 0o644, 0, time.time()),
                         archive.Member(RECORDS, None, 0o755, sandbox.SANDBOX_UID)])


def start(engine: ContainerEngine, spec: GatewaySpec, settings: dict[str, Any],
          image_id: str) -> str:
    """Create the gateway's volume and put its state in through a filler that never
    starts (`sandbox.fill`: a Pod takes no archive before it starts, so the gateway's own
    container is never given one), then create and start the gateway of `image_id`
    (`image`); return the container's id (it is not healthy yet: `wait_healthy`)."""
    volume = engine.create_volume(state_volume(spec.name), spec.labels, size_mb=None,
                                  owner=sandbox.SANDBOX_UID)
    sandbox.fill(engine, volume, image_id, spec.labels, state_archive(settings))
    container_spec = ContainerSpec(
        image=image_id, labels=spec.labels, resources=RESOURCES,
        command=("python3", "-m", "gateway", "--state", STATE_MOUNT, "--port", str(PORT)),
        user=sandbox.SANDBOX_USER, purpose=f"model gateway {spec.name}", name=spec.name,
        hostname=ALIAS, read_only=True, tmpfs=(Tmpfs("/tmp", 64),), network=spec.network,
        mounts=(Volume(volume, STATE_MOUNT),), secret_env=dict(spec.keys), working_dir="/tmp",
        log_max_mb=8)
    container_id = engine.create(container_spec)
    try:
        engine.start(container_id, what="the model gateway")
    except BaseException:
        sandbox.remove(engine, container_id)
        raise
    return container_id


def read_records(engine: ContainerEngine, container_id: str, state_dir: Path) -> int:
    """The gateway's `records/` (running or stopped) into `state_dir`/records, where
    `layout.gateway_requests` names them; the number of files that changed. A line being
    written as it is read arrives torn, and readers skip it (`rig.wire.read_lines`). A
    gateway whose container is gone is a `SandboxUnavailableError`: what was read before
    stays, the rest is in its volume until `down`."""
    try:
        container = engine.inspect(container_id)
    except NotFoundError:
        raise SandboxUnavailableError(
            f"the model gateway {sandbox.shown_id(container_id)} is gone: its records cannot "
            "be read back",
            hint="its volume (named after it, `...-state`) keeps them until `down` or "
                 "`gc` removes it") from None
    with _READING:
        chunks = engine.get_archive(container_id, f"{STATE_MOUNT}/{RECORDS}")
        return archive.unpack(chunks, state_dir, RECORDS,
                              f"the records of model gateway {container.name}")


def attach(engine: ContainerEngine, container_id: str, network: str) -> None:
    """Put the gateway on an arm's network, reachable there as `model-gateway`."""
    engine.connect(network, container_id, aliases=[ALIAS], what="connect the model gateway")


def require_network(engine: ContainerEngine, name: str) -> None:
    """`[gateway] upstream_network` must exist: it is the user's, never created here."""
    try:
        engine.find_network(name, what="find the upstream network", retry=False)
    except NotFoundError:
        raise BadInputError(f"[gateway] upstream_network {name!r} does not exist",
                            hint="create it (docker network create NAME) and attach the "
                                 "proxy the gateway should reach, or remove the key") from None


def wait_healthy(engine: ContainerEngine, container_id: str,
                 timeout_s: float = HEALTH_TIMEOUT_S) -> None:
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
    logs = engine.logs(container_id, stdout=True, stderr=True, tail=20).decode(
        errors="replace")
    raise InfraError(f"the model gateway did not answer /healthz within {timeout_s:.0f}s: "
                     f"{last}\n{logs}", hint="see its log: docker logs (kubectl logs on a "
                                             f"cluster) {sandbox.shown_id(container_id)}")


def write_config(state_dir: Path, config: dict[str, Any]) -> None:
    """The run directory's copy of what `start` puts into the gateway's volume."""
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
    allow_server_tools: bool = False  # provider-side web search / fetch let through
    upstream: str | None = None       # the [[gateway.upstreams]] entry, its only one


@dataclass(frozen=True)
class Budget:
    max_requests: int | None = None
    max_tokens: int | None = None
    max_usd: float | None = None


def config(upstreams: dict[str, object], stage: str, run: str, doors: list[Door], budget: Budget,
           prices: dict[str, dict[str, float | None]]) -> dict[str, Any]:
    """The gateway's config.json for one `up`."""
    tokens = {door.token: {"stage": stage, "run": run, "arm": door.arm, "role": door.role,
                           "models": list(door.models), "keys": door.keys,
                           "allow_server_tools": door.allow_server_tools,
                           "upstream": door.upstream,
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


def plan_launch(section: Gateway, name: str, base_id: str, labels: Labels, state_dir: Path,
                stage: str, doors: list[Door], keys: dict[str, str]) -> Launch:
    """The gateway of `section` for `doors`: through `[gateway] upstream_network` when set,
    else a network of its own (named after `name`); the budgets and prices of the section."""
    own = section.upstream_network is None
    network = (f"{name}-upstream".lower() if own else str(section.upstream_network))
    budget = Budget(section.max_requests_per_arm, section.max_tokens_per_arm,
                    section.max_usd_per_arm)
    prices = {model: price.model_dump() for model, price in section.prices.items()}
    settings = config(section.config_upstreams(), stage, labels.run, doors, budget, prices)
    return Launch(GatewaySpec(name, base_id, labels, state_dir, network, keys), own, doors,
                  settings)


def launch(engine: ContainerEngine, plan: Launch, network_labels: Labels) -> str:
    """The gateway up and healthy on its networks; return its container id. Its image
    first (`image`); its own network (when it needs one) is made here, with egress,
    labelled `network_labels`."""
    built = image(engine, plan.spec.base_id)
    if plan.own_network:
        engine.create_network(plan.spec.network, network_labels, egress=True)
    else:
        require_network(engine, plan.spec.network)
    plan.spec.state_dir.mkdir(parents=True, exist_ok=True)
    write_config(plan.spec.state_dir, plan.config)
    container_id = start(engine, plan.spec, plan.config, built.image_id)
    for network in dict.fromkeys(door.network for door in plan.doors):
        attach(engine, container_id, network)
    wait_healthy(engine, container_id)
    return container_id
