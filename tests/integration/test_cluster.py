"""On a real Kubernetes cluster (issue 36), when `BAKEOFF_TEST_KUBECONTEXT` names a context
and `BAKEOFF_TEST_REGISTRY` the registry its nodes pull from (`BAKEOFF_TEST_KUBENAMESPACE`
optional): without them every test here is reported as skipped, "not run", never as
passed. With them: `doctor`'s cluster lines must all be ok on it (the preflight proofs by
probe Pods of `bakeoff/python` pushed to the registry), and the bundled demo must run end
to end with `engine = "kubernetes"` (never run here: this machine has no cluster).
(The conformance suite's cluster runs in test_conformance.py, the same variables.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.cli import terminal
from runner.cli.app import main
from runner.commands import cluster, demo
from runner.containers import images
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage, registry
from runner.manifest.models import KubernetesSection
from tests.integration.helpers import PlainReporter

KUBECONTEXT, REGISTRY = "BAKEOFF_TEST_KUBECONTEXT", "BAKEOFF_TEST_REGISTRY"


@pytest.fixture(scope="module")
def section() -> KubernetesSection:
    context, registry_at = os.environ.get(KUBECONTEXT), os.environ.get(REGISTRY)
    if not context or not registry_at:
        pytest.skip(f"not run: no cluster ({KUBECONTEXT} and {REGISTRY} name one)")
    return KubernetesSection(context=context, registry=registry_at,
                             namespace=os.environ.get("BAKEOFF_TEST_KUBENAMESPACE"),
                             accept_node_pids_limit=True)


def test_doctor_proves_the_cluster(section: KubernetesSection, engine: Engine,
                                   tmp_path: Path) -> None:
    python: BuiltImage = images.build(engine, ["python"], PlainReporter())[0]
    pushed = registry.Registered(engine, section.registry)
    lines = cluster.checks(section, os.environ, tmp_path, lambda: pushed(python.image_id))
    assert [(check.name, check.status) for check in lines] == [
        (name, "ok") for name in ("pids", *cluster.NAMES)], [c.lines() for c in lines]


def test_the_demo_runs_on_the_cluster(section: KubernetesSection, tmp_path: Path) -> None:
    manifest = demo.prepare(tmp_path / "example")
    manifest.write_text('engine = "kubernetes"\n' + manifest.read_text()
                        + f'\n[kubernetes]\ncontext = "{section.context}"\n'
                          f'registry = "{section.registry}"\naccept_node_pids_limit = true\n')
    assert terminal.load(manifest).manifest.engine == "kubernetes"
    assert main(["run", "-f", str(manifest)]) == 0
