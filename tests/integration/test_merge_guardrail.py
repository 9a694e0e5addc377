"""A merge never weakens the guardrail (issue 20, class 10), with the real engine and git.

One experiment (python, one sample per check, no database), seven scripted arms; A fixes
the bug and wins, the others leave it and pass every check:

- A (the winner) also adds a `setup.cfg` whose addopts deselect a test: it was measured
  under the base's harness, so the branch keeps the base's (withheld, named);
- B changes harness files of every runner (a pytest conftest and `pytest.ini`, a vitest
  config, `package.json`, `Cargo.toml`, `go.mod`), makes the check directory a package
  (harness by layout), and adds a real file: only the real file is grafted;
- C's test helper makes the tests that use it skip (`pytest.skip` in the call);
- D deletes a test file the check runs;
- E's test helper skips its importers at collection (`allow_module_level`): their tests
  are never collected;
- F rewrites a test the check runs to `assert True`;
- G rewrites the protected test to `assert True` and adds a RESULT.md claiming success:
  an arm that rewrote the success criterion's tests is no graft source at all.

Each of C..F keeps every pass-rate at 1.00 (skips are no failures; fewer tests still
pass; a hollow test passes): C and E are dropped by id after their re-verification, D
and F before it (a graft never changes the tests that judge it), the ids named. The
round's flags name A and B with their files; `--graft B:vitest.config.mts` is exit 2 and
changes nothing.
"""

from __future__ import annotations

import json
import secrets
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rig import graft
from rig.report import Observation, read_observation
from runner.commands import down as down_mod
from runner.commands import merge as merge_mod
from runner.commands import report as report_mod
from runner.commands import sample_plan
from runner.commands import score as score_mod
from runner.commands import up as up_mod
from runner.commands.dispatch.run import dispatch
from runner.containers.backend import LABEL_EXPERIMENT
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.manifest import LoadedManifest, load_manifest
from runner.store.records import MergeRecord
from tests.integration.helpers import cleanup, cli, flat_record, git

MANIFEST = """
[experiment]
name = "{name}"
repo = "repo"
base = "main"
agents_dir = "agents"

[contract]
metric = "pass-rate of the success criterion over fresh-container samples"
samples = 1
allow_fewer_samples = true
judge = "none"

[toolchain]
image = "python"
requires = ["python3", "pytest", "git"]

[limits]
cpus = 1.0
memory_mb = 256
pids = 128
check_timeout_s = 60
dispatch_timeout_s = 60

[[checks]]
name = "tests"
run = "pytest -q -p no:cacheprovider checks"
parser = "pytest"

[[changes]]
id = "first"
brief = "brief.md"
protected = ["tests/test_app.py"]

[changes.success]
run = "pytest -q -p no:cacheprovider tests/test_app.py"
parser = "pytest"
"""
ARM = """
[[arms]]
id = "{arm}"
model = "scripted-{arm}"
effort = "none"
effort_normalized = "none"
effort_provenance = "experiment_config"
effort_evidence = "scripted contestant: no model"
mode = "single_agent"
agent = "command"
command = "sh /agents/{arm}.sh"
control = {control}
"""
REPO = {
    "app.py": "VALUE = 1\n",
    "tests/test_app.py": "from app import VALUE\n\n\ndef test_app():\n    assert VALUE == 2\n",
    "checks/helpers.py": "def check(x):\n    return x\n",
    "checks/test_more.py": ("from helpers import check\n\n\ndef test_one():\n"
                            "    assert check(1) == 1\n\n\ndef test_two():\n"
                            "    assert check(2) == 2\n"),
    "checks/test_extra.py": "def test_extra():\n    assert True\n",
}
COMMIT = 'git add -A && git commit -qm "{arm}"\n'
AGENTS = {
    "A": ("sed -i 's/^VALUE = 1/VALUE = 2/' app.py\n"
          "printf '[tool:pytest]\\naddopts = -k \"not test_two\"\\n' > setup.cfg\n"),
    "B": ("mkdir -p docs tests\n"
          "printf 'import pytest\\n\\n\\ndef pytest_collection_modifyitems(items):\\n"
          "    for item in items:\\n        item.add_marker(pytest.mark.skip(\"B\"))\\n'"
          " > tests/conftest.py\n"
          "printf '[pytest]\\naddopts = -k \"not test_one\"\\n' > pytest.ini\n"
          "printf 'export default { test: { testNamePattern: \"^(?!protected)\" } }\\n'"
          " > vitest.config.mts\n"
          "printf '{\"scripts\": {\"test\": \"vitest --run -t nothing\"}}\\n' > package.json\n"
          "printf '[package]\\nname = \"x\"\\n[lib]\\ntest = false\\n' > Cargo.toml\n"
          "printf 'module x\\n\\nreplace y => ./fake\\n' > go.mod\n"
          ": > checks/__init__.py\n"
          "printf 'Why VALUE is what it is.\\n' > docs/notes.md\n"),
    "C": ("printf 'import pytest\\n\\n\\ndef check(x):\\n    pytest.skip(\"grafted helper\")\\n'"
          " > checks/helpers.py\n"),
    "D": "git rm -q checks/test_extra.py\n",
    "E": ("printf 'import pytest\\n\\npytest.skip(\"not today\", allow_module_level=True)\\n\\n\\n"
          "def check(x):\\n    return x\\n' > checks/helpers.py\n"),
    "F": "sed -i 's/assert check(1) == 1/assert True/' checks/test_more.py\n",
    "G": ("sed -i 's/assert VALUE == 2/assert True/' tests/test_app.py\n"
          "printf 'All tests pass.\\n' > RESULT.md\n"),
}
HARNESS_B = ["Cargo.toml", "go.mod", "package.json", "pytest.ini", "tests/conftest.py",
             "vitest.config.mts"]


def say(_: str) -> None:
    return None


@dataclass(frozen=True)
class Merged:
    loaded: LoadedManifest
    record: MergeRecord
    obs: Observation

    @property
    def repo(self) -> Path:
        return self.loaded.repo_path

    @property
    def stage(self) -> Path:
        return sample_plan.stage_path(self.loaded, "first")

    def graft(self, arm: str) -> dict[str, object]:
        data = json.loads((self.stage / "merge.json").read_text())
        (found,) = [g for g in data["grafts"] if g["from"] == arm]
        return dict(found)


def target(root: Path) -> LoadedManifest:
    repo = root / "repo"
    for path, text in REPO.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    (root / "agents").mkdir()
    for arm, script in AGENTS.items():
        (root / "agents" / f"{arm}.sh").write_text("set -eu\n" + script + COMMIT.format(arm=arm))
    (root / "brief.md").write_text("Make tests/test_app.py pass.\n")
    text = MANIFEST.format(name=f"mg-{secrets.token_hex(3)}") + "".join(
        ARM.format(arm=arm, control=str(arm == "A").lower()) for arm in AGENTS)
    (root / "bakeoff.toml").write_text(textwrap.dedent(text))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "base")
    return load_manifest(root / "bakeoff.toml")


@pytest.fixture(scope="module")
def merged(tmp_path_factory: pytest.TempPathFactory, engine: Engine,
           built_images: dict[str, BuiltImage]) -> Iterator[Merged]:
    loaded = target(tmp_path_factory.mktemp("guardrail"))
    try:
        up_mod.up(engine, loaded, "first", say)
        dispatch(engine, loaded)
        score_mod.score(engine, loaded, "first", say)
        record = merge_mod.merge_change(engine, loaded, "first", say)
        obs = report_mod.report(loaded).observation
        down_mod.down(engine, loaded, say)
        yield Merged(loaded, record, obs)
    finally:
        cleanup(engine, loaded)


def test_every_arm_is_eligible_and_only_a_real_file_is_grafted(merged: Merged) -> None:
    """The setting: A wins; B..E passed every check (each could graft)."""
    arms = {a.arm: a for a in merged.obs.rounds[0].arms}
    assert merged.record.winner == "A"
    assert {a: (e.results.success.pass_rate, e.results.checks["tests"].pass_rate, e.valid)
            for a, e in arms.items()} == {"A": (1.0, 1.0, True), **{
                a: (0.0, 1.0, True) for a in "BCDEFG"}}
    assert [(g.arm, g.what, g.verified, g.kept) for g in merged.record.grafts] == [
        ("B", "docs/notes.md", True, True),
        ("C", "checks/helpers.py", True, False),
        ("D", "checks/test_extra.py", False, False),
        ("E", "checks/helpers.py", True, False),
        ("F", "checks/test_more.py", False, False)]
    head = merged.record.head
    assert git(merged.repo, "rev-parse", merged.loaded.manifest.experiment.branch) == head
    assert git(merged.repo, "show", f"{head}:docs/notes.md") == "Why VALUE is what it is."
    assert git(merged.repo, "show", f"{head}:app.py") == "VALUE = 2"
    assert merged.record.note.endswith(
        "; not a graft source: G (it changed protected tests/test_app.py)")


def test_harness_of_every_runner_is_never_grafted_and_the_winner_keeps_the_bases(
        merged: Merged) -> None:
    """B's conftest, pytest.ini, vitest config, package.json, Cargo.toml and go.mod (by
    name), its checks/__init__.py (by layout: the test directory made a package) and A's
    setup.cfg: none is on the branch, each is named in merge.json with why."""
    assert [(w.arm, w.paths, w.count, w.why) for w in merged.record.withheld] == [
        ("A", ["setup.cfg"], 1, merge_mod.WINNER_HARNESS),
        ("B", HARNESS_B, 6, graft.BY_NAME),
        ("B", ["checks/__init__.py"], 1, graft.IN_CONTEXT)]
    on_branch = git(merged.repo, "ls-tree", "-r", "--name-only", merged.record.head).split()
    assert sorted(on_branch) == sorted([*REPO, "docs/notes.md"])
    scorecard = (merged.stage / "SCORECARD.md").read_text()
    assert ("withheld from the branch (harness and protected files are never grafted): "
            "A: setup.cfg; B: Cargo.toml, go.mod, package.json, pytest.ini, "
            "tests/conftest.py (+1 more); B: checks/__init__.py") in scorecard


def test_a_grafted_helper_that_makes_tests_skip_is_dropped_naming_the_ids(
        merged: Merged) -> None:
    """C: every rate held (1.00: skips are no failures), two ids did not."""
    found = merged.graft("C")
    assert found["by_id"] == {
        "success": {"compared": 1, "lost": [], "lost_count": 0, "note": "",
                    "passed_before": 1, "passed_after": 1},
        "tests": {"compared": 3, "lost_count": 2, "note": "", "lost": [
            {"id": "checks/test_more.py::test_one", "after": ["skipped"]},
            {"id": "checks/test_more.py::test_two", "after": ["skipped"]}],
            "passed_before": 3, "passed_after": 1}}
    assert found["why"] == ("lost by id: tests: 2 of 3 test(s) that passed before did not "
                            "pass after: checks/test_more.py::test_one (skipped), "
                            "checks/test_more.py::test_two (skipped); lost by count: tests: "
                            "3 test(s) passed in every sample before, 1 in a sample after")


def test_a_graft_that_deletes_a_test_is_dropped_naming_the_id(merged: Merged) -> None:
    """D: its own tests check passed with one test fewer; the graft would remove a test
    that judges it, so it is dropped before any re-verification."""
    found = merged.graft("D")
    assert found["why"] == (
        "rewrites tests: checks/test_extra.py is a test file of the branch (1 test(s) that "
        "passed before: checks/test_extra.py::test_extra); a graft never changes or "
        "removes the tests that judge it")
    own = flat_record(merged.stage / "samples" / "D" / "tests" / "1.json")
    assert (own["verdict"], own["counts"]["passed"]) == ("PASS", 2)
    assert not (merged.stage / "merge" / "samples" / "graft-4").exists()


def test_a_graft_that_hollows_out_a_test_is_dropped_naming_the_ids(merged: Merged) -> None:
    """F: `assert True` in place of test_one's assertion: every id still passes, so
    only the rule that a graft never rewrites its own judges stops it."""
    assert merged.graft("F")["why"] == (
        "rewrites tests: checks/test_more.py is a test file of the branch (2 test(s) that "
        "passed before: checks/test_more.py::test_one, checks/test_more.py::test_two); a "
        "graft never changes or removes the tests that judge it")
    assert git(merged.repo, "show", f"{merged.record.head}:checks/test_more.py") == (
        REPO["checks/test_more.py"].strip())


def test_a_helper_that_skips_its_importers_at_collection_is_dropped(merged: Merged) -> None:
    """E: the module is skipped before its tests are collected: they are absent."""
    assert merged.graft("E")["why"] == (
        "lost by id: tests: 2 of 3 test(s) that passed before did not pass after: "
        "checks/test_more.py::test_one (absent), checks/test_more.py::test_two (absent); "
        "lost by count: tests: 3 test(s) passed in every sample before, 1 in a sample after")


def test_the_flags_name_each_arm_that_touched_harness_with_its_files(merged: Merged) -> None:
    (round_,) = merged.obs.rounds
    assert [f for f in round_.flags if f.startswith("harness_touched")] == [
        "harness_touched:A (setup.cfg)",
        "harness_touched:B (Cargo.toml, checks/__init__.py, go.mod, package.json, "
        "pytest.ini, +2 more)"]
    assert [(g.from_arm, g.what, g.verified) for g in round_.grafts] == [
        ("B", "docs/notes.md", True), ("C", "checks/helpers.py", False),
        ("D", "checks/test_extra.py", False), ("E", "checks/helpers.py", False),
        ("F", "checks/test_more.py", False)]
    assert "- harness_touched:A (setup.cfg): the arm's diff changed harness files" in (
        merged.stage / "SCORECARD.md").read_text()
    assert read_observation(merged.repo / ".bakeoff" / merged.loaded.manifest.experiment.name
                            / "OBSERVATION.json") == merged.obs


def test_an_asked_graft_of_a_harness_file_is_exit_2_and_changes_nothing(
        merged: Merged, engine: Engine) -> None:
    before = (merged.stage / "merge.json").read_text()
    done = cli(merged.loaded.path.parent, "merge", "--change", "first", "--graft",
               "B:vitest.config.mts")
    assert done.returncode == 2, done.stderr[-2000:]
    assert ("--graft 'B:vitest.config.mts': vitest.config.mts is harness by name or place"
            in done.stderr)
    assert (merged.stage / "merge.json").read_text() == before
    assert git(merged.repo, "rev-parse", merged.loaded.manifest.experiment.branch) == (
        merged.record.head)
    assert engine.labelled("container", {
        LABEL_EXPERIMENT: merged.loaded.manifest.experiment.name}) == []
