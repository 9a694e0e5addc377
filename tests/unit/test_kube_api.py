"""The Kubernetes backend's calls (issue 36, step 2) against an emulator of the API on
loopback (tests/unit/kube_emulator.py): exactly what was sent, and what the backend
concluded from each answer, the failure modes included (an image that cannot be pulled,
an eviction, the Pod's deadline, never scheduled, the API's refusals and failures)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from runner.containers.backend import ContainerSpec, Labels, Resources
from runner.containers.kube import objects
from runner.containers.kube.api import KubeApi, PodFailedError, PodState
from runner.containers.kube.config import KubeTarget
from runner.errors import EngineFailedError, EngineRefusedError, NotFoundError
from tests.unit.kube_emulator import Emulator, emulated

NS = "bakeoff"
PODS = f"/api/v1/namespaces/{NS}/pods"
IMAGE = "registry.example.invalid/bakeoff/python@sha256:" + "ab" * 32


class Clock:
    """A clock the waits advance by their own sleeps (no test sleeps for real)."""

    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture()
def emulator() -> Iterator[Emulator]:
    with emulated() as found:
        yield found


@pytest.fixture()
def clock() -> Clock:
    return Clock()


@pytest.fixture()
def api(emulator: Emulator, clock: Clock) -> KubeApi:
    return KubeApi(KubeTarget("test", emulator.url, NS), clock=lambda: clock.now, sleep=clock.sleep)


def sample_pod(name: str = "horizon-s1", experiment: str = "horizon") -> dict[str, Any]:
    spec = ContainerSpec(image="sha256:x", command=("true",),
                         labels=Labels(experiment, "sample", "fixer", "r1"),
                         resources=Resources(1.0, 256, 64), user="1000:1000",
                         purpose="a sample", stdin=True)
    return objects.pod(name, NS, [("main", spec, IMAGE)], deadline_s=60)


def running(*names: str) -> dict[str, Any]:
    return {"phase": "Running", "containerStatuses": [
        {"name": n, "image": IMAGE, "state": {"running": {}}} for n in names]}


def ended(phase: str, **codes: int) -> dict[str, Any]:
    return {"phase": phase, "containerStatuses": [
        {"name": n, "image": IMAGE, "state": {"terminated": {"exitCode": c}}}
        for n, c in codes.items()]}


def test_a_pod_is_created_as_made_and_waited_for_by_its_own_name(
        api: KubeApi, emulator: Emulator, clock: Clock) -> None:
    pod = sample_pod()
    created = api.create(pod)
    assert created["status"] == {"phase": "Pending"}
    assert emulator.objects[(PODS, "horizon-s1")]["spec"] == pod["spec"]
    emulator.scripts["horizon-s1"] = [{"phase": "Pending"}, running("main")]
    assert api.wait_pod("horizon-s1", running=True, deadline_s=30) == PodState(
        "Running", exit_codes={"main": None})
    emulator.scripts["horizon-s1"] = [running("main"), ended("Succeeded", main=0)]
    assert api.wait_pod("horizon-s1", running=False, deadline_s=30) == PodState(
        "Succeeded", exit_codes={"main": 0})
    assert emulator.requests == [("POST", PODS, ""), *[("GET", f"{PODS}/horizon-s1", "")] * 4]
    assert clock.now == pytest.approx(0.4)  # one poll interval per read that did not end it


def test_a_server_and_its_criterion_end_with_their_own_exit_codes(
        api: KubeApi, emulator: Emulator) -> None:
    api.create(sample_pod())
    emulator.scripts["horizon-s1"] = [ended("Failed", server=143, browser=1)]
    assert api.wait_pod("horizon-s1", running=False, deadline_s=5) == PodState(
        "Failed", exit_codes={"server": 143, "browser": 1})


@pytest.mark.parametrize(("status", "why"), [
    ({"phase": "Pending", "containerStatuses": [{"name": "main", "image": IMAGE, "state": {
        "waiting": {"reason": "ErrImagePull", "message": "manifest unknown"}}}]},
     f"pod horizon-s1: its image {IMAGE} cannot be pulled (ErrImagePull: manifest unknown)"),
    ({"phase": "Pending", "containerStatuses": [{"name": "main", "image": IMAGE, "state": {
        "waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}}}]},
     f"pod horizon-s1: its image {IMAGE} cannot be pulled (ImagePullBackOff: Back-off "
     "pulling image)"),
    ({"phase": "Failed", "reason": "Evicted",
      "message": "The node was low on resource: memory."},
     "pod horizon-s1: the node evicted it: The node was low on resource: memory."),
    ({"phase": "Failed", "reason": "DeadlineExceeded",
      "message": "Pod was active on the node longer than the specified deadline"},
     "pod horizon-s1: it outlived its activeDeadlineSeconds: Pod was active on the node "
     "longer than the specified deadline"),
])
def test_a_pod_that_can_never_run_as_asked_says_why_at_once(
        api: KubeApi, emulator: Emulator, clock: Clock, status: dict[str, Any],
        why: str) -> None:
    api.create(sample_pod())
    emulator.scripts["horizon-s1"] = [status]
    with pytest.raises(PodFailedError) as failed:
        api.wait_pod("horizon-s1", running=False, deadline_s=300)
    assert str(failed.value) == why
    assert clock.now == 0  # the first read said so: no wait


def test_a_pod_never_scheduled_is_given_up_at_the_deadline_with_the_schedulers_words(
        api: KubeApi, emulator: Emulator, clock: Clock) -> None:
    api.create(sample_pod())
    emulator.scripts["horizon-s1"] = [{"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available: 3 Insufficient memory."}]}]
    with pytest.raises(PodFailedError) as failed:
        api.wait_pod("horizon-s1", running=True, deadline_s=5)
    assert str(failed.value) == ("pod horizon-s1: still Pending after 5 s (never scheduled: "
                                 "Unschedulable: 0/3 nodes are available: 3 Insufficient "
                                 "memory.)")
    assert clock.now == pytest.approx(5.0)
    assert len(emulator.requests) == 1 + 26  # the create, then a read every 0.2 s to 5 s


def test_removal_by_labels_takes_the_experiments_pods_and_no_others(
        api: KubeApi, emulator: Emulator) -> None:
    for name, experiment in (("a-1", "horizon"), ("a-2", "horizon"), ("b-1", "other")):
        api.create(sample_pod(name, experiment))
    assert [p["metadata"]["name"] for p in api.listed(
        "Pod", {"io.bakeoff.experiment": "horizon"})] == ["a-1", "a-2"]
    api.delete_selected("Pod", {"io.bakeoff.experiment": "horizon", "io.bakeoff.run": "r1"})
    assert emulator.pods() == ["b-1"]
    assert emulator.requests[-1] == (
        "DELETE", PODS, "labelSelector=io.bakeoff.experiment%3Dhorizon%2Cio.bakeoff.run%3Dr1")


def test_a_pods_log_is_read_per_container(api: KubeApi, emulator: Emulator) -> None:
    api.create(sample_pod())
    emulator.logs[("horizon-s1", "main")] = b"bakeoff-out:AAAA\n"
    assert api.logs("horizon-s1", "main") == b"bakeoff-out:AAAA\n"
    assert emulator.requests[-1] == ("GET", f"{PODS}/horizon-s1/log", "container=main")


def test_the_apis_refusals_and_failures_are_the_projects_errors(
        api: KubeApi, emulator: Emulator) -> None:
    with pytest.raises(NotFoundError) as missing:
        api.get("Pod", "nowhere")
    assert str(missing.value) == (f'the engine at {emulator.url} refused to read Pod nowhere '
                                  '(404): pods "nowhere" not found')
    emulator.fail.append((403, 'pods is forbidden: User "bakeoff" cannot create resource'))
    with pytest.raises(EngineRefusedError) as forbidden:
        api.create(sample_pod())
    assert forbidden.value.status == 403 and "cannot create resource" in str(forbidden.value)
    emulator.fail.append((500, "etcdserver: request timed out"))
    with pytest.raises(EngineFailedError, match=r"failed to create Pod horizon-s1 \(500\): "
                                                 r"etcdserver: request timed out$"):
        api.create(sample_pod())
    api.create(sample_pod())
    with pytest.raises(EngineRefusedError, match=r"\(409\): \"horizon-s1\" already exists$"):
        api.create(sample_pod())


def test_an_object_a_cluster_would_refuse_is_refused_by_the_emulator_too(
        api: KubeApi) -> None:
    """The emulator validates what it is sent (strict 1.37): a test of the backend cannot
    pass on an object no cluster takes."""
    pod = sample_pod()
    pod["spec"]["containers"][0]["pidsLimit"] = 64
    with pytest.raises(EngineRefusedError, match=r"\(422\): invalid: Additional properties "
                                                 r"are not allowed \('pidsLimit' was "
                                                 r"unexpected\)$"):
        api.create(pod)


def test_each_thread_has_its_own_session(api: KubeApi) -> None:
    """A client shared by threads is not safe under concurrent exec (Harbor's finding)."""
    mine = api.session()
    assert api.session() is mine
    theirs: list[Any] = []
    worker = threading.Thread(target=lambda: theirs.append(api.session()))
    worker.start()
    worker.join()
    assert theirs and theirs[0] is not mine


def test_a_token_a_ca_and_a_client_certificate_go_with_every_request(
        emulator: Emulator) -> None:
    api = KubeApi(KubeTarget("test", emulator.url, NS, token="t0k3n", ca_file="/etc/ca.crt",
                             client_cert="/c.crt", client_key="/c.key"))
    session = api.session()
    assert (session.headers["Authorization"], session.verify, session.cert) == (
        "Bearer t0k3n", "/etc/ca.crt", ("/c.crt", "/c.key"))
    insecure = KubeApi(KubeTarget("test", emulator.url, NS, verify=False)).session()
    assert (insecure.verify, insecure.cert, "Authorization" in insecure.headers) == (
        False, None, False)


def test_an_init_container_that_failed_is_why_the_pod_never_runs() -> None:
    from runner.containers.kube.api import pod_problem
    failed = {"status": {"phase": "Failed", "initContainerStatuses": [
        {"name": "owners", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}}
    assert pod_problem(failed) == "its init container owners failed (exit 1: Error)"
    done = {"status": {"phase": "Running", "initContainerStatuses": [
        {"name": "owners", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}}
    assert pod_problem(done) is None
