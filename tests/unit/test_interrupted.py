"""A sample an outage cut is no result (issue 31): its attempt is kept aside for the log,
no record is written in its place, `run_all` starts no sample after it and ends with
`OutageError` (exit 3) naming it, and the same command run again runs it (and only it)
again. Interrupted attempts are counted per arm, never read as records."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from rig.errors import SampleInterruptedError
from rig.sample.oracle import run_sample, sample_paths
from rig.sample.record import SampleRecord
from rig.sample.spec import Execution, SampleSpec
from runner.commands import sample_plan, sample_runs
from runner.errors import OutageError
from runner.store import layout

SPEC = SampleSpec(change="cap", arm="a1", check="success", n=1, commit="c0ffee",
                  base_commit="ba5e", command="pytest -q", parser="exit-code", timeout_s=60)
OUTAGE = "the engine at tcp://10.0.0.2:2375 does not answer: connection refused"


class Scripted:
    """An executor whose samples exit 0, except the ones named in `cut` (by sample id),
    which an outage cuts once each; it remembers what it ran."""

    def __init__(self, cut: set[str]) -> None:
        self.cut, self.ran = set(cut), []  # type: list[str]
        self.image = SimpleNamespace(image_id="sha256:1mage")
        self.engine = SimpleNamespace(workers=1)  # one at a time (the pool: its workers)
        self.lock = threading.Lock()

    def execute(self, spec: SampleSpec) -> Execution:
        with self.lock:
            self.ran.append(spec.sample)
            if spec.sample in self.cut:
                self.cut.discard(spec.sample)
                return Execution(exit_code=None, log="half a log\n", duration_s=0.1,
                                 infra_error=f"the rig failed: {OUTAGE}", interrupted=OUTAGE)
        return Execution(exit_code=0, log="ok\n", duration_s=0.1)


def test_a_cut_sample_leaves_no_record_and_keeps_its_attempt(tmp_path: Path) -> None:
    executor = Scripted({SPEC.sample})
    with pytest.raises(SampleInterruptedError) as raised:
        run_sample(executor, SPEC, tmp_path)  # type: ignore[arg-type]
    record_path, _ = sample_paths(tmp_path, SPEC)
    assert not record_path.exists()
    kept = tmp_path / "samples/a1/success/retried/1-1.json"
    assert raised.value.kept == str(kept) and raised.value.why == OUTAGE
    attempt = SampleRecord.model_validate_json(kept.read_text())
    assert (attempt.verdict, attempt.reason) == ("RIG_ERROR", "infra")
    assert kept.with_suffix(".log").read_text() == "half a log\n"
    assert layout.sample_records(tmp_path, "a1", "success") == []  # never read as a result

    again = run_sample(executor, SPEC, tmp_path)  # type: ignore[arg-type]
    assert (again.verdict, again.reason) == ("PASS", None)
    assert executor.ran == [SPEC.sample, SPEC.sample]
    assert layout.retried_attempts(tmp_path, "a1") == [kept]


def test_attempts_of_one_sample_are_numbered(tmp_path: Path) -> None:
    for _ in range(2):
        with pytest.raises(SampleInterruptedError):
            run_sample(Scripted({SPEC.sample}), SPEC, tmp_path)  # type: ignore[arg-type]
    assert [p.name for p in layout.retried_attempts(tmp_path, "a1")] == [
        "1-1.json", "1-2.json"]


def specs(n: int) -> list[SampleSpec]:
    return [SampleSpec(change="cap", arm=arm, check="success", n=k, commit="c0ffee",
                       base_commit="ba5e", command="pytest -q", parser="exit-code",
                       timeout_s=60)
            for arm in ("a1", "a2") for k in range(1, n + 1)]


def test_run_all_stops_at_a_cut_and_a_second_run_redoes_only_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    todo = specs(3)
    executor = Scripted({"cap/a1/success/2"})
    said: list[str] = []
    with pytest.raises(OutageError) as raised:
        sample_runs.run_all(executor, todo, tmp_path, said.append, diagnose=False)  # type: ignore[arg-type]
    assert raised.value.samples == ["cap/a1/success/2"] and raised.value.exit_code == 3
    assert str(raised.value).startswith(
        f"an outage cut 1 sample(s), and no result was recorded for them "
        f"(cap/a1/success/2): {OUTAGE}")
    assert executor.ran == ["cap/a1/success/1", "cap/a1/success/2"]  # none started after
    assert f"cap/a1/success/2: cut by an outage ({OUTAGE}); it runs again on resume" in said

    records = sample_runs.run_all(executor, todo, tmp_path, said.append, diagnose=False)  # type: ignore[arg-type]
    assert [(r.sample, r.verdict) for r in records] == [(s.sample, "PASS") for s in todo]
    assert executor.ran[2:] == [s.sample for s in todo[1:]]  # the stored one is not re-run
    assert [len(layout.retried_attempts(tmp_path, arm)) for arm in ("a1", "a2")] == [1, 0]


def test_a_base_run_an_outage_cut_voids_the_arm_sample_that_asked_for_it(
        tmp_path: Path) -> None:
    """The arm's verdict needed the base's run (a rig-looking fault), and that run was
    cut: the arm's sample is no result either, and runs again."""
    spec = SampleSpec(change="cap", arm="a1", check="success", n=1, commit="c0ffee",
                      base_commit="ba5e", command="pytest -q", parser="pytest",
                      timeout_s=60)  # not an exit-code check: no tripwire

    class Faulty(Scripted):
        def execute(self, spec: SampleSpec) -> Execution:
            if spec.arm == "a1":
                self.ran.append(spec.sample)
                return Execution(exit_code=None, log="", duration_s=0.1,
                                 infra_error="the layout failed", layout_failed=True)
            return super().execute(spec)

    executor = Faulty({"cap/@base/success/1"})
    with pytest.raises(OutageError) as raised:
        sample_runs.run_all(executor, [spec], tmp_path, lambda _: None)  # type: ignore[arg-type]
    assert raised.value.samples == ["cap/@base/success/1"]
    assert layout.sample_records(tmp_path, "a1", "success") == []


@pytest.mark.parametrize(("engine_down", "server_down", "error", "expected"), [
    (OUTAGE, None, "refusal", OUTAGE),  # the engine does not answer: whatever it said
    (None, None, "failed", "the engine at tcp://e:2375 failed to wait: reset"),
    (None, "the experiment's Postgres is exited", "database",
     "the experiment's Postgres is exited"),
    (None, None, "refusal", None),  # a refusal of an answering engine: the rules judge it
    (None, None, "database", None),  # a statement refused by a running server: the same
])
def test_an_outage_is_told_from_a_refusal(engine_down: str | None, server_down: str | None,
                                          error: str, expected: str | None) -> None:
    from runner.containers.samples.executor import DockerSampleExecutor
    from runner.errors import DatabaseError, EngineFailedError, EngineRefusedError
    errors = {"refusal": EngineRefusedError("tcp://e:2375", "create a container", "bad",
                                            status=400),
              "failed": EngineFailedError("the engine at tcp://e:2375 failed to wait: reset",
                                          hint="check"),
              "database": DatabaseError("relation exists")}
    executor = SimpleNamespace(engine=SimpleNamespace(down=lambda: engine_down),
                               networks=SimpleNamespace(
                                   server_down=lambda within_s=0.0: server_down))
    assert DockerSampleExecutor.outage(executor, errors[error]) == expected  # type: ignore[arg-type]


def test_redo_rig_errors_sets_only_the_rig_errors_aside(tmp_path: Path) -> None:
    """`score --redo-rig-errors`: each arm's RIG_ERROR record (and its log) moves under
    retried/, so the sample runs again; a PASS or a FAIL stays the result it is."""
    from rig.persist import write_text_atomic
    from tests.unit.test_score import record
    letters = {"A": "PFR", "B": "RR"}
    for arm, verdicts in letters.items():
        for n, letter in enumerate(verdicts, 1):
            stored = record(arm, "success", n, letter)
            path, log = sample_paths(tmp_path, stored)
            write_text_atomic(path, stored.model_dump_json())
            write_text_atomic(log, f"log {n}\n")
    loaded = SimpleNamespace(manifest=SimpleNamespace(arms=[SimpleNamespace(id=a)
                                                            for a in letters]))
    said: list[str] = []
    assert sample_plan.redo(loaded, tmp_path, said.append) == [  # type: ignore[arg-type]
        "cap/A/success/3", "cap/B/success/1", "cap/B/success/2"]
    assert said == ["set aside 3 rig-error sample(s) to run again: cap/A/success/3, "
                    "cap/B/success/1, cap/B/success/2"]
    assert [p.name for p in layout.sample_records(tmp_path, "A", "success")] == [
        "1.json", "2.json"]
    assert layout.sample_records(tmp_path, "B", "success") == []
    kept = layout.retried_attempts(tmp_path, "B")
    assert [p.name for p in kept] == ["1-1.json", "2-1.json"]
    assert kept[1].with_suffix(".log").read_text() == "log 2\n"
