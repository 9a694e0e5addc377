"""An arm's sandbox on a cluster (issue 36), against the emulator of the API (every object
validated strictly against the 1.37 schemas): the tool's own steps of `up` and of keeping
an arm's work (`arms.prepare`, `arms.start`, `checkout.make`, `arms.put_brief`,
`checkout.head_in_sandbox`, `checkout.take`), on a `KubeEngine`, with exact assertions on
every object sent, where each Pod was put, what reached it, and what the tool concluded.
The emulator plays the containers' processes: the checkout's init takes the base's bundle
on its stdin, the bundler leaves its status files in its volume."""

from __future__ import annotations

import base64
import io
import json
import re
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.commands.dispatch import process, work
from runner.containers import arms, checkout, sandbox
from runner.containers.backend import Labels
from runner.containers.kube import preflight
from runner.containers.kube.api import KubeApi
from runner.containers.kube.config import KubeTarget
from runner.containers.kube.engine import KubeEngine
from runner.errors import SandboxUnavailableError
from runner.manifest import Arm, Limits
from tests.integration.helpers import committed_repo, git
from tests.unit.kube_emulator import Emulator, emulated, pinned
from tests.unit.test_kube_engine import shell

NS = "bakeoff"
IMAGE = "registry.example.invalid/bakeoff/python@sha256:" + "ab" * 32
PODS = f"/api/v1/namespaces/{NS}/pods"
BASE, HEAD, TIP = "c" * 40, "a" * 40, "b" * 40
URL = "postgresql://bakeoff_horizon_fixer:s3cret-pw@db.horizon:5432/bakeoff_horizon_fixer"
SANDBOX = "bakeoff-horizon-fixer-r1"


def bundler_left(head: str, tip: str, bundle: bytes) -> bytes:
    """The tar of the bundler's volume as a reader's tar gives it: its status files and
    the bundle, under the volume's mount point's name."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        folder = tarfile.TarInfo("fill/out")
        folder.type = tarfile.DIRTYPE
        tar.addfile(folder)
        for name, data in (("why", b"ok\n"), ("head", f"{head}\n".encode()),
                           ("tip", f"{tip}\n".encode()), ("work.bundle", bundle)):
            info = tarfile.TarInfo(f"fill/out/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def tar(emulator: Emulator, pod: str, container: str, argv: list[str],
        stdin: bytes) -> tuple[bytes, bytes, int]:
    if argv[1] == "-x":  # a filler's: keep what it was given
        emulator.received[(pod, "tar")] = stdin
        return b"", b"", 0
    return bundler_left(HEAD, TIP, b"the arm's work"), b"", 0


def git_head(emulator: Emulator, pod: str, container: str, argv: list[str],
             stdin: bytes) -> tuple[bytes, bytes, int]:
    """git in the sandbox (the HEAD probe): the checkout's HEAD."""
    return f"{HEAD}\n".encode(), b"", 0


def timeout(emulator: Emulator, pod: str, container: str, argv: list[str],
            stdin: bytes) -> tuple[bytes, bytes, int]:
    """`timeout -k GRACE LIMIT PROGRAM...`: the program's own answer."""
    return emulator.programs[argv[4]](emulator, pod, container, argv[4:], stdin)


def job_ends(emulator: Emulator, pod: str, container: str, stdin: bytes) -> None:
    """The checkout's init: it read the bundle from its stdin and made the checkout."""
    emulator.end(pod, container, 0)


def bundler_ends(emulator: Emulator, pod: str) -> None:
    """The bundler (no stdin): it ends once made, its files in its volume."""
    if f"-{checkout.BUNDLER_ROLE}-" in pod:
        emulator.end(pod, "main", 0)


@pytest.fixture()
def emulator() -> Iterator[Emulator]:
    with emulated() as found:
        found.autorun, found.on_create = True, shell
        found.programs.update(tar=tar, git=git_head, timeout=timeout)
        yield found


@pytest.fixture()
def engine(emulator: Emulator) -> KubeEngine:
    made = KubeEngine(KubeApi(KubeTarget("test", emulator.url, NS)), cpus=4,
                      accept_node_pids=True)
    preflight.prove_split(made, IMAGE, Labels("preflight", "probe"))  # as `up` will, first
    emulator.made.clear()
    emulator.execs.clear()
    emulator.on_create, emulator.on_attach = bundler_ends, job_ends
    emulator.nodes[SANDBOX] = "node-b"  # where the scheduler puts the sandbox
    return made


def made(emulator: Emulator) -> list[tuple[str, str]]:
    """Every object created, in order, as (kind, name); a one-shot job's name without its
    random suffix."""
    kinds = {"pods": "Pod", "persistentvolumeclaims": "Claim", "secrets": "Secret",
             "networkpolicies": "NetworkPolicy"}
    return [(kinds[collection.rsplit("/", 1)[1]], re.sub(r"-[0-9a-f]{6,12}(?=(-out)?$)", "-*",
                                                         name))
            for collection, name in emulator.made]


def test_an_arm_s_sandbox_its_checkout_and_its_work_taken_on_a_cluster(
        engine: KubeEngine, emulator: Emulator, tmp_path: Path) -> None:
    labels = Labels("horizon", arms.SHARED_ROLE, "", "r1")
    brief = engine.create_volume(arms.shared_volume("horizon", "r1", "brief"), labels,
                                 size_mb=None, owner=0)
    setup = arms.ArmSetup("horizon", "r1", IMAGE, Limits(), ((brief, "/bakeoff/brief"),),
                          "DATABASE_URL")
    arm = Arm.model_validate({"id": "fixer", "command": "true"})
    said: list[str] = []
    prepared = arms.prepare(engine, setup, arm)
    up = arms.start(engine, setup, prepared, URL, said.append)
    assert (up.container_id, up.checkout, up.home, said) == (
        f"{SANDBOX}/main", f"{SANDBOX}-work", f"{SANDBOX}-home",
        [f"arm fixer: sandbox {SANDBOX} up"])
    bundle = tmp_path / "base.bundle"
    bundle.write_bytes(b"the base's bundle")
    checkout.make(engine, prepared.box, bundle, BASE, "refs/bakeoff/base")
    arms.put_brief(engine, "horizon", "r1", IMAGE, "brief.md", b"# the brief\n")
    assert checkout.head_in_sandbox(engine, up.container_id) == HEAD
    taken = checkout.take(engine, prepared.box, BASE, "the arm's stranded work", [],
                          tmp_path / "scratch")
    assert taken == checkout.Taken(head=HEAD, tip=TIP, bundle=tmp_path / "scratch" / "out" /
                                   "work.bundle")
    assert (tmp_path / "scratch" / "out" / "work.bundle").read_bytes() == b"the arm's work"

    assert made(emulator) == [
        ("Claim", "bakeoff-horizon-r1-brief"), ("NetworkPolicy", "horizon-deny-all"),
        ("NetworkPolicy", SANDBOX), ("Claim", f"{SANDBOX}-work"), ("Claim", f"{SANDBOX}-home"),
        ("Secret", f"{SANDBOX}-main-env"), ("Pod", SANDBOX),
        ("Pod", f"{SANDBOX}-arm-checkout-init-*"),
        ("Pod", "bk-*"),                                   # the brief's filler
        ("Claim", f"{SANDBOX}-arm-bundler-*-out"), ("Pod", "bk-*"),  # the bundler's out, filled
        ("Pod", f"{SANDBOX}-arm-bundler-*"), ("Pod", "bk-*")]        # the bundler; its reader
    pods = [obj for (collection, _), obj in emulator.made.items() if collection == PODS]
    sandbox_pod, init, brief_filler, out_filler, bundler, reader = pods
    # The scheduler put the sandbox on node-b; everything that mounts a claim it holds went
    # there too, the bundler's own volume (filled and read beside the checkout) with them.
    assert [pinned(pod) for pod in pods] == [None] + ["node-b"] * 5
    assert sandbox_pod["spec"]["nodeName"] == "node-b"

    # The sandbox: root's keeper that an exec may run in as the sandbox user (`setpriv`
    # needs SETUID and SETGID), its database URL a Secret's, never in the Pod's spec.
    (keeper,) = sandbox_pod["spec"]["containers"]
    assert (keeper["args"], keeper["securityContext"]["runAsUser"],
            keeper["securityContext"]["capabilities"]) == (
        list(sandbox.KEEPER), 0, {"drop": ["ALL"], "add": ["SETGID", "SETUID"]})
    assert URL not in json.dumps(sandbox_pod) and "s3cret-pw" not in json.dumps(sandbox_pod)
    assert keeper["env"][-1] == {"name": "DATABASE_URL", "valueFrom": {"secretKeyRef": {
        "name": f"{SANDBOX}-main-env", "key": "DATABASE_URL"}}}
    secret = emulator.made[(f"/api/v1/namespaces/{NS}/secrets", f"{SANDBOX}-main-env")]
    assert base64.b64decode(secret["data"]["DATABASE_URL"]).decode() == URL
    assert [(m["mountPath"], m["readOnly"]) for m in keeper["volumeMounts"][2:]] == [
        ("/work", False), (sandbox.HOME, False), ("/bakeoff/brief", True)]

    # The checkout's init: the sandbox user, the base's bundle on its stdin (attach).
    (job,) = init["spec"]["containers"]
    assert job["args"] == ["timeout", "-k", "5", str(checkout.GIT_STEP_TIMEOUT_S), "sh", "-c",
                           checkout.INIT_SCRIPT, "init", BASE, "refs/bakeoff/base"]
    assert (job["securityContext"]["runAsUser"], job["stdin"], job["stdinOnce"]) == (
        1000, True, True)
    assert [m["mountPath"] for m in job["volumeMounts"][1:]] == ["/work", checkout.NEW_HOME]
    assert emulator.received[(init["metadata"]["name"], "attach")] == b"the base's bundle"

    # The brief reached its volume through tar; the sandboxes mount it read-only.
    with tarfile.open(fileobj=io.BytesIO(emulator.received[
            (brief_filler["metadata"]["name"], "tar")])) as tar:
        assert [(m.name, tar.extractfile(m).read()) for m in tar] == [  # type: ignore[union-attr]
            ("brief.md", b"# the brief\n")]
    # The bundler's volume, filled beside the checkout (read-only), then the bundler with
    # the checkout read-only and its own volume.
    assert [(m["mountPath"], m["readOnly"]) for m in out_filler["spec"]["containers"][0][
        "volumeMounts"]] == [(sandbox.FILL_TARGET, False), (sandbox.BESIDE, True)]
    (bundling,) = bundler["spec"]["containers"]
    assert bundling["args"][4:8] == ["sh", "-c", checkout.BUNDLE_SCRIPT, "bundle"]
    assert [(m["mountPath"], m["readOnly"]) for m in bundling["volumeMounts"][1:]] == [
        ("/work", True), (checkout.OUT_VOLUME, False)]
    assert [(m["mountPath"], m["readOnly"]) for m in reader["spec"]["containers"][0][
        "volumeMounts"]] == [(sandbox.FILL_TARGET, False), (sandbox.BESIDE, True)]

    # The HEAD probe ran in the sandbox as the sandbox user, through setpriv.
    assert [argv for pod, _, argv in emulator.execs if pod == SANDBOX] == [
        ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "--", "env", "-C",
         "/work", "--", "timeout", "-k", "5", "60", *checkout.HEAD_PROBE]]
    # Every one-shot Pod and the bundler's volume are gone; the sandbox and its claims stay.
    assert emulator.pods() == [SANDBOX]
    assert sorted(name for (c, name) in emulator.objects if c.endswith("claims")) == [
        "bakeoff-horizon-fixer-r1-home", "bakeoff-horizon-fixer-r1-work",
        "bakeoff-horizon-r1-brief"]
    assert engine.remove_labelled({"io.bakeoff.experiment": "horizon"}) == {
        "container": 1, "network": 2, "volume": 3, "service": 0, "secret": 1}
    assert [key for key in emulator.objects if "horizon" in key[1]] == []


# A listing as `process.PROCESS_LIST` prints it after the probe's pid: PID PPID UID STATE
# NAME. The probe is 41 under its exec's timeout (40), both the sandbox user's.
PROBE = [(40, 0, 1000, "S", "timeout"), (41, 40, 1000, "R", "sh")]
ON_A_CLUSTER = [(1, 0, 0, "S", "sh"), (7, 1, 0, "S", "sleep"),  # the keeper is PID 1: no init
                (23, 1, 1000, "S", "node"),  # a daemon the agent left: an orphan of PID 1
                (24, 1, 1000, "Z", "git"), *PROBE]  # a zombie: its threads may run
ON_DOCKER = [(1, 0, 0, "S", "docker-init"), (7, 1, 0, "S", "sh"), (8, 7, 0, "S", "sleep"),
             (23, 1, 1000, "S", "node"), *PROBE]
NOTHING_LEFT = [(1, 0, 0, "S", "sh"), (7, 1, 0, "S", "sleep"), *PROBE]
AGENT_LEFT = [(1, 0, 0, "S", "sh"), (7, 1, 0, "S", "sleep"), (23, 1, 1000, "S", "node"), *PROBE]


def listed(rows: list[tuple[int, int, int, str, str]]) -> tuple[bytes, bytes, int]:
    """The listing's exec as it answers: the probe's pid, `rows`, the end line."""
    lines = "\n".join(" ".join(map(str, row)) for row in rows)
    return f"41\n{lines}\n{process.LISTED}\n".encode(), b"", 0


@pytest.mark.parametrize(("listing", "left"), [(ON_A_CLUSTER, ["node", "git"]),
                                               (ON_DOCKER, ["node"]),
                                               (NOTHING_LEFT, [])])
def test_the_sweep_finds_and_kills_what_the_agent_left_where_the_keeper_is_pid_1(
        engine: KubeEngine, emulator: Emulator, listing: list[tuple[int, int, int, str, str]],
        left: list[str]) -> None:
    """Pins: the listing took PID 1's first child for the sandbox's main process, as under
    docker's init; in a Pod the keeper is PID 1 itself, so a daemon the agent left (an
    orphan of PID 1) passed for the keeper and, alone, was never killed. The listing goes
    by uid now, and the kill no longer depends on it; under docker's init it reads as
    before (twin)."""
    killed: list[str] = []

    def sh(em: Emulator, pod: str, container: str, argv: list[str],
           stdin: bytes) -> tuple[bytes, bytes, int]:
        return listed(listing)

    def kill(em: Emulator, pod: str, container: str, argv: list[str],
             stdin: bytes) -> tuple[bytes, bytes, int]:
        killed.append(pod)
        return b"", b"", 0

    emulator.programs.update(sh=sh, kill=kill)
    setup = arms.ArmSetup("horizon", "r1", IMAGE, Limits(), ())
    prepared = arms.prepare(engine, setup, Arm.model_validate({"id": "fixer", "command": "true"}))
    up = arms.start(engine, setup, prepared, None, lambda _: None)
    assert process.sweep(engine, up.container_id) == left
    assert killed == [SANDBOX]  # every process of the sandbox user, as the sandbox user
    assert emulator.execs[-1][2] == ["setpriv", "--reuid=1000", "--regid=1000",
                                     "--clear-groups", "--", "env", "-C", "/work", "--",
                                     "kill", "-KILL", "-1"]


def work_bundle(tmp_path: Path) -> tuple[Path, str, str, bytes]:
    """The experiment's repository at the base; the arm's work, one commit on it in a clone
    (as in its checkout), bundled as the bundler bundles it: (repo, base, work, bundle)."""
    repo, arm = tmp_path / "repo", tmp_path / "arm"
    committed_repo(repo, {"app.py": "def answer():\n    return 41\n"}, "")
    base = git(repo, "rev-parse", "HEAD")
    git(tmp_path, "clone", "-q", str(repo), str(arm))
    git(arm, "checkout", "-q", "-b", checkout.ARM_BRANCH)
    (arm / "app.py").write_text("def answer():\n    return 42\n")
    git(arm, "-c", "user.name=a", "-c", "user.email=a@a", "commit", "-qam", "the fix")
    git(arm, "bundle", "create", "-q", str(tmp_path / "work.bundle"),
        f"refs/heads/{checkout.ARM_BRANCH}", f"^{base}")
    return repo, base, git(arm, "rev-parse", "HEAD"), (tmp_path / "work.bundle").read_bytes()


def test_an_arm_s_work_is_kept_on_a_cluster_its_sandbox_emptied_never_frozen(
        engine: KubeEngine, emulator: Emulator, tmp_path: Path) -> None:
    """A Pod cannot be frozen (the engine refuses a pause): while the bundler takes the
    work, the sandbox holds no process of the sandbox user, proved by a listing after the
    sweep's kill, before the bundler is made. The work is then imported as on docker (a
    real bundle, checked object by object into the experiment's repository)."""
    repo, base, tip, bundled = work_bundle(tmp_path)
    seen = {"listings": 0, "kills": 0}
    at_bundler: list[dict[str, int]] = []

    def sh(em: Emulator, pod: str, container: str, argv: list[str],
           stdin: bytes) -> tuple[bytes, bytes, int]:
        seen["listings"] += 1
        return listed(NOTHING_LEFT if seen["kills"] else AGENT_LEFT)

    def kill(em: Emulator, pod: str, container: str, argv: list[str],
             stdin: bytes) -> tuple[bytes, bytes, int]:
        seen["kills"] += 1
        return b"", b"", 0

    def bundler_runs(em: Emulator, pod: str) -> None:
        if f"-{checkout.BUNDLER_ROLE}-" in pod:
            at_bundler.append(dict(seen))
            em.end(pod, "main", 0)

    def bundler_left_work(em: Emulator, pod: str, container: str, argv: list[str],
                          stdin: bytes) -> tuple[bytes, bytes, int]:
        if argv[1] == "-x":
            return b"", b"", 0
        return bundler_left(tip, tip, bundled), b"", 0

    emulator.programs.update(sh=sh, kill=kill, tar=bundler_left_work)
    emulator.on_create = bundler_runs
    setup = arms.ArmSetup("horizon", "r1", IMAGE, Limits(), ())
    prepared = arms.prepare(engine, setup, Arm.model_validate({"id": "fixer", "command": "true"}))
    up = arms.start(engine, setup, prepared, None, lambda _: None)
    kept = work.keep(engine, work.Keeping(
        repo=repo, box=prepared.box, container_id=up.container_id, base=base,
        branch="bakeoff/horizon/fixer", message="bakeoff: the arm's stranded work",
        force_add=[], scratch=tmp_path / "scratch", repo_lock=threading.Lock()))
    assert (kept.commit, kept.commits, kept.files_changed, kept.left_running,
            kept.work_refused, kept.no_work) == (tip, 1, 1, ["node"], None, None)
    assert git(repo, "rev-parse", "refs/heads/bakeoff/horizon/fixer") == tip
    # The sweep listed the daemon and killed; a second listing found nothing; then the
    # bundler. No pause was asked (the engine refuses one).
    assert at_bundler == [{"listings": 2, "kills": 1}]
    assert not any(path.endswith("/pause") for _, path, _ in emulator.requests)


def test_a_process_that_outlives_every_kill_stops_the_keep_before_any_bundler(
        engine: KubeEngine, emulator: Emulator, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Twin: a sandbox that is never found empty is unavailable, with what stayed; nothing
    reads its checkout meanwhile."""
    monkeypatch.setattr(process, "EMPTY_WAIT_S", 0)
    repo, base, _, _ = work_bundle(tmp_path)

    def sh(em: Emulator, pod: str, container: str, argv: list[str],
           stdin: bytes) -> tuple[bytes, bytes, int]:
        return listed([(1, 0, 0, "S", "sh"), (23, 1, 1000, "D", "node"), *PROBE])

    emulator.programs.update(sh=sh, kill=lambda *_: (b"", b"", 0))
    setup = arms.ArmSetup("horizon", "r1", IMAGE, Limits(), ())
    prepared = arms.prepare(engine, setup, Arm.model_validate({"id": "fixer", "command": "true"}))
    up = arms.start(engine, setup, prepared, None, lambda _: None)
    with pytest.raises(SandboxUnavailableError) as stopped:
        work.keep(engine, work.Keeping(
            repo=repo, box=prepared.box, container_id=up.container_id, base=base,
            branch="bakeoff/horizon/fixer", message="m", force_add=[],
            scratch=tmp_path / "scratch", repo_lock=threading.Lock()))
    assert (stopped.value.message, stopped.value.hint) == (
        f"the sandbox user's processes outlived {process.EMPTY_TRIES} kills: node",
        "once the engine answers, run the same command again")
    assert [name for name in emulator.pods() if checkout.BUNDLER_ROLE in name] == []
    assert [argv[-3:] for pod, _, argv in emulator.execs].count(
        ["kill", "-KILL", "-1"]) == 1 + process.EMPTY_TRIES
