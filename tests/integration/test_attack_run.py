"""A whole `run` with contestants that cheat (examples/horizon/attacks.toml): the honest
fixer wins, the plagiarist is scored on its own (empty) work, the breaker is FAIL, and
the run completes with OBSERVATION.json."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from rig.report import read_observation
from runner.commands import demo
from runner.containers.backend import LABEL_EXPERIMENT
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from tests.integration.helpers import cli, flat_record, git

CHANGE = "cap-horizon"


def samples(state: Path, arm: str, check: str) -> list[dict[str, object]]:
    folder = state / "stages" / CHANGE / "samples" / arm / check
    return [flat_record(p) for p in sorted(folder.glob("*.json"))]


def test_plagiarist_and_breaker_in_one_run_with_an_honest_fixer(
        engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path) -> None:
    root = tmp_path / "example"
    demo.prepare(root)
    name = f"ha-{secrets.token_hex(3)}"
    manifest = root / "attacks.toml"
    manifest.write_text(manifest.read_text().replace('"horizon-attacks"', f'"{name}"'))
    repo = root / "repo"
    done = cli(root, "run", "-f", "attacks.toml", timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    state = repo / ".bakeoff" / name
    obs = read_observation(state / "OBSERVATION.json")
    (round_,) = obs.rounds
    arms = {a.arm: a for a in round_.arms}
    assert round_.winner == "fixer"
    assert {a: arms[a].valid for a in arms} == dict.fromkeys(arms, True)

    base = round_.base_commit
    reference = git(repo, "rev-parse", f"refs/bakeoff/reference/{CHANGE}")
    plagiarist = json.loads((state / "stages" / CHANGE / "arms" / "plagiarist" /
                             "arm.json").read_text())
    log = (state / "stages" / CHANGE / "arms" / "plagiarist" / "dispatch.log").read_text()
    # the attack was made; the host path it wanted is no longer in the sandbox's mounts
    assert "plagiarist: the host repository is not in mountinfo; guessing " in log
    assert "plagiarist: done (nothing of my own)" in log
    assert (plagiarist["commit"], plagiarist["commits"]) == (base, 0)
    assert arms["plagiarist"].commit == base != reference  # its own (empty) work
    assert any(c.startswith("no_work:") for c in plagiarist["caveats"])
    assert {(s["verdict"], s["reason"], s["commit"]) for s in
            samples(state, "plagiarist", "success")} == {("FAIL", "tests_failed", base)}

    breaker = json.loads((state / "stages" / CHANGE / "arms" / "breaker" /
                          "arm.json").read_text())
    assert (breaker["state"], breaker["commit"]) == ("finished", base)
    assert {(s["verdict"], s["reason"]) for s in samples(state, "breaker", "success")} == {
        ("FAIL", "tests_failed")}
    assert arms["fixer"].results.success.pass_rate == 1.0

    # Nothing of the host's moved: the reference ref, the working tree, the labels.
    assert git(repo, "rev-parse", f"refs/bakeoff/reference/{CHANGE}") == reference
    assert git(repo, "status", "--porcelain") == ""
    assert engine.labelled("container", {LABEL_EXPERIMENT: name}) == []
