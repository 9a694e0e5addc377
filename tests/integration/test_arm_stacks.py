"""Each arm's own stack during dispatch (`[toolchain] stack`): one compose project per arm
on the arm's network, made healthy at `up`, its tree service on the arm's live checkout
(read-only), reached by name from the arm's sandbox and from no other arm's; `down`
keeps its log and leaves nothing. The real engine and the real Docker Compose v2 binary.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from runner.commands import down as down_mod
from runner.commands import up as up_mod
from runner.commands.dispatch.record import load_record, record_dir
from runner.commands.dispatch.run import dispatch
from runner.containers import sandbox
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.containers.stacks import arm as arm_stack
from runner.errors import ArmStackError, StackRefusedError
from runner.manifest import LoadedManifest, load_manifest
from runner.store import layout
from runner.store import state as state_mod
from runner.store.state import ArmSandbox, ExperimentState
from tests.integration.helpers import CORE, cleanup, git, make_target
from tests.integration.test_stacks import compose_projects, ours

# The arm's service serves its checkout as it is now (python's http.server in /work);
# a Redis beside it. Both reached by name on the arm's network.
DEV_STACK = """services:
  app:
    image: bakeoff/python
    command: ["python3", "-m", "http.server", "8000", "--bind", "0.0.0.0"]
    healthcheck:
      test: ["CMD", "python3", "-c",
             "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/app.py', timeout=2)"]
      interval: 250ms
      retries: 80
  redis:
    image: bakeoff/redis
    healthcheck:
      test: ["CMD", "redis-cli", "ping"]
      interval: 250ms
      retries: 80
x-bakeoff:
  tree:
    app: /work
"""
# The rig's own mistake: a health check that can never pass, whatever the base's code.
BROKEN_STACK = """services:
  redis:
    image: bakeoff/redis
    healthcheck:
      test: ["CMD", "redis-cli", "-p", "6390", "ping"]
      interval: 250ms
      retries: 8
"""
# A few lines of RESP over a socket: the sandbox's image has python, not redis-cli.
REDIS = """import socket, sys
host, *args = sys.argv[1:]
with socket.create_connection((host, 6379), timeout=3) as s:
    s.sendall(("*%d\\r\\n" % len(args) + "".join(
        "$%d\\r\\n%s\\r\\n" % (len(a), a) for a in args)).encode())
    print([line for line in s.recv(4096).decode().split("\\r\\n") if line])
"""
LOOKUP = """import socket, sys
try:
    socket.create_connection((sys.argv[1], 6379), timeout=3).close()
    print("reached")
except OSError as error:
    print(type(error).__name__)
"""
FETCH = ("import sys, urllib.request as u; "
         "print(u.urlopen(sys.argv[1], timeout=5).read().decode().strip())")


def stacked(root: Path, text: str = DEV_STACK, timeout_s: int = 40) -> LoadedManifest:
    """make_target's two arms (A, B) without a database, with `[toolchain] stack`."""
    manifest = make_target(root, ["A", "B"], database=False)
    manifest.write_text(manifest.read_text().replace(
        'requires = ["python3", "pytest", "git"]\n',
        'requires = ["python3", "pytest", "git"]\nstack = "compose/dev.yml"\n'
        f"stack_timeout_s = {timeout_s}\n"))
    (root / "compose").mkdir()
    (root / "compose" / "dev.yml").write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "an arm stack")
    return load_manifest(manifest)


def python(engine: Engine, arm: ArmSandbox, script: str, *args: str) -> str:
    done = sandbox.exec_in(engine, arm.container_id, ["python3", "-c", script, *args],
                           timeout_s=30)
    assert done.exit_code == 0, done.stderr
    return done.stdout.strip()


def container_of(engine: Engine, current: ExperimentState, arm: str, service: str) -> Any:
    project = arm_stack.project_name(current.experiment, arm, current.run)
    return engine.client.containers.get(f"{project}-{service}-1")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "repo"


def test_an_arm_reaches_its_own_stack_by_name_and_no_other_arm_does(
        engine: Engine, built_images: dict[str, BuiltImage], root: Path) -> None:
    """A writes a value into its Redis by name and reads it back; B's `redis` is B's own
    (the value is absent there), and B can neither resolve A's Redis by its container
    name nor reach its address. A's app serves A's checkout live (a file A writes is
    served at once) and cannot write it. The stack is recorded in the state and in
    arm.json; `gc` leaves a live run's stacks alone; after `down` their logs are kept at
    each arm's directory and nothing with the experiment's labels, nor a compose
    project, is left."""
    loaded = stacked(root)
    name = loaded.manifest.experiment.name
    try:
        current = up_mod.up(engine, loaded, options=CORE)
        a, b = current.arms
        assert python(engine, a, REDIS, "redis", "SET", "marker", "A-was-here") == "['+OK']"
        assert python(engine, a, REDIS, "redis", "GET", "marker") == "['$10', 'A-was-here']"
        assert python(engine, b, REDIS, "redis", "GET", "marker") == "['$-1']"
        theirs = container_of(engine, current, "A", "redis")
        address = theirs.attrs["NetworkSettings"]["Networks"][a.network]["IPAddress"]
        assert python(engine, b, LOOKUP, theirs.name) == "gaierror"
        assert python(engine, b, LOOKUP, address) in ("TimeoutError", "OSError")
        assert python(engine, a, LOOKUP, address) == "reached"

        # The live checkout: what A writes is served at once; the service cannot write it.
        sandbox.exec_in(engine, a.container_id, "echo live-edit > /work/live.txt",
                        timeout_s=10)
        assert python(engine, a, FETCH, "http://app:8000/live.txt") == "live-edit"
        app = container_of(engine, current, "A", "app")
        wrote = app.exec_run(["sh", "-c", "touch /work/x"])
        assert wrote.exit_code != 0 and b"Read-only file system" in wrote.output
        assert app.attrs["Config"]["User"] == "1000:1000"

        sha = hashlib.sha256((root / "compose" / "dev.yml").read_bytes()).hexdigest()
        recorded = state_mod.load(layout.experiment_dir(root, name))
        assert recorded is not None
        stack = recorded.arms[0].stack
        assert stack is not None
        assert (stack.file, stack.sha256, stack.project, stack.health, sorted(stack.services)) == (
            str(root / "compose" / "dev.yml"), sha,
            arm_stack.project_name(name, "A", current.run), "healthy", ["app", "redis"])
        assert stack.services["app"] == built_images["python"].image_id
        report = dispatch(engine, loaded, environ={})
        assert [o.record.stack for o in report.outcomes] == [arm.stack for arm in recorded.arms]
        record = load_record(record_dir(layout.experiment_dir(root, name), "first", "A")
                             / "arm.json")
        assert record is not None and record.stack == stack

        down_mod.gc(engine, loaded)
        assert python(engine, a, REDIS, "redis", "GET", "marker") == "['$10', 'A-was-here']"
        down_mod.down(engine, loaded)
        assert ours(engine, name) == {"container": [], "network": [], "volume": []}
        assert compose_projects(f"bakeoff-{name}") == []
        for arm in ("A", "B"):
            log = layout.arm_stack_log(layout.arm_dir(layout.experiment_dir(root, name),
                                                      "first", arm))
            assert "Ready to accept connections" in log.read_text()
    finally:
        cleanup(engine, loaded)


def test_an_arm_stack_never_healthy_fails_up_naming_the_service_and_leaves_nothing(
        engine: Engine, built_images: dict[str, BuiltImage], root: Path) -> None:
    """Redis's health check can never pass (the rig's file is wrong): `up` fails with
    exit 3 naming the service, keeps its log at the arm's directory, and leaves no
    container, network, volume or compose project, nor a state that says up."""
    loaded = stacked(root, BROKEN_STACK, timeout_s=20)
    name = loaded.manifest.experiment.name
    try:
        with pytest.raises(ArmStackError) as failed:
            up_mod.up(engine, loaded, options=CORE)
        assert failed.value.exit_code == 3
        assert (failed.value.arm, failed.value.services) == ("A", ("service 'redis': unhealthy",))
        assert ours(engine, name) == {"container": [], "network": [], "volume": []}
        assert compose_projects(f"bakeoff-{name}") == []
        assert state_mod.load(layout.experiment_dir(root, name)) is None
        assert failed.value.log.is_file()
    finally:
        cleanup(engine, loaded)


def test_an_arm_stack_service_named_db_is_refused_at_up_before_anything_is_made(
        engine: Engine, built_images: dict[str, BuiltImage], root: Path) -> None:
    """`db` is the arm's Postgres on its network: a service of that name is refused at
    `up` (exit 2), named, and nothing is made."""
    loaded = stacked(root, DEV_STACK.replace("  redis:\n", "  db:\n"))
    try:
        with pytest.raises(StackRefusedError) as refused:
            up_mod.up(engine, loaded, options=CORE)
        assert refused.value.exit_code == 2
        assert refused.value.refusals == (
            "service 'db': its name 'db' is the rig's on the arm's network (rename it)",)
        assert ours(engine, loaded.manifest.experiment.name) == {
            "container": [], "network": [], "volume": []}
    finally:
        cleanup(engine, loaded)
