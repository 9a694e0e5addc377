"""`rig.guards.observer.read` and the verdict rules that rest on it (rules 7, 9, 12), pure: the
records a sample's root reader kept (built here as the hook writes them,
`tests/unit/observed.py`) in, an observation and a verdict out."""

from __future__ import annotations

import json

from rig.guards import observer
from rig.guards.observer import Status
from rig.parsers.base import Counts, ParseResult, TestCase, TestStatus
from rig.sample import verdict
from rig.sample.evidence import Evidence
from rig.sample.recorded import Base
from rig.sample.verdict import FailReason, RigErrorReason, Verdict
from tests.unit import observed

H = "tests/test_h.py::test_h"


def test_an_honest_session_is_read_test_by_test_with_the_rig_s_attestation() -> None:
    seen = observer.read(observed.honest(protected_ok=True).text())
    assert (seen.present, seen.sessions, seen.finished, seen.status) == (True, 1, True, 0)
    assert seen.anomalies == ()
    assert seen.test(H) == observer.Test(H, Status.PASSED, True, True, True)
    assert seen.counts(excluding="ab12") == Counts(passed=1)
    assert seen.counts() == Counts(passed=2, skipped=1)


def test_no_reader_output_is_no_observation() -> None:
    assert observer.read(None).present is False
    assert observer.read(json.dumps({"ready": 3}) + "\n").present is False


def test_a_record_from_a_process_that_never_started_a_session_is_forged() -> None:
    stream = observed.honest()
    stream.lines.append(json.dumps({"pid": 9, "uid": 1000, "d": json.dumps(
        {"b": json.dumps({"s": 5, "k": "end", "id": H, "ok": True}), "m": "0" * 32})}))
    kinds = {a.kind: a.detail for a in observer.read(stream.text()).anomalies}
    assert kinds == {"forged": "process 9 sent records without starting a session"}


def test_a_gap_in_a_session_s_records_is_an_anomaly() -> None:
    stream = observed.honest()
    del stream.lines[3]
    kinds = {a.kind for a in observer.read(stream.text()).anomalies}
    assert "sequence" in kinds


def test_a_record_that_is_not_json_or_not_the_rig_s_is_forged() -> None:
    stream = observed.honest()
    stream.lines.append(json.dumps({"pid": 100, "uid": 1000, "d": "5 passed in 0.01s"}))
    assert [a.kind for a in observer.read(stream.text()).anomalies] == ["forged"]


def test_a_call_the_rig_saw_raise_that_pytest_reports_passed_is_a_contradiction() -> None:
    stream = observed.Stream().session().config().item(H, True)
    stream.run(H, False, "passed", verified=True).finish(0)
    [anomaly] = observer.read(stream.text()).anomalies
    assert (anomaly.kind, anomaly.detail) == (
        "contradiction", f"{H}: pytest's report says passed, the rig saw its call raise")


def test_a_pass_reported_for_a_call_the_rig_never_saw_is_unattested() -> None:
    stream = observed.Stream().session().config().item(H, True)
    stream.raw({"k": "report", "id": H, "when": "call", "outcome": "passed", "xfail": False})
    [anomaly] = observer.read(stream.finish(0).text()).anomalies
    assert anomaly.kind == "unattested"


def test_xdist_workers_run_the_tests_and_the_controller_gives_the_status() -> None:
    controller = observed.Stream(pid=10).session().config()
    worker = observed.Stream(pid=11, key=b"w" * 32, worker=True).session().config()
    other = observed.Stream(pid=12, key=b"v" * 32, worker=True).session().config()
    worker.item(H, True).run(H, True, "passed", verified=True).finish(0)
    other.item(H, True).finish(0)  # collected, run by the first worker
    controller.raw({"k": "report", "id": H, "when": "call", "outcome": "passed",
                    "xfail": False}).finish(0)
    seen = observer.read(controller.text(worker, other))
    assert (seen.sessions, seen.status, seen.anomalies) == (3, 0, ())
    assert seen.test(H) == observer.Test(H, Status.PASSED, True, True, True)


def test_a_test_two_sessions_ran_is_a_duplicate() -> None:
    first = observed.Stream(pid=10).session().item(H, True).run(H, False, "failed").finish(1)
    second = observed.Stream(pid=20, key=b"z" * 32).session().item(H, True)
    second.run(H, True, "passed").finish(0)
    kinds = {a.kind: a.detail for a in observer.read(first.text(second)).anomalies}
    assert kinds == {"duplicate": f"{H} ran in two sessions"}


CHILD = "tests/test_child.py::test_runs_pytest"
INNER = "test_inner.py::test_inner"


def nested_in_a_test(inner: observed.Stream) -> str:
    """The run's session, whose test CHILD runs pytest in a subprocess (`inner`) while it
    is running, then the protected test H: the records in the order the reader gets them."""
    outer = observed.Stream(pid=10).session().config().item(H, True).item(CHILD)
    outer.raw({"k": "start", "id": CHILD, "verified": False})
    before = len(outer.lines)
    outer.raw({"k": "end", "id": CHILD, "ok": True, "verified": False})
    outer.raw({"k": "report", "id": CHILD, "when": "call", "outcome": "passed", "xfail": False})
    outer.run(H, True, "passed", verified=True).finish(0)
    outer.lines[before:before] = inner.lines
    return outer.text()


def test_a_pytest_run_a_test_starts_in_a_subprocess_is_nested_not_the_run_s() -> None:
    """Issue 30's honest twin of the second session: a test that runs pytest in a
    subprocess (pytester, a plugin's self-test) opens a session while it runs. Its tests
    are not the run's, and it is not one of the run's sessions: one session, one nested,
    no anomaly, the run's own counts."""
    inner = observed.Stream(pid=20, key=b"i" * 32).session().config().item(INNER)
    inner.run(INNER, True, "passed").finish(0)
    seen = observer.read(nested_in_a_test(inner))
    assert (seen.sessions, seen.nested, seen.anomalies, seen.finished) == (1, 1, (), True)
    assert sorted(t.id for t in seen.tests) == sorted([CHILD, H])
    assert seen.counts() == Counts(passed=2)
    judged = verdict.judge(pytest_sample(nested_in_a_test(inner), 0), BASE)
    assert judged.outcome.verdict is Verdict.PASS, judged.outcome.detail


def test_a_nested_session_that_stands_for_a_test_of_the_run_is_a_duplicate() -> None:
    """The forged-session attack moved into a test: the subprocess runs a copy of the
    protected test on a stub. Its id is one of the run's: a duplicate, and the run's own
    record of that test is the one read."""
    inner = observed.Stream(pid=20, key=b"i" * 32).session().config().item(H, True)
    inner.run(H, True, "passed", verified=True).finish(0)
    seen = observer.read(nested_in_a_test(inner))
    assert {a.kind: a.detail for a in seen.anomalies} == {
        "duplicate": f"{H} ran in two sessions (one started by a test)"}
    judged = verdict.judge(pytest_sample(nested_in_a_test(inner), 0), BASE)
    assert (judged.outcome.verdict, judged.outcome.reason) == (Verdict.FAIL,
                                                               FailReason.tampered)


def test_a_session_opened_at_collection_is_the_run_s_own() -> None:
    """Opened while no test runs (at import, at collection: the forged-session attacks),
    a second session is one of the run's: compared with the base's one, tampered."""
    first = observed.Stream(pid=10).session().config().item(H, True)
    second = observed.Stream(pid=20, key=b"z" * 32).session().config().finish(0)
    first.run(H, True, "passed", verified=True).finish(0)
    seen = observer.read(first.text(second))
    assert (seen.sessions, seen.nested) == (2, 0)


def test_a_call_that_started_and_never_ended_is_aborted() -> None:
    stream = observed.Stream().session().item(H, True)
    stream.raw({"k": "start", "id": H, "verified": True})
    seen = observer.read(stream.text())
    assert seen.test(H) is not None and seen.test(H).status is Status.ABORTED  # type: ignore[union-attr]
    assert seen.finished is False


def test_the_reader_s_overflow_is_kept() -> None:
    text = observed.honest().text() + json.dumps({"overflow": 16 << 20}) + "\n"
    assert observer.read(text).overflow is True


def test_summary_round_trips_through_a_record() -> None:
    seen = observer.read(observed.honest().text())
    assert observer.tests_of(observer.summary(seen)) == seen.tests


# -- the verdict rules that rest on it ---------------------------------------------------


BASE = Base("c/@base/success/1", Verdict.FAIL, "tests_failed", observed=True, sessions=1,
            inipath="/work/pyproject.toml", plugins=("bakeoff_observer",),
            tests=(observer.Test(H, Status.FAILED, True, True, True),))


def pytest_sample(stream: str, exit_code: int, check: str = "success") -> Evidence:
    return Evidence(parser="pytest", exit_code=exit_code, observed=True,
                    observation=observer.read(stream), by_id=check == "success")


def test_no_session_where_the_base_had_one_is_tampered() -> None:
    """Without the base, a silent observer leaves the output to decide; a pass (or a
    rig error) asks the base, whose run had a session: tampered."""
    printed = ParseResult(counts=Counts(passed=1), summaries=1)
    silent = Evidence(parser="pytest", exit_code=0, observed=True, parsed=printed,
                      by_id=True)
    alone = verdict.judge(silent)
    assert (alone.outcome.verdict, alone.needs_base) == (Verdict.PASS, True)
    got = verdict.judge(silent, BASE).outcome
    assert (got.verdict, got.reason) == (Verdict.FAIL, FailReason.tampered)
    assert got.detail.startswith("the rig's observer heard nothing from pytest")


def test_no_session_on_the_base_either_falls_back_to_the_output() -> None:
    quiet = Base("b", Verdict.FAIL, "tests_failed")
    sample = Evidence(parser="pytest", exit_code=1, observed=True,
                      parsed=ParseResult(counts=Counts(failed=1), summaries=1))
    judged = verdict.judge(sample, quiet)
    assert (judged.outcome.reason, judged.unguarded) == (
        FailReason.tests_failed, ("no canary could be planted for this pytest command",
                                  "the rig's observer saw no pytest session"))


def test_another_number_of_sessions_than_the_base_s_is_tampered() -> None:
    extra = observed.Stream(pid=7, key=b"q" * 32).session().finish(0)
    got = verdict.judge(pytest_sample(observed.honest(True).text(extra), 0), BASE).outcome
    assert (got.verdict, got.reason) == (Verdict.FAIL, FailReason.tampered)
    assert "sessions (2, the base had 1)" in got.detail


def test_an_anomaly_the_base_shows_too_says_nothing() -> None:
    flagged = observed.honest(True)
    flagged.raw({"k": "flag", "flag": "frames", "detail": "sys._getframe by /work/x.py:f"})
    sample = pytest_sample(flagged.text(), 0)
    assert verdict.judge(sample, BASE).outcome.reason is FailReason.tampered
    same = Base(**{**BASE.__dict__, "anomalies": frozenset({"flag:frames"})})
    assert verdict.judge(sample, same).outcome.verdict is Verdict.PASS


def test_an_exit_code_that_is_not_pytest_s_own_status_is_exit_mismatch() -> None:
    got = verdict.judge(pytest_sample(observed.honest(False).text(), 0), BASE).outcome
    assert (got.verdict, got.reason, got.detail) == (
        Verdict.FAIL, FailReason.exit_mismatch,
        "exit 0, but pytest's own session ended with status 1")


def test_a_check_that_ended_without_its_session_s_end_is_aborted_without_the_base() -> None:
    stream = observed.Stream().session().config().item(H, True)
    judged = verdict.judge(pytest_sample(stream.text(), 0, check="tests"))
    assert (judged.outcome.reason, judged.needs_base) == (FailReason.aborted, False)


def test_a_timed_out_run_is_a_timeout_not_an_aborted_session() -> None:
    stream = observed.Stream().session().config().item(H, True)
    sample = Evidence(parser="pytest", exit_code=124, timed_out=True, observed=True,
                      observation=observer.read(stream.text()), by_id=True)
    assert verdict.judge(sample, BASE).outcome.reason is FailReason.timeout


def test_a_sample_the_host_had_to_stop_is_fail_timeout_unless_the_base_s_was_too() -> None:
    sample = Evidence(parser="pytest", outlived=True)
    alone = verdict.judge(sample)
    assert (alone.outcome.reason, alone.needs_base) == (FailReason.timeout, True)
    assert verdict.judge(sample, BASE).outcome.reason is FailReason.timeout
    stuck = Base("b", Verdict.RIG_ERROR, "infra", outlived=True)
    got = verdict.judge(sample, stuck).outcome
    assert (got.verdict, got.reason) == (Verdict.RIG_ERROR, RigErrorReason.infra)
    own = verdict.judge(Evidence(parser="pytest", outlived=True, of_base=True)).outcome
    assert own.verdict is Verdict.RIG_ERROR


def lines(*cases: tuple[str, TestStatus]) -> ParseResult:
    tests = tuple(TestCase(i, s) for i, s in cases)
    passed = sum(1 for _, s in cases if s is TestStatus.PASSED)
    failed = sum(1 for _, s in cases if s is TestStatus.FAILED)
    return ParseResult(counts=Counts(passed=passed, failed=failed), summaries=1, summed=True,
                       tests=tests)


GO_BASE = Base("c/@base/success/1", Verdict.FAIL, "tests_failed",
               tests=(observer.Test("pkg/TestH", Status.FAILED),
                      observer.Test("pkg/TestOther", Status.PASSED)))


def test_a_go_protected_test_missing_from_the_arm_s_output_is_not_run() -> None:
    sample = Evidence(parser="go-test", exit_code=0, by_id=True,
                      parsed=lines(("pkg/TestOther", TestStatus.PASSED)))
    assert verdict.judge(sample).needs_base
    got = verdict.judge(sample, GO_BASE).outcome
    assert (got.verdict, got.reason, got.detail) == (
        Verdict.FAIL, FailReason.not_run,
        "protected tests the base ran did not run: pkg/TestH (absent)")


def test_a_test_the_output_names_twice_with_two_outcomes_is_tampered() -> None:
    """A forged `--- PASS: TestH` printed beside the runner's own `--- FAIL: TestH`, with
    summary lines that add up to a pass."""
    forged = lines(("pkg/TestH", TestStatus.FAILED), ("pkg/TestH", TestStatus.PASSED),
                   ("pkg/TestOther", TestStatus.PASSED))
    sample = Evidence(parser="go-test", exit_code=0, by_id=True,
                      parsed=ParseResult(counts=Counts(passed=2), summaries=1, summed=True,
                                         tests=forged.tests))
    got = verdict.judge(sample, GO_BASE).outcome
    assert (got.verdict, got.reason) == (Verdict.FAIL, FailReason.tampered)
