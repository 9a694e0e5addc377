"""The model gateway on a cluster (issue 36), against the emulator of the API (every object
validated strictly against the 1.37 schemas): the tool's own steps of `gateway.launch`
after its image (`start`, its upstream network, `attach` to an arm's network,
`wait_healthy`), then `read_records` and the removal by labels, on a `KubeEngine`, with
exact assertions on every object sent, what reached the gateway's volume, where its keys
went and what the tool read back. The emulator plays the gateway's processes."""

from __future__ import annotations

import base64
import io
import json
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runner.containers import gateway, sandbox
from runner.containers.backend import Labels
from runner.containers.kube import objects, preflight
from runner.containers.kube.api import KubeApi
from runner.containers.kube.config import KubeTarget
from runner.containers.kube.engine import KubeEngine
from runner.errors import InfraError, SandboxUnavailableError
from tests.unit.kube_emulator import Emulator, emulated
from tests.unit.test_kube_arm import made, timeout
from tests.unit.test_kube_engine import shell

NS = "bakeoff"
IMAGE = "registry.example.invalid/bakeoff/gateway@sha256:" + "cd" * 32
NAME = "bakeoff-horizon-gateway-r1"
KEY = "sk-live-s3cret-key"
RECORD = b'{"arm": "fixer", "status": 200}\n'


def records_tar() -> bytes:
    """`tar -c -C /state records` in the gateway: one arm's record."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        folder = tarfile.TarInfo("records")
        folder.type = tarfile.DIRTYPE
        tar.addfile(folder)
        info = tarfile.TarInfo("records/fixer.jsonl")
        info.size = len(RECORD)
        tar.addfile(info, io.BytesIO(RECORD))
    return out.getvalue()


def tar(emulator: Emulator, pod: str, container: str, argv: list[str],
        stdin: bytes) -> tuple[bytes, bytes, int]:
    if argv[1] == "-x":  # the state volume's filler: keep what it was given
        emulator.received[(pod, "tar")] = stdin
        return b"", b"", 0
    if argv[-2:] == [gateway.STATE_MOUNT, gateway.RECORDS]:
        return records_tar(), b"", 0
    return b"", f"tar: {argv[-1]}: Cannot stat: No such file or directory\n".encode(), 2


def healthz(answers: list[int]) -> Callable[[Emulator, str, str, list[str], bytes],
                                            tuple[bytes, bytes, int]]:
    """python3's /healthz probe in the gateway: its exit codes in turn, then 0."""
    def run(emulator: Emulator, pod: str, container: str, argv: list[str],
            stdin: bytes) -> tuple[bytes, bytes, int]:
        code = answers.pop(0) if answers else 0
        return b"", (b"ConnectionRefusedError: [Errno 111]\n" if code else b""), code
    return run


@pytest.fixture()
def emulator() -> Iterator[Emulator]:
    with emulated() as found:
        found.autorun, found.on_create = True, shell
        found.programs.update(tar=tar, timeout=timeout, python3=healthz([1]))
        yield found


@pytest.fixture()
def engine(emulator: Emulator) -> KubeEngine:
    made_engine = KubeEngine(KubeApi(KubeTarget("test", emulator.url, NS)), cpus=4,
                             accept_node_pids=True)
    preflight.prove_split(made_engine, IMAGE, Labels("preflight", "probe"))  # as `up` will
    emulator.made.clear()
    emulator.execs.clear()
    emulator.on_create = None
    emulator.addresses[NAME] = "10.0.0.9"
    return made_engine


def spec(tmp_path: Path) -> gateway.GatewaySpec:
    return gateway.GatewaySpec(NAME, "sha256:" + "0" * 64,
                               Labels("horizon", "gateway", "", "r1"), tmp_path / "gateway",
                               "horizon-upstream", {"OPENAI_API_KEY": KEY})


def test_the_gateway_on_a_cluster_its_state_filled_first_its_keys_a_secret(
        engine: KubeEngine, emulator: Emulator, tmp_path: Path) -> None:
    settings = {"stage": "r1", "doors": [{"arm": "fixer", "token": "bkf-gw-t0k3n"}]}
    gateway_spec = spec(tmp_path)
    engine.create_network("horizon-upstream", Labels("horizon", "gateway-network"),
                          egress=True)
    engine.create_network("horizon-fixer", Labels("horizon", "arm-network"), egress=False)
    container_id = gateway.start(engine, gateway_spec, settings, IMAGE)
    gateway.attach(engine, container_id, "horizon-fixer")
    gateway.wait_healthy(engine, container_id)
    assert container_id == f"{NAME}/main"

    assert made(emulator) == [
        ("NetworkPolicy", "horizon-deny-all"), ("NetworkPolicy", "horizon-upstream"),
        ("NetworkPolicy", "horizon-fixer"),
        ("Claim", f"{NAME}-state"), ("Pod", "bk-*"),     # the state volume, filled first
        ("Secret", f"{NAME}-main-env"), ("Pod", NAME),   # its keys; the gateway
        *[("NetworkPolicy", name) for name in objects.joined_names(NAME, "horizon-fixer")]]
    pods = [obj for (collection, _), obj in emulator.made.items()
            if collection.endswith("/pods")]
    filler, pod = pods
    # The filler gave the volume its config (root's, read-only to the gateway) and an
    # empty records/ (the sandbox user's), and never started the gateway for it.
    with tarfile.open(fileobj=io.BytesIO(emulator.received[
            (filler["metadata"]["name"], "tar")])) as state:
        members = [(m.name, m.mode, m.uid, m.isdir()) for m in state]
        config = state.extractfile(gateway.CONFIG_FILE).read()  # type: ignore[union-attr]
    assert members == [(gateway.CONFIG_FILE, 0o644, 0, False),
                       (gateway.RECORDS, 0o755, sandbox.SANDBOX_UID, True)]
    assert json.loads(config) == settings
    # The gateway: the sandbox user, a read-only root, its state at /state, its key a
    # Secret's (never in the Pod's spec), on its upstream network.
    (main,) = pod["spec"]["containers"]
    assert (main["image"], main["args"]) == (IMAGE, [
        "python3", "-m", "gateway", "--state", gateway.STATE_MOUNT, "--port", str(gateway.PORT)])
    assert (main["securityContext"]["runAsUser"], main["securityContext"][
        "readOnlyRootFilesystem"]) == (sandbox.SANDBOX_UID, True)
    assert [m["mountPath"] for m in main["volumeMounts"]][-1] == gateway.STATE_MOUNT
    assert KEY not in json.dumps(pod)
    assert main["env"][-1] == {"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": {
        "name": f"{NAME}-main-env", "key": "OPENAI_API_KEY"}}}
    secret = emulator.made[(f"/api/v1/namespaces/{NS}/secrets", f"{NAME}-main-env")]
    assert base64.b64decode(secret["data"]["OPENAI_API_KEY"]).decode() == KEY
    # An arm's sandbox made from now on resolves model-gateway to the gateway's address.
    assert engine.policies.hosts("horizon-fixer") == {gateway.ALIAS: "10.0.0.9"}
    # Healthy at the second probe (the first refused), each as the container's own user.
    probes = [argv for name, _, argv in emulator.execs if name == NAME]
    assert len(probes) == 2 and probes[0][-3:-1] == ["python3", "-c"]
    assert "setpriv" not in probes[0]

    assert gateway.read_records(engine, container_id, gateway_spec.state_dir) == 1
    assert (gateway_spec.state_dir / gateway.RECORDS / "fixer.jsonl").read_bytes() == RECORD
    assert engine.remove_labelled({"io.bakeoff.experiment": "horizon"}) == {
        "container": 1, "network": 5, "volume": 1, "service": 0, "secret": 1}
    assert [key for key in emulator.objects if "horizon" in key[1]] == []


def test_a_gateway_that_never_answers_is_named_with_its_last_words(
        engine: KubeEngine, emulator: Emulator, tmp_path: Path) -> None:
    emulator.programs["python3"] = healthz([1] * 1000)
    container_id = gateway.start(engine, spec(tmp_path), {}, IMAGE)
    with pytest.raises(InfraError, match=r"did not answer /healthz within 1s: "
                                         r"ConnectionRefusedError: \[Errno 111\]"):
        gateway.wait_healthy(engine, container_id, timeout_s=1)


def test_the_records_of_a_gateway_gone_are_said_gone(
        engine: KubeEngine, emulator: Emulator, tmp_path: Path) -> None:
    container_id = gateway.start(engine, spec(tmp_path), {}, IMAGE)
    engine.remove(container_id)
    # Named whole (a docker id is shown cut to 12 characters, a Pod's name never is).
    with pytest.raises(SandboxUnavailableError, match=rf"^the model gateway {NAME}/main is "
                                                      r"gone: its records cannot be read back\n"):
        gateway.read_records(engine, container_id, tmp_path / "gateway")


@pytest.mark.parametrize(("container_id", "shown"), [
    ("0f" * 32, "0f0f0f0f0f0f"),                         # docker's id: cut, as docker shows it
    (f"{NAME}/main", f"{NAME}/main"),                     # a Pod's container: whole
    ("0f" * 31, "0f" * 31)])                              # not docker's 64 digits: whole
def test_a_container_is_named_by_docker_s_short_id_or_whole(container_id: str,
                                                            shown: str) -> None:
    assert sandbox.shown_id(container_id) == shown
