"""`run` SIGKILLed at five points (up, dispatch, scoring, merge, the next change's up):
after each, `gc` exits 0 and leaves no labelled leftover of the interrupted step, and
`run` resumes; the last one ends with the OBSERVATION.json of an uninterrupted run."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from runner.containers import database
from runner.containers.backend import LABEL_EXPERIMENT, LABEL_RUN
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.manifest import load_manifest
from runner.store import state as state_mod
from tests.integration.helpers import (
    JUDGE_PREFERS_A,
    JUDGED_MANIFEST,
    arms_toml,
    cleanup,
    cli,
    committed_repo,
    measured,
)

DATES = {"GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
FIX = ("sleep 2; if [ \"$BAKEOFF_CHANGE\" = first ]; then sed -i 's/^VALUE = 1/VALUE = 2/' "
       "app.py; else sed -i 's/^OTHER = 1/OTHER = 2/' app.py; fi; {extra}git add -A; "
       "GIT_AUTHOR_DATE=2026-01-01T00:00:00Z GIT_COMMITTER_DATE=2026-01-01T00:00:00Z "
       "git commit -qm fix")
CHANGES = """
[[changes]]
id = "first"
brief = "brief.md"
protected = ["tests/test_app.py"]

[changes.success]
run = "pytest -q -p no:cacheprovider tests/test_app.py"

[[changes]]
id = "second"
brief = "brief.md"
protected = ["tests/test_other.py"]

[changes.success]
run = "pytest -q -p no:cacheprovider tests/test_other.py"
"""


def target(repo: Path, name: str) -> Path:
    """Two changes; A fixes each, B fixes it too and adds a file (a graft to verify); the
    scripted judge prefers A, so A wins (equal totals would be a tie, and no winner)."""
    files = {"app.py": "VALUE = 1\nOTHER = 1\n", "brief.md": "Make the tests pass.\n",
             "tests/test_app.py": "from app import VALUE\n\n\ndef test_app():\n"
                                  "    assert VALUE == 2\n",
             "tests/test_other.py": "from app import OTHER\n\n\ndef test_other():\n"
                                    "    assert OTHER == 2\n",
             "judge.py": JUDGE_PREFERS_A}
    arms = arms_toml([(arm, "none", FIX.format(extra=extra)) for arm, extra in (
        ("A", ""), ("B", "echo 'EXTRA = 1' > extra_$BAKEOFF_CHANGE.py; "))])
    return committed_repo(repo, files, JUDGED_MANIFEST.format(name=name, dispatch_timeout_s=60)
                          + CHANGES + arms)


def start(repo: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "runner.cli", "run"], cwd=repo,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def arm_running(state: Path) -> bool:
    record = state / "stages" / "first" / "arms" / "A" / "arm.json"
    return record.exists() and json.loads(record.read_text())["state"] == "running"


# (what is interrupted, the sign it is under way)
POINTS: list[tuple[str, Callable[[Path], bool]]] = [
    ("up: the baseline proof", lambda s: any((s / "stages" / "first").glob("proofs/*/samples"))),
    ("dispatch: the agents at work", arm_running),
    ("score: the samples", lambda s: (s / "stages" / "first" / "samples" / "A" / "success" /
                                      "1.json").exists()),
    ("merge: the graft's verification", lambda s: (s / "stages" / "first" / "merge" /
                                                   "samples").exists()),
    ("the next change's up", lambda s: any((s / "stages" / "second").glob("proofs/*"))),
]


def leftovers(engine: Engine, name: str, live: str | None) -> list[str]:
    """Every labelled resource of the experiment that is not the live `up`'s."""
    found = []
    for kind in ("container", "network", "volume"):
        for item in engine.labelled(kind, {LABEL_EXPERIMENT: name}):
            labels = item.labels if kind == "container" else item.attrs.get("Labels") or {}
            if live is None or labels.get(LABEL_RUN) != live:
                found.append(f"{kind} {item.name}")
    return found


def orphan_databases(engine: Engine, current: state_mod.ExperimentState) -> list[str]:
    """Databases and roles of the experiment in the live Postgres that no arm owns."""
    assert current.db is not None
    server = database.find_server(engine, current.db.container_id)
    found, roles = database.list_owned(database.Admin(engine, server),
                                       database.role_name(current.experiment, ""))
    return sorted((set(found) | set(roles)) - {a.schema_name for a in current.arms})


def test_run_killed_at_five_points_resumes_to_the_same_observation(
        engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in DATES.items():  # identical merge commits in both repositories
        monkeypatch.setenv(key, value)
    name = f"kp-{secrets.token_hex(3)}"
    whole, cut = target(tmp_path / "whole", name), target(tmp_path / "cut", name)
    try:
        done = start(whole.parent)
        assert done.wait(timeout=900) == 0, done.communicate()[1][-3000:]
        expected = (whole.parent / ".bakeoff" / name / "OBSERVATION.json").read_text()
        first = json.loads(expected)["rounds"][0]
        assert [(g["from"], g["what"], g["verified"]) for g in first["grafts"]] == [
            ("B", "extra_first.py", True)]  # there is a merge step to interrupt
        cleanup(engine, load_manifest(whole))
        state = cut.parent / ".bakeoff" / name
        for what, under_way in POINTS:
            run = start(cut.parent)
            deadline = time.monotonic() + 300
            while not under_way(state) and run.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert run.poll() is None, f"{what}: run ended before it: {run.communicate()[1]}"
            os.kill(run.pid, signal.SIGKILL)
            run.wait()
            swept = cli(cut.parent, "gc")
            assert swept.returncode == 0, f"{what}: {swept.stderr}"
            current = state_mod.load(state)
            live = current.run if current is not None and current.phase == "up" else None
            assert leftovers(engine, name, live) == [], what
            if current is not None and current.db is not None and live is not None:
                assert orphan_databases(engine, current) == [], what
        resumed = start(cut.parent)
        assert resumed.wait(timeout=900) == 0, resumed.communicate()[1][-3000:]
        assert measured((state / "OBSERVATION.json").read_text()) == measured(expected)
        redone = json.loads((state / "stages" / "first" / "arms" / "A" / "arm.json").read_text())
        assert redone["attempt"] == 2  # the dispatch really was cut, and redone from the base
        assert leftovers(engine, name, None) == []
    finally:
        cleanup(engine, load_manifest(cut))
