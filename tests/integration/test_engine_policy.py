"""The choke point against a real engine: what `Engine.create` asks for is what the
engine runs, and one-shot rig containers under docker's init keep their exit codes and
timeouts (issue 12 added init to rig jobs and image checks)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from runner.containers import sandbox
from runner.containers.backend import LABEL_EXPERIMENT, ContainerSpec, Labels, Resources, Tmpfs
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from tests.integration.helpers import created


@pytest.fixture
def experiment(engine: Engine) -> Iterator[str]:
    name = f"it-{secrets.token_hex(4)}"
    yield name
    engine.remove_labelled({LABEL_EXPERIMENT: name})
    assert engine.labelled("container", {LABEL_EXPERIMENT: name}) == []


def test_the_engine_runs_a_container_with_the_policy_the_spec_did_not_state(
        engine: Engine, built_images: dict[str, BuiltImage], experiment: str) -> None:
    spec = ContainerSpec(image=built_images["python"].image_id, command=("sleep", "30"),
                         labels=Labels(experiment, "policy-probe", "A", "r1"),
                         resources=Resources(0.5, 256, 32), user="1000:1000",
                         purpose="the policy probe", tmpfs=(Tmpfs("/tmp", 16),))
    container = created(engine, spec)
    container.reload()
    host = container.attrs["HostConfig"]
    assert {key: host[key] for key in ("CapDrop", "CapAdd", "SecurityOpt", "Init",
                                       "NanoCpus", "Memory", "MemorySwap", "PidsLimit",
                                       "NetworkMode", "Tmpfs")} == {
        "CapDrop": ["ALL"], "CapAdd": None, "SecurityOpt": ["no-new-privileges"],
        "Init": True, "NanoCpus": 500_000_000, "Memory": 256 * 1024 * 1024,
        "MemorySwap": 256 * 1024 * 1024, "PidsLimit": 32, "NetworkMode": "none",
        "Tmpfs": {"/tmp": "size=16m,exec,mode=1777"}}
    ours = {"io.bakeoff.experiment": experiment, "io.bakeoff.role": "policy-probe",
            "io.bakeoff.arm": "A", "io.bakeoff.run": "r1"}  # the image adds its own two
    assert {key: container.labels.get(key) for key in ours} == ours
    assert container.attrs["Config"]["User"] == "1000:1000"


def test_a_rig_job_under_init_keeps_its_exit_code_and_its_timeout(
        engine: Engine, built_images: dict[str, BuiltImage], experiment: str) -> None:
    """Pins the rig job's contract (checkout and bundler read it): the script's exit
    status comes through docker's init unchanged, and a job past its deadline is
    `timed_out` with `timeout`'s 124."""
    def job(script: str, timeout_s: float) -> sandbox.RigResult:
        return sandbox.run_job(engine, sandbox.RigJob(
            name=f"bakeoff-{experiment}-job-{secrets.token_hex(3)}",
            image_id=built_images["python"].image_id, labels=Labels(experiment, "rig-job"),
            command=["sh", "-c", script], mounts=[], env={}, tmp_mb=8, memory_mb=128,
            timeout_s=timeout_s))

    failed = job("echo broken >&2; exit 7", 30)
    assert (failed.exit_code, failed.timed_out, failed.stderr_tail) == (7, False, "broken")
    slow = job("sleep 30", 1)
    assert (slow.exit_code, slow.timed_out) == (124, True)
    assert engine.labelled("container", {LABEL_EXPERIMENT: experiment}) == []


def test_an_image_check_prints_its_stdout_only_as_the_sandbox_user(
        engine: Engine, built_images: dict[str, BuiltImage], experiment: str) -> None:
    out = sandbox.check_image(engine, built_images["python"].image_id,
                              ["sh", "-c", "id -u; echo noise >&2; cat /proc/1/comm"],
                              Labels(experiment, "tool-check"))
    assert out.split() == ["1000", "docker-init"]
    assert engine.labelled("container", {LABEL_EXPERIMENT: experiment}) == []
