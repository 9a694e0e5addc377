"""`BaseRuns` runs the base's sample once per what makes it: arms, sample numbers, canary
tokens and an arm's tripwire guard share one run; another command or base commit is
another run (a lab's attacks on several bases must not read one base's result)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rig.guards.tripwire import Finding
from rig.sample.record import SampleRecord
from rig.sample.spec import SampleSpec
from runner.commands import sample_runs
from tests.unit.test_score import record

SPEC = SampleSpec(change="cap", arm="a1", check="success", n=1, commit="c0ffee",
                  base_commit="ba5e", command="pytest -q", parser="pytest", timeout_s=60)


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[SampleSpec]:
    found: list[SampleSpec] = []

    def run_sample(executor: Any, spec: SampleSpec, stage: Path, *_: Any) -> SampleRecord:
        found.append(spec)
        return record(spec.arm, spec.check, spec.n, "F", commit=spec.commit)

    monkeypatch.setattr(sample_runs, "run_sample", run_sample)
    return found


def bases() -> sample_runs.BaseRuns:
    executor = SimpleNamespace(image=SimpleNamespace(image_id="sha256:1mage"))
    return sample_runs.BaseRuns(executor, Path("/nonexistent"))  # type: ignore[arg-type]


def test_one_base_run_serves_every_arm_sample_and_guard(ran: list[SampleSpec]) -> None:
    runs = bases()
    guard = Finding(sample="cap/a1/success/tripwire", blind="the planted file not seen")
    for spec in (SPEC, dataclasses.replace(SPEC, arm="a2", n=3, token="beef"),
                 dataclasses.replace(SPEC, commit="d00d", guard=guard)):
        runs(spec)
    assert [(s.arm, s.n, s.commit, s.token, s.guard) for s in ran] == [
        ("@base", 1, "ba5e", None, None)]


def test_another_command_or_base_commit_is_another_base_run(ran: list[SampleSpec]) -> None:
    runs = bases()
    for spec in (SPEC, dataclasses.replace(SPEC, command="pytest -q tests"),
                 dataclasses.replace(SPEC, base_commit="f00d"), SPEC):
        runs(spec)
    assert [(s.commit, s.command) for s in ran] == [
        ("ba5e", "pytest -q"), ("ba5e", "pytest -q tests"), ("f00d", "pytest -q")]
