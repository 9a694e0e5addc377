"""What Docker Swarm services really do, checked inside a second engine of the module's
own (never this machine's engine: `swarm init` happens in the container). Engine 20.10
(API 1.41), one node. docs/scale-out.md ("Docker Swarm") says what follows from it.

The services are created through the raw API with the ContainerSpec fields a hardened
sample would need, so what the engine drops silently shows (the CLI would refuse or
ignore some flags before the engine sees them).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from runner.containers import images
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from tests.integration import remote_steps as steps
from tests.integration.remote_engine import RemoteEngine, copy_image, default_gateways, started

IMAGE = "bakeoff/python:latest"  # has python3 for the server; copied in by save | load
JOB_WAIT_S = 120.0
MIB = 1024 * 1024
FINAL = ("complete", "failed", "rejected", "shutdown")


@dataclass(frozen=True)
class Swarm:
    remote: RemoteEngine
    overlay: str  # an internal, attachable overlay network of ours (its ID)
    labels: dict[str, str]


@dataclass(frozen=True)
class JobRun:
    seconds: float
    state: str
    error: str | None
    service: dict[str, Any]
    container: Any  # None when the task never made one
    output: str


@pytest.fixture(scope="module")
def swarm(engine: Engine, engine_image: BuiltImage) -> Iterator[Swarm]:
    with started(engine, engine_image, f"swarm{secrets.token_hex(3)}") as remote:
        images.resolve(engine, "python")
        copy_image(engine, remote.engine, IMAGE)
        remote.client.swarm.init(advertise_addr=remote.address,
                                 listen_addr=f"{remote.address}:2377")
        labels = {**remote.labels.as_dict(), "io.bakeoff.role": "swarm-probe"}
        overlay = remote.client.networks.create("probe-overlay", driver="overlay",
                                                internal=True, attachable=True, labels=labels)
        yield Swarm(remote, str(overlay.id), labels)


def hardened(args: list[str], labels: dict[str, str], **extra: Any) -> dict[str, Any]:
    """A ContainerSpec with every hardening field a sample has, no-new-privileges
    included (`Privileges.NoNewPrivileges`, which API 1.41 does not define)."""
    return {"Image": IMAGE, "Args": args, "Labels": labels, "User": steps.USER,
            "ReadOnly": True, "Init": True, "CapabilityDrop": ["ALL"],
            "Mounts": [{"Type": "tmpfs", "Target": "/tmp",
                        "TmpfsOptions": {"SizeBytes": steps.TMP_MB * MIB}}],
            "Privileges": {"NoNewPrivileges": True}, **extra}


def run_job(swarm: Swarm, name: str, spec: dict[str, Any],
            networks: list[str] | None = None) -> JobRun:
    """A replicated job of one completion, no restart, the limits of a sample; waited for
    (bounded) until its task is final."""
    client = swarm.remote.client
    template: dict[str, Any] = {
        "ContainerSpec": spec, "RestartPolicy": {"Condition": "none"},
        "Resources": {"Limits": {"NanoCPUs": int(steps.LIMITS.cpus * 1e9),
                                 "MemoryBytes": steps.LIMITS.memory_mb * MIB,
                                 "Pids": steps.LIMITS.pids}}}
    if networks is not None:
        template["Networks"] = [{"Target": network} for network in networks]
    began = time.perf_counter()
    service = client.api.create_service(template, name=name, labels=swarm.labels, mode={
        "ReplicatedJob": {"MaxConcurrent": 1, "TotalCompletions": 1}})["ID"]
    tasks: list[dict[str, Any]] = []
    while time.perf_counter() - began < JOB_WAIT_S:
        tasks = client.api.tasks(filters={"service": service})
        if tasks and all(t["Status"]["State"] in FINAL for t in tasks):
            break
        time.sleep(0.1)
    seconds = round(time.perf_counter() - began, 3)
    assert len(tasks) == 1, f"job {name}: {len(tasks)} tasks after {seconds} s: {tasks}"
    made = client.containers.list(all=True, filters={
        "label": f"com.docker.swarm.service.id={service}"})
    container = made[0] if made else None
    output = container.logs().decode() if container is not None else ""
    status = tasks[0]["Status"]
    return JobRun(seconds, status["State"], status.get("Err"), client.api.inspect_service(
        service), container, output)


def test_a_replicated_job_runs_once_with_the_limits_but_without_no_new_privileges(
        swarm: Swarm, record_property: Any) -> None:
    """cap_drop ALL, a read-only root, the pids and memory limits, a tmpfs and the user
    are honoured; no-new-privileges is not: the engine drops the field from the stored
    spec and the task runs with NoNewPrivs 0. An internal overlay gives no default route."""
    ran = run_job(swarm, "facts", hardened(["sh", "-c", steps.FACTS], swarm.labels),
                  [swarm.overlay])
    assert (ran.state, ran.error) == ("complete", None)
    assert steps.Facts.parse(ran.output) == steps.Facts(
        tool="no-probe-tool", uid=steps.UID, cap_eff="0000000000000000", no_new_privs=0,
        pids_max=steps.LIMITS.pids, memory_bytes=steps.LIMITS.memory_mb * MIB,
        root_write="Read-only file system", tmp_kib=steps.TMP_MB * 1024, default_routes=0)
    stored = ran.service["Spec"]["TaskTemplate"]["ContainerSpec"]
    assert "NoNewPrivileges" not in (stored.get("Privileges") or {})
    assert ran.container.attrs["HostConfig"]["SecurityOpt"] is None
    assert ran.service["Spec"]["Mode"] == {"ReplicatedJob": {"MaxConcurrent": 1,
                                                             "TotalCompletions": 1}}
    record_property("seconds", {"a replicated job, create to complete": ran.seconds})


def test_network_none_is_not_a_swarm_network(swarm: Swarm) -> None:
    """A service cannot ask for `network none`: only swarm-scoped networks (and the
    predefined host/bridge ones) can be attached."""
    with pytest.raises(docker.errors.NotFound) as refused:
        run_job(swarm, "none", hardened(["true"], swarm.labels), ["none"])
    assert ("could not find the corresponding predefined swarm network: network none not "
            "found") in str(refused.value.explanation)


def test_a_service_with_no_network_gets_the_engine_s_default_bridge_and_its_route(
        swarm: Swarm) -> None:
    """No network is not no network: the task joins the engine's default bridge, with a
    default route (egress wherever the engine has it)."""
    ran = run_job(swarm, "nonet", hardened(["cat", "/proc/net/route"], swarm.labels))
    assert ran.state == "complete"
    assert list(ran.container.attrs["NetworkSettings"]["Networks"]) == ["bridge"]
    assert len(default_gateways(ran.output)) == 1


def test_services_on_an_internal_overlay_reach_each_other_by_name(
        swarm: Swarm, record_property: Any) -> None:
    """A server service and a job on the same internal overlay: by DNS round robin the job
    reaches the server by its service name. Through the service's virtual IP only where
    the kernel has IPVS (ip_vs): this machine's has not, and nothing answers there."""
    found = {}
    for mode, attempts in (("dnsrr", 20), ("vip", 2)):
        serve(swarm, f"web-{mode}", mode)
        ran = run_job(swarm, f"client-{mode}", hardened(["python3", "-c", CLIENT.format(
            url=f"http://web-{mode}:8000/", attempts=attempts)], swarm.labels),
            [swarm.overlay])
        assert ran.state in ("complete", "failed"), ran
        found[mode] = ran.output.strip()
        record_property(f"seconds ({mode})", ran.seconds)
    assert found["dnsrr"] == "200"
    if Path("/proc/net/ip_vs").exists():
        assert found["vip"] == "200"
    else:
        assert found["vip"].startswith("no answer: "), found


def serve(swarm: Swarm, name: str, endpoint_mode: str) -> None:
    """A hardened web server service (python's http.server as the sandbox user), waited
    for (bounded) until its task runs."""
    client = swarm.remote.client
    service = client.api.create_service(
        {"ContainerSpec": hardened(["python3", "-m", "http.server", "8000"], swarm.labels,
                                   Dir="/tmp"),
         "Networks": [{"Target": swarm.overlay}]},
        name=name, labels=swarm.labels, endpoint_spec={"Mode": endpoint_mode})["ID"]
    deadline = time.monotonic() + JOB_WAIT_S
    while time.monotonic() < deadline:
        states = [t["Status"]["State"] for t in client.api.tasks(filters={"service": service})]
        if states == ["running"]:
            return
        time.sleep(0.1)
    raise AssertionError(f"service {name} never ran: {states}")


# One line: the status, or "no answer: REASON" after `attempts` tries (5 s each at most).
CLIENT = """
import time, urllib.error, urllib.request
for attempt in range({attempts}):
    try:
        print(urllib.request.urlopen("{url}", timeout=5).status, flush=True)
        break
    except OSError as error:
        if attempt == {attempts} - 1:
            print("no answer:", getattr(error, "reason", error), flush=True)
        time.sleep(0.25)
"""


def test_an_image_missing_on_the_node_is_rejected_not_fetched(swarm: Swarm) -> None:
    """A service runs only images the node already has (or a registry serves): a local
    image on another node never travels."""
    ran = run_job(swarm, "missing", hardened(["true"], swarm.labels,
                                             Image="bakeoff/nowhere:latest"), [swarm.overlay])
    assert (ran.state, ran.error, ran.container) == (
        "rejected", "No such image: bakeoff/nowhere:latest", None)
