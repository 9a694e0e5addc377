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

from rig.oracle import SampleSpec, run_sample
from runner import images, sandbox
from runner.engine import Engine
from runner.samples import DockerSampleExecutor
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
            got = {"exit_code": record.exit_code, "passed": record.counts.passed,
                   "failed": record.counts.failed, "skipped": record.counts.skipped,
                   "errors": record.counts.errors, "verdict": str(record.verdict)}
            assert got == {k: want[k] for k in got}, record.detail
            if "reason" in want:
                assert record.reason == want["reason"]

