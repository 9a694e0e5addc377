"""A command on a cluster, measured (issue 36): `oracle` with `engine = "kubernetes"`
against the emulator of the API (tests/unit/kube_emulator.py), whose Pods a node of this
machine's docker engine runs (tests/integration/kubelet_lab.py), with a real registry
(tests/integration/registry_lab.py). The command builds its images here, pushes them, and
names them by the registry's digest; the node pulls that digest and runs the Pod's spec
as written. The cluster is proved first, for real: the log's streams, the policies (the
node's networks: a client on no network cannot reach the listener) and a claim's cap.
The same commits scored on docker give the same verdicts, counts and exit codes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from runner.cli.app import main
from runner.containers.engine import Engine
from runner.containers.kube.about import ACCEPTED_PIDS
from tests.integration.helpers import flat_record, git, make_target
from tests.integration.kubelet_lab import Kubelet
from tests.integration.registry_lab import Registry, images_built, served
from tests.unit.kube_emulator import Emulator, emulated
from tests.unit.test_kube_doctor import kubeconfig

__all__ = ["images_built", "served"]  # the registry lab's fixtures, used here
USES_APP = "from app import VALUE\n\n\ndef test_app():\n    assert VALUE == 2\n"


@pytest.fixture()
def cluster(engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
            ) -> Iterator[tuple[Emulator, Kubelet]]:
    with emulated() as emulator:
        node = Kubelet(engine)
        node.attach(emulator)
        for key, value in kubeconfig(tmp_path, emulator.url).items():
            monkeypatch.setenv(key, value)
        try:
            yield emulator, node
        finally:
            node.close()


def scored(manifest: Path, commit: str, capsys: pytest.CaptureFixture[str]
           ) -> list[dict[str, Any]]:
    code = main(["oracle", "-f", str(manifest), "--commit", commit, "--check", "success",
                 "--samples", "2"])
    said = capsys.readouterr().err
    assert code == 0, said
    stage = Path(said.split("records: ", 1)[1].split()[0])
    return [flat_record(path) for path in sorted(stage.glob("samples/*/*/*.json"))]


def test_oracle_on_a_cluster_gives_the_verdicts_it_gives_on_docker(
        engine: Engine, served: Registry, cluster: tuple[Emulator, Kubelet], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    emulator, node = cluster
    manifest = make_target(tmp_path / "repo", ["a"], database=False)
    repo = manifest.parent
    (repo / "tests" / "test_app.py").write_text(USES_APP)
    git(repo, "commit", "-qam", "the test reads the app's value")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-qb", "fix")
    (repo / "app.py").write_text("VALUE = 2\n")
    git(repo, "commit", "-qam", "the fix")
    fix = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")

    on_docker = {commit: scored(manifest, commit, capsys) for commit in (base, fix)}
    manifest.write_text('engine = "kubernetes"\n' + manifest.read_text() + (
        f'\n[kubernetes]\nregistry = "{served.address}"\naccept_node_pids_limit = true\n'
        "parallelism = 2\nvolume_mb = 16\n"))
    git(repo, "commit", "-qam", "the same experiment on a cluster")
    on_cluster = {commit: scored(manifest, commit, capsys) for commit in (base, fix)}

    def shape(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(r["verdict"], r["reason"], r["counts"], r["exit_code"], r["commit"])
                for r in records]
    assert shape(on_docker[base]) == [("FAIL", "tests_failed", {
        "passed": 0, "failed": 1, "skipped": 0, "errors": 0}, 1, base)] * 2
    assert shape(on_docker[fix]) == [("PASS", None, {
        "passed": 1, "failed": 0, "skipped": 0, "errors": 0}, 0, fix)] * 2
    assert {c: shape(r) for c, r in on_cluster.items()} == {
        c: shape(r) for c, r in on_docker.items()}

    # What ran on the cluster: the image the registry holds, by its digest.
    refs = {r["image_ref"] for records in on_cluster.values() for r in records}
    assert len(refs) == 1
    ref = refs.pop()
    repository, digest = ref.split("@")
    assert repository == f"{served.address}/bakeoff/python"
    answer = requests.head(served.url(f"/v2/bakeoff/python/manifests/{digest}"), timeout=10,
                           headers={"Accept": "application/vnd.docker.distribution."
                                              "manifest.v2+json"})
    assert answer.status_code == 200
    assert {r["image_id"] for records in on_cluster.values() for r in records} == {
        r["image_id"] for records in on_docker.values() for r in records}
    assert {r["image_ref"] for records in on_docker.values() for r in records} == {None}
    # Each record says the pids limit was the nodes' (the manifest accepted it).
    assert {r["engine"].get("accepted_pids") for records in on_cluster.values()
            for r in records} == {ACCEPTED_PIDS}
    assert {r["engine"].get("accepted_pids") for records in on_docker.values()
            for r in records} == {None}

    # Every Pod the node ran: per command, the three proofs' five, then two samples.
    roles = [role for _, role in node.played]
    assert sorted(set(roles)) == ["cluster-probe", "sample"], node.played
    assert (roles.count("cluster-probe"), roles.count("sample")) == (2 * 5, 2 * 2)
    assert emulator.pods() == []  # every Pod deleted: nothing of ours is left running
