"""An arm's own stack during dispatch (`[toolchain] stack`), checked and rendered without
docker: what `stack_file.arm_refusals` adds for the arm's network, the live checkout in
the tree services, the project's name, and the error `up` raises when it never gets
healthy. The model is the real binary's output for examples/cachey's file."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from runner.containers.stacks import arm as arm_stack
from runner.containers.stacks import file as stack_file
from runner.errors import ArmStackError
from runner.store import layout
from tests.unit.test_stack_file import IDS, MODEL

POLICY = stack_file.Policy(
    labels={"io.bakeoff.experiment": "x", "io.bakeoff.role": "arm-stack",
            "io.bakeoff.arm": "A"},
    network="bakeoff-x-A-ab12cd", cpus=1.0, memory_mb=512, pids=128, disk_mb=64,
    checkout="bakeoff-x-a-ab12cd-work", restart="on-failure")


def test_the_cachey_example_is_accepted_as_an_arm_stack() -> None:
    assert stack_file.arm_refusals(MODEL, arm_stack.RESERVED) == []


def test_an_arm_stack_may_run_no_tree_service() -> None:
    """A Redis the arm's sandbox uses is a stack too (a sample's stack needs a tree
    service: its criterion scores the code there)."""
    model = copy.deepcopy(MODEL)
    model.pop("x-bakeoff")
    del model["services"]["app"]
    assert stack_file.arm_refusals(model, arm_stack.RESERVED) == []
    assert stack_file.refusals(model)[0].startswith("x-bakeoff: names no service")


@pytest.mark.parametrize(("name", "aliases", "refusal"), [
    ("db", [], "service 'db': its name 'db' is the rig's on the arm's network (rename it)"),
    ("model-gateway", [], "service 'model-gateway': its name 'model-gateway' is the rig's "
                          "on the arm's network (rename it)"),
    ("cache", ["db"], "service 'cache': alias 'db' is the rig's on the arm's network "
                      "(rename it)"),
])
def test_a_service_named_like_the_rigs_aliases_on_the_arm_network_is_refused(
        name: str, aliases: list[str], refusal: str) -> None:
    """`db` (the arm's Postgres) and `model-gateway` are on every arm network they serve:
    a service of the same name would make the sandbox's name lookups ambiguous."""
    model = copy.deepcopy(MODEL)
    service = model["services"].pop("redis")
    if aliases:
        service["networks"] = {"default": {"aliases": aliases}}
    model["services"][name] = service
    assert stack_file.arm_refusals(model, arm_stack.RESERVED) == [refusal]


def test_a_volume_under_the_key_of_the_arms_checkout_is_refused() -> None:
    model = {**copy.deepcopy(MODEL), "volumes": {"bakeoff-checkout": {}}}
    assert stack_file.arm_refusals(model, arm_stack.RESERVED) == [
        "volumes: 'bakeoff-checkout' is the rig's (the arm's checkout)"]


def test_an_arm_stacks_tree_service_runs_the_live_checkout_read_only() -> None:
    """The arm's checkout volume (the one its sandbox holds) at the tree path, read-only,
    the code run as the sandbox user: no root entry, no capability added back."""
    rendered = stack_file.render(MODEL, "bakeoff-x-a-ab12cd-stack", IDS, POLICY)
    app = rendered["services"]["app"]
    assert {key: app.get(key) for key in ("user", "cap_add", "cap_drop", "read_only",
                                          "entrypoint", "command", "working_dir", "tmpfs",
                                          "volumes", "environment", "restart")} == {
        "user": "1000:1000", "cap_add": None, "cap_drop": ["ALL"], "read_only": True,
        "entrypoint": None, "command": ["python3", "-m", "cachey.server"],
        "working_dir": "/work", "tmpfs": ["/tmp:size=64m,mode=1777"],
        "volumes": [{"type": "volume", "source": "bakeoff-checkout", "target": "/work",
                     "read_only": True, "volume": {"nocopy": True}}],
        "environment": {"HOME": "/tmp", "PORT": "8000", "REDIS_HOST": "redis"},
        "restart": "on-failure"}
    assert rendered["volumes"] == {"bakeoff-checkout": {"name": "bakeoff-x-a-ab12cd-work",
                                                        "external": True}}
    assert rendered["networks"] == {"bakeoff": {"name": "bakeoff-x-A-ab12cd",
                                                "external": True}}
    assert rendered["services"]["redis"]["labels"] == POLICY.labels


def test_an_arm_stack_project_is_named_by_experiment_arm_and_run() -> None:
    assert arm_stack.project_name("Horizon", "C1", "ab12cd") == (
        "bakeoff-horizon-c1-ab12cd-stack")


def test_an_arm_stack_never_healthy_at_up_names_the_services_and_the_log() -> None:
    error = ArmStackError("A", "/r/compose/dev.yml", ["service 'redis': unhealthy"],
                          "dependency failed to start", Path("/r/arms/A/stack.log"))
    assert error.exit_code == 3
    assert error.services == ("service 'redis': unhealthy",)
    assert str(error) == (
        "arm A: its stack /r/compose/dev.yml never got healthy at `up`: service 'redis': "
        "unhealthy (compose: dependency failed to start)\n  fix: it runs the base's code: "
        "fix /r/compose/dev.yml or the base, then `up` again (its services' log: "
        "/r/arms/A/stack.log)")


def test_an_arm_stacks_log_has_its_place_in_the_arms_directory(tmp_path: Path) -> None:
    folder = layout.arm_dir(tmp_path, "first", "A")
    assert layout.arm_stack_log(folder) == folder / "stack.log"

