"""A rig broken on purpose: the toolchain lacks a tool a check needs. Every affected arm
is invalid and unranked and the command exits 3 — never a column of FAILs."""

from __future__ import annotations

import json
from pathlib import Path

from rig import standings
from runner.commands import score as score_mod
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.manifest import load_manifest
from tests.integration.helpers import cleanup, cli, git, make_target

LINT = '''
[[checks]]
name = "fmt"
run = "sh -c 'rustfmt --check src'"
parser = "exit-code"
'''



def test_missing_tool_in_a_check_makes_every_arm_invalid_and_unranked(
        engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path) -> None:
    manifest = make_target(tmp_path / "repo", ["A", "B"], database=False)
    text = manifest.read_text().replace("\n[[changes]]", LINT + "\n[[changes]]", 1)
    manifest.write_text(text)
    repo = manifest.parent
    git(repo, "commit", "-qam", "a check that needs rustfmt, which the image lacks")
    loaded = load_manifest(manifest)
    try:
        assert cli(repo, "up").returncode == 0  # preflight sees `sh`; the tool is inside
        assert cli(repo, "dispatch").returncode == 0
        scored = cli(repo, "score")
        assert scored.returncode == 3, scored.stderr[-2000:]
        arms = score_mod.stage_scores(loaded, "first")
        assert [(a.arm, a.valid) for a in arms] == [("A", False), ("B", False)]
        assert standings.rank(arms) == []
        assert standings.winner(arms, 1.0) is None
        fmt = {a.arm: {(r.verdict.value, r.reason) for r in a.checks["fmt"].records}
               for a in arms}
        assert fmt == {"A": {("RIG_ERROR", "command_not_found")},
                       "B": {("RIG_ERROR", "command_not_found")}}
        card = (repo / ".bakeoff" / loaded.manifest.experiment.name / "stages" / "first" /
                "SCORECARD.md").read_text()
        assert "**Winner" not in card and "invalid" in card
        rows = json.loads(cli(repo, "status", "--json").stdout)
        assert [(r["arm"], r["verdicts"]) for r in rows] == [
            ("A", {"fmt": "0/3 (3 rig)", "success": "0/3"}),
            ("B", {"fmt": "0/3 (3 rig)", "success": "0/3"})]
    finally:
        cleanup(engine, loaded)
