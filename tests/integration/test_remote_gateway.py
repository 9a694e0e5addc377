"""The model gateway on an engine that shares no disk with this machine (issue 24, rows 5
and 6 of docs/scale-out.md): on the second engine of tests/integration/remote_engine.py,
its image is built there from a streamed context, its state is a volume there, one request
goes through it from a container there, and its record comes back through the engine's
archive API into a directory of this machine. Nothing reaches outside the containers the
test made: the lab's network is internal, with no address on this machine.
"""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from runner.containers import gateway
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from tests.integration import sse_upstream
from tests.integration.gateway_lab import REAL_KEY, TOKEN, gateway_lab, run_client
from tests.integration.remote_engine import RemoteEngine, copy_image

pytestmark = pytest.mark.docker
Record = Callable[[str, object], None]

ONE_REQUEST = textwrap.dedent("""
    import http.client, json, os, time
    from urllib.parse import urlsplit

    gateway = urlsplit(os.environ["GATEWAY"])
    for _ in range(150):
        try:
            connection = http.client.HTTPConnection(gateway.hostname, gateway.port, timeout=2)
            connection.request("GET", "/healthz")
            if connection.getresponse().status == 200:
                break
        except OSError:
            pass
        time.sleep(0.1)
    connection = http.client.HTTPConnection(gateway.hostname, gateway.port, timeout=30)
    connection.request("POST", "/anthropic/v1/messages", json.dumps({"model": "claude-x"}),
                       {"x-api-key": os.environ["TOKEN"], "anthropic-version": "2023-06-01"})
    response = connection.getresponse()
    print(json.dumps({"status": response.status, "body": response.read().decode()}))
""")


def test_the_gateway_runs_on_a_remote_engine_and_its_record_comes_back(
        engine: Engine, built_images: dict[str, BuiltImage], remote_engine: RemoteEngine,
        tmp_path: Path, record_property: Record) -> None:
    remote = remote_engine.engine
    seconds: dict[str, float] = {}
    began = time.perf_counter()
    # The toolchain by `docker save | load` through both APIs (the second engine has no
    # egress for apt): the same image ID, so the gateway's image has the same identity.
    python = copy_image(engine, remote, built_images["python"].tag)
    assert python == built_images["python"].image_id
    seconds["save | load bakeoff/python"] = round(time.perf_counter() - began, 3)
    script = tmp_path / "one_request.py"
    script.write_text(ONE_REQUEST, encoding="utf-8")
    began = time.perf_counter()
    with gateway_lab(remote, python, tmp_path) as lab:
        seconds["the lab up (the gateway's image built there)"] = round(
            time.perf_counter() - began, 3)
        status, out = run_client(lab, script)
        lab.read_records()
        lab.gateway.reload()
        mounts = [(m["Type"], m["Destination"]) for m in lab.gateway.attrs["Mounts"]]
        image_id = lab.gateway.attrs["Image"]
        local = engine.client.containers.list(all=True, filters={"name": lab.gateway_host})
    assert status == 0, out
    answer = json.loads(out)
    assert (answer["status"], json.loads(answer["body"])) == (200, sse_upstream.SMALL)
    assert mounts == [("volume", "/state")]
    built = remote_engine.client.images.get(image_id)
    identity = gateway.image_identity(python, gateway.package_files())
    assert built.labels["io.bakeoff.identity"] == identity
    assert local == []  # it ran there, not here
    lines = [json.loads(t) for t in (tmp_path / "gateway-state" / "records" / "s1"
                                     / "requests.jsonl").read_text().splitlines()]
    assert [(line["seq"], line["arm"], line["model_response"], line["status"],
             line["refused"]) for line in lines] == [(1, "a", "claude-x-20260101", 200, None)]
    kept = [p.read_text() for p in (tmp_path / "gateway-state").rglob("*") if p.is_file()]
    assert kept and not [text for text in kept if REAL_KEY in text or TOKEN in text]
    record_property("seconds", seconds)
