"""Stacks under test (`[changes.success] stack`): a fresh compose project per sample
(examples/cachey: the service + Redis), on the sample's own internal network, with the
arm's tree in the service that runs the code; torn down after, and by `down` after a
SIGKILL. The real engine and the real Docker Compose v2 binary."""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rig.sample.oracle import grade
from runner.commands import reproduce
from runner.commands import up as up_mod
from runner.containers import stacks as stack
from runner.containers.backend import LABEL_EXPERIMENT
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.containers.sweep import KINDS
from runner.errors import StackRefusedError
from runner.manifest import load_manifest
from tests.integration.helpers import CORE, cleanup, cli, flat_record, git, make_target
from tests.integration.stack_lab import BROKEN_STACK, CACHEY, LAB_STACK, StackLab, stack_lab


@pytest.fixture
def lab(engine: Engine, built_images: dict[str, BuiltImage],
        tmp_path: Path) -> Iterator[StackLab]:
    with stack_lab(engine, built_images["python"], tmp_path) as found:
        yield found


def ours(engine: Engine, experiment: str) -> dict[str, list[str]]:
    """Everything of ours the engine still holds for `experiment`, by kind."""
    return {kind: sorted(item.name for item in engine.labelled(
        kind, {LABEL_EXPERIMENT: experiment})) for kind in KINDS}


def compose_projects(prefix: str) -> list[str]:
    ran = subprocess.run([str(stack.binary()), "ls", "--all", "--format", "json"],
                         capture_output=True, text=True, check=True,
                         env={**os.environ, "DOCKER_CONFIG": "/nonexistent"})
    return [p["Name"] for p in json.loads(ran.stdout or "[]")
            if p["Name"].startswith(prefix)]


def verdict(record: object) -> tuple[str, str | None]:
    return str(record.verdict), record.reason  # type: ignore[attr-defined]


def test_a_value_written_in_one_sample_is_absent_in_the_next(lab: StackLab,
                                                            engine: Engine) -> None:
    """Each sample gets its own app + Redis: sample 2 does not see sample 1's key, and
    when a sample ends nothing of its stack is left (containers, network, volume)."""
    spec = lab.spec(lab.stack(), "tests/test_fresh.py tests/test_probe.py")
    first = lab.run(spec)
    assert ours(engine, lab.experiment) == {"container": [], "network": [], "volume": []}
    second = lab.run(dataclasses.replace(spec, n=2))
    assert (verdict(first), verdict(second)) == (("PASS", None), ("PASS", None)), (
        first.detail, second.detail)
    assert first.stack is not None and second.stack is not None
    assert first.stack.project != second.stack.project
    assert set(first.stack.services) == {"app", "probe", "redis"}
    assert first.stack.health == "healthy"
    assert first.network != second.network
    # The services' log is kept beside the sample's, and never read as test output.
    assert "7 passed in 0.01s" in lab.log(spec, ".stack.log")
    assert "7 passed in 0.01s" not in lab.log(spec)
    assert compose_projects(f"bakeoff-{lab.experiment}") == []


def test_a_sample_with_a_database_and_a_stack_reaches_both(
        engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path) -> None:
    """With `[database]` too, the sample's own network has the Postgres attached (as
    `db`) beside its stack; it is detached and the network removed after."""
    with stack_lab(engine, built_images["python"], tmp_path, built_images["postgres"]) as lab:
        record = lab.run(lab.spec(lab.stack(), "tests/test_both.py"))
        assert verdict(record) == ("PASS", None), record.detail
        assert record.db_schema is not None
        assert [n for n in ours(engine, lab.experiment)["network"] if "-stack-" in n] == []


def test_a_recorded_stack_sample_re_runs_on_a_fresh_stack_from_its_record(
        lab: StackLab) -> None:
    """`reproduce`'s spec of a stack sample names the recorded compose file by path and
    hash and pins each service to its recorded image ID; run again, it gets a project of
    its own, the same images and the same verdict."""
    record = lab.run(lab.spec(lab.stack(), "tests/test_cache.py"))
    assert record.stack is not None
    again = reproduce.spec_of(record, None)
    fresh = lab.spec(lab.stack(), "x").stack
    assert again.stack is not None and fresh is not None
    assert (again.stack.file, again.stack.sha256) == (fresh.file, fresh.sha256)
    assert dict(again.stack.images) == record.stack.services
    execution = lab.executor.execute(again)
    assert execution.stack is not None
    assert execution.stack.project != record.stack.project
    assert execution.stack.services == record.stack.services
    assert (str(grade(again, execution).verdict), record.verdict) == ("FAIL", "FAIL")


def test_a_stack_sample_whose_recorded_image_is_gone_is_not_reproduced(
        lab: StackLab) -> None:
    """The exact stack or nothing: a service whose recorded image no longer exists is an
    infra error naming it (never pulled, never swapped for today's tag)."""
    record = lab.run(lab.spec(lab.stack(), "tests/test_cache.py"))
    assert record.stack is not None
    gone = "sha256:" + "0" * 64
    forged = record.model_copy(update={"stack": record.stack.model_copy(
        update={"services": {**record.stack.services, "redis": gone}})})
    execution = lab.executor.execute(reproduce.spec_of(forged, None))
    assert execution.infra_error is not None
    assert ("the recorded image of redis (sha256:000000000000) no longer exists and is never "
            "pulled") in execution.infra_error


def test_two_arms_samples_at_once_never_see_each_others_services(lab: StackLab) -> None:
    """Two samples at once, both naming `redis`: each reaches its own only."""
    stack_spec = lab.stack()
    specs = [lab.spec(stack_spec, "tests/test_apart.py", arm=arm) for arm in ("A", "B")]
    with ThreadPoolExecutor(max_workers=2) as pool:
        records = list(pool.map(lab.run, specs))
    assert [verdict(r) for r in records] == [("PASS", None)] * 2, [r.detail for r in records]
    assert records[0].network != records[1].network


def test_a_stack_the_arms_code_breaks_is_fail_server_unhealthy(lab: StackLab) -> None:
    """The arm's app talks to the wrong Redis port, so its health check never passes:
    FAIL server_unhealthy for the arm (the base's stack in the same image is healthy),
    and no criterion runs."""
    # 16 retries of 250 ms (4 s) instead of 40: the base's stack still has time to get
    # healthy, and the arm's is declared unhealthy 6 s sooner.
    stack_spec = lab.stack(LAB_STACK.replace("retries: 40", "retries: 16"), "quick.yml",
                           timeout_s=30)
    broken = lab.commit("cachey/store.py", '"6379"', '"6390"')
    record = lab.run(lab.spec(stack_spec, "tests/test_cache.py", commit=broken),
                     diagnose=True)
    assert verdict(record) == ("FAIL", "server_unhealthy"), record.detail
    assert record.stack is not None and record.stack.health == "unhealthy"
    assert "the arm's code broke it" in record.detail
    assert record.diagnosis is not None and record.diagnosis["base_verdict"] == "FAIL"
    assert record.exit_code is None


def test_a_stack_broken_for_the_base_too_is_rig_error(lab: StackLab) -> None:
    """Redis's health check can never pass (the rig's compose file is wrong): the base's
    own sample is RIG_ERROR infra, and so is an arm's, by the differential rule."""
    broken = lab.stack(BROKEN_STACK, "broken.yml", timeout_s=20)
    base = lab.run(lab.spec(broken, "tests/test_cache.py", arm="baseline"))
    assert verdict(base) == ("RIG_ERROR", "infra"), base.detail
    assert "the base's own stack" in base.detail
    fixed = lab.commit("cachey/server.py", 'f"price:{item}"', 'f"price:{item}:{currency}"')
    arm = lab.run(lab.spec(broken, "tests/test_cache.py", commit=fixed), diagnose=True)
    assert verdict(arm) == ("RIG_ERROR", "infra"), arm.detail
    assert "the base's stack fails the same way" in arm.detail


STACK_MANIFEST = """
[changes.success]
run = "pytest -q -p no:cacheprovider tests/test_app.py"
parser = "pytest"
stack = "compose/stack.yml"
stack_timeout_s = 30
"""
SLEEPING = """services:
  app:
    image: bakeoff/python
    command: ["python3", "-c", "import time; time.sleep(600)"]
  cache:
    image: {cache}
    volumes:
      - data:/data
volumes:
  data: {{}}
x-bakeoff:
  tree:
    app: /work
"""


def stack_target(root: Path, cache_image: str) -> Path:
    """make_target's repo and manifest, its success criterion with a stack."""
    manifest = make_target(root, ["A", "B"], database=False)
    text = manifest.read_text().replace(
        '\n[changes.success]\nrun = "pytest -q -p no:cacheprovider tests/test_app.py"\n'
        'parser = "pytest"\n', STACK_MANIFEST)
    manifest.write_text(text)
    (root / "compose").mkdir()
    (root / "compose" / "stack.yml").write_text(SLEEPING.format(cache=cache_image))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "a stack")
    return manifest


def test_a_stack_image_that_is_not_local_is_refused_at_up_naming_the_service(
        engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path) -> None:
    """`image: nosuch/redis:7` would be pulled: `up` refuses it (exit 2) before it makes
    anything, naming the service."""
    loaded = load_manifest(stack_target(tmp_path / "repo", "nosuch/redis:7"))
    try:
        with pytest.raises(StackRefusedError) as refused:
            up_mod.up(engine, loaded, options=CORE)
        assert refused.value.exit_code == 2
        assert refused.value.refusals == (
            "service 'cache': image 'nosuch/redis:7' is not local and would be pulled "
            "(nothing is ever pulled: build it, or name an image of images/)",)
        assert ours(engine, loaded.manifest.experiment.name) == {
            "container": [], "network": [], "volume": []}
    finally:
        cleanup(engine, loaded)


def test_sigkill_mid_sample_then_down_leaves_no_stack(
        engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path) -> None:
    """`oracle` killed with SIGKILL while its sample's stack runs: its containers,
    network and volume are there; `down` removes every one, and no compose project of
    the experiment is left."""
    root = tmp_path / "repo"
    manifest = stack_target(root, "bakeoff/redis")
    (root / "tests" / "test_app.py").write_text("import time\n\n\ndef test_app():\n"
                                                "    time.sleep(120)\n")
    git(root, "commit", "-qam", "a slow criterion")
    loaded = load_manifest(manifest)
    name = loaded.manifest.experiment.name
    process = subprocess.Popen([sys.executable, "-m", "runner.cli", "oracle", "--commit",
                                "HEAD", "--check", "success", "--samples", "1"], cwd=root,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            roles = {c.labels.get("io.bakeoff.role") for c in engine.labelled(
                "container", {LABEL_EXPERIMENT: name}) if c.status == "running"}
            if {"stack", "sample"} <= roles:
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"the sample and its stack never ran together: {ours(engine, name)}")
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        left = ours(engine, name)
        # The stack's own data volume and the volume of the sample's inputs (its tree
        # services read them from the engine, never from this machine).
        assert len(left["container"]) >= 3 and len(left["volume"]) == 2, left
        assert sum(v.endswith("-inputs") for v in left["volume"]) == 1, left
        assert compose_projects(f"bakeoff-{name}") != []
        done = cli(root, "down")
        assert done.returncode == 0, done.stderr
        assert ours(engine, name) == {"container": [], "network": [], "volume": []}
        assert compose_projects(f"bakeoff-{name}") == []
    finally:
        if process.poll() is None:
            process.kill()
        cleanup(engine, loaded)


def test_the_cachey_example_stack_is_accepted_as_it_is(engine: Engine,
                                                       built_images: dict[str, BuiltImage]
                                                       ) -> None:
    """examples/cachey's compose file passes `up`'s check: two services, local images."""
    path = CACHEY / "compose" / "cachey.yml"
    found = stack.check(engine, path.read_bytes(), str(path))
    assert sorted(found) == ["app", "redis"]
    assert found["app"].image_id == built_images["python"].image_id



def test_the_cachey_example_end_to_end(engine: Engine, built_images: dict[str, BuiltImage],
                                       tmp_path: Path) -> None:
    """examples/cachey through `run` (up with its proofs, dispatch, score, merge, down):
    the base fails on a healthy stack, the fixer passes, the control fails its tests and
    the breaker, whose code never reaches its Redis, is FAIL server_unhealthy; every
    sample had its own project; a graft that breaks the stack is dropped; nothing of the
    experiment is left."""
    example = tmp_path / "cachey"
    shutil.copytree(CACHEY, example)
    name = f"it-{secrets.token_hex(3)}"
    manifest = example / "bakeoff.toml"
    # One sample per check: this test is about the verdicts and the graft (freshness per
    # sample is test_a_value_written_in_one_sample_is_absent_in_the_next's); each of the
    # breaker's never-healthy samples costs the stack's 10 s of health retries.
    manifest.write_text(manifest.read_text().replace('name = "cachey"', f'name = "{name}"')
                        .replace("samples = 3", "samples = 1\nallow_fewer_samples = true"))
    repo = example / "repo"
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "cachey: base")
    loaded = load_manifest(manifest)
    try:
        done = cli(example, "run", "-f", str(manifest), timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        stage = repo / ".bakeoff" / name / "stages" / "currency-cache"
        found = {arm: sorted((str(r["verdict"]), r["reason"], r["stack"]["health"])
                             for r in map(flat_record, (
                                 stage / "samples" / arm / "success").glob("*.json")))
                 for arm in ("control", "fixer", "breaker")}
        assert found == {
            "control": [("FAIL", "tests_failed", "healthy")],
            "fixer": [("PASS", None, "healthy")],
            "breaker": [("FAIL", "server_unhealthy", "unhealthy")]}
        projects = {flat_record(p)["stack"]["project"]
                    for p in stage.glob("samples/*/success/*.json")}
        assert len(projects) == 3
        # The breaker's store.py, grafted onto the fixer's, is re-verified on the stack too:
        # the merged service never reaches its Redis, so the graft is dropped (its success
        # tests never ran: by id, both are gone).
        merged = json.loads((stage / "merge.json").read_text())
        assert [(g["from"], g["kept"], g["why"]) for g in merged["grafts"]] == [
            ("breaker", False, "regressed: success 1.00 -> 0.00; lost by id: success: 2 of 2 "
             "test(s) that passed before did not pass after: tests/test_cache.py::"
             "test_a_repeated_request_is_served_from_the_cache (absent), tests/test_cache.py::"
             "test_each_currency_gets_its_own_price (absent); lost by count: success: 2 "
             "test(s) passed in every sample before, 0 in a sample after")]
        assert ours(engine, name) == {"container": [], "network": [], "volume": []}
    finally:
        cleanup(engine, loaded)
