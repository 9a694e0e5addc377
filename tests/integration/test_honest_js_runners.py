"""Honest work on a vitest and jest project (tests/fixtures/js-runners: jest 29.7.0 and
vitest 2.1.9 installed by the prepared image's `npm install`, node 18): for the whole
suite (from the root and after `cd test`), one named file and a `-t` name filter, the
base (a discount off by one) FAILs and the fix PASSes with exact counts. A command naming
one file, or a filter its name does not match, never runs the rig's must-fail file: none
is planted there (vitest still lists every test by id) and the record says what went
unguarded. One lab for both runners.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from rig.sample.outcome import Counts
from rig.sample.record import SampleRecord
from runner.containers import images, sandbox
from runner.containers.backend import LABEL_EXPERIMENT
from runner.containers.engine import Engine
from runner.containers.images import prepared
from runner.containers.samples.executor import DockerSampleExecutor
from tests.integration.attack_lab import Lab, commit, verdict
from tests.integration.helpers import PlainReporter, git

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "js-runners"
SOURCE = "src/cart.js"
FIX = (FIXTURE / SOURCE).read_text()
BUG = FIX.replace("cents >= 10000", "cents > 10000")
JEST_TEST, VITEST_TEST = "test/cart.jest.test.js", "test/cart.vitest.test.mjs"
BASE = {"package.json": (FIXTURE / "package.json").read_text(), SOURCE: BUG,
        JEST_TEST: (FIXTURE / JEST_TEST).read_text(),
        VITEST_TEST: (FIXTURE / VITEST_TEST).read_text()}
SETUP = prepared.Setup(("npm install --no-audit --no-fund",))

# (runner, command, protected file, the fix's exact counts). Both files hold 4 tests, a
# skipped one and a todo (counted skipped); `-t discount` keeps the 2 of `describe
# ('discount')`, the others reported skipped.
SHAPES = {
    "vitest: the suite": ("vitest", "npx vitest run --globals", VITEST_TEST,
                          Counts(passed=8, skipped=4)),
    "vitest: one file": ("vitest", f"npx vitest run --globals {VITEST_TEST}", VITEST_TEST,
                         Counts(passed=4, skipped=2)),
    "vitest: a name filter": ("vitest", "npx vitest run --globals vitest -t discount",
                              VITEST_TEST, Counts(passed=2, skipped=4)),
    "vitest: the suite from a subdirectory": ("vitest", "cd test && npx vitest run --globals",
                                              VITEST_TEST, Counts(passed=8, skipped=4)),
    "jest: the suite": ("jest", "npx jest", JEST_TEST, Counts(passed=4, skipped=2)),
    "jest: the suite from a subdirectory": ("jest", "cd test && npx jest", JEST_TEST,
                                            Counts(passed=4, skipped=2)),
    "jest: one file": ("jest", f"npx jest {JEST_TEST}", JEST_TEST,
                       Counts(passed=4, skipped=2)),
    "jest: a name filter": ("jest", "npx jest -t discount", JEST_TEST,
                            Counts(passed=2, skipped=4)),
}


@pytest.fixture(scope="module")
def lab(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("js-runners")
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    base = commit(repo, BASE, "base: the discount starts one cent late")
    toolchain = images.build(engine, ["node"], PlainReporter())[-1]
    image = prepared.prepare(engine, repo, base, toolchain, SETUP, lambda _: None)
    experiment = f"it-{secrets.token_hex(3)}"
    limits = sandbox.SandboxLimits(cpus=1.0, memory_mb=1024, pids=256)
    try:
        with DockerSampleExecutor(engine, repo, experiment, image, limits) as executor:
            found = Lab(repo, executor, root / "stage", base=base)
            yield found
    finally:
        engine.remove_labelled({LABEL_EXPERIMENT: experiment})


@pytest.fixture(scope="module")
def fixed(lab: Lab) -> str:
    return lab.on_base({SOURCE: FIX}, "fix")


def counted(record: SampleRecord) -> Counts | None:
    return None if record.counts is None else Counts(**record.counts.model_dump())


@pytest.mark.parametrize("name", list(SHAPES))
def test_the_base_fails_and_the_fix_passes(lab: Lab, fixed: str, name: str) -> None:
    runner, command, protected, want = SHAPES[name]
    how = {"command": command, "parser": runner, "protected": (protected,),
           "requires": ("node", "npm"), "check": f"shape{list(SHAPES).index(name)}",
           "timeout_s": 120}
    base = lab.grade(lab.base, **how)
    record = lab.grade(fixed, **how)
    assert verdict(base) == ("FAIL", "tests_failed"), base.detail
    assert verdict(record) == ("PASS", None), record.detail
    assert counted(record) == want, record.detail
    # The must-fail file runs (and failed as planted) exactly where the command selects it.
    selects = "suite" in name
    planted = record.canaries is not None and record.canaries["fail"] is not None
    assert planted is selects, record.canaries
    if selects:
        assert record.canaries is not None and record.canaries["seen"] == {
            "pass": "passed", "fail": "failed", "exit_agrees": True}
    else:
        assert record.unguarded, record.canaries
