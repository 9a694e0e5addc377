"""A registry of our own for the tests (issue 36): `images/registry` (Debian's
docker-registry, CNCF distribution 2.8, FROM the local base) in a container of ours, its
layers on a tmpfs, published on 127.0.0.1 only (an engine trusts a loopback registry over
HTTP); removed by its labels afterwards."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests

from runner.containers import images
from runner.containers.backend import LABEL_EXPERIMENT, LABEL_RUN, Labels
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from tests.integration.helpers import PlainReporter

READY_S = 30.0


@dataclass(frozen=True)
class Registry:
    address: str  # 127.0.0.1:PORT

    def url(self, path: str) -> str:
        return f"http://{self.address}{path}"


@pytest.fixture(scope="module")
def images_built(engine: Engine) -> dict[str, BuiltImage]:
    return {b.name: b for b in images.build(engine, ["base", "registry"], PlainReporter())}


@pytest.fixture(scope="module")
def served(engine: Engine, images_built: dict[str, BuiltImage]) -> Iterator[Registry]:
    """The registry, hardened as our containers are, its layers on a tmpfs; removed by
    its labels afterwards, whatever happened."""
    run = secrets.token_hex(3)
    labels = Labels(f"registry{run}", "registry", run=run)
    client = engine.client
    try:
        network: Any = engine.call("create the registry's network", client.networks.create,
                                   f"bakeoff-registry-{run}", driver="bridge",
                                   labels=labels.as_dict())
        container: Any = engine.call(
            "create the registry", client.containers.create, images_built["registry"].image_id,
            name=f"bakeoff-registry-{run}", labels=labels.as_dict(), detach=True, init=True,
            cap_drop=["ALL"], security_opt=["no-new-privileges"], read_only=True,
            tmpfs={"/var/lib/docker-registry": "size=1024m,uid=100,gid=101,mode=0700"},
            mem_limit="1536m", memswap_limit="1536m", pids_limit=256, network=network.name,
            ports={"5000/tcp": ("127.0.0.1", None)})
        engine.call("start the registry", container.start)
        container.reload()
        port = container.attrs["NetworkSettings"]["Ports"]["5000/tcp"][0]["HostPort"]
        served = Registry(f"127.0.0.1:{port}")
        until = time.monotonic() + READY_S
        while True:
            try:
                if requests.get(served.url("/v2/"), timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < until, f"the registry did not answer in {READY_S} s"
            time.sleep(0.2)
        yield served
    finally:
        engine.remove_labelled({LABEL_EXPERIMENT: labels.experiment, LABEL_RUN: run})
