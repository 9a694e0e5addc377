"""Every container is made by `Engine.create` from a typed spec, and the engine
applies the policy whatever the spec says (issue 12): cap_drop=ALL, no-new-privileges,
init, our labels, CPU/memory/pids limits with no swap. No docker needed: the translation
(`container_args`) is pure, and the rest is proved by reading the source."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from docker.models.containers import RUN_CREATE_KWARGS, RUN_HOST_CONFIG_KWARGS
from docker.types import Mount

from runner.containers import database, sandbox
from runner.containers.backend import (
    LABEL_ARM,
    LABEL_EXPERIMENT,
    LABEL_ROLE,
    LABEL_RUN,
    OWN_LOOPBACK,
    Bind,
    ContainerSpec,
    Labels,
    Resources,
    Tmpfs,
    Volume,
)
from runner.containers.dockerspec import container_args, state_of
from runner.containers.engine import Engine

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "runner" / "containers" / "engine.py"
BACKEND = ROOT / "runner" / "containers" / "backend.py"
LABELS = Labels("it-abc", "sample", "A", "r1")


def spec(**changes: object) -> ContainerSpec:
    base: dict[str, object] = dict(image="sha256:img", command=("true",), labels=LABELS,
                                   resources=Resources(1.5, 300, 64), user="1000:1000",
                                   purpose="a test container")
    base.update(changes)
    return ContainerSpec(**base)  # type: ignore[arg-type]


def sources() -> list[Path]:
    return sorted(p for d in ("runner", "rig") for p in (ROOT / d).rglob("*.py"))


def test_every_container_gets_the_hardening_the_labels_and_the_limits() -> None:
    args = container_args(spec())
    assert {k: args[k] for k in ("cap_drop", "security_opt", "init", "nano_cpus",
                                 "mem_limit", "memswap_limit", "pids_limit", "user",
                                 "network_mode", "read_only")} == {
        "cap_drop": ["ALL"], "security_opt": ["no-new-privileges"], "init": True,
        "nano_cpus": 1_500_000_000, "mem_limit": "300m", "memswap_limit": "300m",
        "pids_limit": 64, "user": "1000:1000", "network_mode": "none", "read_only": False}
    assert args["labels"] == {LABEL_EXPERIMENT: "it-abc", LABEL_ROLE: "sample",
                              LABEL_ARM: "A", LABEL_RUN: "r1"}
    assert "cap_add" not in args and "network" not in args


@pytest.mark.parametrize("labels", [Labels("", "sample"), Labels("it-abc", "")])
def test_a_spec_without_an_experiment_or_a_role_label_is_refused(labels: Labels) -> None:
    """Pins: an unlabelled container escapes `down` and `gc` (they remove by label only)."""
    with pytest.raises(ValueError, match=r"^refusing to create a test container without an "
                                         r"experiment and a role label"):
        container_args(spec(labels=labels))


def test_only_the_driver_capabilities_may_be_added_back() -> None:
    args = container_args(spec(cap_add=("CHOWN", "SETUID", "SETGID")))
    assert (args["cap_drop"], args["cap_add"]) == (["ALL"], ["CHOWN", "SETUID", "SETGID"])
    with pytest.raises(ValueError, match=r"capabilities \['NET_ADMIN', 'SYS_ADMIN'\] may "
                                         r"not be added"):
        container_args(spec(cap_add=("SYS_ADMIN", "CHOWN", "NET_ADMIN")))


def test_every_argument_the_choke_point_passes_is_one_containers_create_takes() -> None:
    """A keyword docker-py's `containers.create` does not know is a TypeError at the
    first create (`stdin_once` was one: docker-py sets StdinOnce itself for stdin_open)."""
    known = set(RUN_CREATE_KWARGS) | set(RUN_HOST_CONFIG_KWARGS)
    for variant in (spec(), spec(stdin=True), spec(tty=True), spec(log_max_mb=1,
                                                                   name="n", hostname="h")):
        assert set(container_args(variant)) - known == set()
    assert container_args(spec(stdin=True))["stdin_open"] is True
    assert "tty" not in container_args(spec(stdin=True))


def test_a_container_joins_a_namespace_or_has_a_network_never_both() -> None:
    assert container_args(spec(joins="abc123"))["network_mode"] == "container:abc123"
    joined = container_args(spec(network="bakeoff-net"))
    assert joined["network"] == "bakeoff-net" and "network_mode" not in joined
    with pytest.raises(ValueError, match="joins another's network namespace or has a network"):
        container_args(spec(joins="abc123", network="bakeoff-net"))


def test_a_container_that_resolves_only_its_networks_names_has_its_own_dns_server() -> None:
    """Its DNS server is its own loopback (the engine's DNS forwards there what it cannot
    answer: nothing outside the container); only with a network of its own (a joined one
    takes the namespace's, no network has none); every other container keeps the engine's."""
    own = container_args(spec(network="bakeoff-net", resolve_outside=False))
    assert own["dns"] == [OWN_LOOPBACK] == ["127.0.0.1"]
    for kept in (spec(network="bakeoff-net"), spec(resolve_outside=False),
                 spec(joins="abc123", resolve_outside=False)):
        assert "dns" not in container_args(kept)
    assert "dns" in RUN_HOST_CONFIG_KWARGS  # a keyword containers.create takes


def test_tmpfs_mounts_carry_their_size_mode_and_owner() -> None:
    assert Tmpfs("/tmp", 64).options() == "size=64m,exec,mode=1777"
    assert Tmpfs("/run", 256, "0700", executable=False).options() == "size=256m,mode=0700"
    assert Tmpfs("/home/agent", 8, "0755", owner=1000).options() == (
        "size=8m,exec,mode=0755,uid=1000,gid=1000")
    with pytest.raises(ValueError, match="two tmpfs mounts at one path"):
        container_args(spec(tmpfs=(Tmpfs("/tmp", 1), Tmpfs("/tmp", 2))))


def test_volumes_never_copy_the_image_content_and_binds_are_read_only_by_default(
        tmp_path: Path) -> None:
    args = container_args(spec(mounts=(Volume("vol", "/work"), Bind(tmp_path, "/in"))))
    assert args["mounts"] == [
        Mount("/work", "vol", type="volume", read_only=False, no_copy=True),
        Mount("/in", str(tmp_path.resolve()), type="bind", read_only=True)]


def test_the_sandbox_and_a_rig_job_are_what_they_were_before_the_choke_point() -> None:
    """The sandbox: root's idle keeper (it reaps: `sandbox.KEEPER`) on a read-only root
    filesystem, with no capability on docker; a rig job: the sandbox user under
    `timeout`, no network, a capped log."""
    box = container_args(sandbox.container_spec(sandbox.SandboxSpec(
        name="bakeoff-x-a-r1", image_id="sha256:img", labels=LABELS, checkout="work-vol",
        network="net", limits=sandbox.SandboxLimits(2, 1024, 100, 64), home=None)))
    assert (box["user"], box["read_only"], box["network"], box["command"], box["cap_drop"],
            "cap_add" in box) == (
        "0:0", True, "net", ["sh", "-c", "while :; do sleep infinity & wait; done"], ["ALL"],
        False)
    # An arm's database URL (its role's password): a Secret's on a cluster, its
    # environment here, as before.
    url = "postgresql://bk_x_a:pw@db:5432/bk_x_a"
    keyed = sandbox.container_spec(sandbox.SandboxSpec(
        name="bakeoff-x-a-r1", image_id="sha256:img", labels=LABELS, checkout="work-vol",
        network="net", env={"HOME": "/home/agent"}, secret_env={"DATABASE_URL": url}))
    assert (dict(keyed.env), dict(keyed.secret_env)) == ({"HOME": "/home/agent"},
                                                         {"DATABASE_URL": url})
    assert container_args(keyed)["environment"] == {"HOME": "/home/agent",
                                                    "DATABASE_URL": url}
    assert box["tmpfs"] == {"/tmp": "size=64m,exec,mode=1777",
                            "/var/tmp": "size=64m,exec,mode=1777",
                            "/home/agent": "size=64m,exec,mode=0755,uid=1000,gid=1000"}
    job = container_args(sandbox.RigJob(
        name="bakeoff-x-job", image_id="sha256:img", labels=LABELS, command=["sh", "-c", "x"],
        mounts=[], env={}, tmp_mb=32, memory_mb=600, timeout_s=300).container_spec())
    assert (job["user"], job["network_mode"], job["read_only"], job["command"][:4]) == (
        "1000:1000", "none", True, ["timeout", "-k", "5", "300"])
    assert (job["mem_limit"], job["memswap_limit"], job["pids_limit"], job["init"]) == (
        "600m", "600m", 256, True)
    assert job["log_config"]["Config"] == {"max-size": "1m", "max-file": "1"}


def test_no_container_network_or_volume_is_created_outside_the_engine() -> None:
    """The choke point is the only one: no `containers.create` / `containers.run`, no
    `networks.create` / `volumes.create`, no low-level `create_container` elsewhere."""
    pattern = re.compile(r"containers\.(create|run)\b|(networks|volumes)\.create\b|"
                         r"api\.create_(container|network|volume)\b")
    found = [f"{path.relative_to(ROOT)}:{n}" for path in sources() if path != ENGINE
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if pattern.search(line)]
    assert found == []
    assert pattern.search(ENGINE.read_text()) is not None  # the grep finds what it must


def test_postgres_is_a_container_of_ours_with_no_port_no_host_path_and_its_limits() -> None:
    """The experiment's Postgres goes through the choke point like every container (no
    testcontainers: it creates on its own environment's engine, never the Engine handed to
    it): no published port, no mount of this machine, the image's postgres user with no
    capability added back, memory = its data tmpfs + 2 GiB, pids = max_connections + 64."""
    assert not [path for path in sources()
                if re.search(r"(import|from) testcontainers|PostgresContainer\(", path.read_text())]
    policy = database.DbPolicy(connection_limit=5)
    args = container_args(database.server_spec("sha256:img", LABELS, "net", "pg", "pw",
                                               policy, databases=4, cpus=3))
    assert args["nano_cpus"] == 3 * 10**9  # the engine's CPUs, not this machine's
    assert "ports" not in args and args["mounts"] == []
    assert (args["user"], args["cap_drop"], "cap_add" in args, args["network"]) == (
        "postgres", ["ALL"], False, "net")
    assert args["tmpfs"] == {database.DATA: f"size={database.DATA_MB}m,mode=1777"}
    assert (args["mem_limit"], args["memswap_limit"], args["pids_limit"]) == (
        f"{database.DATA_MB + 2048}m", f"{database.DATA_MB + 2048}m", 4 * 5 + 10 + 64)
    assert args["labels"] == LABELS.as_dict()
    # The admin's password: the container's variable on docker (a Secret's on a cluster).
    assert args["environment"][database.PASSWORD_ENV] == "pw"
    assert database.policy_from(args["command"]) == policy
    with pytest.raises(ValueError, match=r"^refusing to create Postgres pg without an "):
        database.start_server(Engine(), "sha256:img", Labels("", "database"), "net", "pg")


def test_label_keys_are_spelled_only_in_the_engine_interface() -> None:
    """Pins: a label key spelled as a literal (`"io.bakeoff.run"`) drifts from the one
    the engine writes, and a removal by that key then matches nothing. The keys are the
    interface's (`backend.py`), which the engine re-exports."""
    found = [f"{path.relative_to(ROOT)}:{n}" for path in sources() if path != BACKEND
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if "io.bakeoff." in line]
    assert found == []


class RecordingEngine:
    """The part of `ContainerEngine` a one-shot container uses, each call recorded."""

    address = "unix:///fake.sock"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def create(self, spec: ContainerSpec) -> str:
        self.calls.append("create")
        return "c1"

    def start(self, container_id: str, stdin: object = None, *, what: str = "") -> None:
        self.calls.append("start")

    def put_archive(self, container_id: str, path: str, data: bytes) -> None:
        self.calls.append(f"put_archive {path} {data!r}")

    def wait(self, container_id: str, deadline_s: float) -> int | None:
        self.calls.append("wait")
        return 0

    def logs(self, container_id: str, *, stdout: bool = True, stderr: bool = False,
             tail: int | None = None) -> bytes:
        return b"out" if stdout else b""

    def remove(self, container_id: str) -> bool:
        self.calls.append("remove")
        return True


def test_an_archive_goes_into_the_container_once_it_runs_never_before() -> None:
    """A tmpfs volume holds what it is given only while a container holds it: put into a
    created container that has not started, the inputs vanish before it runs (seen on
    engine 20.10). So: start, then the archive, then the wait."""
    engine = RecordingEngine()
    done = sandbox.run_to_end(engine, spec(), 60, stdout=True,  # type: ignore[arg-type]
                              archive=sandbox.Archive("/bakeoff/in", b"tar"))
    assert engine.calls == ["create", "start", "put_archive /bakeoff/in b'tar'", "wait", "remove"]
    assert (done.exit_code, done.stdout) == (0, b"out")


def test_an_inspect_answer_is_a_typed_state_with_an_exit_code_only_once_exited() -> None:
    """`Engine.inspect` gives callers a `ContainerState`, never docker's dict."""
    answer = {"Id": "abc", "Name": "/bakeoff-x", "Image": "sha256:img",
              "State": {"Status": "exited", "ExitCode": 137, "OOMKilled": True},
              "Config": {"Labels": {LABEL_EXPERIMENT: "it-abc"}},
              "NetworkSettings": {"Networks": {"net": {"IPAddress": "10.0.0.2"}}}}
    state = state_of(answer)
    assert (state.id, state.name, state.status, state.exit_code, state.oom_killed) == (
        "abc", "bakeoff-x", "exited", 137, True)
    assert (dict(state.networks), dict(state.labels)) == ({"net": "10.0.0.2"},
                                                          {LABEL_EXPERIMENT: "it-abc"})
    running = state_of({**answer, "State": {"Status": "running", "ExitCode": 0}})
    assert (running.exit_code, running.oom_killed) == (None, False)


def test_a_secret_env_is_the_containers_environment_on_docker() -> None:
    """Docker has no Secret outside a swarm: the keys are the container's environment (its
    inspect shows them to whoever holds the engine, as before), a key of both the one
    given as secret."""
    args = container_args(spec(env={"HOME": "/tmp", "KEY": "plain"},
                               secret_env={"KEY": "sk-real", "OTHER_KEY": "sk-2"}))
    assert args["environment"] == {"HOME": "/tmp", "KEY": "sk-real", "OTHER_KEY": "sk-2"}
