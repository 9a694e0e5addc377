"""The Kubernetes backend's whole call flow (issue 36, step 5): `KubeEngine`, the engine
interface over the objects, the API's calls and its channel, against the emulator on
loopback (tests/unit/kube_emulator.py: it validates every object strictly against the
1.37 schemas and plays the containers' processes). Exact assertions on what was sent and
what the engine concluded: a sample's Pod made at its start, its inputs through attach,
its result on its log; a server and its criterion as one Pod; the failure modes (an image
that cannot be pulled, an eviction, a deadline); exec as the container's user; removal
by label; and what a cluster does not do, refused with the reason."""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from rig.sample.oracle import assess, record_of
from rig.sample.spec import Execution, SampleSpec
from runner.containers import browser, database, sandbox
from runner.containers.backend import (
    NO_NETWORK,
    Bind,
    ContainerSpec,
    ContainerState,
    ExecOutput,
    ExecState,
    Labels,
    Resources,
    exit_after_output,
)
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.containers.kube import channel, objects, preflight
from runner.containers.kube.about import ACCEPTED_PIDS
from runner.containers.kube.api import KubeApi, PodFailedError
from runner.containers.kube.config import KubeTarget
from runner.containers.kube.engine import KubeEngine
from runner.containers.samples.container import ran_as
from runner.errors import (
    ConflictError,
    EngineRefusedError,
    EngineUnreachableError,
    InfraError,
    NotFoundError,
    SandboxUnavailableError,
)
from tests.unit.kube_emulator import Emulator, emulated
from tests.unit.test_kube_api import Clock

NS = "bakeoff"
PODS = f"/api/v1/namespaces/{NS}/pods"
POLICIES = f"/apis/networking.k8s.io/v1/namespaces/{NS}/networkpolicies"
IMAGE = "registry.example.invalid/bakeoff/python@sha256:" + "ab" * 32
DRIVER_CAPS = ("CHOWN", "SETUID", "SETGID", "KILL")


def spec(name: str = "sample-1", **changes: object) -> ContainerSpec:
    found = ContainerSpec(image=IMAGE, command=("bakeoff-driver", "run"),
                          labels=Labels("horizon", "sample", "fixer", "r1"),
                          resources=Resources(1.0, 256, 64), user="0:0",
                          purpose="sample c/fixer/x/1", name=name, cap_add=DRIVER_CAPS,
                          stdin=True)
    return replace(found, **changes)  # type: ignore[arg-type]


def driver(emulator: Emulator, pod: str, container: str, stdin: bytes) -> None:
    """A sample's driver: its result (the digest of its inputs) on stdout, a word on
    stderr, exit 0."""
    emulator.end(pod, container, 0, stdout=b"bakeoff-out:" + hashlib.sha256(stdin)
                 .hexdigest().encode() + b"\n", stderr=b"laid out\n")


def shell(emulator: Emulator, pod: str) -> None:
    """A Pod whose command is `sh -c 'echo A; echo B >&2'` (the log streams' probe) ends
    as a shell would end it."""
    command = emulator.pod(pod)["spec"]["containers"][0]["args"]
    if command[:2] == ["sh", "-c"]:
        out, err = (part.split()[-1] for part in command[2].replace(">&2", "").split(";"))
        emulator.end(pod, "main", 0, stdout=f"{out}\n".encode(), stderr=f"{err}\n".encode())


@pytest.fixture()
def emulator() -> Iterator[Emulator]:
    with emulated() as found:
        found.autorun, found.on_attach, found.on_create = True, driver, shell
        yield found


@pytest.fixture()
def clock() -> Clock:
    return Clock()


@pytest.fixture()
def engine(emulator: Emulator, clock: Clock) -> KubeEngine:
    api = KubeApi(KubeTarget("test", emulator.url, NS), clock=lambda: clock.now,
                  sleep=clock.sleep)
    made = KubeEngine(api, cpus=4, accept_node_pids=True)
    preflight.prove_split(made, IMAGE, Labels("preflight", "probe"))  # as `up` will, first
    emulator.requests.clear()
    emulator.made.clear()
    return made


def test_a_sample_is_a_pod_made_at_its_start_its_inputs_on_stdin_its_result_on_its_log(
        engine: KubeEngine, emulator: Emulator) -> None:
    made = engine.create(spec())
    assert made == "sample-1/main"
    assert emulator.requests == []  # planned: nothing is made before its start
    assert engine.inspect(made).status == "created"
    inputs = os.urandom(300_000)
    engine.start(made, io.BytesIO(inputs), what="sample c/fixer/x/1")
    assert emulator.received[("sample-1", "attach")] == inputs
    assert engine.wait(made, 30) == 0
    result = b"bakeoff-out:" + hashlib.sha256(inputs).hexdigest().encode() + b"\n"
    assert engine.logs(made) == result  # stdout only, as the interface's default
    assert engine.logs(made, stdout=False, stderr=True) == b"laid out\n"
    assert engine.logs(made, stdout=True, stderr=True) == result + b"laid out\n"
    assert b"".join(engine.follow_logs(made, follow=False)) == result
    state = engine.inspect(made)
    assert (state.status, state.exit_code, state.oom_killed, state.image) == (
        "exited", 0, False, IMAGE)
    pod = emulator.pod("sample-1")
    assert [c["name"] for c in pod["spec"]["containers"]] == ["main"]
    assert pod["spec"]["containers"][0]["stdinOnce"] is True
    assert engine.remove(made) is True
    assert emulator.pods() == []
    attach = ("GET", f"{PODS}/sample-1/attach", "container=main&stdin=true")
    log = f"{PODS}/sample-1/log"
    assert emulator.requests == [
        ("POST", POLICIES, ""),  # the experiment's deny-all, first
        ("POST", PODS, ""), ("GET", f"{PODS}/sample-1", ""), attach,
        ("GET", f"{PODS}/sample-1", ""),  # wait: ended at the first read
        ("GET", log, "container=main&stream=Stdout"),
        ("GET", log, "container=main&stream=Stderr"),
        ("GET", log, "container=main"),
        ("GET", log, "container=main&stream=Stdout"),
        ("GET", f"{PODS}/sample-1", ""),
        ("DELETE", f"{PODS}/sample-1", "gracePeriodSeconds=0")]
    assert emulator.objects[(POLICIES, "horizon-deny-all")]["spec"]["policyTypes"] == [
        "Ingress", "Egress"]


def test_a_server_and_its_criterion_are_two_containers_of_one_pod(
        engine: KubeEngine, emulator: Emulator) -> None:
    server = engine.create(spec("serve-1", command=("bakeoff-driver", "serve"),
                                labels=Labels("horizon", "sample-server", "fixer", "r1")))
    criterion = engine.create(spec(None, joins=server))
    assert (server, criterion) == ("serve-1/main", "serve-1/c1")
    served: list[str] = []
    emulator.on_attach = lambda em, pod, container, stdin: (
        served.append(container) if container == "main" else driver(em, pod, container, stdin))
    engine.start(server, io.BytesIO(b"server inputs"))
    engine.start(criterion, io.BytesIO(b"criterion inputs"))
    assert [r for r in emulator.requests if r[0] == "POST"] == [
        ("POST", POLICIES, ""), ("POST", PODS, "")]  # one Pod for both
    pod = emulator.pod("serve-1")
    assert [c["name"] for c in pod["spec"]["containers"]] == ["main", "c1"]
    assert pod["metadata"]["labels"]["io.bakeoff.role"] == "sample-server"
    assert served == ["main"]
    assert engine.wait(criterion, 30) == 0
    assert engine.wait(server, 0) is None  # the server still runs
    assert engine.remove(criterion) is True
    assert emulator.pods() == ["serve-1"]  # its Pod goes with its last container
    assert engine.remove(server) is True
    assert emulator.pods() == []
    assert emulator.requests[-1] == ("DELETE", f"{PODS}/serve-1", "gracePeriodSeconds=0")


def test_a_pod_name_planned_twice_is_a_conflict(engine: KubeEngine) -> None:
    engine.create(spec())
    with pytest.raises(ConflictError, match="a Pod named sample-1 is already planned"):
        engine.create(spec())


def test_a_container_cannot_join_a_pod_already_made(engine: KubeEngine) -> None:
    server = engine.create(spec("serve-1"))
    engine.start(server, io.BytesIO(b""))
    with pytest.raises(EngineRefusedError) as refused:
        engine.create(spec(None, joins=server))
    assert str(refused.value) == (
        f"the engine at {engine.address} refused to create sample c/fixer/x/1: it joins "
        "serve-1/main, whose Pod is already made or unknown: a Pod takes no container once "
        "made (create the joining container before starting the one it joins)")


def test_a_pids_limit_is_refused_unless_the_nodes_own_is_accepted(
        emulator: Emulator, clock: Clock) -> None:
    api = KubeApi(KubeTarget("test", emulator.url, NS), clock=lambda: clock.now,
                  sleep=clock.sleep)
    strict = KubeEngine(api, cpus=4)
    assert (strict.capabilities.pids_limit, strict.capabilities.freeze) == (False, False)
    with pytest.raises(InfraError) as refused:
        strict.create(spec())
    assert refused.value.message == (
        f"sample c/fixer/x/1 needs pids_limit, which the cluster at {emulator.url} "
        f"(namespace {NS}) cannot enforce per Pod (a pids limit is the kubelet's, node-wide)")
    assert refused.value.hint == ("accept the nodes' own pids limit explicitly, or run it on "
                                  "a docker engine")
    accepting = KubeEngine(api, cpus=4, accept_node_pids=True)
    assert accepting.create(spec()) == "sample-1/main"
    assert accepting.facts().limits["pids"] is True and strict.facts().limits["pids"] is False
    assert emulator.requests == [("GET", "/version", ""), ("GET", "/version", "")]


@pytest.mark.parametrize(("changes", "why"), [
    ({"image": "bakeoff/python:latest"}, "sample c/fixer/x/1: the image "
     "'bakeoff/python:latest' is not named by digest (repo@sha256:...): a tag can move "
     "under a run"),
    ({"mounts": (Bind(source=Path("/srv"), target="/srv"),)},
     "sample c/fixer/x/1: a Pod gets no host path (/srv)"),
    ({"cap_add": ("NET_ADMIN",)}, "sample c/fixer/x/1: capabilities ['NET_ADMIN'] may not "
     "be added (only ['CHOWN', 'KILL', 'SETGID', 'SETUID'])"),
])
def test_what_a_pod_cannot_carry_is_refused_at_create(
        engine: KubeEngine, emulator: Emulator, changes: dict[str, object], why: str) -> None:
    with pytest.raises(EngineRefusedError) as refused:
        engine.create(spec(**changes))
    assert str(refused.value) == (f"the engine at {engine.address} refused to create "
                                  f"sample c/fixer/x/1: {why}")
    assert emulator.requests == []


def test_an_image_that_cannot_be_pulled_fails_the_start_by_name(
        engine: KubeEngine, emulator: Emulator) -> None:
    made = engine.create(spec())
    emulator.scripts["sample-1"] = [{"phase": "Pending", "containerStatuses": [
        {"name": "main", "image": IMAGE, "state": {"waiting": {
            "reason": "ErrImagePull", "message": "manifest unknown"}}}]}]
    with pytest.raises(PodFailedError) as failed:
        engine.start(made, io.BytesIO(b"inputs"))
    assert str(failed.value) == (f"pod sample-1: its image {IMAGE} cannot be pulled "
                                 "(ErrImagePull: manifest unknown)")
    assert ("sample-1", "attach") not in emulator.received  # no input went to it
    assert engine.remove(made) is True and emulator.pods() == []


def test_a_sample_past_its_deadline_is_none_and_killed_with_its_pod(
        engine: KubeEngine, emulator: Emulator, clock: Clock) -> None:
    emulator.on_attach = None  # it never ends
    made = engine.create(spec())
    engine.start(made, io.BytesIO(b"inputs"))
    assert engine.wait(made, 5) is None
    assert clock.now == pytest.approx(5.0)
    engine.kill(made)
    assert emulator.pods() == []
    assert emulator.requests[-1] == ("DELETE", f"{PODS}/sample-1", "gracePeriodSeconds=0")
    assert engine.remove(made) is False  # gone with its Pod


def test_an_eviction_under_a_wait_is_the_pods_failure(
        engine: KubeEngine, emulator: Emulator) -> None:
    emulator.on_attach = None
    made = engine.create(spec())
    engine.start(made, io.BytesIO(b"inputs"))
    emulator.scripts["sample-1"] = [{"phase": "Failed", "reason": "Evicted",
                                     "message": "The node was low on resource: memory."}]
    with pytest.raises(PodFailedError, match=r"^pod sample-1: the node evicted it: The node "
                                             r"was low on resource: memory\.$"):
        engine.wait(made, 30)


def test_an_oom_kill_is_said_by_inspect(engine: KubeEngine, emulator: Emulator) -> None:
    emulator.on_attach = lambda em, pod, container, stdin: em.end(pod, container, 137,
                                                                  reason="OOMKilled")
    made = engine.create(spec())
    engine.start(made, io.BytesIO(b"inputs"))
    assert engine.wait(made, 30) == 137
    assert (engine.inspect(made).oom_killed, engine.inspect(made).exit_code) == (True, 137)


def test_an_exec_runs_as_its_containers_user_in_its_directory_with_its_variables(
        engine: KubeEngine, emulator: Emulator) -> None:
    emulator.on_attach = None
    emulator.programs["echo"] = lambda em, pod, c, argv, stdin: (
        " ".join(argv[1:]).encode() + b"\n", b"", 3)
    root = engine.create(spec())
    engine.start(root, io.BytesIO(b""))
    done = engine.exec(root, ["echo", "hi"], user="0:0", workdir="/work", deadline_s=10,
                       env={"A": "1", "KEY": "sk-real"})
    assert (done.exit_code, done.stdout, done.stderr) == (3, "hi\n", "")
    engine.exec(root, ["echo", "as", "sandbox"], user="1000:1000", workdir="/work",
                deadline_s=10)
    # The variables on stdin, never in the command (the request's URL: audit logs keep it).
    assert [command for _, _, command in emulator.execs] == [
        ["sh", "-c", channel.ENV_SCRIPT, "bakeoff-env", "/work", "echo", "hi"],
        ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "--",
         "env", "-C", "/work", "--", "echo", "as", "sandbox"]]
    assert emulator.exec_env == [{"A": "1", "KEY": "sk-real"}]
    assert not [query for _, _, query in emulator.requests if "sk-real" in query]
    with pytest.raises(EngineRefusedError, match=r"refused to run an exec: not a variable's "
                                                 r"name: 'A B', 'X=Y'$"):
        engine.exec(root, ["echo"], user="0:0", workdir="/", deadline_s=5,
                    env={"X=Y": "1", "A B": "2", "OK": "3"})
    sandbox = engine.create(spec("sandbox-1", user="1000:1000", cap_add=()))
    engine.start(sandbox)
    assert engine.exec(sandbox, ["echo"], user="1000", workdir="/", deadline_s=5
                       ).exit_code == 3
    with pytest.raises(EngineRefusedError) as refused:
        engine.exec(sandbox, ["echo"], user="0:0", workdir="/", deadline_s=5)
    assert str(refused.value) == (f"the engine at {engine.address} refused to run an exec: "
                                  "an exec runs as its container's user (1000:1000) on "
                                  "Kubernetes, not 0:0")


def test_stop_is_sigterm_to_pid_1_then_the_pod_after_the_grace(
        engine: KubeEngine, emulator: Emulator, clock: Clock) -> None:
    emulator.on_attach = None
    killed: list[list[str]] = []

    def kill(em: Emulator, pod: str, container: str, argv: list[str],
             stdin: bytes) -> tuple[bytes, bytes, int]:
        killed.append(argv)
        if pod == "polite":
            em.end(pod, container, 143, stdout=b"bakeoff-out:server\n")
        return b"", b"", 0

    emulator.programs["kill"] = kill
    polite = engine.create(spec("polite"))
    deaf = engine.create(spec("deaf"))
    for made in (polite, deaf):
        engine.start(made, io.BytesIO(b""))
    engine.stop(polite, grace_s=10)
    assert engine.inspect(polite).exit_code == 143
    assert engine.logs(polite) == b"bakeoff-out:server\n"  # its log kept: read after
    before = clock.now
    engine.stop(deaf, grace_s=10)
    assert 10.0 <= clock.now - before <= 10.2 + 1e-9  # read every 0.2 s to its grace
    assert killed == [["kill", "-TERM", "1"]] * 2
    assert emulator.pods() == ["polite"]  # the deaf one's Pod went after its grace


def test_archives_go_in_and_out_through_tar_by_exec(
        engine: KubeEngine, emulator: Emulator) -> None:
    emulator.on_attach = None
    kept: dict[str, bytes] = {}

    def tar(em: Emulator, pod: str, container: str, argv: list[str],
            stdin: bytes) -> tuple[bytes, bytes, int]:
        if argv[1] == "-x":
            kept[argv[3]] = stdin
            return b"", b"", 0
        if argv[4] == "secret":  # GNU tar's words, as the container's user
            return (b"", b"tar: secret: Cannot open: Permission denied\n"
                         b"tar: Exiting with failure status due to previous errors\n", 2)
        found = kept.get(os.path.join(argv[3], argv[4]))
        return ((b"", f"tar: {argv[4]}: Cannot stat: No such file or directory\n"
                      "tar: Exiting with failure status due to previous errors\n".encode(), 2)
                if found is None else (found, b"", 0))

    emulator.programs["tar"] = tar
    made = engine.create(spec())
    engine.start(made, io.BytesIO(b""))
    archive = os.urandom(2 * 1024 * 1024)
    engine.put_archive(made, "/work", archive)
    assert kept == {"/work": archive}
    assert b"".join(engine.get_archive(made, "/work")) == archive
    assert emulator.execs[-1][2] == ["tar", "-c", "-C", "/", "work"]
    with pytest.raises(NotFoundError) as missing:
        list(engine.get_archive(made, "/nowhere"))
    assert missing.value.answer == ("tar exit 2: tar: nowhere: Cannot stat: No such file or "
                                    "directory\ntar: Exiting with failure status due to "
                                    "previous errors")
    # A path the container's user may not read is refused, never said to be absent (an
    # optional file's reader would take it for none).
    with pytest.raises(EngineRefusedError) as refused:
        list(engine.get_archive(made, "/work/secret"))
    assert type(refused.value) is EngineRefusedError
    assert refused.value.answer.startswith("tar exit 2: tar: secret: Cannot open: "
                                           "Permission denied")


def test_a_network_is_a_policy_over_its_pods_label(engine: KubeEngine,
                                                   emulator: Emulator) -> None:
    owner = Labels("horizon", "sample-network", "fixer")
    assert engine.create_network("horizon-fixer-net", owner, egress=False) == (
        "horizon-fixer-net")
    policy = emulator.objects[(POLICIES, "horizon-fixer-net")]["spec"]
    members = [{"podSelector": {"matchLabels": {"io.bakeoff.network": "horizon-fixer-net"}}}]
    assert (policy["ingress"], policy["egress"]) == ([{"from": members}], [{"to": members}])
    made = engine.create(spec(network="horizon-fixer-net"))
    engine.start(made, io.BytesIO(b""))
    assert emulator.pod("sample-1")["metadata"]["labels"]["io.bakeoff.network"] == (
        "horizon-fixer-net")
    assert engine.inspect(made).networks == {"horizon-fixer-net": "10.0.0.7"}
    assert engine.find_network("horizon-fixer-net") == "horizon-fixer-net"
    engine.create_network("horizon-gateway-net", Labels("horizon", "gateway-network"),
                          egress=True)
    assert emulator.objects[(POLICIES, "horizon-gateway-net")]["spec"]["egress"] == [
        {"to": [{"podSelector": {"matchLabels": {
            "io.bakeoff.network": "horizon-gateway-net"}}}]}, {}]  # {}: anywhere
    engine.remove_network("horizon-fixer-net")
    assert (POLICIES, "horizon-fixer-net") not in emulator.objects
    assert [r for r in emulator.requests if r[0] == "POST"].count(("POST", POLICIES, "")) == 3


def test_removal_by_label_takes_every_kind_of_the_experiment_and_spares_the_kept(
        engine: KubeEngine, emulator: Emulator) -> None:
    emulator.on_attach = None
    for name, run in (("a-1", "r1"), ("a-2", "r2")):
        engine.start(engine.create(spec(name, labels=Labels("horizon", "sample", "fixer",
                                                            run))), io.BytesIO(b""))
    other = KubeEngine(engine.api, cpus=4, accept_node_pids=True)
    other.start(other.create(spec("b-1", labels=Labels("other", "sample"))), io.BytesIO(b""))
    engine.create_network("horizon-net", Labels("horizon", "sample-network"), egress=False)
    assert [s.id for s in engine.containers({"io.bakeoff.experiment": "horizon"})] == [
        "a-1/main", "a-2/main"]
    assert [s.id for s in engine.containers({"io.bakeoff.run": ""})] == [
        "a-1/main", "a-2/main"]  # a key with any value; b-1 has no run
    removed = engine.remove_labelled({"io.bakeoff.experiment": "horizon"},
                                     keep=lambda labels: labels.get("io.bakeoff.run") == "r2")
    assert removed == {"container": 1, "network": 2, "volume": 0, "service": 0, "secret": 0}
    assert emulator.pods() == ["a-2", "b-1"]
    assert sorted(name for (c, name) in emulator.objects if c == POLICIES) == [
        "other-deny-all", "preflight-deny-all"]
    engine.start(engine.create(spec("a-3")), io.BytesIO(b""))
    assert (POLICIES, "horizon-deny-all") in emulator.objects  # made again, never assumed
    with pytest.raises(ValueError, match="without a bakeoff label filter"):
        engine.remove_labelled({"app": "x"})


def test_samples_started_at_once_each_get_their_own_inputs(
        engine: KubeEngine, emulator: Emulator) -> None:
    """Four threads, four Pods: each attach reaches its own container (an anchor's
    readiness by label once handed an agent the wrong one)."""
    inputs = {f"s-{n}": os.urandom(100_000) for n in range(4)}
    made = {name: engine.create(spec(name)) for name in inputs}
    threads = [threading.Thread(target=engine.start, args=(made[name], io.BytesIO(data)))
               for name, data in inputs.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for name, data in inputs.items():
        assert engine.wait(made[name], 5) == 0
        assert engine.logs(made[name]) == (b"bakeoff-out:" + hashlib.sha256(data).hexdigest()
                                           .encode() + b"\n")


def test_what_a_cluster_does_not_do_is_refused_with_the_reason(engine: KubeEngine) -> None:
    made = engine.create(spec())
    calls = {"pause": lambda: engine.pause(made, what="arm fixer"),
             "unpause": lambda: engine.unpause(made, what="arm fixer"),
             "volume": lambda: engine.create_volume("V_1", Labels("horizon", "inputs"),
                                                    size_mb=None, owner=0)}
    said = {}
    for name, call in calls.items():
        with pytest.raises(EngineRefusedError) as refused:
            call()
        said[name] = str(refused.value).removeprefix(f"the engine at {engine.address} ")
    assert said == {
        "pause": "refused to pause arm fixer: a Pod cannot be frozen (Kubernetes)",
        "unpause": "refused to unpause arm fixer: a Pod cannot be frozen (Kubernetes)",
        "volume": "refused to create volume V_1: 'V_1' is not a Kubernetes object name (at "
                  "most 63 of [a-z0-9-], alphanumeric at both ends)"}


def test_the_engine_is_the_api_server_and_says_so(engine: KubeEngine,
                                                  emulator: Emulator) -> None:
    engine.ping()
    assert engine.down() is None
    assert engine.identity.as_record() == {"host": engine.address, "id": f"test/{NS}",
                                           "name": "Kubernetes v1.37.0",
                                           "accepted_pids": ACCEPTED_PIDS}
    strict = KubeEngine(engine.api, cpus=4)
    assert strict.identity.as_record() == {"host": engine.address, "id": f"test/{NS}",
                                           "name": "Kubernetes v1.37.0"}
    assert (engine.facts().server_version, engine.facts().api_version, engine.cpus) == (
        "v1.37.0", "1.37", 4)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    gone = KubeEngine(KubeApi(KubeTarget("test", f"http://127.0.0.1:{port}", NS),
                              timeout_s=2), cpus=1)
    assert (gone.down() or "").startswith(f"the Kubernetes API at http://127.0.0.1:{port} "
                                           "did not answer to read its version")
    with pytest.raises(EngineUnreachableError, match=r"^no Kubernetes API answers at "):
        gone.ping()


def test_a_state_read_from_a_pod_is_the_interfaces(engine: KubeEngine,
                                                   emulator: Emulator) -> None:
    emulator.on_attach = None
    made = engine.create(spec(network=NO_NETWORK))
    engine.start(made, io.BytesIO(b""))
    assert engine.inspect(made) == ContainerState(
        id="sample-1/main", name="sample-1/main", status="running", exit_code=None,
        oom_killed=False, image=IMAGE, command=("bakeoff-driver", "run"), networks={},
        labels={"io.bakeoff.experiment": "horizon", "io.bakeoff.role": "sample",
                "io.bakeoff.arm": "fixer", "io.bakeoff.run": "r1",
                "io.bakeoff.pod": "sample-1"})  # what a network it joins selects
def test_one_stream_of_a_log_is_trusted_only_once_the_cluster_proved_it_gives_one(
        emulator: Emulator, clock: Clock) -> None:
    """A sample's result is the last mark line of its stdout: a cluster that ignores
    `stream` (KEP-3288's feature gate off) gives stderr too, where a line could be forged."""
    api = KubeApi(KubeTarget("test", emulator.url, NS), clock=lambda: clock.now,
                  sleep=clock.sleep)
    unproved = KubeEngine(api, cpus=4, accept_node_pids=True)
    made = unproved.create(spec())
    unproved.start(made, io.BytesIO(b"inputs"))
    assert unproved.logs(made, stdout=True, stderr=True).endswith(b"laid out\n")  # both: ok
    with pytest.raises(EngineRefusedError) as refused:
        unproved.logs(made)
    assert str(refused.value) == (
        f"the engine at {unproved.address} refused to read the stdout of sample-1/main: one "
        "stream of a log is trusted only once the cluster proved it gives one "
        "(kube.preflight.prove_split)")
    with pytest.raises(EngineRefusedError, match="read the stdout of sample-1/main"):
        list(unproved.follow_logs(made, follow=False))
    emulator.split_streams = False  # an API server that ignores `stream`
    with pytest.raises(InfraError) as mixed:
        preflight.prove_split(unproved, IMAGE, Labels("horizon", "probe"))
    assert mixed.value.message == (
        f"the cluster at {unproved.address} does not give one stream of a log: asked for "
        "stdout, it gave b'bakeoff-probe-stdout\\nbakeoff-probe-stderr\\n'")
    assert emulator.pods() == ["sample-1"]  # the probe's Pod removed
    emulator.split_streams = True
    preflight.prove_split(unproved, IMAGE, Labels("horizon", "probe"))
    assert unproved.logs(made) == (b"bakeoff-out:" + hashlib.sha256(b"inputs").hexdigest()
                                   .encode() + b"\n")


def connecting(enforced: bool, control: bool = True) -> Callable[[Emulator, str], None]:
    """The isolation probe's clients on a cluster: one on the listener's network reaches
    it (unless the `control` is broken), one on no network reaches it only where policies
    are not `enforced`; each ends with the probe script's exit (0: reached)."""
    def made(emulator: Emulator, pod: str) -> None:
        obj = emulator.pod(pod)
        command = obj["spec"]["containers"][0]["args"]
        if command[2] != preflight.CONNECT:
            return
        same = "io.bakeoff.network" in obj["metadata"]["labels"]
        emulator.end(pod, "main", 0 if (control if same else not enforced) else 1)
    return made


def test_isolation_is_proved_by_a_denied_connection_and_a_control_that_connects(
        engine: KubeEngine, emulator: Emulator) -> None:
    emulator.on_create = connecting(enforced=True)
    preflight.prove_isolation(engine, IMAGE, Labels("preflight", "probe"))
    made = [(o["metadata"].get("labels", {}).get("io.bakeoff.network"),
             o["spec"]["containers"][0]["args"][3:])
            for (c, _), o in emulator.made.items() if c == PODS]
    assert made == [("preflight-probe-net", []),  # the listener
                    ("preflight-probe-net", ["10.0.0.7"]),  # the control, on its network
                    (None, ["10.0.0.7"])]  # on no network: denied
    assert emulator.pods() == [] and (POLICIES, "preflight-probe-net") not in emulator.objects


@pytest.mark.parametrize(("enforced", "control", "said"), [
    (False, True, "the cluster at {address} does not enforce NetworkPolicies: a Pod on no "
     "network reached another Pod's port"),
    (True, False, "the isolation probe on {address} could not reach its listener from the "
     "same network (exit 1): the cluster's isolation cannot be proved"),
    (False, False, "the isolation probe on {address} could not reach its listener from the "
     "same network (exit 1): the cluster's isolation cannot be proved"),
])
def test_a_cluster_that_ignores_policies_or_a_probe_that_cannot_connect_is_refused(
        engine: KubeEngine, emulator: Emulator, enforced: bool, control: bool,
        said: str) -> None:
    """A CNI that ignores NetworkPolicies must not pass as isolated; and a probe that never
    connects proves nothing (its control fails first)."""
    emulator.on_create = connecting(enforced, control)
    with pytest.raises(InfraError) as refused:
        preflight.prove_isolation(engine, IMAGE, Labels("preflight", "probe"))
    assert refused.value.message == said.format(address=engine.address)
    assert emulator.pods() == [] and (POLICIES, "preflight-probe-net") not in emulator.objects


def test_a_streamed_exec_gives_both_streams_as_they_come_and_its_state_after(
        engine: KubeEngine, emulator: Emulator) -> None:
    """An agent's run (`sandbox.exec_stream`): the API keeps no exec, so its state is the
    engine's own record: running until its output ended, then the status channel's code."""
    emulator.on_attach = None
    emulator.programs["agent"] = lambda em, pod, c, argv, stdin: (b"x" * 200_000,
                                                                  b"warned\n", 7)
    sandbox = engine.create(spec("sandbox-1", user="1000:1000", cap_add=()))
    engine.start(sandbox)
    streamed = engine.exec_stream(sandbox, ["agent", "--brief"], user="1000:1000",
                                  workdir="/work", env={"HOME": "/home/agent"})
    assert engine.exec_state(streamed.exec_id) == ExecState(True, None)
    assert b"".join(streamed.output) == b"x" * 200_000 + b"warned\n"
    assert engine.exec_state(streamed.exec_id) == ExecState(False, 7)
    assert exit_after_output(engine, streamed.exec_id) == ExecState(False, 7)
    assert emulator.execs[-1] == ("sandbox-1", "main", [
        "sh", "-c", channel.ENV_SCRIPT, "bakeoff-env", "/work", "agent", "--brief"])
    assert emulator.exec_env == [{"HOME": "/home/agent"}]
    streamed.close()  # after its end: nothing to free
    with pytest.raises(NotFoundError, match=r"no exec sandbox-1/main/exec-x was started here"):
        engine.exec_state("sandbox-1/main/exec-x")


def test_a_streamed_exec_closed_early_stays_running_as_docker_says_it(
        engine: KubeEngine, emulator: Emulator) -> None:
    emulator.on_attach = None
    sandbox = engine.create(spec("sandbox-1"))
    engine.start(sandbox)
    streamed = engine.exec_stream(sandbox, ["hang"], user="0:0", workdir="/", env={})
    streamed.close()  # the caller's deadline: its output is freed, the process not waited
    assert engine.exec_state(streamed.exec_id) == ExecState(True, None)


def test_a_held_exec_answers_script_by_script_then_ends_with_its_code(
        engine: KubeEngine, emulator: Emulator) -> None:
    """One process, many scripts (psql in the database's Pod): each answer read up to
    the marker line it prints; after the input's end, the rest and the status's code."""
    emulator.on_attach = None
    made = engine.create(spec("db-1", user="999:999", cap_add=()))
    engine.start(made)
    with engine.hold_exec(made, ["cat"], user="999:999", what="psql") as held:
        held.send(b"select 1;\nbakeoff-done\n")
        assert held.until(b"bakeoff-done", 10) == ExecOutput(None, b"select 1;\n", b"")
        held.send(b"x" * 200_000 + b"\nbakeoff-done\n")
        assert held.until(b"bakeoff-done", 10).stdout == b"x" * 200_000 + b"\n"
        held.send(b"tail\n")
        held.close_input()
        ended = held.until(None, 10)
        assert (ended.exit_code, ended.stdout, held.ended) == (0, b"tail\n", True)
        assert ended.stderr.startswith(b"exec env -C / -- cat")
    assert emulator.execs[-1] == ("db-1", "main", ["env", "-C", "/", "--", "cat"])


def test_a_held_exec_that_never_answers_is_the_sandbox_unavailable(
        engine: KubeEngine, emulator: Emulator) -> None:
    emulator.on_attach = None
    made = engine.create(spec("db-1"))
    engine.start(made)
    with (engine.hold_exec(made, ["hang"], user="0:0") as held,
          pytest.raises(SandboxUnavailableError, match=r"^exec: no answer in time")):
        held.until(b"bakeoff-done", 0.3)


def test_exec_with_input_runs_on_the_kube_engine_as_on_docker(
        engine: KubeEngine, emulator: Emulator) -> None:
    """The database's scripts go through `held_exec.exec_with_input`, backend-blind."""
    from runner.containers.held_exec import exec_with_input
    emulator.on_attach = None
    emulator.programs["psql"] = lambda em, pod, c, argv, stdin: (
        b"rows: " + str(stdin.count(b";")).encode() + b"\n", b"", 0)
    made = engine.create(spec("db-1", user="999:999", cap_add=()))
    engine.start(made)
    done = exec_with_input(engine, made, ["psql", "-X"], b"select 1; select 2;\n",
                           user="999:999", timeout_s=10, what="psql")
    assert (done.exit_code, done.stdout) == (0, b"rows: 2\n")


def test_a_record_names_the_image_by_the_digest_the_pod_ran(emulator: Emulator) -> None:
    """The sample's and the browser's records carry the `repo@sha256:` the engine named
    (pushed by content: `images.registry.Registered`); on Docker the field stays empty,
    the image ID being what ran."""
    pushed = {"sha256:" + "01" * 32: IMAGE, IMAGE: IMAGE}  # as `Registered` answers
    kube = KubeEngine(KubeApi(KubeTarget("test", emulator.url, NS)), cpus=2,
                      image_ref=pushed.__getitem__, accept_node_pids=True)
    assert ran_as(kube, "sha256:" + "01" * 32) == IMAGE
    assert ran_as(kube, IMAGE) == ""  # already by digest: nothing more to say
    assert ran_as(Engine(SimpleNamespace()), "sha256:" + "01" * 32) == ""  # type: ignore[arg-type]
    sample = SampleSpec(change="c", arm="A", check="success", n=1, commit="a" * 40,
                        base_commit="b" * 40, command="pytest -q", parser="pytest",
                        timeout_s=60)
    execution = Execution(exit_code=0, log="", duration_s=1.0, image="bakeoff/python:x",
                          image_id="sha256:" + "01" * 32, image_ref=IMAGE,
                          engine=kube.identity.as_record())
    record = record_of(sample, execution, assess(sample, execution), "now", "1.log")
    assert (record.image_ref, record.engine["accepted_pids"]) == (IMAGE, ACCEPTED_PIDS)
    docker = record_of(sample, replace(execution, image_ref=""), assess(sample, execution),
                       "now", "1.log")
    assert docker.image_ref is None
    assert "image_ref" not in json.loads(docker.model_dump_json(exclude_none=True))
    ran = browser.facts({}, BuiltImage("bakeoff/browser", "bakeoff/browser:x", "sha256:b",
                                       "sha256:i", cached=True), None,
                        "http://localhost:8000", browser.BrowserLimits(), IMAGE)
    assert (ran.image_id, ran.image_ref) == ("sha256:b", IMAGE)


def test_samples_run_as_many_at_once_as_the_manifest_s_parallelism(
        emulator: Emulator) -> None:
    """Not this machine's CPUs, nor the CPUs a container may ask: `parallelism`."""
    kube = KubeEngine(KubeApi(KubeTarget("test", emulator.url, NS)), cpus=2, parallelism=24)
    assert (sandbox.workers(kube), kube.cpus) == (24, 2)
    assert database.sample_databases(kube) == 96


def test_the_database_joins_a_network_and_the_pods_made_after_reach_it_by_name(
        engine: KubeEngine, emulator: Emulator) -> None:
    """`database.attach`, as the samples' networks call it: two policies open the running
    Postgres Pod and the network's Pods to each other, and `db` is its address in the
    hosts of every Pod made on the network from then on (none resolves through the
    cluster's DNS); what cannot hold is refused by name, never left half made."""
    emulator.on_attach = None
    emulator.addresses["scoredb"] = "10.0.0.9"
    for net in ("horizon-scoredb", "horizon-fixer-samples", "horizon-other-samples"):
        engine.create_network(net, Labels("horizon", "sample-network"), egress=False)
    server = Labels("horizon", "score-database", "", "r1")
    db = engine.create(spec("scoredb", network="horizon-scoredb", labels=server))
    with pytest.raises(EngineRefusedError, match=r"refused to connect db: scoredb/main is "
                       r"not running: a name on a network is its Pod's address \(connect "
                       r"it once started\)"):
        database.attach(engine, db, "horizon-fixer-samples")
    engine.start(db)
    database.attach(engine, db, "horizon-fixer-samples")
    on_pod, on_net = objects.joined_names("scoredb", "horizon-fixer-samples")
    member = {"podSelector": {"matchLabels": {"io.bakeoff.network": "horizon-fixer-samples"}}}
    it = {"podSelector": {"matchLabels": {"io.bakeoff.pod": "scoredb"}}}
    for name, selects, peer in ((on_pod, it, member), (on_net, member, it)):
        policy = emulator.objects[(POLICIES, name)]
        assert policy["spec"] == {**selects, "policyTypes": ["Ingress", "Egress"],
                                  "ingress": [{"from": [peer]}], "egress": [{"to": [peer]}]}
        assert policy["metadata"]["labels"]["io.bakeoff.experiment"] == "horizon"
    assert engine.inspect(db).networks == {"horizon-scoredb": "10.0.0.9",
                                           "horizon-fixer-samples": "10.0.0.9"}
    engine.start(engine.create(spec("s-1", network="horizon-fixer-samples")), io.BytesIO(b""))
    assert emulator.pod("s-1")["spec"]["hostAliases"] == [{"ip": "10.0.0.9",
                                                           "hostnames": ["db"]}]
    engine.start(engine.create(spec("s-2", network="horizon-other-samples")), io.BytesIO(b""))
    assert "hostAliases" not in emulator.pod("s-2")["spec"]  # not joined there
    said = []
    for call in (lambda: database.attach(engine, db, "horizon-other-samples"),
                 lambda: engine.connect("horizon-scoredb", db, aliases=["Db_1"]),
                 lambda: engine.connect("horizon-nowhere", db, aliases=["db"])):
        with pytest.raises((EngineRefusedError, NotFoundError)) as refused:
            call()
        said.append(str(refused.value).removeprefix(f"the engine at {engine.address} "))
    assert said[:2] == [
        "refused to connect db: Pods already made on horizon-other-samples (s-2) would not "
        "resolve its names (a Pod's hosts are fixed when it is made: connect before "
        "starting them)",
        "refused to connect a container: 'Db_1' is not a host name (RFC 1123 label)"]
    assert "horizon-nowhere" in said[2]
    engine.create_network("horizon-late-samples", Labels("horizon", "sample-network"),
                          egress=False)
    other = engine.create(spec("scoredb2", network="horizon-scoredb", labels=server))
    engine.start(other)
    database.attach(engine, db, "horizon-late-samples")
    with pytest.raises(EngineRefusedError, match=r"refused to connect db: db already names "
                                                 r"another Pod on horizon-late-samples$"):
        database.attach(engine, other, "horizon-late-samples")
    engine.disconnect("horizon-late-samples", db)
    assert {(POLICIES, name) for name in objects.joined_names(
        "scoredb", "horizon-late-samples")}.isdisjoint(emulator.objects)
    engine.start(engine.create(spec("s-3", network="horizon-late-samples")), io.BytesIO(b""))
    assert "hostAliases" not in emulator.pod("s-3")["spec"]  # its name went with it
    assert engine.remove(db) is True  # the Pod and the policies of what it joined
    assert {(POLICIES, on_pod), (POLICIES, on_net)}.isdisjoint(emulator.objects)
    engine.start(engine.create(spec("s-4", network="horizon-fixer-samples")), io.BytesIO(b""))
    assert "hostAliases" not in emulator.pod("s-4")["spec"]


def test_a_user_named_in_its_image_runs_as_the_ids_the_image_gives_it(
        emulator: Emulator) -> None:
    """The experiment's Postgres runs as `postgres` (its image's user, whatever its uid):
    a Pod holds numbers only, so the name is resolved in the image (`user_of`); an exec
    as that name runs as the container's own user. Without a resolver: refused at create,
    with the reason."""
    asked: list[tuple[str, str]] = []

    def user_of(image: str, user: str) -> str:
        asked.append((image, user))
        return "103:109"
    api = KubeApi(KubeTarget("test", emulator.url, NS))
    kube = KubeEngine(api, cpus=2, accept_node_pids=True, user_of=user_of)
    db = kube.create(spec("pg", user="postgres", cap_add=(), stdin=False))
    emulator.programs["psql"] = lambda em, pod, c, argv, stdin: (b"ok\n", b"", 0)
    kube.start(db)
    security = emulator.pod("pg")["spec"]["containers"][0]["securityContext"]
    assert (security["runAsUser"], security["runAsGroup"], security["runAsNonRoot"]) == (
        103, 109, True)
    assert asked[0] == (IMAGE, "postgres")
    done = kube.exec(db, ["psql", "-c", "select 1"], user="postgres", workdir="/",
                     deadline_s=10)
    assert (done.exit_code, done.stdout) == (0, "ok\n")
    assert emulator.execs[-1][2][-3:] == ["psql", "-c", "select 1"]  # no setpriv
    assert "setpriv" not in emulator.execs[-1][2]
    strict = KubeEngine(api, cpus=2, accept_node_pids=True)
    with pytest.raises(EngineRefusedError, match=r"refused to create sample c/fixer/x/1: "
                       r"sample c/fixer/x/1: the user 'postgres' is not uid:gid: a Pod runs "
                       r"as numbers \(runAsUser\), never a name its image resolves"):
        strict.create(spec("pg2", user="postgres"))


def test_a_containers_keys_go_in_a_secret_made_before_its_pod_and_removed_with_it(
        engine: KubeEngine, emulator: Emulator) -> None:
    """The gateway's real keys (`secret_env`): a Secret of the Pod's, made before the Pod
    (which names it, never the value), deleted with the Pod, and by label at `down`."""
    keyed = spec("gateway-1", command=("python3", "-m", "gateway"), stdin=False, cap_add=(),
                 user="1000:1000", secret_env={"ANTHROPIC_API_KEY": "sk-ant-real"})
    made = engine.create(keyed)
    engine.start(made)
    secrets_path = f"/api/v1/namespaces/{NS}/secrets"
    assert [(m, p) for m, p, _ in emulator.requests if m == "POST"][-2:] == [
        ("POST", secrets_path), ("POST", PODS)]
    assert "sk-ant-real" not in json.dumps(emulator.pod("gateway-1"))
    assert sorted(n for (c, n) in emulator.objects if c == secrets_path) == [
        "gateway-1-main-env"]
    engine.remove(made)
    assert (emulator.requests[-1][:2], emulator.requests[-1][2]) == (
        ("DELETE", secrets_path), "labelSelector=io.bakeoff.pod%3Dgateway-1")
    assert [n for (c, n) in emulator.objects if c == secrets_path] == []
    again = engine.create(replace(keyed, name="gateway-2"))
    engine.start(again)
    removed = engine.remove_labelled({"io.bakeoff.experiment": "horizon"})
    assert (removed["container"], removed["secret"]) == (1, 1)
