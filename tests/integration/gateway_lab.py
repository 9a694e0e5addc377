"""The gateway as a container, for its integration tests and its bench: an internal
network the caller's experiment label owns, a stdlib SSE upstream (`sse_upstream.py`) and
the gateway on it, started as the runner starts it (`gateway.image`, then `gateway.start`: its
image built on the engine, its state a volume), and one-shot client containers that reach
both by name. No container here gets a path of this machine: the scripts travel on their
stdin, the records come back through the engine's archive API, so the lab runs on a
remote engine as it runs here."""

from __future__ import annotations

import io
import secrets
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.containers import gateway as gateway_mod
from runner.containers.backend import LABEL_EXPERIMENT, ContainerSpec, Labels, Resources, Tmpfs
from runner.containers.engine import Engine
from tests.integration.helpers import created

UPSTREAM_SCRIPT = Path(__file__).resolve().parent / "sse_upstream.py"
REAL_KEY = "sk-ant-it-REAL-" + "7" * 24
TOKEN = "tok-it-arm-a-" + "c" * 16
PORT = 8080
SANDBOX_USER = 1000


@dataclass(frozen=True)
class StoredFile:
    """A file as the gateway's volume holds it."""

    name: str
    uid: int
    data: bytes


@dataclass(frozen=True)
class GatewayLab:
    engine: Engine
    experiment: str
    network: str
    image: str
    state: Path            # the host directory its records are read back into
    upstream: Any          # the docker-py containers
    gateway: Any

    @property
    def gateway_host(self) -> str:
        return f"{self.experiment}-gateway"

    @property
    def upstream_host(self) -> str:
        return f"{self.experiment}-upstream"

    def labels(self, role: str) -> Labels:
        return Labels(self.experiment, role)

    def read_records(self) -> None:
        """The gateway's records into `state`/records, as the runner reads them back."""
        gateway_mod.read_records(self.engine, str(self.gateway.id), self.state)

    def stored(self) -> list[StoredFile]:
        """Every file under the volume's records/, with its owner there."""
        data = b"".join(self.engine.get_archive(
            str(self.gateway.id), f"{gateway_mod.STATE_MOUNT}/{gateway_mod.RECORDS}"))
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            return [StoredFile(m.name, m.uid, _read(tar, m)) for m in tar if m.isfile()]


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    found = tar.extractfile(member)
    assert found is not None
    return found.read()


def gateway_config(upstream_url: str, **budget: Any) -> dict[str, Any]:
    return {"upstreams": {"anthropic": upstream_url, "openai": upstream_url},
            "tokens": {TOKEN: {"stage": "s1", "arm": "a", "role": "arm",
                               "models": ["claude-x"], "keys": {"anthropic": "BAKEOFF_KEY_0"},
                               "budget": {"max_requests": None, "max_tokens": None,
                                          "max_usd": None, **budget}}},
            "prices": {"claude-x": {"input": 15.0, "output": 75.0, "cache_read": 1.5,
                                    "cache_write": 18.75}}}


def lab_spec(lab_name: str, image: str, network: str, role: str, command: tuple[str, ...],
          env: dict[str, str], cpus: float = 1.0) -> ContainerSpec:
    """A container whose script comes on its stdin (`python3 - ARGS`)."""
    return ContainerSpec(
        image=image, command=command, labels=Labels(lab_name, role),
        resources=Resources(cpus, 256, 128), user=f"{SANDBOX_USER}:{SANDBOX_USER}",
        purpose=f"gateway lab {role}", name=f"{lab_name}-{role}", network=network,
        env=env, read_only=True, tmpfs=(Tmpfs("/tmp", 16),), stdin=True)


def started(engine: Engine, spec: ContainerSpec, script: Path) -> Any:
    container = created(engine, spec)
    with script.open("rb") as source:
        engine.start(container.id, source, what=spec.purpose)
    return container


@contextmanager
def gateway_lab(engine: Engine, image: str, tmp: Path, *, events: int = 3,
                delay_s: float = 0.0, budget: dict[str, Any] | None = None
                ) -> Iterator[GatewayLab]:
    """Network, upstream and gateway up (`image`: the python toolchain the gateway's image
    is built on); everything labelled `it-<hex>` removed after."""
    experiment = f"it-{secrets.token_hex(4)}"
    try:
        network = f"{experiment}-net"
        engine.create_network(network, Labels(experiment, "gateway-lab"), egress=False)
        state = tmp / "gateway-state"
        state.mkdir()
        upstream = started(engine, lab_spec(
            experiment, image, network, "upstream",
            ("python3", "-", str(PORT), str(events), str(delay_s)),
            {"EXPECTED_KEY": REAL_KEY}), UPSTREAM_SCRIPT)
        spec = gateway_mod.GatewaySpec(f"{experiment}-gateway", image,
                                       Labels(experiment, "gateway"), state, network,
                                       {"BAKEOFF_KEY_0": REAL_KEY})
        settings = gateway_config(f"http://{experiment}-upstream:{PORT}", **(budget or {}))
        built = gateway_mod.image(engine, image)
        gateway = engine.client.containers.get(gateway_mod.start(engine, spec, settings,
                                                                 built.image_id))
        yield GatewayLab(engine, experiment, network, image, state, upstream, gateway)
    finally:
        engine.remove_labelled({LABEL_EXPERIMENT: experiment})


def run_client(lab: GatewayLab, script: Path, *args: str, cpus: float = 1.0,
               timeout_s: int = 300) -> tuple[int, str]:
    """`python3 - args...` with `script` on its stdin, in a fresh client container on the
    lab's network; its exit status and stdout (stderr is appended after a marker line
    when it is not empty)."""
    name = f"client-{secrets.token_hex(3)}"
    container = started(lab.engine, lab_spec(
        lab.experiment, lab.image, lab.network, name, ("python3", "-", *args),
        {"GATEWAY": f"http://{lab.gateway_host}:{PORT}",
         "UPSTREAM": f"http://{lab.upstream_host}:{PORT}", "TOKEN": TOKEN}, cpus=cpus), script)
    try:
        status = container.wait(timeout=timeout_s)["StatusCode"]
        out = container.logs(stdout=True, stderr=False).decode()
        err = container.logs(stdout=False, stderr=True).decode()
        return status, out + (f"\n--- stderr ---\n{err}" if err.strip() else "")
    finally:
        container.remove(force=True)


def logs(container: Any) -> str:
    return str(container.logs().decode())
