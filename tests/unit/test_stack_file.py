"""A stack's compose file checked and rewritten (`runner.containers.stacks.file`): no docker.

The model is what `docker-compose config --format json` prints; the fixture is the real
binary's output for examples/cachey's file (tests/fixtures/compose/)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from runner.containers.stacks import SAMPLE_RESERVED, cap, health_of, project_name
from runner.containers.stacks import file as stack_file

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "compose" / "cachey.config.json"
MODEL: dict[str, Any] = json.loads(FIXTURE.read_text())["model"]
POLICY = stack_file.Policy(labels={"io.bakeoff.experiment": "x", "io.bakeoff.role": "stack"},
                           network="bakeoff-x-a-stack-1", cpus=1.0, memory_mb=512, pids=128,
                           disk_mb=64, inputs="bakeoff-x-r1-1a2b3c4d-inputs")
IDS = {"app": "sha256:aaa", "redis": "sha256:rrr"}


def with_redis(**keys: Any) -> dict[str, Any]:
    model = copy.deepcopy(MODEL)
    model["services"]["redis"].update(keys)
    return model


def test_the_cachey_example_is_accepted() -> None:
    assert stack_file.refusals(MODEL) == []
    assert stack_file.trees(MODEL) == {"app": "/work"}
    assert stack_file.images(MODEL) == {"app": "bakeoff/python", "redis": "bakeoff/redis"}


@pytest.mark.parametrize(("keys", "refusal"), [
    ({"ports": [{"target": 6379, "published": "6379"}]},
     "ports: publishes a port on the host (services are reached by name on the sample's "
     "network)"),
    ({"network_mode": "host"}, "network_mode: leaves the sample's network"),
    ({"privileged": True}, "privileged: asks for privileges"),
    ({"pid": "host"}, "pid: 'host' shares a namespace (only a private one)"),
    ({"ipc": "host"}, "ipc: 'host' shares a namespace (only a private one)"),
    ({"devices": [{"source": "/dev/kvm", "target": "/dev/kvm"}]}, "devices: maps host devices"),
    ({"cap_add": ["NET_ADMIN"]}, "cap_add: adds capabilities"),
    ({"security_opt": ["seccomp=unconfined"]}, "security_opt: changes the security options"),
    ({"volumes": [{"type": "bind", "source": "/etc", "target": "/host-etc"}]},
     "volumes: '/host-etc' is a bind mount (host files are never mounted; use a named volume)"),
    ({"build": {"context": "."}},
     "build: is built outside images/ (an image per project, with egress): add "
     "images/NAME/Dockerfile and write image: bakeoff/NAME"),
    ({"container_name": "redis"},
     "container_name: fixes a container name (two samples at once would collide)"),
    ({"use_api_socket": True}, "use_api_socket: mounts the engine's API socket"),
    ({"userns_mode": "host"}, "userns_mode: changes the user namespace"),
    ({"networks": {"default": None, "outside": None}},
     "networks: 'outside' (the stack's only network is the sample's)"),
    ({"labels": {"io.bakeoff.role": "gateway"}}, "labels: 'io.bakeoff.role' is the rig's"),
    ({"deploy": {"resources": {"limits": {"memory": "8g"}}}},
     "deploy.resources: the limits are [limits]'s"),
])
def test_each_refusal_names_the_service_and_the_key(keys: dict[str, Any], refusal: str) -> None:
    assert stack_file.refusals(with_redis(**keys)) == [f"service 'redis': {refusal}"]


def test_a_criterion_stack_service_named_or_aliased_db_is_refused() -> None:
    """With [database] the sample's own network has the Postgres as `db`: a service of that
    name (or alias) would make `db` resolve to either."""
    model = copy.deepcopy(MODEL)
    model["services"]["db"] = model["services"].pop("redis")
    assert stack_file.refusals(model, reserved=SAMPLE_RESERVED) == [
        "service 'db': its name 'db' is the rig's on the sample's network (rename it)"]
    aliased = with_redis(networks={"default": {"aliases": ["db"]}})
    assert stack_file.refusals(aliased, reserved=SAMPLE_RESERVED) == [
        "service 'redis': alias 'db' is the rig's on the sample's network (rename it)"]


def test_a_service_without_an_image_is_refused() -> None:
    model = copy.deepcopy(MODEL)
    del model["services"]["redis"]["image"]
    assert stack_file.refusals(model) == [
        "service 'redis': image: names none (a stack runs local images only)"]


def test_a_private_ipc_namespace_is_fine() -> None:
    assert stack_file.refusals(with_redis(ipc="private")) == []


@pytest.mark.parametrize(("extension", "refusal"), [
    (None, "x-bakeoff: names no service to run the arm's code (write x-bakeoff: {tree: "
           "{app: /work}})"),
    ({"tree": {"web": "/work"}}, "x-bakeoff: tree: service 'web' is not in the file"),
    ({"tree": {"app": "work"}},
     "x-bakeoff: tree: app: 'work' is not an absolute path outside /bakeoff"),
    ({"tree": {"app": "/bakeoff/in"}},
     "x-bakeoff: tree: app: '/bakeoff/in' is not an absolute path outside /bakeoff"),
    ({"tree": {}}, "x-bakeoff: tree: names no service"),
    ({"tree": {"app": "/work"}, "ports": True},
     "x-bakeoff: holds only tree: {SERVICE: PATH} (found {'tree': {'app': '/work'}, "
     "'ports': True})"),
])
def test_the_tree_extension_is_checked(extension: Any, refusal: str) -> None:
    model = copy.deepcopy(MODEL)
    model.pop("x-bakeoff")
    if extension is not None:
        model["x-bakeoff"] = extension
    assert stack_file.refusals(model) == [refusal]


def test_a_tree_service_states_its_command_and_no_user() -> None:
    model = copy.deepcopy(MODEL)
    model["services"]["app"].update(command=None, user="root")
    assert stack_file.refusals(model) == [
        "service 'app': command: a tree service must state the command that runs the "
        "arm's code",
        "service 'app': user: a tree service runs as the sandbox user (uid 1000)"]


@pytest.mark.parametrize(("top", "refusal"), [
    ({"networks": {"default": {}, "wide": {"driver": "bridge"}}},
     "networks: 'wide' (the stack's only network is the sample's)"),
    ({"volumes": {"data": {"external": True}}},
     "volumes: 'data' is external (each sample's are fresh)"),
    ({"volumes": {"data": {"driver_opts": {"type": "none", "o": "bind", "device": "/srv"}}}},
     "volumes: 'data' sets a driver or driver_opts"),
    ({"secrets": {"key": {"file": "/root/.ssh/id_rsa"}}}, "secrets: 'key' reads a host file"),
    ({"configs": {"conf": {"file": "./conf"}}}, "configs: 'conf' reads a host file"),
])
def test_top_level_refusals(top: dict[str, Any], refusal: str) -> None:
    model = {**copy.deepcopy(MODEL), **top}
    assert stack_file.refusals(model) == [refusal]


def test_render_lays_the_rigs_policy_over_a_plain_service() -> None:
    rendered = stack_file.render(MODEL, "bakeoff-x-1", IDS, POLICY)
    assert rendered["name"] == "bakeoff-x-1"
    assert rendered["networks"] == {"bakeoff": {"name": "bakeoff-x-a-stack-1",
                                                "external": True}}
    assert rendered["services"]["redis"] == {
        "command": None, "entrypoint": None,
        "healthcheck": MODEL["services"]["redis"]["healthcheck"],
        "image": "sha256:rrr", "pull_policy": "never", "restart": "no", "init": True,
        "labels": {"io.bakeoff.experiment": "x", "io.bakeoff.role": "stack"},
        "cap_drop": ["ALL"], "security_opt": ["no-new-privileges"], "cpus": 1.0,
        "mem_limit": "512m", "memswap_limit": "512m", "pids_limit": 128,
        "networks": {"bakeoff": {"aliases": ["redis"]}},
        "logging": {"driver": "json-file", "options": {"max-size": "8m", "max-file": "1"}}}


def test_render_gives_the_tree_service_the_tree_read_only_and_the_sandbox_user() -> None:
    app = stack_file.render(MODEL, "bakeoff-x-1", IDS, POLICY)["services"]["app"]
    assert {key: app[key] for key in ("user", "cap_add", "read_only", "entrypoint",
                                      "command", "working_dir", "tmpfs", "volumes",
                                      "environment", "image", "depends_on")} == {
        "user": "0:0", "cap_add": ["SETUID", "SETGID"], "read_only": True,
        "entrypoint": ["sh", "/bakeoff/in/stack-entry.sh", "/work"],
        "command": ["python3", "-m", "cachey.server"], "working_dir": "/work",
        "tmpfs": ["/work:size=64m,mode=0755", "/tmp:size=64m,mode=1777"],
        "volumes": [{"type": "volume", "source": "bakeoff-inputs", "target": "/bakeoff/in",
                     "read_only": True, "volume": {"nocopy": True}}],
        "environment": {"HOME": "/tmp", "PORT": "8000", "REDIS_HOST": "redis"},
        "image": "sha256:aaa",
        "depends_on": {"redis": {"condition": "service_healthy", "required": True}}}
    assert "setpriv --reuid=1000 --regid=1000 --clear-groups" in stack_file.STACK_ENTRY
    # The inputs are one of our volumes (the engine's), never a path of this machine.
    volumes = stack_file.render(MODEL, "bakeoff-x-1", IDS, POLICY)["volumes"]
    assert volumes["bakeoff-inputs"] == {"name": POLICY.inputs, "external": True}


def test_render_labels_named_volumes_and_leaves_the_model_alone() -> None:
    model = with_redis(volumes=[{"type": "volume", "source": "data", "target": "/data"}])
    model["volumes"] = {"data": {"name": "bakeoff-check_data", "labels": {"mine": "1"}}}
    before = copy.deepcopy(model)
    rendered = stack_file.render(model, "p", IDS, POLICY)
    assert rendered["volumes"] == {"data": {"labels": {"mine": "1", **POLICY.labels}},
                                   "bakeoff-inputs": {"name": POLICY.inputs, "external": True}}
    assert model == before


def test_project_names_are_compose_safe_ours_and_unique() -> None:
    first = project_name("Horizon", "ab12cd", "cap-horizon/C1/success/2")
    assert first.startswith("bakeoff-horizon-ab12cd-cap-horizon-c1-success-2-")
    assert first != project_name("Horizon", "ab12cd", "cap-horizon/C1/success/2")
    assert all(c.isalnum() or c in "-_" for c in first)


def test_the_services_log_is_capped_head_and_tail() -> None:
    text = "a" * 100 + "b" * 100
    assert cap(text, 200) == text
    assert cap(text, 40) == ("a" * 20 + "\n[bakeoff-rig: 160 characters of the services' "
                             "log left out]\n" + "b" * 20)


@pytest.mark.parametrize(("code", "stderr", "health"), [
    (0, " Container p-app-1  Healthy\n", "healthy"),
    (1, " Container p-redis-1  Error\ndependency failed to start: container p-redis-1 is "
        "unhealthy\n", "unhealthy"),
    (1, " Container p-job-1  Waiting\ncontainer p-job-1 exited (3)\n", "unhealthy"),
    (1, " Container p-app-1  Waiting\napplication not healthy after 3s\n", "unhealthy"),
    (1, 'Error response from daemon: failed to create shim task: OCI runtime create failed: '
        'exec: "nosuchcmd": executable file not found in $PATH: unknown\n', "failed"),
], ids=["healthy", "unhealthy", "exited", "wait-timeout", "engine-error"])
def test_up_wait_is_read_as_healthy_unhealthy_or_a_rig_failure(code: int, stderr: str,
                                                                health: str) -> None:
    """What docker-compose v2.40.3 `up --wait` printed in each case (captured here): only
    a service's health is the stack's; an engine error is the rig's (never an arm's FAIL)."""
    assert health_of(code, stderr) == health
