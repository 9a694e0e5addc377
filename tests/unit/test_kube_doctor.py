"""A manifest with `engine = "kubernetes"` (issue 36): its rules, and `doctor`'s checks of the
cluster against the emulator of the API (tests/unit/kube_emulator.py) and a registry's
`/v2/` on loopback: each line exact, every line after a failed one "not checked", and the
preflight proofs run by Pods of their own (a cluster that ignores policies is `wrong`)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from runner.cli import terminal
from runner.commands import cluster, demo
from runner.commands.doctor import DoctorCheck
from runner.containers.backend import Labels
from runner.containers.kube import objects
from runner.errors import InfraError, ManifestError
from runner.manifest import load_manifest
from runner.manifest.models import KubernetesSection
from tests.unit.kube_emulator import Emulator, emulated
from tests.unit.test_kube_engine import IMAGE, connecting, shell, spec
from tests.unit.test_kube_volumes import filling

KUBE = '\n[kubernetes]\nregistry = "127.0.0.1:5000"\n'


def example(tmp_path: Path, head: str = 'engine = "kubernetes"\n', tail: str = KUBE) -> Path:
    path = demo.prepare(tmp_path / "example")
    path.write_text(head + path.read_text() + tail)
    return path


def test_a_cluster_is_named_exactly_when_the_engine_is_one(tmp_path: Path) -> None:
    section = load_manifest(example(tmp_path)).manifest.kubernetes
    assert section == KubernetesSection(registry="127.0.0.1:5000")
    assert (section.parallelism, section.cpus, section.accept_node_pids_limit,
            section.context, section.namespace) == (4, 4, False, None, None)
    with pytest.raises(ManifestError) as missing:
        load_manifest(example(tmp_path / "a", tail=""))
    assert 'kubernetes: engine = "kubernetes" needs a [kubernetes] table' in str(missing.value)
    with pytest.raises(ManifestError) as stray:
        load_manifest(example(tmp_path / "b", head=""))
    assert 'engine: is "docker" while a [kubernetes] table is given' in str(stray.value)
    with pytest.raises(ManifestError, match="engine"):
        load_manifest(example(tmp_path / "c", head='engine = "swarm"\n'))


def test_a_kubernetes_manifest_loads_for_every_command(tmp_path: Path) -> None:
    """The commands run on a cluster (tests/unit/test_kube_commands.py): loading it refuses
    nothing; what a cluster cannot run is refused by `cluster.refuse`, by name."""
    assert terminal.load(example(tmp_path)).manifest.engine == "kubernetes"
    docker = demo.prepare(tmp_path / "docker")
    assert terminal.load(docker).manifest.engine == "docker"


class Registry(BaseHTTPRequestHandler):
    status = 200

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/v2/" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture()
def registry() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture()
def emulator() -> Iterator[Emulator]:
    with emulated() as found:
        found.autorun = True
        yield found


def kubeconfig(tmp_path: Path, server: str) -> dict[str, str]:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "clusters": [{"name": "lab", "cluster": {"server": server}}],
        "users": [{"name": "tool", "user": {"token": "t0k3n"}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "tool",
                                                 "namespace": "bakeoff"}}],
        "current-context": "lab"}))
    return {"KUBECONFIG": str(path)}


def on_create(*hooks: Callable[[Emulator, str], None]) -> Callable[[Emulator, str], None]:
    def made(emulator: Emulator, pod: str) -> None:
        for hook in hooks:
            hook(emulator, pod)
    return made


def doctor(tmp_path: Path, emulator: Emulator, registry: str,
           image: Callable[[], str] = lambda: IMAGE) -> list[tuple[str, str, str]]:
    """The cluster's lines past the pids line (the manifest's: its own test)."""
    found = cluster.checks(KubernetesSection(registry=registry),
                           kubeconfig(tmp_path, emulator.url), tmp_path / "secrets", image)
    assert found[0].name == "pids"
    return [(check.name, check.status, check.found) for check in found[1:]]


def test_the_pids_line_is_the_manifests_acceptance_of_the_nodes_limit() -> None:
    """Refused unless accepted, never passed silently: the probes run either way (their
    Pods are the tool's own, a handful of processes)."""
    refused = cluster.pids_check(KubernetesSection(registry="r:5000"))
    assert (refused.status, refused.found, refused.fix) == (
        "wrong", "a Pod has no pids limit of its own (the kubelet's podPidsLimit is "
        "node-wide) and the manifest does not accept it", cluster.PIDS_FIX)
    accepted = cluster.pids_check(KubernetesSection(registry="r:5000",
                                                    accept_node_pids_limit=True))
    assert (accepted.status, accepted.fix) == ("ok", "")


def test_a_cluster_that_answers_and_proves_both_is_all_ok(
        tmp_path: Path, emulator: Emulator, registry: str) -> None:
    emulator.on_create = on_create(shell, connecting(enforced=True), filling(3, 1016))
    assert doctor(tmp_path, emulator, registry) == [
        ("kubeconfig", "ok", f"context lab: {emulator.url}, namespace bakeoff, a token"),
        ("kubernetes", "ok", f"Kubernetes v1.37.0 answers at {emulator.url} (needs 1.30 or "
                             "later)"),
        ("registry", "ok", f"http://{registry}/v2/ answers"),
        ("log-streams", "ok", "one stream of a log is given alone"),
        ("policies", "ok", "NetworkPolicies are enforced (a denied connection failed, the "
                           "allowed one connected)"),
        ("volumes", "ok", "a claim of 1024 MiB holds that much and no more (its class caps "
                          "it)")]
    assert emulator.pods() == []  # every probe's Pod removed
    assert emulator.objects == {}  # and the probes' deny-all and claim: nothing stays


def test_a_cluster_that_ignores_policies_or_mixes_the_streams_is_wrong(
        tmp_path: Path, emulator: Emulator, registry: str) -> None:
    emulator.on_create = on_create(shell, connecting(enforced=False), filling(0, 1032))
    emulator.split_streams = False
    lines = {name: (status, found) for name, status, found in doctor(tmp_path, emulator,
                                                                      registry)}
    assert lines["log-streams"][0] == lines["policies"][0] == lines["volumes"][0] == "wrong"
    assert lines["volumes"][1] == (f"the storage class at {emulator.url} (namespace bakeoff) "
                                   "does not cap a volume: a claim of 1024 MiB took 1032 MiB")
    assert lines["log-streams"][1].endswith("asked for stdout, it gave "
                                            "b'bakeoff-probe-stdout\\nbakeoff-probe-stderr\\n'")
    assert lines["policies"][1].endswith("does not enforce NetworkPolicies: a Pod on no "
                                         "network reached another Pod's port")


def test_what_fails_first_is_named_and_the_rest_not_checked(
        tmp_path: Path, emulator: Emulator, registry: str) -> None:
    emulator.version = {"major": "1", "minor": "29", "gitVersion": "v1.29.4"}
    lines = doctor(tmp_path, emulator, registry)
    assert lines[1] == ("kubernetes", "wrong", "Kubernetes v1.29.4, older than 1.30: exec and "
                        "attach need the v5 channel protocol")
    assert lines[3:] == [(name, "missing", "not checked: kubernetes is not ok (fix it first)")
                         for name in ("log-streams", "policies", "volumes")]
    assert emulator.requests == [("GET", "/version", "")]  # no Pod was made


def test_a_registry_that_does_not_answer_is_missing(tmp_path: Path, emulator: Emulator) -> None:
    import socket
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    lines = doctor(tmp_path, emulator, f"127.0.0.1:{port}")
    assert lines[2] == ("registry", "missing", f"no registry answers at "
                        f"http://127.0.0.1:{port}/v2/: ConnectionError")
    assert [status for _, status, _ in lines] == ["ok", "ok"] + ["missing"] * 4


def test_no_kubeconfig_is_the_first_line_with_its_fix(tmp_path: Path) -> None:
    found = cluster.checks(KubernetesSection(registry="r:5000"),
                           {"KUBECONFIG": str(tmp_path / "nowhere")}, tmp_path / "s",
                           lambda: IMAGE)
    assert found[1] == DoctorCheck("kubeconfig", "missing", "KUBECONFIG names no file that "
                                   f"exists: {tmp_path / 'nowhere'}", "point it at a kubeconfig")
    assert [check.found for check in found[2:]] == [
        "not checked: kubeconfig is not ok (fix it first)"] * 5


def test_without_a_probe_image_the_proofs_are_not_checked(
        tmp_path: Path, emulator: Emulator, registry: str) -> None:
    def missing() -> str:
        raise InfraError("bakeoff/python:latest is not built here",
                         hint="bakeoff-sandbox images build python")
    lines = doctor(tmp_path, emulator, registry, missing)
    assert lines[3:] == [(name, "missing", "not checked: no probe image (bakeoff/python:latest "
                          "is not built here)") for name in ("log-streams", "policies",
                                                             "volumes")]
    assert emulator.pods() == []


def test_doctor_reads_the_cluster_of_a_kubernetes_manifest_only(tmp_path: Path) -> None:
    from runner.cli import app
    assert app._cluster_of(example(tmp_path)) == KubernetesSection(registry="127.0.0.1:5000")
    assert app._cluster_of(demo.prepare(tmp_path / "docker")) is None
    assert app._cluster_of(None) is None and app._cluster_of(tmp_path / "none.toml") is None


def test_the_run_books_role_is_the_one_the_tool_needs() -> None:
    """docs/scale-out.md shows the Role to bind: the text must be `objects.role`'s."""
    from runner.containers.backend import Labels
    from runner.containers.kube import objects
    text = (Path(__file__).parents[2] / "docs" / "scale-out.md").read_text()
    block = text.split("8. **This Role**", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    assert yaml.safe_load(block) == objects.role("bakeoff", Labels("bakeoff-sandbox", "rbac"))


def test_gc_on_a_cluster_removes_the_experiments_objects_by_selector_and_no_others(
        tmp_path: Path, emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """`gc -f` with a Kubernetes manifest: every Pod, policy, claim, Service and Secret
    labelled with the experiment goes, by label selector, from the manifest's namespace; another
    experiment's stay, and this machine's engine is never asked."""
    from typer.testing import CliRunner

    from runner.cli import app as app_module
    from runner.containers.kube.engine import KubeEngine
    path = example(tmp_path)
    name = load_manifest(path).manifest.experiment.name
    for key, value in kubeconfig(tmp_path, emulator.url).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(app_module, "Engine", None)  # called: a TypeError, the test fails
    api = cluster.engine(KubernetesSection(registry="r:5000"), os.environ,
                         tmp_path / "s").api
    planted = KubeEngine(api, cpus=1, accept_node_pids=True)
    emulator.on_attach = None
    for pod, experiment in (("a-1", name), ("a-2", name), ("b-1", "other")):
        planted.start(planted.create(spec(pod, labels=Labels(experiment, "sample"))))
    planted.create_network(f"{name}-net", Labels(name, "sample-network"), egress=False)
    api.create(objects.service(f"{name}-db", "bakeoff", Labels(name, "database"),
                               {"io.bakeoff.role": "database"}, 5432))
    api.create(objects.secret(f"{name}-keys", "bakeoff", Labels(name, "gateway"),
                              {"KEY": "k"}))
    planted.create_volume(f"{name}-fixer-work", Labels(name, "arm-checkout", "fixer"),
                          size_mb=64, owner=1000)
    done = CliRunner().invoke(app_module.app, ["gc", "-f", str(path)])
    assert done.exit_code == 0, done.output
    assert done.output.splitlines()[-1] == (
        f"gc: removed 2 containers, 2 network policies, 1 volume claims, 1 services, "
        f"1 secrets at {emulator.url} (namespace bakeoff)")
    assert sorted(name for _, name in emulator.objects) == ["b-1", "other-deny-all"]
