"""The rubric: exact scores, validity, ranking, the winner and the integrity flags (pure)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping

import pytest

from rig.errors import RigError
from rig.rubric import (
    JUDGE_NONE_CAVEAT,
    NO_CHECKS_CAVEAT,
    ArmScore,
    CheckResult,
    DimScore,
    JudgeScores,
    ScoreError,
    check_result,
    score_arm,
)
from rig.sample.record import SampleRecord
from rig.sample.verdict import Verdict
from rig.standings import (
    TIE_RULE,
    Tie,
    WinnerDecision,
    decide_winner,
    describe_flag,
    flags,
    places,
    rank,
    winner,
)
from runner.manifest.arms import Arm
from runner.manifest.models import Weights

WEIGHTS = Weights(success=3, checks=2, diagnosis=2, plan=1, code_quality=1, intent=1)
# one letter per sample: P pass, F fail, S spoofed output, X exit mismatch, R rig error
OUTCOMES = {
    "P": (Verdict.PASS, None),
    "F": (Verdict.FAIL, "tests_failed"),
    "S": (Verdict.FAIL, "spoofed_output"),
    "X": (Verdict.FAIL, "exit_mismatch"),
    "R": (Verdict.RIG_ERROR, "tool_missing"),
}


def record(arm: str, check: str, n: int, letter: str, *, commit: str = "c0ffee",
           image_id: str = "sha256:1mage", change: str = "cap") -> SampleRecord:
    verdict, reason = OUTCOMES[letter]
    return SampleRecord(
        sample=f"{change}/{arm}/{check}/{n}", change=change, arm=arm, check=check, n=n,
        commit=commit, base_commit="ba5e", image="python", image_id=image_id,
        image_identity="python:bookworm", command="pytest -q", parser="pytest", env={},
        mounts=[], limits={}, network="none", db_schema=None, protected={}, requires=[],
        exit_code=0 if verdict is Verdict.PASS else 1, timed_out=False, oom_killed=False,
        program_present=True, counts=None, tests_ran=0, verdict=verdict, reason=reason,
        rig_error=reason if verdict is Verdict.RIG_ERROR else None, detail="",
        started_at="2024-01-01T00:00:00+00:00", duration_s=1.0, log=f"{n}.log")


def result(arm: str, check: str, letters: str, **kw: str) -> CheckResult:
    return check_result(check, [record(arm, check, n, x, **kw)
                                for n, x in enumerate(letters, 1)])


def arm_of(arm_id: str, *, model: str = "", effort: str = "high", control: bool = False) -> Arm:
    return Arm.model_validate({
        "id": arm_id, "model": model or f"model-{arm_id}", "effort": effort,
        "effort_normalized": effort, "effort_provenance": "experiment_config",
        "effort_evidence": "stated in the experiment config", "mode": "single_agent",
        "command": "true", "control": control})


def judged(diagnosis: float = 5, plan: float = 5, code_quality: float = 5,
           intent: float = 5) -> JudgeScores:
    return JudgeScores(DimScore(diagnosis, "d"), DimScore(plan, "p"),
                       DimScore(code_quality, "c"), DimScore(intent, "i"))


def scored(arm_id: str, success: str, checks: Mapping[str, str] | None = None,
           judge: JudgeScores | None = None, *, effort: str = "high",
           control: bool = False, model: str = "") -> ArmScore:
    checks = {"tests": "PPP", "compile": "PPP"} if checks is None else checks
    return score_arm(arm_of(arm_id, effort=effort, control=control, model=model),
                     result(arm_id, "success", success),
                     {name: result(arm_id, name, letters) for name, letters in checks.items()},
                     judge, WEIGHTS)


# --- the rubric ----------------------------------------------------------------------


def test_weighted_total_with_the_judge_is_exact() -> None:
    """weights 3/2/2/1/1/1; success 3/3, checks [3/3, 1/3]; judge 5/4/3/2."""
    arm = scored("A", "PPP", {"tests": "PPP", "compile": "PFF"}, judged(5, 4, 3, 2))
    assert arm.scores["success"] == 5.0
    assert arm.scores["checks"] == pytest.approx(5 * (1 + 1 / 3) / 2)  # 3.333...
    assert (arm.scores["diagnosis"], arm.scores["plan"], arm.scores["code_quality"],
            arm.scores["intent"]) == (5.0, 4.0, 3.0, 2.0)
    objective = 3 * 5.0 + 2 * (5 * (1 + 1 / 3) / 2)  # 15 + 6.667
    assert arm.total == pytest.approx(objective + 2 * 5 + 4 + 3 + 2)  # 40.667
    assert arm.max == 50.0
    assert arm.valid is True
    assert arm.commit == "c0ffee" and arm.image_id == "sha256:1mage"


def test_judge_none_scores_only_the_objective_dims_and_says_so() -> None:
    arm = scored("A", "PPP", {"tests": "PPP", "compile": "PFF"}, judge=None)
    assert arm.max == 25.0  # 5 * (3 + 2)
    assert arm.total == pytest.approx(15 + 2 * 5 * (1 + 1 / 3) / 2)  # 21.667
    assert [arm.scores[d] for d in ("diagnosis", "plan", "code_quality", "intent")] == [None] * 4
    assert JUDGE_NONE_CAVEAT in arm.caveats


def test_no_checks_leaves_the_checks_dim_out_of_total_and_max() -> None:
    arm = scored("A", "PPF", checks={}, judge=judged())
    assert arm.scores["checks"] is None
    assert arm.scores["success"] == pytest.approx(5 * 2 / 3)
    assert arm.max == 5 * (3 + 2 + 1 + 1 + 1)  # 40: checks weight excluded
    assert arm.total == pytest.approx(3 * 5 * 2 / 3 + 5 * 5)
    assert NO_CHECKS_CAVEAT in arm.caveats


def test_a_rig_error_makes_the_arm_invalid_and_names_the_sample() -> None:
    """Principle 4: a rig fault is never scored as a model failure, nor ranked."""
    arm = scored("A", "PPP", {"tests": "PRP", "compile": "PPP"}, judged())
    assert arm.valid is False
    assert arm.checks["tests"].rate.n == 2  # the RIG_ERROR sample is counted apart
    assert arm.rig_errors == [("cap/A/tests/2", "tool_missing")]
    assert any("cap/A/tests/2 tool_missing" in c and "not ranked" in c for c in arm.caveats)


def test_a_result_with_no_graded_sample_is_not_scored_as_zero() -> None:
    arm = scored("A", "RRR", {"tests": "PPP"}, judge=None)
    assert arm.scores["success"] is None and arm.valid is False
    assert arm.max == 10.0 and arm.total == 10.0  # checks only: 2 * 5


def test_spoofed_output_scores_success_zero_with_the_spoofing_recorded() -> None:
    arm = scored("cheat", "SSX", judge=judged(0, 0, 0, 0))
    assert arm.scores["success"] == 0.0 and arm.valid is True
    assert arm.success.spoofed is True
    assert any("cap/cheat/success/1 spoofed_output" in c and "exit_mismatch" in c
               for c in arm.caveats)


def test_dim_scores_outside_zero_to_five_or_without_evidence_are_refused() -> None:
    with pytest.raises(ValueError, match=r"0\.\.5"):
        DimScore(5.5, "too much")
    with pytest.raises(ValueError, match="evidence"):
        DimScore(3, "  ")


def test_samples_of_another_arm_or_another_commit_are_refused() -> None:
    success = result("A", "success", "PPP")
    mixed = check_result("tests", [record("A", "tests", 1, "P"),
                                   record("A", "tests", 2, "P", commit="deadbee")])
    with pytest.raises(ScoreError, match="different commits: c0ffee, deadbee"):
        score_arm(arm_of("A"), success, {"tests": mixed}, None, WEIGHTS)
    with pytest.raises(ScoreError, match="samples of arm"):
        score_arm(arm_of("B"), success, {}, None, WEIGHTS)
    assert issubclass(ScoreError, RigError)


def test_samples_on_different_images_are_a_caveat() -> None:
    success = check_result("success", [record("A", "success", 1, "P", image_id="sha256:a"),
                                       record("A", "success", 2, "P", image_id="sha256:b"),
                                       record("A", "success", 3, "P", image_id="sha256:b")])
    arm = score_arm(arm_of("A"), success, {}, None, WEIGHTS)
    assert arm.image_id == "sha256:b"
    assert "samples ran on different images: sha256:b, sha256:a" in arm.caveats


# --- rank and winner -------------------------------------------------------------------


def test_invalid_arms_are_not_ranked_even_with_the_best_total() -> None:
    arms = [scored("good", "PPP", judge=judged(4, 4, 4, 4)),
            scored("rigged", "PPR", judge=judged()),
            scored("poor", "FFF", judge=judged(1, 1, 1, 1))]
    assert rank(arms) == ["good", "poor"]
    assert winner(arms, 1.0) == "good"


def test_equal_totals_share_a_rank_and_the_arm_id_decides_nothing() -> None:
    """Regression: rank() broke a tie by arm id, silently: `a` won over an identical `b`
    because of its name. Equal totals now share the rank; an identical pair has no winner."""
    b = scored("b", "PPP", {"tests": "PPP"}, judged(0, 0, 0, 0))  # 15 + 10 + 0 = 25
    a = scored("a", "PPP", {"tests": "PPP"}, judged(0, 0, 0, 0))  # 25
    c = scored("c", "PPF", {"tests": "PPP"}, judged(1, 1, 1, 1))  # 10 + 10 + 5 = 25, 2/3
    low = scored("low", "PPP", {"tests": "PPF"}, judged(0, 0, 0, 0))  # 15 + 6.67 = 21.67
    assert a.total == b.total == c.total == 25.0
    assert rank([c, low, b, a]) == ["a", "b", "c", "low"]  # listed, not decided, by id
    assert places([c, low, b, a]) == {"a": 1, "b": 1, "c": 1, "low": 4}
    assert decide_winner([c, low, b, a], 0.5) == WinnerDecision(None, Tie(("a", "b", "c"),
                                                                          25.0, None))
    assert winner([c, low, b, a], 0.5) is None  # never `low`: a lower total never wins a tie
    assert decide_winner([c, low, b, a], 0.5).no_winner_reason == (
        "a, b, c tie at 25.00 and the tie-break (success pass-rate, then checks score) "
        "cannot separate them")


def test_a_tie_is_broken_by_the_success_pass_rate_first() -> None:
    steady = scored("steady", "PPP", {"tests": "PPP"}, judged(0, 0, 0, 0))  # 15 + 10 + 0
    lucky = scored("lucky", "PPF", {"tests": "PPP"}, judged(1, 1, 1, 1))  # 10 + 10 + 5
    assert decide_winner([lucky, steady], 0.5) == WinnerDecision(
        "steady", Tie(("steady", "lucky"), 25.0, "success_pass_rate"))
    assert decide_winner([lucky, steady], 1.0) == WinnerDecision(
        "steady", Tie(("steady", "lucky"), 25.0, "success_pass_rate"))


def test_a_tie_on_total_and_success_is_broken_by_the_checks_score() -> None:
    checked = scored("checked", "PPP", {"tests": "PPP"}, judged(0, 0, 0, 0))  # 15 + 10 + 0
    judged_up = scored("judged", "PPP", {"tests": "FFF"}, judged(2, 2, 2, 2))  # 15 + 0 + 10
    assert checked.total == judged_up.total == 25.0
    decision = decide_winner([judged_up, checked], 1.0)
    assert decision == WinnerDecision("checked", Tie(("checked", "judged"), 25.0, "checks"))
    assert decision.no_winner_reason == ""


def test_a_tie_nobody_in_which_reaches_the_threshold_leaves_the_win_to_the_next_total() -> None:
    one = scored("one", "PPF", judge=judged())  # 10 + 10 + 25 = 45
    two = scored("two", "PPF", judge=judged())  # 45
    steady = scored("steady", "PPP", judge=judged(3, 3, 3, 3))  # 15 + 10 + 15 = 40
    assert places([one, two, steady]) == {"one": 1, "two": 1, "steady": 3}
    assert decide_winner([one, two, steady], 1.0) == WinnerDecision("steady")
    assert decide_winner([one, two, steady], 0.5) == WinnerDecision(
        None, Tie(("one", "two"), 45.0, None))
    assert decide_winner([scored("x", "FFF")], 1.0).no_winner_reason == (
        "no valid arm reached the threshold")


def test_the_tie_rule_is_stated_in_words() -> None:
    assert TIE_RULE == (
        "equal totals share a rank; the winner is the best-ranked valid arm whose success "
        "pass-rate reaches the threshold; between arms of equal total the higher success "
        "pass-rate wins, then the higher checks score; still equal: no winner (never the "
        "arm id)")


def test_winner_is_the_best_ranked_arm_that_reaches_the_threshold() -> None:
    flaky_best = scored("flaky", "PPF", judge=judged())  # 10 + 10 + 25 = 45
    steady = scored("steady", "PPP", judge=judged(3, 3, 3, 3))  # 15 + 10 + 15 = 40
    assert rank([flaky_best, steady]) == ["flaky", "steady"]
    assert winner([flaky_best, steady], 1.0) == "steady"
    assert winner([flaky_best, steady], 0.6) == "flaky"
    assert winner([flaky_best], 1.0) is None
    assert winner([scored("rigged", "RPP")], 0.0) is None


# --- flags -----------------------------------------------------------------------------


def test_no_separation_when_every_valid_arm_passes() -> None:
    both = [scored("a", "PPP"), scored("b", "PPP"), scored("rigged", "FFR")]
    assert "no_separation" in flags(both)
    assert "no_separation" not in flags([scored("a", "PPP"), scored("b", "FFF")])


def test_rig_asymmetric_when_rig_errors_hit_arms_unequally() -> None:
    assert "rig_asymmetric" in flags([scored("a", "PPR"), scored("b", "PPP")])
    assert "rig_asymmetric" in flags([scored("a", "PRR"), scored("b", "PPR")])
    assert "rig_asymmetric" not in flags([scored("a", "PPR"), scored("b", "FFR")])
    assert "rig_asymmetric" not in flags([scored("a", "PPP"), scored("b", "FFF")])


def test_effort_confounded_when_any_effort_is_unknown() -> None:
    arms = [scored("ctl", "FFF", effort="unknown", control=True), scored("a", "PPP")]
    assert "effort_confounded" in flags(arms)
    assert any("effort-confounded" in c for c in arms[0].caveats)
    assert "effort_confounded" not in flags([scored("a", "PPP")])


def test_flaky_names_each_arm_with_a_flaky_success_or_check() -> None:
    arms = [scored("a", "PPF"), scored("b", "PPP", {"tests": "PFP"}), scored("c", "PPP")]
    assert [f for f in flags(arms) if f.startswith("flaky")] == ["flaky:a", "flaky:b"]
    assert describe_flag("flaky:a").startswith("flaky:a: 0 < pass-rate < 1")


def test_a_tie_in_the_winner_decision_is_a_flag_naming_the_tied_arms() -> None:
    arms = [scored("b", "PPP"), scored("a", "PPP"), scored("c", "FFF")]
    decision = decide_winner(arms, 1.0)
    assert "tie:a,b" in flags(arms, decision)
    assert not any(f.startswith("tie") for f in flags(arms))  # no decision given: no tie flag
    assert describe_flag("tie:a,b") == (
        "tie:a,b: arms of equal total competed for the win: the tie-break (success "
        "pass-rate, then checks score) decided or, still equal, there is no winner")


def test_flags_are_sorted_and_deterministic() -> None:
    arms = [scored("z", "PPF", effort="unknown"), scored("y", "SFF"), scored("x", "PPR")]
    # x's rig error stands (rig_asymmetric) and is the infrastructure's hit on x alone
    # (infra_asymmetric)
    assert flags(arms) == ["effort_confounded", "flaky:z", "infra_asymmetric",
                           "rig_asymmetric", "spoofed:y"]
    assert flags(list(reversed(arms))) == flags(arms)


def test_scoring_judging_and_reports_import_no_docker_git_or_orchestration() -> None:
    """STYLE.md: the scoring maths is pure; a fresh interpreter proves it. Of runner it
    imports the manifest's models alone (ArmIdentity; docs/design.md: rig imports the models it
    measures), never the orchestration."""
    code = ("import sys, rig.rubric, rig.judge, rig.report; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'docker', 'git', 'testcontainers'} or (m.split('.')[0] == 'runner' and m not in "
            "{'runner', 'runner.errors'} and not m.startswith('runner.manifest'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "[]"
