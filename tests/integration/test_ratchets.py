"""Ratchet checks on the bundled example (examples/horizon/ratchets.toml), issue 8.

Real docker, real git, real Postgres; the library drives up -> dispatch -> score -> merge
on copies of the example with 2 samples per check (the example's 3 measure nothing more
here: every sample is deterministic), each experiment under a fresh name:

- `ratchets`: control, drop-test, lint-noise, more-tests on cap-horizon; merged; then
  horizon-units' `up` freezes the moved baseline. Scenarios 1-3.
- `flunk`: control and an arm that raises coverage but leaves a failing test; it wins,
  is merged, and the coverage baseline stays. Scenario 4.
- `unparsed`: a ratchet whose regex matches nothing, one whose value is unstable: `up`
  refuses (exit 3) and the samples say RIG_ERROR unparsed_output. Scenario 5.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rig import contract as contract_mod
from rig.errors import RigError
from rig.sample.record import SampleRecord
from runner.commands import demo, sample_plan
from runner.commands import down as down_mod
from runner.commands import merge as merge_mod
from runner.commands import score as score_mod
from runner.commands import up as up_mod
from runner.commands.dispatch.run import dispatch
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.manifest import LoadedManifest, load_manifest
from runner.store.records import MergeRecord, load_stage
from tests.integration.helpers import cleanup

FIRST, SECOND = "cap-horizon", "horizon-units"
FLUNK = """#!/bin/sh
# Test fixture "flunk": more-tests (the fix, its tests, the HTTP error-path tests: coverage
# up), plus one test that fails: the tests check cannot pass in full.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
sh "$here/more-tests.sh" "$@"
if ! grep -q test_flunks tests/test_http_errors.py; then
  printf '\\n\\ndef test_flunks():\\n    assert call("GET", "/nope")[0] == 200\\n' \\
    >> tests/test_http_errors.py
fi
commit_all "Expect 200 for an unknown path"
"""
UNPARSED = '''
[[checks]]
name = "typos"
kind = "ratchet"
run = "python3 tools/lint.py"
metric = 'typos: (?P<value>\\d+)'
better = "lower"

[[checks]]
name = "dice"
kind = "ratchet"
run = "python3 -c 'import os; print(\\"dice:\\", os.getpid() + int.from_bytes(os.urandom(2)))'"
metric = 'dice: (?P<value>\\d+)'
better = "lower"
'''


def say(_: str) -> None:
    return None


def _manifest(root: Path, prefix: str, arms: tuple[str, ...], extra_arm: str = "",
              checks: str | None = None) -> LoadedManifest:
    """A copy of the example with ratchets.toml as the manifest, 2 samples, `arms` only."""
    demo.prepare(root)
    text = (root / "ratchets.toml").read_text(encoding="utf-8")
    text = text.replace('name = "horizon-ratchets"', f'name = "{prefix}-{secrets.token_hex(3)}"')
    text = re.sub(r"(?m)^samples = \d+", "samples = 2\nallow_fewer_samples = true", text)
    head, *blocks = text.split("[[arms]]")
    keep = [b for b in blocks if _arm_id(b) in arms]
    if checks is not None:
        head = re.sub(r"(?s)\[\[checks\]\].*?(?=\[\[changes\]\])", lambda _: checks + "\n",
                      head)
    path = root / "ratchets.toml"
    path.write_text(head + "".join("[[arms]]" + b for b in keep) + extra_arm, encoding="utf-8")
    return load_manifest(path)


def _arm_id(block: str) -> str:
    found = re.search(r'(?m)^id = "([^"]+)"', block)
    return found[1] if found else ""


def _cycle(engine: Engine, loaded: LoadedManifest, change: str) -> MergeRecord:
    up_mod.up(engine, loaded, change, say)
    dispatch(engine, loaded)
    score_mod.score(engine, loaded, change, say)
    record = merge_mod.merge_change(engine, loaded, change, say)
    down_mod.down(engine, loaded, say)
    return record


@dataclass(frozen=True)
class Done:
    loaded: LoadedManifest
    merge: MergeRecord

    def stage(self, change: str = FIRST) -> Path:
        return sample_plan.stage_path(self.loaded, change)

    def records(self, arm: str, check: str) -> list[SampleRecord]:
        return score_mod.records_of(self.stage(), arm, check)

    def frozen(self, change: str) -> dict[str, float]:
        lock = contract_mod.load_lock(self.stage(change))
        assert lock is not None
        return lock.latest.contract.ratchet_baselines


@pytest.fixture(scope="module")
def ratchets(tmp_path_factory: pytest.TempPathFactory, engine: Engine,
             built_images: dict[str, BuiltImage]) -> Iterator[Done]:
    loaded = _manifest(tmp_path_factory.mktemp("ratchets") / "example", "hr",
                       ("control", "drop-test", "lint-noise", "more-tests"))
    try:
        record = _cycle(engine, loaded, FIRST)
        up_mod.up(engine, loaded, SECOND, say)  # freezes change 2's baselines
        down_mod.down(engine, loaded, say)
        yield Done(loaded, record)
    finally:
        cleanup(engine, loaded)


@pytest.fixture(scope="module")
def flunk(tmp_path_factory: pytest.TempPathFactory, engine: Engine,
          built_images: dict[str, BuiltImage]) -> Iterator[Done]:
    root = tmp_path_factory.mktemp("flunk") / "example"
    arm = ('\n[[arms]]\nid = "flunk"\nmodel = "scripted-flunk"\neffort = "none"\n'
           'effort_normalized = "none"\neffort_provenance = "experiment_config"\n'
           'effort_evidence = "scripted test fixture: no model"\nmode = "single_agent"\n'
           'agent = "command"\ncommand = "sh /agents/flunk.sh {brief}"\ncontrol = false\n')
    loaded = _manifest(root, "hf", ("control",), arm)
    (root / "agents" / "flunk.sh").write_text(FLUNK, encoding="utf-8")
    try:
        yield Done(loaded, _cycle(engine, loaded, FIRST))
    finally:
        cleanup(engine, loaded)


def verdicts(records: list[SampleRecord]) -> set[tuple[str, str | None]]:
    return {(str(r.verdict), r.reason) for r in records}


PASSED = {("PASS", None)}


def test_base_values_are_measured_at_up_and_frozen_in_the_contract(ratchets: Done) -> None:
    frozen = ratchets.frozen(FIRST)
    assert frozen["coverage"] == pytest.approx(80.32, abs=0.01)
    assert frozen["lint"] == 0
    stage = load_stage(ratchets.stage())
    assert stage is not None
    assert stage.ratchets["coverage"].source == "measured on the base (2 samples agree)"


def test_deleting_a_test_fails_the_coverage_ratchet_while_the_other_checks_pass(
        ratchets: Done) -> None:
    """Issue 8 (1)."""
    coverage = ratchets.records("drop-test", "coverage")
    assert verdicts(coverage) == {("FAIL", "ratchet_regressed")}
    assert {round(r.metric_value or 0, 2) for r in coverage} == {79.79}
    assert {r.metric_base for r in coverage} == {ratchets.frozen(FIRST)["coverage"]}
    assert all(r.collected == {"cov.json": f"{r.n}.files/cov.json"} for r in coverage)
    for check in ("tests", "compile", "lint"):
        assert verdicts(ratchets.records("drop-test", check)) == PASSED, check
    card = (ratchets.stage() / "SCORECARD.md").read_text()
    assert "base 80.32 → 79.79" in card


def test_lint_findings_fail_a_lower_is_better_count_ratchet(ratchets: Done) -> None:
    """Issue 8 (2)."""
    lint = ratchets.records("lint-noise", "lint")
    assert verdicts(lint) == {("FAIL", "ratchet_regressed")}
    assert {(r.metric_base, r.metric_value) for r in lint} == {(0, 3)}
    for check in ("tests", "compile", "coverage"):
        assert verdicts(ratchets.records("lint-noise", check)) == PASSED, check
    assert "base 0 → 3" in (ratchets.stage() / "SCORECARD.md").read_text()


def test_improved_coverage_passes_and_after_its_merge_is_the_next_frozen_baseline(
        ratchets: Done) -> None:
    """Issue 8 (3)."""
    coverage = ratchets.records("more-tests", "coverage")
    assert verdicts(coverage) == PASSED
    assert ratchets.merge.winner == "more-tests"
    moves = ratchets.merge.ratchets
    assert moves["coverage"].moved and moves["coverage"].why.startswith("moved:")
    assert moves["coverage"].after == pytest.approx(86.39, abs=0.01)
    assert (moves["lint"].moved, moves["lint"].after) == (False, 0)
    assert ratchets.frozen(SECOND) == {"coverage": moves["coverage"].after, "lint": 0}
    stage = load_stage(ratchets.stage(SECOND))
    assert stage is not None
    assert stage.ratchets["coverage"].source.startswith(f"moved by {FIRST}'s merge")


def test_regression_a_merge_whose_tests_failed_leaves_the_baseline_where_it_was(
        flunk: Done) -> None:
    """Issue 8 (4): coverage rose, but on a merge whose tests check did not fully pass."""
    assert flunk.merge.winner == "flunk"
    assert verdicts(flunk.records("flunk", "tests")) == {("FAIL", "tests_failed")}
    assert verdicts(flunk.records("flunk", "coverage")) == PASSED
    coverage = flunk.merge.ratchets["coverage"]
    base = flunk.frozen(FIRST)["coverage"]
    assert (coverage.moved, coverage.before, coverage.after) == (False, base, base)
    assert coverage.measured is not None and coverage.measured > base
    assert "tests 0/2 FAIL(tests_failed)" in coverage.why
    assert "Ratchet baselines for the next change" in (
        flunk.stage() / "SCORECARD.md").read_text()


def test_regression_a_metric_that_matches_nothing_is_rig_error_unparsed_output(
        tmp_path: Path, engine: Engine, built_images: dict[str, BuiltImage]) -> None:
    """Issue 8 (5): a regex that matches nothing (and an unstable value) refuse `up`, exit 3."""
    loaded = _manifest(tmp_path / "example", "hu", ("control",), checks=UNPARSED)
    try:
        with pytest.raises(RigError) as refused:
            up_mod.up(engine, loaded, FIRST, say)
        assert refused.value.exit_code == 3
        assert "'typos' cannot be measured" in refused.value.message
        assert "'dice' is unstable on the base" in refused.value.message
        proofs = sample_plan.stage_path(loaded, FIRST) / "proofs"
        typos = [SampleRecord.model_validate_json(p.read_text())
                 for p in proofs.glob("*/samples/baseline/typos/*.json")]
        assert verdicts(typos) == {("RIG_ERROR", "unparsed_output")}
        assert contract_mod.load_lock(sample_plan.stage_path(loaded, FIRST)) is None
    finally:
        cleanup(engine, loaded)
