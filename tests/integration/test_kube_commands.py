"""The bake-off on a cluster, measured (issue 36): `run` with `engine = "kubernetes"`
against the emulator of the API (tests/unit/kube_emulator.py), whose Pods a node of this
machine's docker engine runs (tests/integration/kubelet_lab.py), with a real registry
(tests/integration/registry_lab.py). The command builds its images here, pushes them, and
names them by the registry's digest; the node pulls that digest and runs each Pod's spec
as written, its claims as a provisioner gives them (the root root's, the Pod's fsGroup its
group). The cluster is proved first, for real: the log's streams, the policies (the
node's networks: a client on no network cannot reach the listener) and a claim's cap.
Then up (the baseline's proof samples, the arms' sandboxes and checkouts, the model
gateway on the user's upstream network), dispatch (the agents by exec, one through the
gateway; the work taken with the sandbox emptied, never frozen), score (each sample a
fresh server of the tree and the criterion that asks it: one Pod of two containers) and
merge, and nothing is left on the cluster but the user's network. The same experiment on
docker gives the same verdicts, counts, exit codes, trees, merge and gateway record.

What it found, mended: a claim's root is root's on a cluster, so the checkout's init (as
the sandbox user) could not make /work/.git; an init container gives each claim a Pod
writes to its owner at the root (`kube.objects` `OWNED`), as docker makes a volume its
owner's; the archive filler (root with CHOWN alone) could not set the mode of an entry
it gave the sandbox user, so the gateway's state never went in: it has FOWNER too."""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from runner.cli.app import main
from runner.containers.backend import LABEL_EXPERIMENT, Labels
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.containers.kube import objects
from runner.containers.kube.about import ACCEPTED_PIDS
from tests.integration.gateway_lab import UPSTREAM_SCRIPT, lab_spec, started
from tests.integration.helpers import MANIFEST, arms_toml, committed_repo, flat_record, git
from tests.integration.kubelet_lab import Kubelet, on_a_node
from tests.integration.registry_lab import Registry, images_built, served
from tests.unit.kube_emulator import Emulator

__all__ = ["images_built", "served"]  # the registry lab's fixtures, used here
# The fixer reads its change from its environment (given on an exec's stdin on a cluster).
FIX = ("[ \"$BAKEOFF_CHANGE\" = first ] && sed -i 's/^VALUE = 1/VALUE = 2/' app.py; "
       "git add -A; git commit -qm fix")
# The criterion asks the sample's own server (its Pod's other container, on localhost) for
# the value the tree's app holds.
SERVED = """import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from app import VALUE


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = str(VALUE).encode() if self.path == "/value" else b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""
ASKS_SERVER = """import os
import urllib.request


def test_app():
    url = "http://localhost:%s/value" % os.environ["PORT"]
    with urllib.request.urlopen(url, timeout=10) as answer:
        assert answer.read() == b"2"
"""
SERVER = 'server = { run = "python3 served.py $PORT", health = "/healthz" }\n'
# The asker commits what its model answered: one request through the gateway (its token,
# never the key), which holds the real key and reaches the upstream beyond.
ASK = """import json, os, sys, urllib.request
request = urllib.request.Request(
    os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
    json.dumps({"model": "scripted-asker", "max_tokens": 8,
                "messages": [{"role": "user", "content": "the value?"}]}).encode(),
    {"x-api-key": os.environ["ANTHROPIC_API_KEY"], "anthropic-version": "2023-06-01",
     "content-type": "application/json"})
with urllib.request.urlopen(request, timeout=60) as answer:
    print(json.load(answer)["content"][0]["text"])
"""
ASKER = "python3 ask.py > answer.txt && git add answer.txt && git commit -qm asked"
REAL_KEY = "sk-ant-kube-REAL-" + "9" * 24
UPSTREAM_PORT = 8080


@pytest.fixture()
def cluster(engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
            ) -> Iterator[tuple[Emulator, Kubelet]]:
    with on_a_node(engine, tmp_path, monkeypatch) as found:
        yield found


def experiment(root: Path, registry_at: str | None, upstream: tuple[str, str]) -> Path:
    """One change, three arms: the control changes nothing, the fixer fixes it, the asker
    commits what its model answered through the gateway (`upstream`: the upstream's
    network and host); a sample is a fresh server of the tree and the criterion that asks
    it (one Pod on a cluster)."""
    files = {"app.py": "VALUE = 1\n", "served.py": SERVED, "ask.py": ASK,
             "briefs/first.md": "Make the test pass.\n", "tests/test_app.py": ASKS_SERVER}
    text = MANIFEST.format(name="kuberun", memory_mb=256, pids=128, database="")
    text = text.replace('parser = "pytest"\n', 'parser = "pytest"\n' + SERVER, 1)
    text += arms_toml([("control", "none", "true"), ("fixer", "none", FIX),
                       ("asker", "gateway", ASKER)])
    text += 'secrets = ["ANTHROPIC_API_KEY"]\n'  # the asker's, the last arm
    network, host = upstream
    text += (f'\n[gateway]\nanthropic = "http://{host}:{UPSTREAM_PORT}"\n'
             f'upstream_network = "{network}"\n')
    if registry_at is not None:
        text = 'engine = "kubernetes"\n' + text + (
            f'\n[kubernetes]\nregistry = "{registry_at}"\naccept_node_pids_limit = true\n'
            "parallelism = 2\ncpus = 2\nvolume_mb = 16\n")
    return committed_repo(root, files, text)


def outcome(manifest: Path) -> dict[str, Any]:
    """What a run measured, beside how it ran: each sample's verdict, reason, counts and
    exit code, each arm's change from the base, the merge's."""
    repo = manifest.parent
    stage = repo / ".bakeoff" / "kuberun" / "stages" / "first"
    samples = {str(path.relative_to(stage)): flat_record(path)
               for path in sorted(stage.glob("**/samples/*/*/*.json"))}
    arms = {arm: json.loads((stage / "arms" / arm / "arm.json").read_text())
            for arm in ("control", "fixer", "asker")}
    return {
        "samples": {name.split("/", 2)[-1] if name.startswith("proofs/") else name: (
            r["verdict"], r["reason"], r["counts"], r["exit_code"])
            for name, r in samples.items()},
        "changes": {arm: git(repo, "diff", "main", found["commit"])
                    for arm, found in arms.items()},
        "merged": git(repo, "diff", "main", "bakeoff/kuberun"),
        "records": list(samples.values()),
        "gateway": [json.loads(line) for path in sorted((stage / "gateway").glob(
            "records/**/requests.jsonl")) for line in path.read_text().splitlines()]}


@contextlib.contextmanager
def upstream_on(engine: Engine, lab: str, network: str, image: str) -> Iterator[Any]:
    """The model's upstream (tests/integration/sse_upstream.py, on its stdin) on the docker
    network `network`, as `LAB-upstream`, expecting the real key; its container."""
    container = started(engine, lab_spec(
        lab, image, network, "upstream", ("python3", "-", str(UPSTREAM_PORT), "1", "0"),
        {"EXPECTED_KEY": REAL_KEY}), UPSTREAM_SCRIPT)
    try:
        yield container
    finally:
        container.remove(force=True)


def test_the_bake_off_on_a_cluster_gives_the_results_it_gives_on_docker(
        engine: Engine, built_images: dict[str, BuiltImage], served: Registry,
        cluster: tuple[Emulator, Kubelet], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    emulator, node = cluster
    monkeypatch.setenv("ANTHROPIC_API_KEY", REAL_KEY)
    python = built_images["python"].image_id
    # The upstream's network: on docker one the test makes; on the cluster a policy of ours
    # that the user made (as `kubectl apply` would), the upstream on the node's network of
    # it (beyond the cluster: the gateway reaches it by its name).
    lab = f"it-up-{secrets.token_hex(3)}"
    engine.create_network(f"{lab}-net", Labels(lab, "upstream-network"), egress=False)
    users = objects.network(f"{lab}-net", "bakeoff", Labels(lab, "upstream-network"),
                            egress=False)
    made = requests.post(f"{emulator.url}/apis/networking.k8s.io/v1/namespaces/bakeoff/"
                         "networkpolicies", json=users, timeout=10)
    assert made.status_code == 201, made.text
    found, asked = {}, {}
    try:
        for where, registry_at, network, host in (
                ("docker", None, f"{lab}-net", lab),
                ("cluster", served.address, node.network(f"{lab}-net"), f"kubelet{node.run}")):
            with upstream_on(engine, host, network, python) as upstream:
                manifest = experiment(tmp_path / where, registry_at,
                                      (f"{lab}-net", f"{host}-upstream"))
                code = main(["run", "-f", str(manifest)])
                said = capsys.readouterr().err
                assert code == 0, said
                asked[where] = [json.loads(line) for line in upstream.logs(
                    stdout=True, stderr=False).decode().splitlines()]
            found[where] = outcome(manifest)
    finally:
        engine.remove_labelled({LABEL_EXPERIMENT: lab})
    on_docker, on_cluster = found["docker"], found["cluster"]

    failed = ("FAIL", "tests_failed", {"passed": 0, "failed": 1, "skipped": 0, "errors": 0}, 1)
    passed = ("PASS", None, {"passed": 1, "failed": 0, "skipped": 0, "errors": 0}, 0)
    assert on_docker["samples"] == {
        **{f"samples/baseline/success/{n}.json": failed for n in (1, 2, 3)},
        **{f"samples/control/success/{n}.json": failed for n in (1, 2, 3)},
        **{f"samples/fixer/success/{n}.json": passed for n in (1, 2, 3)},
        **{f"samples/asker/success/{n}.json": failed for n in (1, 2, 3)},
        # The asker's answer grafted onto the fixer's fix, its samples passing.
        **{f"merge/samples/graft-1/success/{n}.json": passed for n in (1, 2, 3)}}
    assert on_cluster["samples"] == on_docker["samples"]
    assert on_docker["changes"]["control"] == ""
    assert "+++ b/answer.txt\n@@ -0,0 +1 @@\n+ok" in on_docker["changes"]["asker"]
    assert "-VALUE = 1\n+VALUE = 2" in on_docker["changes"]["fixer"]
    assert on_cluster["changes"] == on_docker["changes"]
    assert on_cluster["merged"] == on_docker["merged"]
    assert "-VALUE = 1\n+VALUE = 2" in on_docker["merged"]
    assert "+++ b/answer.txt\n@@ -0,0 +1 @@\n+ok" in on_docker["merged"]

    # What ran on the cluster: the image the registry holds, by its digest; each record
    # says the pids limit was the nodes' (the manifest accepted it).
    refs = {r["image_ref"] for r in on_cluster["records"]}
    assert len(refs) == 1
    repository, digest = refs.pop().split("@")
    assert repository == f"{served.address}/bakeoff/python"
    answer = requests.head(served.url(f"/v2/bakeoff/python/manifests/{digest}"), timeout=10,
                           headers={"Accept": "application/vnd.docker.distribution."
                                              "manifest.v2+json"})
    assert answer.status_code == 200
    assert {r["image_id"] for r in on_cluster["records"]} == {
        r["image_id"] for r in on_docker["records"]}
    assert {r["image_ref"] for r in on_docker["records"]} == {None}
    assert {r["engine"].get("accepted_pids") for r in on_cluster["records"]} == {ACCEPTED_PIDS}
    assert {r["engine"].get("accepted_pids") for r in on_docker["records"]} == {None}

    # The Pods the node ran, by role: the proofs' five, the arms' sandboxes, their
    # checkouts' inits, the briefs' filler, the tools' checks, the gateway and the filler
    # of its state, the samples (3 baseline, 9 arms', 3 of the graft: the server's Pod,
    # its criterion the Pod's second container), per arm its bundler with the filler and
    # the reader of the bundler's volume; every Pod that writes to a claim of a user's ran
    # the owners' init first.
    roles = [role for pod, role in node.played if "/" not in pod]
    assert {role: roles.count(role) for role in set(roles)} == {
        "cluster-probe": 5, "arm": 3, "arm-checkout-init": 3, "arm-inputs": 1,
        "tool-check": 4, "gateway": 2, "sample-server": 15, "arm-bundler": 9}
    assert sorted(pod for pod, _ in node.played if "/" in pod and not pod.endswith(
        "/owners")) == sorted(f"{pod}/c1" for pod, role in node.played
                              if role == "sample-server" and "/" not in pod)
    owned = {pod.split("/")[0] for pod, _ in node.played if pod.endswith("/owners")}
    assert {role for pod, role in node.played if pod in owned} == {
        "arm", "arm-checkout-init", "arm-bundler", "cluster-probe", "gateway"
    }  # the briefs' is root's
    # Every Pod, policy, claim and Secret of the run removed; the user's network stays.
    assert list(emulator.objects) == [(
        "/apis/networking.k8s.io/v1/namespaces/bakeoff/networkpolicies", f"{lab}-net")]

    # The asker's one request: through the gateway, which recorded it as the asker's and
    # gave the upstream the real key (never the token); the key is nowhere in the run's
    # state.
    for where in ("docker", "cluster"):
        assert asked[where] == [{"path": "/v1/messages", "authorization": False,
                                 "key_ok": True}], where
        assert [(r["arm"], r["status"], r["refused"]) for r in found[where]["gateway"]] == [
            ("asker", 200, None)], where
        assert not [path for path in (tmp_path / where / ".bakeoff").rglob("*")
                    if path.is_file() and REAL_KEY.encode() in path.read_bytes()], where

