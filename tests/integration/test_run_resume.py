"""`run` is interrupt-safe: killed during scoring and run again, it ends with the same
OBSERVATION.json as an uninterrupted run, and never re-runs a finished sample."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.manifest import load_manifest
from tests.integration.helpers import cleanup, make_target, measured

FIXED_DATES = {"GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
               "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def start_run(repo: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "runner.cli", "run"], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def observation(repo: Path) -> dict[str, object]:
    found: dict[str, object] = json.loads(
        (repo / ".bakeoff" / "resume" / "OBSERVATION.json").read_text())
    return found


def test_killed_run_resumes_to_the_same_observation(
        engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in FIXED_DATES.items():  # identical commits in both repositories
        monkeypatch.setenv(key, value)
    whole = make_target(tmp_path / "whole" / "repo", ["A", "B"], database=False,
                        name="resume")
    cut = make_target(tmp_path / "cut" / "repo", ["A", "B"], database=False, name="resume")
    try:
        done = start_run(whole.parent)
        assert done.wait(timeout=600) == 0, done.communicate()[1][-2000:]
        expected = observation(whole.parent)

        samples = cut.parent / ".bakeoff" / "resume" / "stages" / "first" / "samples"
        killed = start_run(cut.parent)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not list(samples.glob("A/success/*.json")):
            time.sleep(0.1)
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        first_pass = {p: p.stat().st_mtime for p in samples.glob("*/*/*.json")}
        assert 0 < len(first_pass) < 6  # interrupted in the middle of scoring
        resumed = start_run(cut.parent)
        assert resumed.wait(timeout=600) == 0, resumed.communicate()[1][-2000:]
        assert {p: p.stat().st_mtime for p in first_pass} == first_pass  # not re-run
        assert len(list(samples.glob("*/*/*.json"))) == 6
        assert measured(observation(cut.parent)) == measured(expected)
    finally:
        cleanup(engine, load_manifest(whole))
        cleanup(engine, load_manifest(cut))
