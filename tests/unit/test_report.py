"""The report: OBSERVATION.json (abc-comparison/v2) validates and round-trips, SCORECARD.md
has arms as columns, RESULTS.md says who won where and what the caveats are."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from rig.report import (
    Observation,
    observation,
    read_observation,
    render_results,
    render_scorecard,
    round_of,
    write_observation,
)
from rig.report.scorecard import graft_lines
from rig.rubric import JUDGE_NONE_CAVEAT, ArmScore
from rig.sample.verdict import Verdict
from rig.standings import TIE_RULE, decide_winner, flags, winner
from tests.unit.test_score import WEIGHTS, judged, scored

SHA = "ab" * 32
CONTRACT = {"version": 1, "sha256": SHA, "frozen_at": "2024-01-01T00:00:00+00:00"}
GRAFT = {"from": "graft", "what": "src/horizon/db.py", "verified": True,
         "rationale": "connect_timeout and an index; success + checks re-verified"}
ARM_KEYS = {"arm", "model", "effort", "effort_normalized", "effort_provenance",
            "effort_evidence", "mode", "control", "commit", "image_id", "results", "scores",
            "total", "max", "valid", "caveats", "harness_touched"}


def round_one() -> list[ArmScore]:
    return [scored("ctl", "FFF", judge=judged(0, 1, 2, 2), effort="unknown", control=True,
                   model="m-small"),
            scored("fix", "PPP", {"tests": "PPP", "compile": "PFF"}, judged(),
                   model="m-large"),
            scored("graft", "PPP", judge=judged(4, 3, 4, 5), model="m-small"),
            scored("rigged", "PPR", judge=judged(), model="m-large")]


def build() -> Observation:
    first = round_one()
    second = [scored("ctl", "FFF", judge=None, effort="unknown", control=True, model="m-small"),
              scored("fix", "PPP", judge=None, model="m-large"),
              scored("graft", "PPF", judge=None, model="m-small"),
              scored("rigged", "PPP", {"tests": "PPP", "compile": "PFP"}, judge=None,
                     model="m-large")]  # 15 + 8.33: no tie with fix's 25
    rounds = [
        round_of("cap", "ba5e", 0.0, [Verdict.FAIL] * 3, first, winner(first, 1.0), [GRAFT],
                 flags(first)),
        round_of("units", "4ead", 0.0, ["FAIL", "FAIL", "FAIL"], second, winner(second, 1.0),
                 [{**GRAFT, "what": "README.md", "verified": False,
                   "rationale": "success regressed"}], flags(second)),
    ]
    return observation("horizon", CONTRACT, rounds)


# --- OBSERVATION.json ------------------------------------------------------------------


def test_observation_is_laid_out_as_design_records(tmp_path: Path) -> None:
    path = tmp_path / "OBSERVATION.json"
    write_observation(path, build())
    doc = json.loads(path.read_text())
    assert list(doc) == ["schema", "experiment", "contract", "rounds", "paired"]
    assert doc["schema"] == "abc-comparison/v2" and doc["contract"]["sha256"] == SHA
    cap = doc["rounds"][0]
    assert set(cap) == {"change", "base_commit", "baseline", "arms", "winner", "grafts",
                        "flags", "tie_break", "pairwise", "rank_interval"}  # (issue 33)
    assert cap["tie_break"] is None
    assert cap["baseline"] == {"pass_rate": 0.0, "verdicts": ["FAIL", "FAIL", "FAIL"]}
    assert cap["grafts"] == [GRAFT] and cap["winner"] == "fix"
    fix = cap["arms"][1]
    assert set(fix) == ARM_KEYS
    assert fix["results"]["success"]["samples"] == ["cap/fix/success/1", "cap/fix/success/2",
                                                    "cap/fix/success/3"]
    assert fix["results"]["checks"]["compile"]["pass_rate"] == pytest.approx(1 / 3)
    assert fix["results"]["checks"]["compile"]["ci95"] == [pytest.approx(0.0615, abs=1e-4),
                                                           pytest.approx(0.7923, abs=1e-4)]
    assert set(fix["scores"]) == {"success", "checks", "diagnosis", "plan", "code_quality",
                                  "intent"}
    assert cap["arms"][3]["valid"] is False
    assert doc["rounds"][1]["arms"][0]["scores"]["diagnosis"] is None


def test_observation_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "OBSERVATION.json"
    obs = build()
    write_observation(path, obs)
    assert read_observation(path) == obs
    assert read_observation(path).dump() == path.read_text()


@pytest.mark.parametrize(("where", "key"), [
    (lambda d: d["rounds"][0]["arms"][1], "max"),
    (lambda d: d["rounds"][0]["arms"][1]["results"]["success"], "ci95"),
    (lambda d: d["rounds"][0], "flags"),
    (lambda d: d["rounds"][0]["grafts"][0], "verified"),
    (lambda d: d, "schema"),
])
def test_a_missing_field_is_refused(where: Any, key: str) -> None:
    doc = json.loads(build().dump())
    del where(doc)[key]
    if key == "schema":  # it has a default in Python; a stored artifact must still name it
        doc["schema"] = "abc-comparison/v1"
    with pytest.raises(ValidationError):
        Observation.model_validate(doc)


def test_unknown_keys_a_foreign_winner_and_a_contract_without_hash_are_refused() -> None:
    doc = json.loads(build().dump())
    doc["rounds"][0]["arms"][0]["score"] = 1
    with pytest.raises(ValidationError, match="Extra inputs"):
        Observation.model_validate(doc)
    doc = json.loads(build().dump())
    doc["rounds"][0]["winner"] = "rigged"  # invalid arms are never winners
    with pytest.raises(ValidationError, match="not a valid arm"):
        Observation.model_validate(doc)
    with pytest.raises(ValidationError, match="sha256"):
        observation("horizon", {"version": 1}, [])


def test_an_invalid_observation_is_never_written_over_a_good_one(tmp_path: Path) -> None:
    path = tmp_path / "OBSERVATION.json"
    write_observation(path, build())
    before = path.read_text()
    broken = Observation.model_construct(experiment="horizon", contract={}, rounds=[])
    with pytest.raises(ValidationError):
        write_observation(path, broken)
    assert path.read_text() == before


# --- SCORECARD.md ------------------------------------------------------------------------


def scorecard() -> str:
    arms = round_one()
    merge = "fix merged onto bakeoff/horizon; graft from graft kept."
    decision = decide_winner(arms, 1.0)
    return render_scorecard("cap", arms, WEIGHTS, flags(arms, decision), decision, merge,
                            [GRAFT])


def table_row(text: str, label: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(f"| {label} |"))
    return [c.strip() for c in line.strip("|").split(" | ")]


def test_scorecard_has_arms_as_columns_and_dims_as_rows() -> None:
    text = scorecard()
    header = table_row(text, "dim (weight)")
    assert header == ["dim (weight)", "ctl: m-small @ unknown / single_agent · control",
                      "fix: m-large @ high / single_agent", "graft: m-small @ high / single_agent",
                      "rigged: m-large @ high / single_agent"]
    rubric = text.split("## Verdict")[0]  # the pair table (issue 33) comes after it
    rows = [line.split(" | ")[0].lstrip("| ") for line in rubric.splitlines()
            if line.startswith("| ") and "dim (weight)" not in line]
    assert rows == ["success (w=3)", "checks (w=2)", "↳ tests", "↳ compile", "diagnosis (w=2)",
                    "plan (w=1)", "code_quality (w=1)", "intent (w=1)", "**total / max**"]


def test_scorecard_cells_carry_pass_rates_with_intervals_and_totals() -> None:
    text = scorecard()
    assert table_row(text, "success (w=3)")[2] == "5.00 · 1.00 [0.44, 1.00] 3/3"
    assert table_row(text, "success (w=3)")[1] == "0.00 · 0.00 [0.00, 0.56] 0/3"
    assert table_row(text, "success (w=3)")[4] == "5.00 · 1.00 [0.34, 1.00] 2/2 +1 RIG_ERROR"
    assert table_row(text, "↳ compile")[2] == "0.33 [0.06, 0.79] 1/3 flaky"
    assert table_row(text, "checks (w=2)")[2] == "3.33"
    assert table_row(text, "**total / max**")[2] == "**46.67** / 50"
    assert table_row(text, "**total / max**")[4] == "**50.00** / 50 (invalid)"


def test_scorecard_verdicts_flags_merge_and_caveats() -> None:
    text = scorecard()
    assert "**Winner: fix**" in text
    assert ("- **fix** (m-large @ high / single_agent): valid, rank 1 of 3, **winner**; "
            "success: 3 PASS") in text
    assert ("- **rigged** (m-large @ high / single_agent): **invalid**: RIG_ERROR in "
            "cap/rigged/success/3 tool_missing; not ranked until the rig is fixed") in text
    assert "- **ctl** (m-small @ unknown / single_agent): valid, rank 3 of 3; " \
           "success: 3 FAIL tests_failed" in text
    assert "- effort_confounded: an arm's effort_normalized is unknown" in text
    assert "- rig_asymmetric: rig errors hit arms unequally" in text
    assert "- flaky:fix: 0 < pass-rate < 1" in text
    assert "fix merged onto bakeoff/horizon; graft from graft kept." in text
    assert ("- from **graft**: src/horizon/db.py — kept (re-verified): connect_timeout and "
            "an index") in text
    assert "- ctl: effort_normalized = unknown: effort-confounded (directional only)" in text


def test_a_graft_that_was_verified_but_regressed_is_dropped_on_the_scorecard() -> None:
    """merge.json's graft: verified (it ran) and not kept (it regressed) must read as
    dropped; it read "kept (re-verified)" until the cachey example showed it."""
    lines = graft_lines([{"from": "breaker", "what": "cachey/server.py", "verified": True,
                          "kept": False, "rationale": "r", "why": "regressed"}])
    assert lines == ["- from **breaker**: cachey/server.py — dropped: r; regressed"]


def test_scorecard_with_judge_none_says_the_total_is_objective_only() -> None:
    arms = [scored("ctl", "FFF", control=True), scored("fix", "PPP")]
    text = render_scorecard("cap", arms, WEIGHTS, flags(arms), decide_winner(arms, 1.0), "",
                            [])
    assert table_row(text, "diagnosis (w=2)")[1:] == ["— (judge = none)"] * 2
    assert table_row(text, "**total / max**")[2] == "**25.00** / 25"
    assert f"- all arms: {JUDGE_NONE_CAVEAT}" in text
    assert "Nothing merged." in text and "No graft." in text


# --- RESULTS.md ---------------------------------------------------------------------------


def test_results_scoreboard_labels_arms_and_totals_per_round() -> None:
    text = render_results(build())
    assert "| arm | model @ effort / mode | cap | units |" in text
    assert table_row(text, "fix") == ["fix", "m-large @ high / single_agent",
                                      "46.67 / 50 ★", "25.00 / 25 ★"]
    assert table_row(text, "rigged")[2:] == ["50.00 / 50 (invalid)", "23.33 / 25"]
    assert table_row(text, "ctl")[1] == "m-small @ unknown / single_agent · control"


def test_results_per_model_pattern_is_the_mean_of_valid_totals() -> None:
    text = render_results(build())
    # m-large: fix 46.67 + 25, rigged 23.33 (its invalid round 1 is left out)
    large = table_row(text, "m-large")
    assert large[1:4] == ["fix, rigged", "3 / 4", f"{(140 / 3 + 25 + 70 / 3) / 3:.2f}"]
    assert large[5] == "2"


def test_results_say_where_the_merge_beat_every_arm_and_list_integrity_caveats() -> None:
    text = render_results(build())
    assert ("- **cap**: the merge beat every single arm: winner fix plus 1 verified graft(s) "
            "it lacked (src/horizon/db.py from graft)") in text
    assert "- **units**: the merge is fix alone (no graft kept)." in text
    assert "  - dropped: README.md from graft: success regressed" in text
    assert "- cap: rig_asymmetric: rig errors hit arms unequally" in text
    assert "- units: effort_confounded:" in text
    assert "- cap: **rigged is invalid** (not ranked): RIG_ERROR in " \
           "cap/rigged/success/3 tool_missing (a rig fault, not a model failure" in text


# --- ties -----------------------------------------------------------------------------------


def tied_round() -> list[ArmScore]:
    """a and b identical (25 of 25, judge = none), c below them."""
    return [scored("a", "PPP", judge=None), scored("b", "PPP", judge=None),
            scored("c", "PPP", {"tests": "PPF", "compile": "PPP"}, judge=None)]


def test_scorecard_shows_an_unbroken_tie_as_a_shared_rank_and_no_winner() -> None:
    arms = tied_round()
    decision = decide_winner(arms, 1.0)
    text = render_scorecard("cap", arms, WEIGHTS, flags(arms, decision), decision, "", [])
    assert ("**No winner**: a, b tie at 25.00 and the tie-break (success pass-rate, then "
            "checks score) cannot separate them (`merge --base ARM` merges one of them by "
            "hand)") in text
    assert "- **a** (model-a @ high / single_agent): valid, rank 1 of 3 (tied with b); " \
           "success: 3 PASS" in text
    assert "- **b** (model-b @ high / single_agent): valid, rank 1 of 3 (tied with a); " \
           "success: 3 PASS" in text
    assert "- **c** (model-c @ high / single_agent): valid, rank 3 of 3; success: 3 PASS" in text
    assert "- tie:a,b: arms of equal total competed for the win" in text


def test_scorecard_states_the_rule_and_which_tie_breaker_decided() -> None:
    checked = scored("checked", "PPP", {"tests": "PPP"}, judged(0, 0, 0, 0))  # 15 + 10 + 0
    judged_up = scored("judged", "PPP", {"tests": "FFF"}, judged(2, 2, 2, 2))  # 15 + 0 + 10
    decision = decide_winner([judged_up, checked], 1.0)
    text = render_scorecard("cap", [judged_up, checked], WEIGHTS,
                            flags([judged_up, checked], decision), decision, "", [])
    assert ("**Winner: checked** (tie at 25.00 with judged, broken by the checks score)"
            in text)
    assert f"Rule: {TIE_RULE}." in text
    assert "valid, rank 1 of 2 (tied with judged), **winner**" in text


def tied_observation() -> Observation:
    arms = tied_round()
    decision = decide_winner(arms, 1.0)
    return observation("horizon", CONTRACT, [round_of(
        "cap", "ba5e", 0.0, [Verdict.FAIL] * 3, arms, decision.winner, [],
        flags(arms, decision), decision.tie)])


def test_observation_records_the_tie_and_the_rule() -> None:
    doc = json.loads(tied_observation().dump())
    cap = doc["rounds"][0]
    assert cap["winner"] is None and "tie:a,b" in cap["flags"]
    assert cap["tie_break"] == {"arms": ["a", "b"], "total": 25.0, "rule": TIE_RULE,
                                "decided_by": None}
    assert Observation.model_validate(doc) == tied_observation()
    cap["tie_break"]["arms"] = ["a", "zz"]
    with pytest.raises(ValidationError, match="tie_break names arms that are not valid "
                                              "arms of the round: zz"):
        Observation.model_validate(doc)


def test_results_show_a_tie_as_a_shared_rank_and_say_why_nothing_merged() -> None:
    text = render_results(tied_observation())
    assert table_row(text, "a")[2:] == ["25.00 / 25 (tied, rank 1)"]
    assert table_row(text, "b")[2:] == ["25.00 / 25 (tied, rank 1)"]
    assert table_row(text, "c")[2:] == ["23.33 / 25"]
    assert ("- **cap**: a, b tie at 25.00 and the tie-break cannot separate them: no "
            "winner; nothing merged.") in text
    assert f"Ties: {TIE_RULE}." in text
    assert "- cap: tie:a,b: arms of equal total competed for the win" in text


def test_results_name_the_tie_breaker_under_the_merge_it_decided() -> None:
    steady = scored("steady", "PPP", {"tests": "PPP"}, judged(0, 0, 0, 0))  # 15 + 10 + 0
    lucky = scored("lucky", "PPF", {"tests": "PPP"}, judged(1, 1, 1, 1))  # 10 + 10 + 5
    decision = decide_winner([lucky, steady], 0.5)
    obs = observation("horizon", CONTRACT, [round_of(
        "cap", "ba5e", 0.0, [Verdict.FAIL] * 3, [lucky, steady], decision.winner, [],
        flags([lucky, steady], decision), decision.tie)])
    text = render_results(obs)
    assert table_row(text, "steady")[2:] == ["25.00 / 50 (tied, rank 1) ★"]
    assert ("- **cap**: the merge is steady alone (no graft kept).\n"
            "  - steady tied at 25.00 with lucky: broken by the success pass-rate") in text
