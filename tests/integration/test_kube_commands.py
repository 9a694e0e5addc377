"""The bake-off on a cluster, measured (issue 36): `run` with `engine = "kubernetes"`
against the emulator of the API (tests/unit/kube_emulator.py), whose Pods a node of this
machine's docker engine runs (tests/integration/kubelet_lab.py), with a real registry
(tests/integration/registry_lab.py). The command builds its images here, pushes them, and
names them by the registry's digest; the node pulls that digest and runs each Pod's spec
as written, its claims as a provisioner gives them (the root root's, the Pod's fsGroup its
group). The cluster is proved first, for real: the log's streams, the policies (the
node's networks: a client on no network cannot reach the listener) and a claim's cap.
Then up (the baseline's proof samples, the arms' sandboxes and checkouts), dispatch (the
agents by exec, the work taken with the sandbox emptied, never frozen), score and merge,
and nothing is left on the cluster. The same experiment on docker gives the same
verdicts, counts, exit codes, trees and merge.

What it found, mended: a claim's root is root's on a cluster, so the checkout's init (as
the sandbox user) could not make /work/.git; an init container gives each claim a Pod
writes to its owner at the root (`kube.objects` `OWNED`), as docker makes a volume its
owner's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from runner.cli.app import main
from runner.containers.engine import Engine
from runner.containers.kube.about import ACCEPTED_PIDS
from tests.integration.helpers import MANIFEST, arms_toml, committed_repo, flat_record, git
from tests.integration.kubelet_lab import Kubelet, on_a_node
from tests.integration.registry_lab import Registry, images_built, served
from tests.unit.kube_emulator import Emulator

__all__ = ["images_built", "served"]  # the registry lab's fixtures, used here
# The fixer reads its change from its environment (given on an exec's stdin on a cluster).
FIX = ("[ \"$BAKEOFF_CHANGE\" = first ] && sed -i 's/^VALUE = 1/VALUE = 2/' app.py; "
       "git add -A; git commit -qm fix")
USES_APP = "from app import VALUE\n\n\ndef test_app():\n    assert VALUE == 2\n"



@pytest.fixture()
def cluster(engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
            ) -> Iterator[tuple[Emulator, Kubelet]]:
    with on_a_node(engine, tmp_path, monkeypatch) as found:
        yield found


def experiment(root: Path, registry_at: str | None) -> Path:
    """One change, two arms: the control changes nothing, the fixer fixes it."""
    files = {"app.py": "VALUE = 1\n", "briefs/first.md": "Make the test pass.\n",
             "tests/test_app.py": USES_APP}
    text = MANIFEST.format(name="kuberun", memory_mb=256, pids=128, database="")
    text += arms_toml([("control", "none", "true"), ("fixer", "none", FIX)])
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
            for arm in ("control", "fixer")}
    return {
        "samples": {name.split("/", 2)[-1] if name.startswith("proofs/") else name: (
            r["verdict"], r["reason"], r["counts"], r["exit_code"])
            for name, r in samples.items()},
        "changes": {arm: git(repo, "diff", "main", found["commit"])
                    for arm, found in arms.items()},
        "merged": git(repo, "diff", "main", "bakeoff/kuberun"),
        "records": list(samples.values())}


def test_the_bake_off_on_a_cluster_gives_the_results_it_gives_on_docker(
        engine: Engine, served: Registry, cluster: tuple[Emulator, Kubelet], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    emulator, node = cluster
    found = {}
    for where, registry_at in (("docker", None), ("cluster", served.address)):
        manifest = experiment(tmp_path / where, registry_at)
        code = main(["run", "-f", str(manifest)])
        said = capsys.readouterr().err
        assert code == 0, said
        found[where] = outcome(manifest)
    on_docker, on_cluster = found["docker"], found["cluster"]

    failed = ("FAIL", "tests_failed", {"passed": 0, "failed": 1, "skipped": 0, "errors": 0}, 1)
    passed = ("PASS", None, {"passed": 1, "failed": 0, "skipped": 0, "errors": 0}, 0)
    assert on_docker["samples"] == {
        **{f"samples/baseline/success/{n}.json": failed for n in (1, 2, 3)},
        **{f"samples/control/success/{n}.json": failed for n in (1, 2, 3)},
        **{f"samples/fixer/success/{n}.json": passed for n in (1, 2, 3)}}
    assert on_cluster["samples"] == on_docker["samples"]
    assert on_docker["changes"]["control"] == ""
    assert "-VALUE = 1\n+VALUE = 2" in on_docker["changes"]["fixer"]
    assert on_cluster["changes"] == on_docker["changes"]
    assert on_cluster["merged"] == on_docker["merged"] == on_docker["changes"]["fixer"]

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
    # checkouts' inits, the briefs' filler, the tools' checks, the samples (3 baseline, 6
    # arms'), per arm its bundler with the filler and the reader of the bundler's volume;
    # every Pod that writes to a claim of a user's ran the owners' init first.
    roles = [role for pod, role in node.played if not pod.endswith("/owners")]
    assert {role: roles.count(role) for role in set(roles)} == {
        "cluster-probe": 5, "arm": 2, "arm-checkout-init": 2, "arm-inputs": 1,
        "tool-check": 4, "sample": 9, "arm-bundler": 6}
    owned = {pod.split("/")[0] for pod, _ in node.played if pod.endswith("/owners")}
    assert {role for pod, role in node.played if pod in owned} == {
        "arm", "arm-checkout-init", "arm-bundler", "cluster-probe"}  # the briefs' is root's
    assert emulator.objects == {}  # every Pod, policy, claim and Secret removed

