"""A real TypeScript project as its users run it (issue 21), through `run` (up, dispatch,
score, merge, down, report): tests/fixtures/ts-router, a path-matching library on
TypeScript 5.9 and vitest 3.2 from the npm registry with its lockfile, plain `npm ci` as
setup (through this machine's TLS-intercepting proxy), the Node its `.nvmrc` pins (22),
its own `npm run build` in every sample (the success criterion imports `dist/`, as the
package's users do), vitest and `tsc --noEmit` as checks, five scripted contestants.

One run is shared by the tests of this module."""

from __future__ import annotations

import json
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from rig.report import read_observation
from runner.containers import sandbox
from runner.containers.backend import LABEL_EXPERIMENT, Labels
from runner.containers.engine import Engine
from tests.integration.helpers import cli, flat_record, git

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "ts-router"
CHANGE = "decode-params"
CHECKS = ("success", "tests", "typecheck")


class Run:
    def __init__(self, root: Path, name: str, stdout: str, engine_id: str) -> None:
        self.root, self.name, self.stdout, self.engine_id = root, name, stdout, engine_id
        self.repo = root / "repo"
        self.state = self.repo / ".bakeoff" / name
        self.stage = self.state / "stages" / CHANGE

    def samples(self, arm: str, check: str) -> list[dict[str, object]]:
        folder = self.stage / "samples" / arm / check
        return [flat_record(p) for p in sorted(folder.glob("*.json"))]

    def verdicts(self, arm: str, check: str) -> list[tuple[object, object]]:
        return [(s["verdict"], s["reason"]) for s in self.samples(arm, check)]


@pytest.fixture(scope="module")
def run(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    root = tmp_path_factory.mktemp("ts") / "ts-router"
    shutil.copytree(FIXTURE, root)
    name = f"ts-{secrets.token_hex(3)}"
    manifest = root / "bakeoff.toml"
    manifest.write_text(manifest.read_text().replace('name = "ts-router"', f'name = "{name}"')
                        .replace('"bakeoff/ts-router"', f'"bakeoff/{name}"'))
    repo = root / "repo"
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "ts-router 1.4.0")
    try:  # a run that failed leaves its `up` behind: removed whatever happened
        done = cli(root, "run", timeout=1500)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        yield Run(root, name, done.stdout, str(engine.client.info()["ID"]))
    finally:
        engine.remove_labelled({LABEL_EXPERIMENT: name})


def test_each_contestant_gets_its_exact_verdicts_and_the_fixer_wins(run: Run) -> None:
    """control: the bug stays; fixer: everything passes; cheat (a vitest config that
    leaves the failing file out, the protected test skipped): its config is not the
    harness and the protected file is restored, so the criterion fails as on the base;
    type-breaker: runs, and tsc rejects it; build-breaker: the library's own build fails
    on its tree, every check that builds is its build_failed."""
    fail, ok = ("FAIL", "tests_failed"), ("PASS", None)
    expected = {
        "control": {"success": fail, "tests": ok, "typecheck": ok},
        "fixer": {"success": ok, "tests": ok, "typecheck": ok},
        "cheat": {"success": fail, "tests": ok, "typecheck": ok},
        "type-breaker": {"success": ok, "tests": ok, "typecheck": ("FAIL", "check_failed")},
        "build-breaker": {"success": ("FAIL", "build_failed"),
                          "tests": ("FAIL", "build_failed"),
                          "typecheck": ("FAIL", "check_failed")},
    }
    got = {arm: {check: set(run.verdicts(arm, check)) for check in CHECKS} for arm in expected}
    assert got == {arm: {check: {want} for check, want in checks.items()}
                   for arm, checks in expected.items()}
    assert all(len(run.samples(arm, check)) == 3 for arm in expected for check in CHECKS)
    observation = read_observation(run.state / "OBSERVATION.json")
    (round_,) = observation.rounds
    assert round_.winner == "fixer"
    assert "harness_touched:cheat (vitest.config.mts)" in round_.flags
    merge = json.loads((run.stage / "merge.json").read_text())
    assert merge["winner"] == "fixer"
    branch = git(run.repo, "rev-parse", f"bakeoff/{run.name}")
    assert git(run.repo, "show", f"{branch}:src/match.ts").count("decodeURIComponent") == 1


def test_the_arm_verifies_in_its_sandbox_with_the_dependencies_and_commits_only_its_work(
        run: Run) -> None:
    """The arm's checkout has setup's dependencies as a sample does (links, nothing
    copied): the fixer builds, typechecks and runs every test there; neither the links nor
    what its build wrote become part of its work."""
    log = (run.stage / "arms" / "fixer" / "dispatch.log").read_text()
    assert "Tests  16 passed (16)" in log
    arm = json.loads((run.stage / "arms" / "fixer" / "arm.json").read_text())
    changed = git(run.repo, "diff", "--name-only", f"{arm['base_commit']}..{arm['commit']}")
    assert changed.splitlines() == ["src/match.ts"]


def test_the_reasons_say_what_happened(run: Run) -> None:
    """A failed build names the build and its error; a failed typecheck its count and
    tsc's lines; the base's failing criterion its counts (vitest lists every test: the
    protected tests are checked by id, and the fixer's pass is one)."""
    broken = run.samples("build-breaker", "success")[0]
    assert broken["build"] == ["npm run build"] and broken["build_exit"] == 2
    assert broken["detail"] == (
        "the build (npm run build) failed: exit 2 with 1 error; its last lines: > "
        "ts-router@1.4.0 build | > tsc -p tsconfig.build.json | src/extra.ts(1,59): error "
        "TS1005: ')' expected.; the base's build in the same image succeeds")
    typed = run.samples("type-breaker", "typecheck")[0]
    assert typed["build"] == [] and typed["build_exit"] is None  # build = false
    assert str(typed["detail"]).startswith(
        "exit 2: the command failed with 3 errors; its last lines: src/match.ts(")
    assert "error TS2322: Type 'string' is not assignable to type 'number'." in str(
        typed["detail"])
    fixed = run.samples("fixer", "success")[0]
    assert fixed["engine"]["id"] == run.engine_id  # the engine the sample ran on (issue 24)
    assert (fixed["build_exit"], fixed["counts"]) == (0, {"passed": 5, "failed": 0,
                                                          "skipped": 0, "errors": 0})
    ids = sorted(str(t["id"]) for t in fixed["tests"])  # type: ignore[union-attr]
    assert ids == [f"test/decode.test.ts > params are decoded > {name}" for name in (
        "a wildcard is decoded segment by segment", "an encoded slash stays inside its param",
        "compile and match round-trip", "malformed encoding is kept as written",
        "percent-encoded UTF-8")]
    assert (run.stage / "samples" / "fixer" / "success" / "1.build.log").read_text().count(
        "> tsc -p tsconfig.build.json") == 1


def test_the_sample_tree_is_the_arms_plus_dependencies_never_the_bases_build(
        run: Run, engine: Engine) -> None:
    """Issue 21 item 2: `npm ci` runs the package's `prepare` (its build): the base's
    dist/ and tsbuildinfo were in every sample, so a criterion importing dist/ scored the
    base's build. The prepared image keeps node_modules once (deps/, shared through links),
    drops the rest and lists it; the fixer passes only because its own build made dist/."""
    record = run.samples("fixer", "success")[0]
    image = str(record["image_id"])
    labels = Labels(run.name, "ts-check")
    seen = sandbox.check_image(engine, image, ["sh", "-c", (
        "cd /opt/bakeoff/prepared && cat kept.txt && echo -- && cat dropped.txt && echo -- "
        "&& readlink skel/node_modules/vitest && ls -d skel/node_modules/.bin deps/node_modules "
        "&& ls work dist 2>&1 | wc -l")], labels)
    assert seen.splitlines() == [
        "deps\tnode_modules", "--", "dist/index.d.ts", "dist/index.js", "dist/match.d.ts",
        "dist/match.js", "tsconfig.build.tsbuildinfo", "--",
        "/opt/bakeoff/prepared/deps/node_modules/vitest", "deps/node_modules",
        "skel/node_modules/.bin", "2"]
    contract = json.loads((run.stage / "contract.lock.json").read_text())
    toolchain = contract["versions"][-1]["contract"]["toolchain"]
    assert toolchain["node"] == "Node 22.20.0 (.nvmrc: 22)"
    assert (toolchain["setup"], toolchain["build"]) == (["npm ci"], ["npm run build"])
    node = sandbox.check_image(engine, image, ["node", "--version"], labels)
    assert node.strip() == "v22.20.0"


def test_reproduce_rebuilds_the_arms_dist_and_passes_again(run: Run) -> None:
    done = cli(run.root, "reproduce", f"{CHANGE}/fixer/success/2", timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "reproduced: the same verdict, counts and exit code" in done.stdout
