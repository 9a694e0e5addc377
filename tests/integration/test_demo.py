"""`bakeoff-sandbox demo` end to end, through the real command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from runner.engine import LABEL_EXPERIMENT, Engine
from runner.images import BuiltImage


def test_demo_brings_up_every_arm_runs_in_each_and_tears_down(
        engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path) -> None:
    keep = tmp_path / "demo"
    done = subprocess.run([sys.executable, "-m", "runner.cli", "demo", "--keep", str(keep)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    arms = ["control", "fixer", "fixer-graft", "cheat", "broken"]
    for arm in arms:
        assert f"{arm}: 1 commit(s)" in done.stderr
        assert f"schema bk_horizon_{arm.replace('-', '_')}" in done.stderr
    status_rows = [line.split()[0] for line in done.stdout.splitlines()[1:] if line.strip()]
    assert status_rows == arms
    assert "removed 6 containers, 6 networks, dropped 5 schemas" in done.stderr
    assert engine.labelled("container", {LABEL_EXPERIMENT: "horizon"}) == []
    assert (keep / "repo" / ".git").is_dir() and (keep / "bakeoff.toml").is_file()
