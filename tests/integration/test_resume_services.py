"""Resume restores the experiment's services (issue 31, item 2), on this machine's engine
with containers the test itself made: `docker stop` of the experiment's own labelled
Postgres, gateway and sandboxes (by id, from state.json) is what an engine restart
leaves (stopped, not removed; what lived on a tmpfs lost); `remove` of one is an engine
that lost it. The real daemon restarts are tests/integration/test_engine_outage.py's,
on the second engine.

One `up` for the first three (its proofs are the costly part), in order: a dispatch cut
by the stop (never scored, re-dispatched from the base), a `score` after a second stop
(every sample as a clean run grades it), containers removed that nothing needs any more
(said, and `run` finishes). The last has an `up` of its own: a removed sandbox an arm
still needs is refused, and the fix the refusal names works.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.containers import database
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.manifest import LoadedManifest, load_manifest
from runner.store import layout
from runner.store import state as state_mod
from runner.store.state import ExperimentState
from tests.integration.helpers import (
    JUDGE_PREFERS_A,
    JUDGED_MANIFEST,
    arms_toml,
    cleanup,
    cli,
    committed_repo,
    flat_record,
)

COMMIT = ("git add -A; GIT_AUTHOR_DATE=2026-01-01T00:00:00Z "
          "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z git commit -qm fix")
# A is slow (the stop cuts it while it sleeps); B, behind the gateway, is done at once.
# Each fails unless its scratch directories are writable and `db` (its Postgres) resolves:
# what a restored sandbox must give back.
PROBE = "touch /tmp/probe /var/tmp/probe && getent hosts db >/dev/null && "
SLOW_FIX = (f"echo started; sleep 15; {PROBE}sed -i 's/^VALUE = 1/VALUE = 2/' app.py; "
            f"{COMMIT}")
FIX = f"sed -i 's/^VALUE = 1/VALUE = 2/' app.py; {COMMIT}"
CHANGES = """
[[changes]]
id = "first"
brief = "brief.md"
protected = ["tests/test_app.py"]

[changes.success]
run = "pytest -q -p no:cacheprovider tests/test_app.py"
"""


def target(repo: Path, name: str, slow: str) -> Path:
    files = {"app.py": "VALUE = 1\n", "brief.md": "Make the test pass.\n",
             "tests/test_app.py": "from app import VALUE\n\n\ndef test_app():\n"
                                  "    assert VALUE == 2\n",
             "judge.py": JUDGE_PREFERS_A}
    arms = arms_toml([("A", "none", slow), ("B", "gateway", FIX)])
    return committed_repo(repo, files, JUDGED_MANIFEST.format(name=name, dispatch_timeout_s=120)
                          + CHANGES + arms)


class Lab:
    def __init__(self, engine: Engine, manifest: Path) -> None:
        self.engine, self.manifest = engine, manifest
        self.loaded: LoadedManifest = load_manifest(manifest)
        self.repo = manifest.parent
        self.directory = layout.experiment_dir(self.repo, self.loaded.manifest.experiment.name)

    @property
    def state(self) -> ExperimentState:
        found = state_mod.load(self.directory)
        assert found is not None and found.phase == "up"
        return found

    def ids(self) -> dict[str, str]:
        current = self.state
        assert current.db is not None and current.gateway is not None
        return {"postgres": current.db.container_id, "gateway": current.gateway.container_id,
                **{arm.arm: arm.container_id for arm in current.arms}}

    def stop(self, *which: str) -> None:
        """What an engine restart does to each: stopped, not removed."""
        ids = self.ids()
        for name in which:
            self.engine.client.containers.get(ids[name]).stop(timeout=10)
        assert {self.status(ids[n]) for n in which} == {"exited"}

    def status(self, container_id: str) -> str:
        return str(self.engine.client.containers.get(container_id).status)

    def arm_record(self, arm: str) -> dict[str, object]:
        found: dict[str, object] = json.loads(
            layout.arm_record(self.directory, "first", arm).read_text())
        return found

    def verdicts(self, arm: str) -> list[tuple[str, str | None, int, int]]:
        stage = layout.stage_dir(self.directory, "first")
        found = []
        for path in layout.sample_records(stage, arm, "success"):
            record = flat_record(path)
            counts = record.get("counts") or {}
            found.append((record["verdict"], record.get("reason"), counts.get("passed", -1),
                          counts.get("failed", -1)))
        return found


@pytest.fixture(scope="module")
def lab(engine: Engine, built_images: dict[str, BuiltImage],
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    name = f"rs-{secrets.token_hex(3)}"
    made = Lab(engine, target(tmp_path_factory.mktemp("resume") / "repo", name, SLOW_FIX))
    try:
        upped = cli(made.repo, "up", timeout=900)
        assert upped.returncode == 0, upped.stderr[-3000:]
        yield made
    finally:
        cleanup(engine, made.loaded)


def restored(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("restored: ")]


def test_a_dispatch_cut_by_the_outage_is_never_scored_and_is_redispatched_from_the_base(
        lab: Lab) -> None:
    """The sandbox stopped under A's agent (with the Postgres and the gateway, as a
    restart stops them) during `run`'s dispatch: A is a rig error, not the agent's
    failure, and `run` stops there (exit 3, run it again); `score` refuses it; the next
    `dispatch` restores every service and redoes A (attempt 2), never B."""
    running = subprocess.Popen([sys.executable, "-m", "runner.cli", "run"],
                               cwd=lab.repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    log = layout.arm_dir(lab.directory, "first", "A") / layout.DISPATCH_LOG
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and running.poll() is None and not (
            log.exists() and "started" in log.read_text()
            and layout.arm_record(lab.directory, "first", "B").exists()
            and lab.arm_record("B")["state"] == "finished"):
        time.sleep(0.1)
    assert running.poll() is None, running.communicate()
    lab.stop("A", "postgres", "gateway", "B")  # A first: its agent still asleep
    _, err = running.communicate(timeout=300)
    assert running.returncode == 3, err[-3000:]
    assert err.splitlines()[-2:] == [
        "error: first: the dispatch of arm A (attempt 1, rig_error: the sandbox stopped under "
        "the agent (it is exited): the engine at unix:///var/run/docker.sock ended it, not "
        "the agent) did not finish: not scored",
        "  fix: once the engine and the experiment's services answer (`docker info`), run "
        "the same command again: the experiment's services are restored and that arm is "
        "dispatched again from the base; an arm whose work is kept is not"]
    cut = lab.arm_record("A")
    assert (cut["state"], cut["attempt"], cut["commit"]) == ("rig_error", 1, None)
    assert str(cut["error"]).splitlines()[0] == (
        "the sandbox stopped under the agent (it is exited): the engine at "
        "unix:///var/run/docker.sock ended it, not the agent")
    kept_b = layout.arm_record(lab.directory, "first", "B").read_text()

    scored = cli(lab.repo, "score")
    assert scored.returncode == 3, scored.stderr
    assert scored.stderr.splitlines()[0] == (
        "error: first: the dispatch of arm A (attempt 1, rig_error: the sandbox stopped under "
        "the agent (it is exited): the engine at unix:///var/run/docker.sock ended it, not "
        "the agent) did not finish: not scored")

    again = cli(lab.repo, "dispatch", timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    base = lab.state.base_commit
    assert restored(again.stderr) == [
        "restored: the experiment's Postgres (made again: it was stopped; 2 arm "
        "databases re-made)",
        "restored: the model gateway (started; /healthz answers)",
        f"restored: arm A's sandbox (started; checkout made again at the base {base[:12]})",
        "restored: arm B's sandbox (started; its dispatch is done, its work kept)"]
    redone = lab.arm_record("A")
    assert (redone["state"], redone["attempt"], redone["exit_code"]) == ("finished", 2, 0)
    assert redone["interrupted_work"] == []  # the outage left no work: its checkout was a tmpfs
    assert layout.arm_record(lab.directory, "first", "B").read_text() == kept_b


def test_score_after_an_engine_restart_restores_the_postgres_and_grades_as_a_clean_run(
        lab: Lab) -> None:
    """Everything stopped again once dispatch is done: `score` starts it all, re-makes the
    arms' databases with their recorded passwords, and every sample is graded as a clean
    run grades it (each PASS, 1 passed)."""
    lab.stop("postgres", "gateway", "A", "B")
    nobody = subprocess.run([sys.executable, "-m", "runner.cli", "score"], cwd=lab.repo,
                            env={**os.environ, "DOCKER_HOST": "tcp://127.0.0.1:9"},
                            capture_output=True, text=True, timeout=120, check=False)
    assert nobody.returncode == 3, nobody.stderr  # no engine at all: one line, nothing done
    assert nobody.stderr.startswith("error: no Docker engine answers at tcp://127.0.0.1:9")
    assert len(nobody.stderr.splitlines()) == 2, nobody.stderr  # the line and its fix
    scored = cli(lab.repo, "score", timeout=900)
    assert scored.returncode == 0, scored.stderr[-3000:]
    assert restored(scored.stderr) == [
        "restored: the experiment's Postgres (made again: it was stopped; 2 arm "
        "databases re-made)",
        "restored: the model gateway (started; /healthz answers)",
        "restored: arm A's sandbox (started; its dispatch is done, its work kept)",
        "restored: arm B's sandbox (started; its dispatch is done, its work kept)"]
    for arm in ("A", "B"):
        assert lab.verdicts(arm) == [("PASS", None, 1, 0)] * 3, arm
    current = lab.state
    assert current.db is not None
    for box in current.arms:  # the role logs in with the password the sandbox was given
        assert box.schema_name and box.schema_password
        login = lab.engine.client.containers.get(current.db.container_id).exec_run(
            ["psql", "-X", "-A", "-t", "-h", "127.0.0.1", "-U", box.schema_name, "-d",
             box.schema_name, "-c", "SELECT current_user"], user=database.USER,
            environment={"PGPASSWORD": box.schema_password})
        output = login.output
        assert isinstance(output, bytes)
        assert (login.exit_code, output.decode().strip()) == (0, box.schema_name)
    again = cli(lab.repo, "score")
    assert again.returncode == 0 and restored(again.stderr) == []  # nothing to restore
    server = database.find_server(lab.engine, current.db.container_id)
    lost = str(current.arms[0].schema_name)
    database.drop_schema(database.Admin(lab.engine, server), lost)  # a running server lost one
    third = cli(lab.repo, "score")
    assert third.returncode == 0, third.stderr[-3000:]
    assert restored(third.stderr) == [
        "restored: the experiment's Postgres (running; 1 arm database re-made)"]
    assert lost in database.list_owned(database.Admin(lab.engine, server), lost)[0]


def observed(lab: Lab) -> list[tuple[str, bool, float, float]]:
    """Each arm of the round: valid, total, the success criterion's pass-rate."""
    (first,) = json.loads((lab.directory / "OBSERVATION.json").read_text())["rounds"]
    assert first["winner"] == "A"  # the judge's preference: both pass every sample
    return [(arm["arm"], arm["valid"], arm["total"], arm["results"]["success"]["pass_rate"])
            for arm in first["arms"]]


def test_a_lost_service_no_arm_still_needs_is_spared_and_run_finishes(lab: Lab) -> None:
    """Every arm dispatched, the Postgres and B's sandbox removed (a `docker system prune`
    after a restart): nothing still needs them, so `run` says so and finishes the change
    (score and merge on a server of their own), dispatching no arm again."""
    ids = lab.ids()
    for name in ("postgres", "B"):
        lab.engine.client.containers.get(ids[name]).remove(force=True, v=True)
    kept = {arm: layout.arm_record(lab.directory, "first", arm).read_text() for arm in "AB"}
    finished = cli(lab.repo, "run", timeout=900)
    assert finished.returncode == 0, finished.stderr[-3000:]
    spared = [f"gone: the experiment's Postgres (container {ids['postgres'][:12]}): nothing "
              "needs it any more (every arm that used it is dispatched, its work kept)",
              f"gone: arm B's sandbox (container {ids['B'][:12]}): nothing needs it any more "
              "(every arm that used it is dispatched, its work kept)"]
    assert [line for line in finished.stderr.splitlines()
            if line.startswith(("gone: ", "restored: "))] == spared * 2  # score, then merge
    assert {arm: layout.arm_record(lab.directory, "first", arm).read_text()
            for arm in "AB"} == kept  # neither dispatched again: A's attempt 2 stands
    assert observed(lab) == [("A", True, 40.0, 1.0), ("B", True, 35.0, 1.0)]


def test_a_lost_sandbox_an_arm_still_needs_is_refused_and_the_fix_it_names_works(
        engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path) -> None:
    """Right after `up` every arm still needs its sandbox: A's removed, `dispatch`
    refuses (exit 3, the exact line and fix); `down`, then `run`, as it says, finishes."""
    fresh = Lab(engine, target(tmp_path / "repo", f"rs-{secrets.token_hex(3)}", FIX))
    try:
        upped = cli(fresh.repo, "up", timeout=900)
        assert upped.returncode == 0, upped.stderr[-3000:]
        gone = fresh.ids()["A"]
        engine.client.containers.get(gone).remove(force=True, v=True)
        refused = cli(fresh.repo, "dispatch")
        assert refused.returncode == 3, refused.stderr
        manifest = fresh.repo / "bakeoff.toml"
        assert refused.stderr.splitlines()[-2:] == [
            f"error: the engine at unix:///var/run/docker.sock no longer has arm A's sandbox "
            f"(container {gone[:12]}): the experiment cannot resume on it",
            f"  fix: run `bakeoff-sandbox down -f {manifest}`, then `bakeoff-sandbox run -f "
            f"{manifest}` (an arm whose work is kept is not dispatched again)"]
        assert not layout.arm_dir(fresh.directory, "first", "A").exists()  # nothing started
        assert cli(fresh.repo, "down").returncode == 0
        finished = cli(fresh.repo, "run", timeout=900)
        assert finished.returncode == 0, finished.stderr[-3000:]
        assert observed(fresh) == [("A", True, 40.0, 1.0), ("B", True, 35.0, 1.0)]
    finally:
        cleanup(engine, fresh.loaded)
