"""A first bake-off on a repository of one's own, as a newcomer makes it (issue 34): a
fresh git repository, `init` with only the answers it asks for, then `up` succeeds on
the first try and `run` completes with exact verdicts; the user's repository is clean
afterwards except for the branches `run` leaves (the experiment branch and each arm's
work, `bakeoff-sandbox down` lists them)."""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path

from rig.report.observation import read_observation
from runner.containers.backend import LABEL_EXPERIMENT
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.manifest import load_manifest
from runner.workspace import arm_branch
from tests.integration.helpers import cleanup, flat_record, git

SUCCESS = "pytest -q -p no:cacheprovider tests/test_calc.py"
TEST = "pytest -q -p no:cacheprovider"
FIX = """#!/bin/sh
# The fixer: subtraction where addition was meant.
set -eu
sed -i 's/return a - b/return a + b/' calc.py
git add -A && git commit -q -m "add adds"
"""


def _project(root: Path) -> Path:
    """A tiny Python project whose one test fails: `add` subtracts."""
    (root / "tests").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "calc"\nversion = "0.1"\n')
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "README.md").write_text("# calc\n")
    (root / "tests" / "__init__.py").write_text("")
    (root / "conftest.py").write_text("")  # the root on sys.path for `import calc`
    (root / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    (root / "tests" / "test_other.py").write_text("def test_true():\n    assert True\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "newcomer@bakeoff.invalid")
    git(root, "config", "user.name", "newcomer")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "calc")
    return root


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "runner.cli", *args], capture_output=True,
                          text=True, timeout=1200, check=False, stdin=subprocess.DEVNULL)


def test_init_up_run_on_a_fresh_repository_with_only_init_s_answers(
        engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path) -> None:
    name = f"calc-{secrets.token_hex(3)}"
    repo = _project(tmp_path / name)
    setup = tmp_path / f"{name}-bakeoff"
    manifest = setup / "bakeoff.toml"
    try:
        done = _cli("init", str(repo), "--test", TEST, "--success", SUCCESS,
                    "--arm", "command", "--arm", "command")
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [
            f"wrote {manifest}", f"wrote {setup / 'briefs' / 'first-change.md'}",
            f"wrote {setup / 'agents' / 'control.sh'}",
            f"wrote {setup / 'agents' / 'scripted.sh'}",
            f"next: bakeoff-sandbox up -f {manifest}"]
        loaded = load_manifest(manifest)
        assert [c.protected for c in loaded.manifest.changes] == [["tests/test_calc.py"]]
        assert [(a.id, a.model, a.effort_normalized, a.control) for a in
                loaded.manifest.arms] == [("control", "scripted", "none", True),
                                          ("scripted", "scripted", "none", False)]
        (setup / "agents" / "scripted.sh").write_text(FIX)  # the control stays a no-op

        up = _cli("up", "-f", str(manifest))
        assert up.returncode == 0, up.stderr[-3000:]
        run = _cli("run", "-f", str(manifest))
        assert run.returncode == 0, run.stderr[-3000:]

        state = repo / ".bakeoff" / name
        (round_,) = read_observation(state / "OBSERVATION.json").rounds
        assert round_.winner == "scripted"
        assert round_.baseline.pass_rate == 0.0
        assert "effort_confounded" not in round_.flags  # every arm scripted: effort none
        verdicts = {arm: [flat_record(state / "stages" / "first-change" / "samples" / arm /
                                      "success" / f"{n}.json")["verdict"] for n in (1, 2, 3)]
                    for arm in ("control", "scripted")}
        assert verdicts == {"control": ["FAIL"] * 3, "scripted": ["PASS"] * 3}
        # The user's repository: clean, on main, its files as they were; the branches
        # are the experiment's and each arm's work (`down` lists them).
        assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
        assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
        assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
        branches = git(repo, "branch", "--format=%(refname:short)").splitlines()
        assert sorted(branches) == sorted([
            "main", f"bakeoff/{name}", arm_branch(name, "first-change", "control"),
            arm_branch(name, "first-change", "scripted")])
    finally:
        if manifest.is_file():
            cleanup(engine, load_manifest(manifest))
        engine.remove_labelled({LABEL_EXPERIMENT: name})
