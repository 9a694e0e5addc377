"""The commands on a cluster (issue 36): a Kubernetes manifest's engine is the cluster's,
its images this machine's docker engine's (pushed to the registry, run by digest), and a
command that runs containers there proves the cluster first, on its own engine, against
the emulator of the API (tests/unit/kube_emulator.py): a cluster that fails a proof is
refused by the proof's words with nothing of ours left; what a cluster cannot run (a
compose stack, a shell on this terminal) is refused by name, and runs on docker."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli import app as app_module
from runner.cli import terminal
from runner.commands import cluster, demo
from runner.containers.engine import Engine, docker_engine
from runner.containers.kube.engine import KubeEngine
from runner.errors import BadInputError, InfraError
from runner.manifest import LoadedManifest
from tests.unit.kube_emulator import Emulator
from tests.unit.test_kube_doctor import emulator, example, kubeconfig, on_create
from tests.unit.test_kube_engine import IMAGE, connecting, shell
from tests.unit.test_kube_volumes import filling

__all__ = ["emulator"]  # the fixture, shared
ACCEPTED = '\n[kubernetes]\nregistry = "127.0.0.1:5000"\naccept_node_pids_limit = true\n'


def loaded_on(tmp_path: Path, emulator: Emulator, monkeypatch: pytest.MonkeyPatch,
              tail: str = ACCEPTED) -> LoadedManifest:
    for key, value in kubeconfig(tmp_path, emulator.url).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(cluster, "probe_image", lambda on: IMAGE)  # built by docker
    return terminal.load(example(tmp_path, tail=tail))


def probes_made(emulator: Emulator) -> list[dict[str, str]]:
    return [obj["metadata"]["labels"] for (collection, _), obj in emulator.made.items()
            if collection.endswith("/pods")]


def deny_all(experiment: str) -> tuple[str, str]:
    return ("/apis/networking.k8s.io/v1/namespaces/bakeoff/networkpolicies",
            f"{experiment}-deny-all")


def test_a_command_on_a_cluster_gets_the_cluster_proved_on_its_own_engine(
        tmp_path: Path, emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    emulator.on_create = on_create(shell, connecting(enforced=True), filling(3, 1016))
    loaded = loaded_on(tmp_path, emulator, monkeypatch)
    said: list[str] = []
    monkeypatch.setattr(terminal, "say", said.append)
    on = terminal.engine(loaded)
    assert isinstance(on, KubeEngine)
    assert on.split_proved  # the log's one stream, proved on the engine the command uses
    assert (on.workers, on.cpus, on.accept_node_pids) == (4, 4, True)
    assert said == [f"proving the cluster at {emulator.url} (namespace bakeoff): one log "
                    "stream, policies, volume size"]
    labels = probes_made(emulator)
    assert len(labels) == 5  # the streams' probe, the listener, two clients, the filler
    name = loaded.manifest.experiment.name
    runs = {found["io.bakeoff.run"] for found in labels}
    assert len(runs) == 1 and next(iter(runs)).startswith("probe-")
    assert {(found["io.bakeoff.experiment"], found["io.bakeoff.role"])
            for found in labels} == {(name, "cluster-probe")}
    # The probes and their claim went; the experiment's deny-all stays for its Pods to come
    # (`down` and `gc` remove it with them).
    assert list(emulator.objects) == [deny_all(name)]
    store = docker_engine(on)  # the images: this machine's docker engine's
    assert isinstance(store, Engine) and store._client is None  # never asked yet


def test_a_cluster_that_fails_a_proof_is_refused_by_its_words_and_left_clean(
        tmp_path: Path, emulator: Emulator, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    emulator.on_create = on_create(shell, connecting(enforced=False), filling(3, 1016))
    loaded = loaded_on(tmp_path, emulator, monkeypatch)
    with pytest.raises(InfraError) as refused:
        terminal.engine(loaded)
    assert refused.value.message == (
        f"the cluster at {emulator.url} (namespace bakeoff) failed its policies proof: the "
        f"cluster at {emulator.url} (namespace bakeoff) does not enforce NetworkPolicies: a "
        "Pod on no network reached another Pod's port")
    name = loaded.manifest.experiment.name
    assert list(emulator.objects) == [deny_all(name)]  # no probe, no claim: a deny rule
    # Through the command line: `up` ends with that refusal (exit 3), before its plan.
    assert app_module.main(["up", "-f", str(loaded.path)]) == 3
    assert "error: the cluster at" in capsys.readouterr().err
    assert list(emulator.objects) == [deny_all(name)]


def test_the_nodes_pids_limit_not_accepted_is_refused_before_any_request(
        tmp_path: Path, emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = loaded_on(tmp_path, emulator, monkeypatch,
                       tail='\n[kubernetes]\nregistry = "127.0.0.1:5000"\n')
    with pytest.raises(BadInputError) as refused:
        terminal.engine(loaded)
    assert refused.value.message == (
        "a Pod has no pids limit of its own (the kubelet's podPidsLimit is node-wide) and "
        "the manifest does not accept it: refused, never degraded")
    assert refused.value.hint == cluster.PIDS_FIX
    assert emulator.requests == []


def test_status_and_down_on_a_cluster_prove_nothing_and_make_nothing(
        tmp_path: Path, emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """What reads or removes needs no proof: no Pod is made for it."""
    loaded = loaded_on(tmp_path, emulator, monkeypatch)
    on = terminal.engine(loaded, proved=False)
    assert isinstance(on, KubeEngine) and not on.split_proved
    done = CliRunner().invoke(app_module.app, ["status", "-f", str(loaded.path)])
    assert done.exit_code == 0, done.output
    assert [method for method, _, _ in emulator.requests] == []
    done = CliRunner().invoke(app_module.app, ["down", "-f", str(loaded.path),
                                               "--keep-images"])
    assert done.exit_code == 0, done.output
    assert "POST" not in {method for method, _, _ in emulator.requests}


def test_a_compose_stack_is_refused_on_a_cluster_by_its_key_and_runs_on_docker(
        tmp_path: Path, emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = loaded_on(tmp_path, emulator, monkeypatch)
    manifest = loaded.manifest.model_copy(update={"toolchain": loaded.manifest.toolchain
                                                  .model_copy(update={"stack": "compose/a.yml"})})
    stacked = dataclasses.replace(loaded, manifest=manifest)
    with pytest.raises(BadInputError) as refused:
        terminal.engine(stacked)
    assert refused.value.message == (
        f'{loaded.path}: engine = "kubernetes": toolchain.stack names a compose stack, and '
        "compose runs on a docker engine only")
    assert emulator.requests == []
    docker = dataclasses.replace(stacked, manifest=manifest.model_copy(
        update={"engine": "docker", "kubernetes": None}))
    cluster.refuse(docker)  # the honest twin: a docker manifest runs its stack
    assert isinstance(terminal.engine(docker), Engine)


def test_reproduce_with_a_shell_or_a_command_is_refused_on_a_cluster(
        tmp_path: Path, emulator: Emulator, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    loaded = loaded_on(tmp_path, emulator, monkeypatch)
    code = app_module.main(["reproduce", "first/a/success/1", "-f", str(loaded.path), "--",
                            "true"])
    said = " ".join(capsys.readouterr().err.split())
    assert code == 2
    assert said.startswith(f'error: {loaded.path}: engine = "kubernetes": a shell or a '
                           "command attached to this terminal (reproduce --shell, -- CMD) "
                           "goes through the docker CLI; re-run the sample without them")
    assert emulator.requests == []  # refused before the cluster is asked anything
    cluster.refuse(loaded)  # the same manifest, no stack: every other command runs
    docker = demo.prepare(tmp_path / "docker")
    cluster.refuse(terminal.load(docker), "anything")  # a docker manifest: nothing refused
