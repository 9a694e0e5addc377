"""A browser criterion on a cluster (issue 36): the sample's server and the browser that
drives its page are one Pod of two containers (one network namespace: the page at
http://localhost:PORT), run by the node lab (tests/integration/kubelet_lab.py) from the
Pod's spec as written, behind the emulator of the API; the browser image (Debian's
Chromium and Playwright) pushed to a real registry and run by its digest, its inputs on
the browser container's stdin (no host path on a cluster).

The samples are test_attacks_browser.py's on docker, graded by the same executor and
rules with a `KubeEngine` as its engine: the base fails by its test, the honest fix passes
on the real path, the client-side trick fails `not_real_path`, a page that allocates
until its renderer dies fails by its test, each with the verdict it gets on docker."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from rig.sample.record import SampleRecord
from runner.containers.backend import LABEL_EXPERIMENT, Labels
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.containers.kube import preflight
from runner.containers.kube.about import ACCEPTED_PIDS
from tests.integration.browser_lab import PAGES
from tests.integration.kubelet_lab import Kubelet
from tests.integration.registry_lab import Registry, images_built, served
from tests.integration.test_attacks_browser import FIXED, INDEX, Lab, tree, verdict
from tests.integration.test_conformance import on_the_node

__all__ = ["images_built", "served"]  # the registry lab's fixtures, used here


class NodeLab:
    """test_attacks_browser.py's lab on a `KubeEngine`, the node that runs its Pods, and
    every record it graded."""

    def __init__(self, lab: Lab, node: Kubelet, registry: str) -> None:
        self.lab, self.node, self.registry = lab, node, registry
        self.records: list[SampleRecord] = []

    def grade(self, files: dict[str, str]) -> SampleRecord:
        record = self.lab.grade(files)
        self.records.append(record)
        return record


@pytest.fixture(scope="module")
def node_lab(engine: Engine, built_images: dict[str, BuiltImage], browser_image: BuiltImage,
             served: Registry, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeLab]:
    root = tmp_path_factory.mktemp("kube-browser")
    with on_the_node(engine, served, root) as (kube, emulator, node):
        proof = Labels(f"kube-browser-{secrets.token_hex(3)}", "probe")
        preflight.prove_split(kube, built_images["python"].image_id, proof)
        kube.remove_labelled({LABEL_EXPERIMENT: proof.experiment})
        lab = Lab(kube, built_images["python"], root / "lab")
        try:
            yield NodeLab(lab, node, served.address)
        finally:
            lab.close()
            kube.remove_labelled({LABEL_EXPERIMENT: lab.experiment})
        assert emulator.objects == {}  # every Pod, Secret and policy of the samples removed


def test_the_base_fails_and_the_honest_fix_passes_on_the_real_path(node_lab: NodeLab) -> None:
    honest = node_lab.grade(tree({"index.html": INDEX}, FIXED))
    assert verdict(honest) == ("PASS", None), honest.detail
    assert [(p.met, p.detail) for p in honest.real_path] == [
        (True, "POST /api/horizon 2xx: 1 answer(s) from the app's server (200)")]
    assert honest.browser_run is not None and [
        t["status"] for t in honest.tests] == ["passed"]
    base = node_lab.grade({})
    assert verdict(base) == ("FAIL", "tests_failed"), base.detail
    assert [p.met for p in base.real_path] == [False]


@pytest.mark.parametrize(("pages", "expected", "detail"), [
    ({"index.html": PAGES["client.html"]}, ("FAIL", "not_real_path"),
     "the flow did not take the real path: POST /api/horizon 2xx: never requested by the "
     "page"),
    ({"index.html": PAGES["oom.html"]}, ("FAIL", "tests_failed"), None),
], ids=["computes the answer in the page", "allocates until the renderer dies"])
def test_a_page_that_cheats_or_breaks_gets_the_verdict_it_gets_on_docker(
        node_lab: NodeLab, pages: dict[str, str], expected: tuple[str, str],
        detail: str | None) -> None:
    record = node_lab.grade(tree(pages, FIXED))
    assert verdict(record) == expected, record.detail
    if detail is not None:
        assert record.detail == detail


def test_every_sample_ran_a_pod_of_the_server_and_the_browser_by_digest(
        node_lab: NodeLab) -> None:
    """Runs last: what the node played for the module's four samples."""
    records = node_lab.records
    assert len(records) == 4
    played = node_lab.node.played
    servers = [pod for pod, role in played if role == "sample-server" and "/" not in pod]
    # every sample: a server Pod whose second container is the browser, and no Pod of a
    # browser alone
    assert len(servers) == len(records)
    assert sorted(pod for pod, _ in played if "/" in pod and not pod.endswith(
        "/owners")) == sorted(f"{pod}/c1" for pod in servers)
    for record in records:
        assert record.image_ref.startswith(f"{node_lab.registry}/bakeoff/python@sha256:")
        assert record.engine["accepted_pids"] == ACCEPTED_PIDS
    pulled = {ref.split("@")[0] for ref in node_lab.node.pulled}
    assert f"{node_lab.registry}/bakeoff/browser" in pulled
