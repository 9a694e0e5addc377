"""Ratchet checks (issue 8), pure: metric extraction, tolerance and direction, one sample's
verdict, the base's value at `up`, and the rule that moves a baseline after a merge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rig import ratchet
from rig.ratchet import Movement, RatchetError
from rig.report.scorecard import metric_text
from rig.rubric import check_result
from rig.sample import metric, verdict
from rig.sample.evidence import Evidence
from rig.sample.metric import Ratchet
from rig.sample.oracle import assess, grade, record_of, run_sample
from rig.sample.record import SampleRecord
from rig.sample.spec import Execution, SampleSpec
from rig.sample.verdict import FailReason, Outcome, RigErrorReason, Verdict
from runner.contract import _moved_to
from runner.store.records import RatchetMove

# coverage.py 6.5.0 (Debian bookworm python3-coverage) `coverage json` of
# examples/horizon/repo's unit tests without DATABASE_URL; "files" trimmed to one entry.
COVERAGE_JSON = json.dumps({
    "meta": {"version": "6.5.0", "timestamp": "2026-11-29T11:12:37.566503",
             "branch_coverage": False, "show_contexts": False},
    "files": {"src/horizon/forecast.py": {
        "executed_lines": [1, 6, 8], "summary": {
            "covered_lines": 33, "num_statements": 33, "percent_covered": 100.0,
            "percent_covered_display": "100", "missing_lines": 0, "excluded_lines": 0},
        "missing_lines": [], "excluded_lines": []}},
    "totals": {"covered_lines": 131, "num_statements": 188,
               "percent_covered": 69.68085106382979, "percent_covered_display": "70",
               "missing_lines": 57, "excluded_lines": 0}})
LINT = r"lint: (?P<value>\d+) findings"
COVERAGE = "coverage-json:cov.json"


def rec(check: str, verdict: Verdict, value: float | None = None, n: int = 1,
        reason: str | None = None) -> SampleRecord:
    return SampleRecord(
        sample=f"c/merged/{check}/{n}", change="c", arm="merged", check=check, n=n,
        commit="c0ffee", base_commit="ba5e", image="python", image_id="sha256:1",
        image_identity="python", command="true", parser="metric", env={}, mounts=[],
        limits={}, network="none", db_schema=None, protected={}, requires=[], exit_code=0,
        timed_out=False, oom_killed=False, program_present=True, counts=None, tests_ran=0,
        verdict=verdict, reason=reason, rig_error=None, detail="", started_at="t",
        duration_s=1.0, log=f"{n}.log", metric_value=value)


# --- extraction ------------------------------------------------------------------------

def test_a_regex_metric_reads_its_named_group() -> None:
    assert metric.extract(LINT, "a.py:1: unused import 'os'\nlint: 3 findings\n", {}) == 3.0
    assert metric.extract(r"TOTAL.* (?P<value>[0-9.]+)%", "TOTAL 188 57 69.68%", {}) == 69.68


def test_a_regex_that_matches_nothing_reads_no_value() -> None:
    assert metric.extract(LINT, "1 passed in 0.01s\n", {}) is None
    assert metric.extract(r"n=(?P<value>\w+)", "n=abc", {}) is None  # not a number


def test_a_value_reported_twice_differently_is_no_value_but_twice_the_same_is() -> None:
    assert metric.extract(LINT, "lint: 0 findings\nlint: 3 findings\n", {}) is None
    assert metric.extract(LINT, "lint: 3 findings\nlint: 3 findings\n", {}) == 3.0


def test_coverage_json_reads_totals_percent_covered_of_the_file_the_command_wrote() -> None:
    assert metric.extract(COVERAGE, "", {"cov.json": COVERAGE_JSON}) == 69.68085106382979
    assert Ratchet(COVERAGE, "higher").collect == ("cov.json",)
    assert Ratchet(LINT, "lower").collect == ()


@pytest.mark.parametrize("files", [{}, {"cov.json": "not json"}, {"cov.json": "[1, 2]"},
                                   {"cov.json": '{"totals": {"percent_covered": "70"}}'},
                                   {"other.json": COVERAGE_JSON}])
def test_coverage_json_without_a_readable_total_is_no_value(files: dict[str, str]) -> None:
    assert metric.extract(COVERAGE, '{"totals": {"percent_covered": 99.0}}', files) is None


# --- tolerance and direction -------------------------------------------------------------

@pytest.mark.parametrize(("value", "base", "better", "tolerance", "ok"), [
    (80.32, 80.32, "higher", 0.0, True),
    (86.39, 80.32, "higher", 0.0, True),
    (79.79, 80.32, "higher", 0.0, False),
    (79.79, 80.32, "higher", 0.6, True),
    (79.79, 80.32, "higher", 0.5, False),
    (0, 0, "lower", 0.0, True),
    (3, 0, "lower", 0.0, False),
    (3, 0, "lower", 3.0, True),
    (2, 5, "lower", 0.0, True),
    (80.2, 80.3, "higher", 0.1, True),  # 80.3 - 0.1 rounds below 80.2: noise is no regression
])
def test_passes_within_the_tolerance_in_the_better_direction(
        value: float, base: float, better: metric.Better, tolerance: float, ok: bool) -> None:
    assert metric.passes(value, base, better, tolerance) is ok


def test_show_prints_counts_whole_and_percentages_to_two_places() -> None:
    assert [metric.show(v) for v in (3.0, 80.31914893617021, None)] == ["3", "80.32", "?"]


# --- one sample's verdict ------------------------------------------------------------------

def grade_ratchet(r: Ratchet, *, exit_code: int | None, log: str, files: dict[str, str],
                  **kw: bool) -> Outcome:
    """`rig.sample.verdict`'s ratchet rule (8) on one sample."""
    return verdict.judge(Evidence(parser="metric", exit_code=exit_code, log=log,
                                          files=files, ratchet=r, **kw)).outcome


def graded(r: Ratchet, log: str, exit_code: int | None = 0,
           files: dict[str, str] | None = None, **kw: bool) -> tuple[Verdict, object]:
    outcome = grade_ratchet(r, exit_code=exit_code, log=log, files=files or {}, **kw)
    return outcome.verdict, outcome.reason


def test_regression_unparsed_metric_is_rig_error_unparsed_output_never_fail() -> None:
    """Issue 8 (5): a metric regex that matches nothing is the rig's fault."""
    outcome = grade_ratchet(Ratchet(LINT, "lower", base=0), exit_code=0,
                            log="all clean\n", files={})
    assert (outcome.verdict, outcome.reason) == (Verdict.RIG_ERROR,
                                                 RigErrorReason.unparsed_output)
    assert "matched nothing" in outcome.detail
    missing = grade_ratchet(Ratchet(COVERAGE, "higher", base=80), exit_code=0, log="",
                            files={})
    assert missing.reason is RigErrorReason.unparsed_output and "cov.json" in missing.detail


def test_a_worse_value_fails_and_says_by_how_much() -> None:
    outcome = grade_ratchet(Ratchet(LINT, "lower", base=0), exit_code=0,
                            log="lint: 3 findings\n", files={})
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, FailReason.ratchet_regressed)
    assert outcome.detail == ("base 0 -> 3 (lower is better, tolerance 0): worse by 3")


def test_the_value_decides_not_the_exit_code() -> None:
    r = Ratchet(COVERAGE, "higher", base=80.32)
    files = {"cov.json": COVERAGE_JSON}
    assert graded(r, "", exit_code=1, files=files) == (Verdict.FAIL,
                                                      FailReason.ratchet_regressed)
    assert graded(Ratchet(LINT, "lower", base=3), "lint: 1 findings", exit_code=1) == (
        Verdict.PASS, None)


def test_the_rig_and_the_container_come_before_the_value() -> None:
    r = Ratchet(LINT, "lower", base=0)
    assert graded(r, "lint: 0 findings", exit_code=127) == (
        Verdict.RIG_ERROR, RigErrorReason.command_not_found)
    assert graded(r, "lint: 0 findings", exit_code=None) == (Verdict.RIG_ERROR,
                                                            RigErrorReason.infra)
    assert graded(r, "lint: 0 findings", program_present=False) == (
        Verdict.RIG_ERROR, RigErrorReason.tool_missing)
    assert graded(r, "lint: 0 findings", exit_code=124, timed_out=True) == (
        Verdict.FAIL, FailReason.timeout)


def test_two_different_values_in_one_output_are_spoofed_output() -> None:
    assert graded(Ratchet(LINT, "lower", base=0), "lint: 0 findings\nlint: 4 findings") == (
        Verdict.FAIL, FailReason.spoofed_output)


def test_measuring_the_base_passes_with_the_value() -> None:
    outcome = grade_ratchet(Ratchet(LINT, "lower"), exit_code=0, log="lint: 0 findings",
                            files={})
    assert outcome.verdict is Verdict.PASS and outcome.detail.startswith("measured 0")


# --- the oracle: spec -> record with both values, files kept beside the log ------------------

class FakeExecutor:
    def execute(self, spec: SampleSpec) -> Execution:
        assert spec.collect == ("cov.json",)
        return Execution(exit_code=0, log="14 passed\n", duration_s=0.1,
                         files={"cov.json": COVERAGE_JSON})


def test_a_ratchet_sample_records_both_values_and_keeps_the_file_it_read(
        tmp_path: Path) -> None:
    spec = SampleSpec(change="c", arm="drop-test", check="coverage", n=1, commit="c0ffee",
                      base_commit="ba5e", command="coverage run ...", parser="metric",
                      timeout_s=60, ratchet=Ratchet(COVERAGE, "higher", base=80.32))
    record = run_sample(FakeExecutor(), spec, tmp_path)
    assert (record.verdict, record.reason) == (Verdict.FAIL, "ratchet_regressed")
    assert (record.metric_value, record.metric_base) == (69.68085106382979, 80.32)
    assert record.collected == {"cov.json": "1.files/cov.json"}
    folder = tmp_path / "samples" / "drop-test" / "coverage"
    assert sorted(p.name for p in folder.glob("*.json")) == ["1.json"]  # records only
    kept = folder / "1.files" / "cov.json"
    assert kept.read_text() == COVERAGE_JSON
    again = Execution(exit_code=0, log="", duration_s=0, files={"cov.json": kept.read_text()})
    assert grade(spec, again).reason == FailReason.ratchet_regressed  # re-graded offline


def test_a_test_check_record_has_no_metric_fields() -> None:
    spec = SampleSpec(change="c", arm="a", check="tests", n=1, commit="c", base_commit="b",
                      command="true", parser="exit-code", timeout_s=1)
    record = record_of(spec, Execution(exit_code=0, log="", duration_s=0),
                       assess(spec, Execution(exit_code=0, log="", duration_s=0)), "t", "1.log")
    assert (record.metric_value, record.metric_base, record.collected) == (None, None, {})


def test_the_scorecard_shows_base_to_arm_values() -> None:
    records = [rec("coverage", Verdict.FAIL, 79.79, n) for n in (1, 2)]
    records = [r.model_copy(update={"metric_base": 80.31914893617021}) for r in records]
    assert metric_text(check_result("coverage", records)) == "base 80.32 → 79.79"
    assert metric_text(check_result("tests", [rec("tests", Verdict.PASS)])) == ""


# --- the base's value at up ------------------------------------------------------------------

def test_the_base_value_is_the_one_every_sample_agrees_on() -> None:
    assert ratchet.baseline("lint", [rec("lint", Verdict.PASS, 0.0, n) for n in (1, 2, 3)]) == 0


def test_an_unstable_base_value_is_the_rigs_problem_exit_3() -> None:
    with pytest.raises(RatchetError, match="unstable on the base") as raised:
        ratchet.baseline("coverage", [rec("coverage", Verdict.PASS, v, n)
                                      for n, v in ((1, 80.3), (2, 80.4))])
    assert raised.value.exit_code == 3


def test_an_unmeasured_base_value_is_the_rigs_problem() -> None:
    with pytest.raises(RatchetError, match="unparsed_output"):
        ratchet.baseline("lint", [rec("lint", Verdict.PASS, 0.0),
                                  rec("lint", Verdict.RIG_ERROR, None, 2, "unparsed_output")])


# --- moving the baseline after a merge -------------------------------------------------------

def merged(coverage: float | None, tests: str = "PPP", lint: float = 0.0
           ) -> dict[str, list[SampleRecord]]:
    verdict = {"P": Verdict.PASS, "F": Verdict.FAIL}
    return {
        "success": [rec("success", Verdict.PASS, None, n) for n in (1, 2, 3)],
        "tests": [rec("tests", verdict[x], None, n, None if x == "P" else "tests_failed")
                  for n, x in enumerate(tests, 1)],
        "coverage": [rec("coverage", Verdict.PASS if coverage is not None else
                         Verdict.RIG_ERROR, coverage, n) for n in (1, 2, 3)],
        "lint": [rec("lint", Verdict.PASS, lint, n) for n in (1, 2, 3)],
    }


def test_a_better_value_with_every_other_check_in_full_moves_the_baseline() -> None:
    move = ratchet.move("coverage", "higher", 80.32, merged(86.39))
    assert (move.before, move.after, move.moved) == (80.32, 86.39, True)
    assert move.why.startswith("moved:")
    assert move.as_dict() == {"from": 80.32, "to": 86.39, "measured": 86.39, "moved": True,
                              "why": move.why}


def test_regression_a_better_value_while_tests_failed_is_not_a_new_baseline() -> None:
    """Issue 8 (4): coverage that rose on a merge whose tests did not pass in full."""
    move = ratchet.move("coverage", "higher", 80.32, merged(86.39, tests="PFP"))
    assert (move.after, move.moved, move.measured) == (80.32, False, 86.39)
    assert "tests 2/3 FAIL(tests_failed)" in move.why


@pytest.mark.parametrize(("value", "word"), [(79.79, "worse"), (80.32, "unchanged")])
def test_a_baseline_never_moves_in_the_worse_direction(value: float, word: str) -> None:
    move = ratchet.move("coverage", "higher", 80.32, merged(value))
    assert (move.after, move.moved) == (80.32, False) and word in move.why


def test_lower_is_better_moves_down_only() -> None:
    assert ratchet.move("lint", "lower", 3.0, merged(80.0, lint=1.0)).after == 1.0
    assert ratchet.move("lint", "lower", 0.0, merged(80.0, lint=2.0)).after == 0.0


def test_an_unmeasured_merged_value_keeps_the_baseline() -> None:
    move = ratchet.move("coverage", "higher", 80.32, merged(None))
    assert (move.moved, move.measured) == (False, None) and "not measured" in move.why


def test_movement_text_says_where_the_baseline_goes() -> None:
    assert Movement("lint", 0, 0, 0, "kept: unchanged").text() == "lint: stays 0 (kept: " \
        "unchanged)"
    assert "80.32 -> 86.39" in Movement("coverage", 80.32, 86.39, 86.39, "moved").text()


def _recorded(before: float, after: float) -> RatchetMove:
    return RatchetMove.model_validate({"from": before, "to": after, "measured": after,
                                       "moved": after != before, "why": "recorded"})


def test_a_recorded_move_is_carried_only_in_the_better_direction_from_the_frozen_value() -> None:
    assert _moved_to(_recorded(80.32, 86.39), 80.32, "higher") == 86.39
    assert _moved_to(_recorded(80.32, 70.0), 80.32, "higher") is None  # never lowered
    assert _moved_to(_recorded(81.0, 86.39), 80.32, "higher") is None  # not our value
    assert _moved_to(_recorded(3.0, 1.0), 3.0, "lower") == 1.0
    assert _moved_to(_recorded(3.0, 1.0), 3.0, None) is None  # no longer a ratchet
