"""A Kubernetes engine's named volumes (issue 36): each a PersistentVolumeClaim, against
the emulator (every object validated strictly against the 1.37 schemas). Exact
assertions on what was sent and what the engine concluded: a claim of the size asked and
its owner; files put in and read out through a Pod that holds as the volume's owner (the
tool's own `sandbox.fill` and `sandbox.read_volume`), never started after; a Pod put on
the node where a claim it mounts is held, and refused when two are held on two nodes; a
class that gives more than asked refused; removal by label."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runner.containers import sandbox
from runner.containers.backend import ContainerSpec, Labels, Resources, Volume
from runner.containers.kube import preflight
from runner.containers.kube.api import KubeApi
from runner.containers.kube.config import KubeTarget
from runner.containers.kube.engine import KubeEngine
from runner.containers.kube.volumes import quantity_bytes
from runner.errors import ConflictError, EngineRefusedError, InfraError
from tests.unit.kube_emulator import Emulator, emulated

NS = "bakeoff"
IMAGE = "registry.example.invalid/bakeoff/python@sha256:" + "ab" * 32
CLAIMS = f"/api/v1/namespaces/{NS}/persistentvolumeclaims"
ARM = Labels("horizon", "arm-checkout", "fixer", "r1")


def tar_program(emulator: Emulator, pod: str, container: str, argv: list[str],
                stdin: bytes) -> tuple[bytes, bytes, int]:
    """tar in a container: `-x` keeps what it was given, `-c` gives it back."""
    if argv[1] == "-x":
        emulator.received[(pod, "tar")] = stdin
        return b"", b"", 0
    return emulator.received.get(("filled", "tar"), b""), b"", 0


@pytest.fixture()
def emulator() -> Iterator[Emulator]:
    with emulated() as found:
        found.autorun = True
        found.programs["tar"] = tar_program
        yield found


def engine_on(emulator: Emulator, **options: object) -> KubeEngine:
    return KubeEngine(KubeApi(KubeTarget("test", emulator.url, NS)), cpus=4,
                      accept_node_pids=True, **options)  # type: ignore[arg-type]


def box(name: str, *mounts: Volume, user: str = "1000:1000") -> ContainerSpec:
    return ContainerSpec(image=IMAGE, command=("sleep", "infinity"), labels=ARM,
                         resources=Resources(1.0, 256, 64), user=user,
                         purpose=f"the {name} of fixer", name=name, mounts=mounts)


def refused_start(engine: KubeEngine, container_id: str, what: str) -> str:
    """Why `start` refused the container, past the engine's own words."""
    with pytest.raises(EngineRefusedError) as refused:
        engine.start(container_id, what=what)
    return str(refused.value).removeprefix(f"the engine at {engine.address} refused to ")


def test_a_claim_is_filled_by_a_holding_root_and_read_by_its_owner(
        emulator: Emulator) -> None:
    engine = engine_on(emulator, volume_mb=512, storage_class="fast-ssd")
    assert engine.create_volume("horizon-fixer-out", ARM, size_mb=None, owner=1000) == \
        "horizon-fixer-out"
    claim = emulator.made[(CLAIMS, "horizon-fixer-out")]
    assert (claim["metadata"]["labels"]["io.bakeoff.owner"], claim["spec"]) == ("1000", {
        "accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
        "resources": {"requests": {"storage": "512Mi"}}, "storageClassName": "fast-ssd"})
    owned = io.BytesIO()
    with tarfile.open(fileobj=owned, mode="w") as tar:
        info = tarfile.TarInfo("out")
        info.type, info.uid, info.gid = tarfile.DIRTYPE, 1000, 1000
        tar.addfile(info)
    sandbox.fill(engine, "horizon-fixer-out", IMAGE, ARM, owned.getvalue())
    (pod,) = [name for (c, name) in emulator.made if c.endswith("/pods")]
    held = emulator.made[(f"/api/v1/namespaces/{NS}/pods", pod)]["spec"]
    (container,) = held["containers"]
    # It holds as root with CHOWN and FOWNER alone, so tar keeps the owners and modes the
    # archive gives (the sandbox user's directory), as docker's daemon does; the Pod's
    # group is the owner's.
    assert (container["command"], container["securityContext"]["runAsUser"],
            container["securityContext"]["capabilities"], held["securityContext"]) == (
        ["sleep", "21600"], 0, {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]},
        {"seccompProfile": {"type": "RuntimeDefault"}, "fsGroup": 1000,
         "fsGroupChangePolicy": "OnRootMismatch"})
    assert "args" not in container  # its sleep replaces the image's entrypoint
    assert container["volumeMounts"] == [{"name": "claim-0", "mountPath": sandbox.FILL_TARGET,
                                          "readOnly": False}]
    assert [argv for p, _, argv in emulator.execs if p == pod] == [
        ["tar", "-x", "-C", sandbox.FILL_TARGET]]
    assert emulator.received[(pod, "tar")] == owned.getvalue()
    assert emulator.pods() == []  # removed once filled
    # Another process of the tool reads it back as the owner (who reads what it kept to
    # itself), with no capability: the owner from the claim's label.
    emulator.received[("filled", "tar")] = b"the tar of the volume"
    out = io.BytesIO()
    sandbox.read_volume(engine_on(emulator), "horizon-fixer-out", IMAGE, ARM, out)
    assert out.getvalue() == b"the tar of the volume"
    reader = [o for (c, _), o in emulator.made.items() if c.endswith("/pods")][-1]["spec"]
    assert (reader["containers"][0]["securityContext"]["runAsUser"],
            reader["containers"][0]["securityContext"]["capabilities"],
            reader["securityContext"]["fsGroup"]) == (1000, {"drop": ["ALL"]}, 1000)
    assert emulator.pods() == []


def test_a_container_that_was_filled_is_never_started(emulator: Emulator) -> None:
    engine = engine_on(emulator)
    engine.create_volume("horizon-brief", ARM, size_mb=None, owner=0)
    made = engine.create(box("filler", Volume("horizon-brief", "/in"), user="0:0"))
    engine.put_archive(made, "/in", b"a tar")
    assert refused_start(engine, made, "the filler") == (
        "start the filler: filler/main holds for the archive it was given before it "
        "started: it never runs its own command (a container that is filled is not started)")
    spec = emulator.pod("filler")["spec"]
    assert (spec["containers"][0]["command"], spec["containers"][0]["securityContext"]
            ["runAsUser"], "fsGroup" in spec["securityContext"]) == (
        ["sleep", "21600"], 0, False)  # root's volume: root holds, no group
    # Asked for an archive first, a container writing to no volume of ours holds as its
    # own user, never as root.
    plain = engine.create(box("plain", user="1000:1000"))
    assert b"".join(engine.get_archive(plain, "/tmp")) == b""
    assert emulator.pod("plain")["spec"]["containers"][0]["securityContext"][
        "runAsUser"] == 1000


def test_a_pod_is_put_on_the_node_that_holds_its_claim(emulator: Emulator) -> None:
    engine = engine_on(emulator)
    engine.create_volume("horizon-fixer-work", ARM, size_mb=2048, owner=1000)
    emulator.nodes["sandbox"] = "node-b"  # where the scheduler puts the first
    first = engine.create(box("sandbox", Volume("horizon-fixer-work", "/work")))
    engine.start(first)
    assert "affinity" not in emulator.pod("sandbox")["spec"]  # held by none yet: anywhere
    bundler = engine.create(box("bundler", Volume("horizon-fixer-work", "/work",
                                                  read_only=True)))
    engine.start(bundler)
    found = emulator.pod("bundler")["spec"]
    assert (found["nodeName"], found["affinity"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]) == (
        "node-b", [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                     "values": ["node-b"]}]}])
    engine.remove(bundler)
    engine.remove(first)  # held by none again: the next goes anywhere
    again = engine.create(box("again", Volume("horizon-fixer-work", "/work")))
    engine.start(again)
    assert ("affinity" not in emulator.pod("again")["spec"],
            emulator.pod("again")["spec"]["nodeName"]) == (True, "node-a")


def test_claims_held_on_two_nodes_are_refused_together(emulator: Emulator) -> None:
    engine = engine_on(emulator)
    for name, node in (("a", "node-a"), ("b", "node-b")):
        engine.create_volume(f"horizon-{name}", ARM, size_mb=64, owner=1000)
        emulator.nodes[f"holds-{name}"] = node
        engine.start(engine.create(box(f"holds-{name}", Volume(f"horizon-{name}", "/v"))))
    both = engine.create(box("both", Volume("horizon-a", "/a"), Volume("horizon-b", "/b")))
    assert refused_start(engine, both, "the bundler") == (
        "start the bundler: its volumes are held on two nodes (horizon-a on node-a, "
        "horizon-b on node-b): a claim is one node's at a time (ReadWriteOnce)")
    assert emulator.pods() == ["holds-a", "holds-b"]  # never made, never left pending


def test_a_class_that_gives_more_than_asked_is_refused_once_bound(
        emulator: Emulator) -> None:
    engine = engine_on(emulator)
    emulator.capacity.update({"horizon-exact": "1Gi", "horizon-rounded": "10Gi"})
    for name in ("horizon-exact", "horizon-rounded"):
        engine.create_volume(name, ARM, size_mb=1024, owner=1000)
    engine.start(engine.create(box("exact", Volume("horizon-exact", "/work"))))
    rounded = engine.create(box("rounded", Volume("horizon-rounded", "/work")))
    assert refused_start(engine, rounded, "the sandbox of fixer") == (
        "start the sandbox of fixer: the volume horizon-rounded was given 10Gi for the "
        "1024Mi asked: its size would not cap it (ask what the storage class gives exactly, "
        "or name a class that does in [kubernetes] storage_class)")
    assert emulator.pods() == ["exact"]  # the refused one is not left running
    emulator.capacity["horizon-unread"] = "1.5Gi"  # not the API's form: never taken as capped
    engine.create_volume("horizon-unread", ARM, size_mb=1024, owner=1000)
    assert refused_start(engine, engine.create(box("unread", Volume("horizon-unread", "/w"))),
                         "the sandbox of fixer").startswith(
        "start the sandbox of fixer: the volume horizon-unread was given 1.5Gi for the 1024Mi "
        "asked: its size would not cap it")


@pytest.mark.parametrize(("text", "found"), [
    ("1Gi", 2**30), ("1024Mi", 2**30), ("2000M", 2 * 10**9), ("1073741824", 2**30),
    ("5k", 5000), ("1.5Gi", None), ("1e3", None), ("Gi", None)])
def test_a_storage_quantity_is_read_as_the_api_writes_it(text: str, found: int | None) -> None:
    assert quantity_bytes(text) == found


def test_claims_go_by_label_and_a_second_create_is_the_same_volume(
        emulator: Emulator) -> None:
    engine = engine_on(emulator)
    engine.create_volume("horizon-fixer-work", ARM, size_mb=64, owner=1000)
    engine.create_volume("horizon-brief", Labels("horizon", "shared", "", "r1"),
                         size_mb=None, owner=0)
    other = Labels("cachey", "arm-checkout", "fixer", "r9")
    engine.create_volume("cachey-fixer-work", other, size_mb=64, owner=1000)
    # Made again (a resumed `up`): the same claim, its owner from its label.
    assert engine_on(emulator).create_volume("horizon-fixer-work", ARM, size_mb=64,
                                             owner=0) == "horizon-fixer-work"
    with pytest.raises(ConflictError):  # another experiment's name is not ours to reuse
        engine.create_volume("cachey-fixer-work", ARM, size_mb=64, owner=1000)
    removed = engine.remove_labelled({"io.bakeoff.experiment": "horizon"})
    assert (removed["volume"], sorted(n for (c, n) in emulator.objects
                                      if c == CLAIMS)) == (2, ["cachey-fixer-work"])
    engine.remove_volume("cachey-fixer-work")
    engine.remove_volume("cachey-fixer-work")  # one already gone is fine
    assert [(m, p) for m, p, _ in emulator.requests if m == "DELETE"][-2:] == [
        ("DELETE", f"{CLAIMS}/cachey-fixer-work")] * 2


def filling(code: int, written: int) -> Callable[[Emulator, str], None]:
    """The volume probe's Pod on a cluster: it ends with `code`, `written` MiB said."""
    def made(emulator: Emulator, pod: str) -> None:
        if emulator.pod(pod)["spec"]["containers"][0]["args"][2:3] == [preflight.FILL]:
            emulator.end(pod, "main", code, stdout=f"{written}\n".encode())
    return made


@pytest.mark.parametrize(("code", "written", "capacity", "why"), [
    (3, 1016, "1Gi", None),  # refused past its size, after most of it: capped
    (0, 1032, "1Gi", "the storage class at {at} does not cap a volume: a claim of 1024 MiB "
                     "took 1032 MiB"),
    (3, 12, "1Gi", "the volume probe on {at} could not fill its claim of 1024 MiB (exit 3, "
                   "12 MiB written): the volumes' cap cannot be proved"),
    (4, 0, "1Gi", "the volume probe on {at} could not fill its claim of 1024 MiB (exit 4, 0 "
                  "MiB written): the volumes' cap cannot be proved"),
    (3, 1016, "10Gi", "the engine at {at} refused to start the container: the volume "
                      "preflight-probe-volume was given 10Gi for the 1024Mi asked: its size "
                      "would not cap it (ask what the storage class gives exactly, or name a "
                      "class that does in [kubernetes] storage_class)"),
])
def test_the_volumes_cap_is_proved_by_a_write_past_it_with_a_control(
        emulator: Emulator, code: int, written: int, capacity: str, why: str | None) -> None:
    engine = engine_on(emulator)
    emulator.on_create = filling(code, written)
    emulator.capacity["preflight-probe-volume"] = capacity
    labels = Labels("preflight", "probe")
    if why is None:
        preflight.prove_sized(engine, IMAGE, labels, 1024)
    else:
        with pytest.raises(InfraError) as failed:
            preflight.prove_sized(engine, IMAGE, labels, 1024)
        assert failed.value.message == why.format(at=engine.address)
    (probe,) = [o for (c, _), o in emulator.made.items() if c.endswith("/pods")]
    container = probe["spec"]["containers"][0]
    assert (container["args"][3:], container["volumeMounts"], probe["spec"]
            ["securityContext"]["fsGroup"]) == (
        ["1024", "/probe"], [{"name": "claim-0", "mountPath": "/probe", "readOnly": False}],
        65534)
    # The probe's Pod and claim gone, whatever it found (the deny-all: doctor's, by label).
    assert [name for _, name in emulator.objects] == ["preflight-deny-all"]


# Sets a file size limit on itself, then becomes `python3 -c SCRIPT ARGS...` (a limit
# outlives exec). Never a function run in the child before its exec: Python code in a
# child forked from a process with threads (an xdist worker has its own, and the
# emulator's are left in it) can deadlock, and the test with it (test_architecture.py).
LIMITED = ("import os, resource, sys; n = int(sys.argv[1]); "
           "resource.setrlimit(resource.RLIMIT_FSIZE, (n, n)); "
           "os.execv(sys.executable, [sys.executable, '-c', *sys.argv[2:]])")


def test_the_fill_script_is_refused_past_a_real_cap(tmp_path: Path) -> None:
    """The probe's own script, run here against a file size limit (RLIMIT_FSIZE: EFBIG)
    and without one: refused past the cap after writing up to it; all of it without."""
    capped = subprocess.run([sys.executable, "-c", LIMITED, str(16 * 2**20), preflight.FILL,
                             "16", str(tmp_path)],
                            capture_output=True, text=True, check=False, timeout=60)
    assert (capped.returncode, capped.stdout) == (3, "16\n"), capped.stderr
    assert (tmp_path / "fill").stat().st_size == 16 * 2**20
    (tmp_path / "fill").unlink()
    free = subprocess.run([sys.executable, "-c", preflight.FILL, "4", str(tmp_path)],
                          capture_output=True, text=True, check=False, timeout=60)
    assert (free.returncode, free.stdout, (tmp_path / "fill").stat().st_size) == (
        0, "12\n", 12 * 2**20)
