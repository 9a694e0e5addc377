"""Dispatch of the bundled example's scripted agents (examples/horizon/dispatch.toml).

Real docker, real git, real Postgres. Two experiments, each a copy of the example with
its own `up` (about 4 s each), forever's dispatch_timeout_s lowered to 8 s:

- `full`: a dispatch without the leaky arm's secret is refused before anything starts;
  then every arm at once (measured); then again (everything skipped).
- `resumed`: `dispatch` in a subprocess, SIGKILLed once the five quick arms have finished
  and forever is half way; then `dispatch` again: only forever runs, redone from the base.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from runner.commands import demo
from runner.commands import up as up_mod
from runner.commands.dispatch.brief import BRIEF_PATH, GUARDRAILS, compose_brief
from runner.commands.dispatch.process import leftovers
from runner.commands.dispatch.record import (
    ArmRecord,
    ArmState,
    interrupted_branch,
    load_record,
    record_dir,
)
from runner.commands.dispatch.run import DispatchReport, SecretMissingError, dispatch
from runner.containers import sandbox
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.manifest import LoadedManifest, load_manifest
from runner.store import state as state_mod
from runner.store.layout import experiment_dir
from tests.integration.helpers import cleanup, git

SECRET = f"sk-ant-bakeoff-{secrets.token_hex(12)}"
WITH_SECRET = {"ANTHROPIC_API_KEY": SECRET}
TIMEOUT_S = 8
QUICK = ("control", "fixer", "no-commit", "leaky", "probe")
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Experiment:
    loaded: LoadedManifest

    def arm_dir(self, arm: str) -> Path:
        directory = experiment_dir(self.loaded.repo_path, self.loaded.manifest.experiment.name)
        return record_dir(directory, "cap-horizon", arm)

    def record(self, arm: str) -> ArmRecord:
        found = load_record(self.arm_dir(arm) / "arm.json")
        assert found is not None, f"no record for {arm}"
        return found

    def container(self, arm: str) -> str:
        _, current = state_mod.require_up(self.loaded)
        found = current.arm(arm)
        assert found is not None
        return found.container_id

    def branch(self, arm: str) -> str:
        return f"bakeoff-arms/{self.loaded.manifest.experiment.name}/cap-horizon/{arm}"

    def show(self, ref: str, path: str) -> str:
        return git(self.loaded.repo_path, "show", f"{ref}:{path}")


@dataclass(frozen=True)
class Full(Experiment):
    refused: SecretMissingError
    records_after_refusal: list[Path]
    report: DispatchReport
    wall_s: float
    again: DispatchReport


@dataclass(frozen=True)
class Resumed(Experiment):
    killed: dict[str, str]             # arm.json text of every arm right after the SIGKILL
    killed_log_mtimes: dict[str, float]
    report: DispatchReport


def _up(engine: Engine, root: Path) -> LoadedManifest:
    demo.prepare(root)
    manifest = root / "dispatch.toml"
    text = manifest.read_text(encoding="utf-8")
    text = text.replace('name = "horizon-dispatch"', f'name = "hd-{secrets.token_hex(3)}"')
    text = re.sub(r"(?m)^dispatch_timeout_s = \d+", f"dispatch_timeout_s = {TIMEOUT_S}", text)
    manifest.write_text(text, encoding="utf-8")
    loaded = load_manifest(manifest)
    up_mod.up(engine, loaded, options=up_mod.UpOptions(prove=False))
    return loaded


@pytest.fixture(scope="class")
def full(tmp_path_factory: pytest.TempPathFactory, engine: Engine,
         built_images: dict[str, BuiltImage]) -> Iterator[Full]:
    loaded = _up(engine, tmp_path_factory.mktemp("full") / "example")
    try:
        with pytest.raises(SecretMissingError) as refused:
            dispatch(engine, loaded, environ={})
        stage = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name) / "stages"
        after_refusal = sorted(stage.rglob("arm.json")) if stage.exists() else []
        started = time.monotonic()
        report = dispatch(engine, loaded, environ=WITH_SECRET)
        wall = time.monotonic() - started
        again = dispatch(engine, loaded, environ=WITH_SECRET)
        yield Full(loaded, refused.value, after_refusal, report, wall, again)
    finally:
        cleanup(engine, loaded)


def _killed_run(exp: Experiment, logs: Path) -> None:
    """`dispatch` in a subprocess (through the CLI's command function), SIGKILLed half way."""
    code = ("import sys; from pathlib import Path; from runner.cli.dispatch import "
            "dispatch_command; dispatch_command(Path(sys.argv[1]), None)")
    with (logs / "killed.out").open("w") as out, (logs / "killed.err").open("w") as err:
        child = subprocess.Popen([sys.executable, "-c", code, str(exp.loaded.path)], cwd=ROOT,
                                 stdout=out, stderr=err, env={**os.environ, **WITH_SECRET})
        try:
            deadline = time.monotonic() + 90
            while not _half_way(exp):
                assert child.poll() is None, (logs / "killed.err").read_text()
                assert time.monotonic() < deadline, "dispatch never got half way"
                time.sleep(0.2)
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)


def _half_way(exp: Experiment) -> bool:
    records = {arm: load_record(exp.arm_dir(arm) / "arm.json") for arm in (*QUICK, "forever")}
    log = exp.arm_dir("forever") / "dispatch.log"
    forever = records["forever"]
    return (all(r is not None and r.state == ArmState.FINISHED
                for arm, r in records.items() if arm != "forever")
            and forever is not None and forever.state == ArmState.RUNNING
            and log.exists() and "forever: thinking" in log.read_text())


@pytest.fixture(scope="class")
def resumed(tmp_path_factory: pytest.TempPathFactory, engine: Engine,
            built_images: dict[str, BuiltImage]) -> Iterator[Resumed]:
    base = tmp_path_factory.mktemp("resumed")
    loaded = _up(engine, base / "example")
    exp = Experiment(loaded)
    try:
        _killed_run(exp, base)
        arms = [*QUICK, "forever"]
        killed = {arm: (exp.arm_dir(arm) / "arm.json").read_text() for arm in arms}
        mtimes = {arm: (exp.arm_dir(arm) / "dispatch.log").stat().st_mtime for arm in arms}
        report = dispatch(engine, loaded, environ=WITH_SECRET)
        yield Resumed(loaded, killed, mtimes, report)
    finally:
        cleanup(engine, loaded)


class TestEveryArmAtOnce:
    def test_a_missing_secret_is_refused_before_anything_starts(self, full: Full) -> None:
        error = full.refused
        assert error.exit_code == 2
        assert "ANTHROPIC_API_KEY" in str(error) and "(leaky)" in str(error)
        assert full.records_after_refusal == []  # no arm started

    def test_fixer_commits_its_fix_and_it_is_fetched_back(self, full: Full) -> None:
        record = full.record("fixer")
        assert (record.state, record.exit_code, record.orchestrator_commit) == (
            ArmState.FINISHED, 0, None)
        assert git(full.loaded.repo_path, "rev-parse", full.branch("fixer")) == record.commit
        assert record.commits == 1 and record.files_changed == 2
        assert "tests/test_app.py" in (record.diffstat or "")
        assert "MAX_HORIZON_DAYS" in full.show(record.commit or "", "src/horizon/app.py")

    def test_no_commit_work_is_committed_by_the_orchestrator_result_md_included(
            self, full: Full) -> None:
        """Pins: an agent that never commits loses nothing, and a file .gitignore lists
        but the arm names in commit_ignored (RESULT.md) is force-added."""
        record = full.record("no-commit")
        repo = full.loaded.repo_path
        assert record.state == ArmState.FINISHED
        assert record.orchestrator_commit == record.commit
        message = git(repo, "log", "-1", "--format=%an%n%B", record.commit or "")
        assert "committed by the orchestrator" in message and "RESULT.md" in message
        files = git(repo, "show", "--name-only", "--format=", record.commit or "").split()
        assert sorted(files) == ["RESULT.md", "src/horizon/app.py"]
        assert git(repo, "check-ignore", "RESULT.md") == "RESULT.md"  # ignored, yet committed

    def test_forever_is_stopped_at_the_timeout_with_its_partial_work_kept(
            self, full: Full, engine: Engine) -> None:
        record = full.record("forever")
        assert (record.state, record.timed_out, record.exit_code) == (
            ArmState.TIMED_OUT, True, 124)
        assert TIMEOUT_S - 0.5 <= (record.duration_s or 0) < TIMEOUT_S + 5
        repo, commit = full.loaded.repo_path, record.commit or ""
        log = git(repo, "log", "--format=%an: %s", f"{record.base_commit}..{commit}")
        assert log.splitlines() == [
            "bakeoff-sandbox orchestrator: Uncommitted work of arm forever, committed by the "
            "orchestrator",
            "bakeoff agent: WIP: reject horizons over 90 days"]
        assert "Still working" in full.show(commit, "RESULT.md")  # stranded, kept
        assert "TODO(forever)" in full.show(commit, "src/horizon/app.py")
        assert leftovers(engine, full.container("forever")) == []  # nothing left running

    def test_leaky_secret_is_absent_from_every_file_under_bakeoff_and_from_status(
            self, full: Full, engine: Engine) -> None:
        record = full.record("leaky")
        assert record.state == ArmState.FINISHED
        assert record.env["ANTHROPIC_API_KEY"] == "***"
        seen = sandbox.exec_in(engine, full.container("leaky"),
                               ["cat", "/tmp/leaky-api-key.txt"], timeout_s=30)
        assert SECRET in seen.stdout  # the agent really had it
        log = (full.arm_dir("leaky") / "dispatch.log").read_text()
        assert "leaky: my key is ***" in log and "ANTHROPIC_API_KEY=***" in log
        files = [p for p in (full.loaded.repo_path / ".bakeoff").rglob("*") if p.is_file()]
        arms = [arm.id for arm in full.loaded.manifest.arms]
        scanned = {(p.parent.name, p.name) for p in files}
        assert scanned >= {(arm, name) for arm in arms for name in ("arm.json", "dispatch.log")}
        assert [p for p in files if SECRET.encode() in p.read_bytes()] == []
        status = subprocess.run([sys.executable, "-m", "runner.cli", "status", "--json", "-f",
                                 str(full.loaded.path)], cwd=ROOT, capture_output=True,
                                text=True, timeout=120, check=False,
                                env={**os.environ, **WITH_SECRET})
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout) and SECRET not in status.stdout + status.stderr

    def test_all_arms_ran_at_once_wall_time_close_to_the_slowest(self, full: Full) -> None:
        ran = [o.record for o in full.report.outcomes]
        assert not any(o.skipped for o in full.report.outcomes) and len(ran) == 6
        spans = {r.arm: _agent_span(r) for r in ran}
        # No agent waited for the slowest (forever, 8 s) to end before it started ...
        assert all(start < spans["forever"][1] for start, _ in spans.values()), spans
        # ... and the whole dispatch took about as long as the slowest, not the sum.
        durations = [r.duration_s or 0.0 for r in ran]
        slowest, total = max(durations), sum(durations)
        assert full.wall_s < slowest + 0.5 * (total - slowest) + 2.0, (full.wall_s, durations)

    def test_the_brief_is_byte_identical_across_arms_and_outside_the_checkout(
            self, full: Full, engine: Engine) -> None:
        base = git(full.loaded.repo_path, "rev-parse", full.loaded.manifest.experiment.base)
        expected = compose_brief(full.loaded, "cap-horizon", base)
        arms = [arm.id for arm in full.loaded.manifest.arms]
        texts = {arm: sandbox.exec_in(engine, full.container(arm), ["cat", BRIEF_PATH],
                                      timeout_s=30).stdout for arm in arms}
        assert set(texts.values()) == {expected.text}
        digest = hashlib.sha256(expected.text.encode()).hexdigest()
        assert {full.record(arm).brief_sha256 for arm in arms} == {digest}
        brief_file = full.loaded.brief_path("cap-horizon").read_text()
        assert expected.text.startswith(brief_file.rstrip())
        assert f"\n{GUARDRAILS}\n## What is the base's at scoring\n" in expected.text
        name = full.loaded.manifest.experiment.name
        assert name not in expected.text  # nothing arm- or experiment-specific
        for arm in arms:
            tree = git(full.loaded.repo_path, "ls-tree", "-r", "--name-only", full.branch(arm))
            assert "brief.md" not in tree

    def test_effort_probe_match_is_recorded_as_runtime_log(self, full: Full) -> None:
        probe = full.record("probe")
        assert probe.effort_provenance == "runtime_log" and probe.effort_runtime == "matched"
        assert probe.effort_evidence == "thinking: budget_tokens=32000 effort=high"
        assert (probe.effort, probe.effort_observed) == ("high", "high")
        fixer = full.record("fixer")  # no probe: the declared identity stands
        assert (fixer.effort_provenance, fixer.effort_runtime) == ("experiment_config", None)

    def test_a_second_dispatch_skips_every_finished_arm(self, full: Full) -> None:
        assert {o.skipped for o in full.again.outcomes} == {True}
        assert [o.record for o in full.again.outcomes] == [o.record for o in full.report.outcomes]
        assert full.again.wall_s < 5


def _agent_span(record: ArmRecord) -> tuple[datetime, datetime]:
    end = datetime.fromisoformat(record.finished_at or "")
    return end - timedelta(seconds=record.duration_s or 0.0), end


class TestKilledHalfWay:
    def test_rerun_after_a_killed_dispatch_finishes_only_the_unfinished_arms(
            self, resumed: Resumed) -> None:
        """Pins: a SIGKILLed dispatch leaves forever `running` (its agent still looping in
        the sandbox); the re-run skips the five finished arms without touching their
        records or logs, and redoes forever only."""
        killed = {arm: ArmRecord.model_validate_json(text)
                  for arm, text in resumed.killed.items()}
        assert {arm: str(r.state) for arm, r in killed.items()} == {
            **dict.fromkeys(QUICK, "finished"), "forever": "running"}
        assert {o.record.arm for o in resumed.report.outcomes if not o.skipped} == {"forever"}
        for arm in QUICK:
            assert (resumed.arm_dir(arm) / "arm.json").read_text() == resumed.killed[arm]
            mtime = (resumed.arm_dir(arm) / "dispatch.log").stat().st_mtime
            assert mtime == resumed.killed_log_mtimes[arm]
        forever = resumed.record("forever")
        assert (forever.state, forever.attempt) == (ArmState.TIMED_OUT, 2)

    def test_the_redo_starts_from_the_base_and_keeps_the_first_attempt(
            self, resumed: Resumed, engine: Engine) -> None:
        forever = resumed.record("forever")
        name = resumed.loaded.manifest.experiment.name
        first = interrupted_branch(name, "cap-horizon", "forever", 1)
        assert forever.interrupted_work == [first]
        repo = resumed.loaded.repo_path
        assert git(repo, "log", "-1", "--format=%s", first).startswith("Interrupted attempt 1")
        assert "Still working" in resumed.show(first, "RESULT.md")
        # The redo started from the base: one agent commit, then the orchestrator's.
        authors = git(repo, "log", "--format=%an", f"{forever.base_commit}..{forever.commit}")
        assert authors.splitlines() == ["bakeoff-sandbox orchestrator", "bakeoff agent"]
        assert leftovers(engine, resumed.container("forever")) == []
