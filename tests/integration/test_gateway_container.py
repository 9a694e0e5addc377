"""The gateway as the runner runs it (`runner.containers.gateway.start`): its image
(`bakeoff/python` plus the package, built on first use), uid 1000, its state a volume on
the engine's disk, on an internal network with a containerised upstream and a client
container that reaches it by name; its records read back through the engine. Nothing here
touches loopback or any address outside the test's own containers."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from runner.containers import gateway
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from tests.integration import sse_upstream
from tests.integration.gateway_lab import REAL_KEY, TOKEN, gateway_lab, logs, run_client

CLIENT = textwrap.dedent("""
    import http.client, json, os, socket, time
    from urllib.parse import urlsplit

    gateway, upstream = urlsplit(os.environ["GATEWAY"]), urlsplit(os.environ["UPSTREAM"])

    def ready(url, probe):
        for _ in range(150):
            try:
                if probe(url):
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise SystemExit(f"{url.hostname} never answered")

    def healthz(url):
        connection = http.client.HTTPConnection(url.hostname, url.port, timeout=2)
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        return response.status == 200 and response.read() == b"ok"

    def listening(url):
        socket.create_connection((url.hostname, url.port), timeout=2).close()
        return True

    def post(path, body, headers):
        connection = http.client.HTTPConnection(gateway.hostname, gateway.port, timeout=30)
        connection.request("POST", path, json.dumps(body), headers)
        response = connection.getresponse()
        return {"status": response.status, "type": response.getheader("Content-Type"),
                "body": response.read().decode()}

    ready(upstream, listening)
    ready(gateway, healthz)
    token = os.environ["TOKEN"]
    print(json.dumps({
        "stream": post("/anthropic/v1/messages?beta=true",
                       {"model": "claude-x", "stream": True, "output_config": {"effort": "high"}},
                       {"x-api-key": token, "anthropic-version": "2023-06-01"}),
        "small": post("/anthropic/v1/messages", {"model": "claude-x"},
                      {"Authorization": "Bearer " + token}),
        "stranger": post("/anthropic/v1/messages", {"model": "claude-x"},
                         {"x-api-key": "tok-nobody"})}))
""")


def expected_stream(events: int) -> str:
    chunks = [sse_upstream.event(sse_upstream.START)] + [
        sse_upstream.event(sse_upstream.DELTA)] * events + [
        sse_upstream.event(e) for e in sse_upstream.END]
    return b"".join(chunks).decode()


def test_gateway_container_streams_records_and_keeps_the_key_to_itself(
        engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path) -> None:
    script = tmp_path / "client.py"
    script.write_text(CLIENT, encoding="utf-8")
    with gateway_lab(engine, built_images["python"].image_id, tmp_path, events=3,
                     delay_s=0.05) as lab:
        status, out = run_client(lab, script)
        assert status == 0, out
        answers = json.loads(out)
        upstream_log, gateway_log = logs(lab.upstream), logs(lab.gateway)
        lab.read_records()
        written = lab.stored()
    assert answers["stream"] == {"status": 200, "type": "text/event-stream",
                                 "body": expected_stream(3)}
    assert (answers["small"]["status"], json.loads(answers["small"]["body"])) == (
        200, sse_upstream.SMALL)
    assert answers["stranger"]["status"] == 401
    assert [json.loads(line) for line in upstream_log.splitlines()] == [
        {"path": "/v1/messages?beta=true", "authorization": False, "key_ok": True},
        {"path": "/v1/messages", "authorization": False, "key_ok": True}]
    lines = [json.loads(t) for t in (lab.state / "records" / "s1" / "requests.jsonl")
             .read_text().splitlines()]
    assert [(line["seq"], line["stream"], line["output_config_effort"], line["model_response"],
             line["usage"], line["cost_usd"], line["refused"]) for line in lines] == [
        (1, True, "high", "claude-x-20260101",
         {"input": 120, "output": 57, "cache_read": 400, "cache_write": 30, "reasoning": 0},
         0.0072375, None),
        (2, False, None, "claude-x-20260101",
         {"input": 11, "output": 7, "cache_read": 5, "cache_write": 0, "reasoning": 0},
         0.0006975, None)]
    refused = json.loads((lab.state / "records" / "_refused.jsonl").read_text())
    assert (refused["status"], refused["refused"]) == (401, "unknown_token")
    assert {f.uid for f in written} == {1000}
    for text in [gateway_log, *(f.data.decode() for f in written)]:
        assert REAL_KEY not in text and TOKEN not in text


def test_the_gateway_gets_nothing_through_a_host_path_and_runs_an_image_of_ours(
        engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path) -> None:
    """Issue 24, the gateway's rows: its one mount is its state volume (no bind of any
    path of this machine), its program is in its image (`bakeoff/gateway:<identity>`,
    labelled with the identity of the package and the exact base it was built on), and
    its config is root's in the volume, out of the gateway's reach."""
    base = built_images["python"].image_id
    with gateway_lab(engine, base, tmp_path) as lab:
        lab.gateway.reload()
        mounts = [(m["Type"], m["Name"], m["Destination"], m["RW"])
                  for m in lab.gateway.attrs["Mounts"]]
        assert mounts == [("volume", gateway.state_volume(lab.gateway_host), "/state", True)]
        assert not lab.gateway.attrs["HostConfig"]["Binds"]
        image = engine.client.images.get(lab.gateway.attrs["Image"])
        identity = gateway.image_identity(base, gateway.package_files())
        assert image.labels["io.bakeoff.identity"] == identity
        assert image.tags == [f"bakeoff/gateway:{identity[7:23]}"]
        config = lab.gateway.exec_run(["stat", "-c", "%u %a", "/state/config.json"],
                                      user="1000")
        overwrite = lab.gateway.exec_run(["sh", "-c", "echo {} > /state/config.json"],
                                         user="1000")
    assert config.output.decode().split() == ["0", "644"]
    assert overwrite.exit_code != 0
