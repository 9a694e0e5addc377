"""The gateway as a container, for its integration test and its bench: an internal network
the caller's experiment label owns, a stdlib SSE upstream (`sse_upstream.py`) and the
gateway on it, and one-shot client containers that reach both by name."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.containers.engine import (
    LABEL_EXPERIMENT,
    Bind,
    ContainerSpec,
    Engine,
    Labels,
    Resources,
    Tmpfs,
    create_container,
    create_network,
)

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM_SCRIPT = Path(__file__).resolve().parent / "sse_upstream.py"
REAL_KEY = "sk-ant-it-REAL-" + "7" * 24
TOKEN = "tok-it-arm-a-" + "c" * 16
PORT = 8080
SANDBOX_USER = 1000


@dataclass(frozen=True)
class GatewayLab:
    engine: Engine
    experiment: str
    network: str
    image: str
    state: Path
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


def gateway_config(upstream_url: str, **budget: Any) -> dict[str, Any]:
    return {"upstreams": {"anthropic": upstream_url, "openai": upstream_url},
            "tokens": {TOKEN: {"stage": "s1", "arm": "a", "role": "arm",
                               "models": ["claude-x"], "keys": {"anthropic": "BAKEOFF_KEY_0"},
                               "budget": {"max_requests": None, "max_tokens": None,
                                          "max_usd": None, **budget}}},
            "prices": {"claude-x": {"input": 15.0, "output": 75.0, "cache_read": 1.5,
                                    "cache_write": 18.75}}}


def _spec(lab_name: str, image: str, network: str, role: str, command: tuple[str, ...],
          mounts: tuple[Bind, ...], env: dict[str, str], cpus: float = 1.0) -> ContainerSpec:
    return ContainerSpec(
        image=image, command=command, labels=Labels(lab_name, role),
        resources=Resources(cpus, 256, 128), user=f"{SANDBOX_USER}:{SANDBOX_USER}",
        purpose=f"gateway lab {role}", name=f"{lab_name}-{role}", network=network,
        mounts=mounts, env=env, read_only=True, tmpfs=(Tmpfs("/tmp", 16),))


@contextmanager
def gateway_lab(engine: Engine, image: str, tmp: Path, *, events: int = 3,
                delay_s: float = 0.0, budget: dict[str, Any] | None = None
                ) -> Iterator[GatewayLab]:
    """Network, upstream and gateway up; everything labelled `it-<hex>` removed after."""
    experiment = f"it-{secrets.token_hex(4)}"
    try:
        network = f"{experiment}-net"
        create_network(engine, network, Labels(experiment, "gateway-lab"), egress=False)
        state = tmp / "gateway-state"
        state.mkdir()
        (state / "config.json").write_text(json.dumps(gateway_config(
            f"http://{experiment}-upstream:{PORT}", **(budget or {}))), encoding="utf-8")
        os.chown(state, SANDBOX_USER, SANDBOX_USER)
        upstream = create_container(engine, _spec(
            experiment, image, network, "upstream",
            ("python3", "/srv/sse_upstream.py", str(PORT), str(events), str(delay_s)),
            (Bind(UPSTREAM_SCRIPT, "/srv/sse_upstream.py"),), {"EXPECTED_KEY": REAL_KEY}))
        gateway = create_container(engine, _spec(
            experiment, image, network, "gateway",
            ("python3", "-m", "gateway", "--state", "/state", "--port", str(PORT)),
            (Bind(ROOT / "gateway", "/bakeoff/gateway"),
             Bind(state, "/state", read_only=False)),
            {"PYTHONPATH": "/bakeoff", "BAKEOFF_KEY_0": REAL_KEY}))
        upstream.start()
        gateway.start()
        yield GatewayLab(engine, experiment, network, image, state, upstream, gateway)
    finally:
        engine.remove_labelled({LABEL_EXPERIMENT: experiment})


def run_client(lab: GatewayLab, script: Path, *args: str, cpus: float = 1.0,
               timeout_s: int = 300) -> tuple[int, str]:
    """`python3 script args...` in a fresh client container on the lab's network; its
    exit status and stdout (stderr is appended after a marker line when it is not empty)."""
    name = f"client-{secrets.token_hex(3)}"
    container = create_container(lab.engine, _spec(
        lab.experiment, lab.image, lab.network, name,
        ("python3", f"/srv/{script.name}", *args), (Bind(script, f"/srv/{script.name}"),),
        {"GATEWAY": f"http://{lab.gateway_host}:{PORT}",
         "UPSTREAM": f"http://{lab.upstream_host}:{PORT}", "TOKEN": TOKEN}, cpus=cpus))
    try:
        container.start()
        status = container.wait(timeout=timeout_s)["StatusCode"]
        out = container.logs(stdout=True, stderr=False).decode()
        err = container.logs(stdout=False, stderr=True).decode()
        return status, out + (f"\n--- stderr ---\n{err}" if err.strip() else "")
    finally:
        container.remove(force=True)


def logs(container: Any) -> str:
    return str(container.logs().decode())
