"""Each toolchain image scores a real fixture project through the oracle: a passing
commit and a failing one (fail.patch), with the exact counts of EXPECTED.json.

The Rust case is the one a first-match grep gets wrong: the lib binary reports its
passes first, the failure is in one integration binary, and the counts are the sum
over every binary and the doc-tests."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from rig.sample.oracle import run_sample
from rig.sample.record import SampleRecord
from rig.sample.spec import SampleSpec
from runner.containers import images, sandbox
from runner.containers.engine import Engine
from runner.containers.samples.executor import DockerSampleExecutor
from tests.integration.helpers import PlainReporter, git

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CASES = [("go-mod", "go-test"), ("node-test", "node-test"), ("pytest-proj", "pytest"),
         ("rust-ws", "cargo")]


@pytest.mark.parametrize(("fixture", "parser"), CASES)
def test_oracle_counts_match_the_fixture_on_pass_and_fail(
        engine: Engine, tmp_path: Path, fixture: str, parser: str) -> None:
    expected = json.loads((FIXTURES / fixture / "EXPECTED.json").read_text())
    name = expected["image"].split("/")[1].split(":")[0]
    image = images.build(engine, [name], PlainReporter())[-1]
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / fixture, repo, ignore=shutil.ignore_patterns("target"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "pass")
    passing = git(repo, "rev-parse", "HEAD")
    git(repo, "apply", expected["fail_patch"])
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "fail")
    failing = git(repo, "rev-parse", "HEAD")
    check = expected["parsers"][parser]
    limits = sandbox.SandboxLimits(cpus=2.0, memory_mb=2048, pids=512)
    with DockerSampleExecutor(engine, repo, f"tc-{os.getpid()}", image, limits) as executor:
        for label, commit in (("pass", passing), ("fail", failing)):
            spec = SampleSpec(change="toolchain", arm=fixture, check=label, n=1,
                              commit=commit, base_commit=passing, command=check["command"],
                              parser=parser, timeout_s=600)
            record = run_sample(executor, spec, tmp_path / "stage")
            want = check[label]
            assert record.counts is not None, record.detail
            # The exit status graded: a must-fail canary's failure is taken out of it.
            got = {"exit_code": record.exit_code_graded, "passed": record.counts.passed,
                   "failed": record.counts.failed, "skipped": record.counts.skipped,
                   "errors": record.counts.errors, "verdict": str(record.verdict)}
            assert got == {k: want[k] for k in got}, record.detail
            if "reason" in want:
                assert record.reason == want["reason"]
            assert_canaries_as_planted(record)


def assert_canaries_as_planted(record: SampleRecord) -> None:
    """Every toolchain's runner reported the rig's canaries as they were planted."""
    canaries = record.canaries
    assert canaries is not None, f"{record.sample}: no canaries planted"
    seen = canaries["seen"]
    assert isinstance(seen, dict)
    expect = canaries["fail_expect"] if canaries["fail"] is not None else None
    assert (seen["pass"], seen["fail"]) == ("passed", expect), (record.sample, canaries)



CRATE = {
    "Cargo.toml": '[package]\nname = "edge"\nversion = "0.1.0"\nedition = "2021"\n',
    "src/lib.rs": "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
    "tests/it.rs": "#[test]\nfn adds() {\n    assert_eq!(edge::add(2, 2), 5);\n}\n",
}


def test_cargo_lib_reporting_zero_passed_does_not_hide_a_failing_integration_binary(
        engine: Engine, tmp_path: Path) -> None:
    """The first `test result:` line is the lib's `ok. 0 passed`: a first-match grep would
    call this a pass (or no tests); the sum over every binary is 1 failed."""
    image = images.build(engine, ["rust"], PlainReporter())[-1]
    repo = tmp_path / "repo"
    for name, text in CRATE.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "edge")
    head = git(repo, "rev-parse", "HEAD")
    limits = sandbox.SandboxLimits(cpus=2.0, memory_mb=2048, pids=512)
    with DockerSampleExecutor(engine, repo, f"tc-{os.getpid()}", image, limits) as executor:
        spec = SampleSpec(change="toolchain", arm="edge", check="cargo", n=1, commit=head,
                          base_commit=head, command="cargo test --no-fail-fast --offline",
                          parser="cargo", timeout_s=600)
        record = run_sample(executor, spec, tmp_path / "stage")
    log = (tmp_path / "stage" / "samples" / "edge" / "cargo" / "1.log").read_text()
    assert log.index("test result: ok. 0 passed") < log.index("test result: FAILED")
    assert (str(record.verdict), record.reason) == ("FAIL", "tests_failed"), record.detail
    assert record.counts is not None
    assert (record.counts.passed, record.counts.failed) == (0, 1)
