"""The charts of REPORT.html as geometry (`rig.report.charts`): a bar is its pass-rate, a
whisker its interval, a stack its weighted total; no price is a lane, never 0. And the
templates mark nothing safe."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from rig.report import charts
from rig.report.charts import PLOT_W, PLOT_X, flags_by_arm, nice_top, rates, rubric, usage
from tests.unit.test_report_page import observed

WEIGHTS = {"success": 3, "checks": 2, "diagnosis": 2, "plan": 1, "code_quality": 1, "intent": 1}


def test_a_bar_is_its_pass_rate_and_the_whisker_its_interval() -> None:
    round_ = observed().rounds[0]
    chart = rates(round_, 0.75, "k")
    assert chart.threshold == PLOT_X + 0.75 * PLOT_W and chart.threshold_label == (
        "threshold 0.75")
    for bar, entry in zip(chart.bars, round_.arms, strict=True):
        rate = entry.results.success
        assert bar.width == pytest.approx(PLOT_W * rate.pass_rate, abs=0.01)
        assert (bar.low, bar.high) == pytest.approx(
            (PLOT_X + PLOT_W * rate.ci95[0], PLOT_X + PLOT_W * rate.ci95[1]), abs=0.01)
    assert [b.kind for b in chart.bars] == ["valid", "winner", "valid", "invalid"]
    assert [t.label for t in chart.ticks] == ["0.00", "0.25", "0.50", "0.75", "1.00"]


def test_flags_naming_an_arm_go_on_its_row_the_rest_above_the_chart() -> None:
    round_ = observed().rounds[0].model_copy(update={"flags": [
        "effort_confounded", "flaky:fix", "harness_touched:graft (conftest.py, pytest.ini)",
        "tie:fix,graft", "model_mismatch:ctl", "spoofed:nobody"]})
    whole, per_arm = flags_by_arm(round_)
    assert whole == ["effort_confounded", "tie:fix,graft", "spoofed:nobody"]
    assert per_arm == {"ctl": ["model_mismatch"], "fix": ["flaky"],
                       "graft": ["harness_touched (conftest.py, pytest.ini)"], "rigged": []}
    assert rates(round_, 1.0, "k").flags == (
        "flags: effort_confounded, tie:fix,graft, spoofed:nobody")


def test_the_rubric_stack_adds_up_to_the_total() -> None:
    round_ = observed().rounds[0]
    chart = rubric(round_, WEIGHTS, "k")
    scale = PLOT_W / 50  # every arm's max is 50: the axis ends there
    for row, entry in zip(chart.rows, round_.arms, strict=True):
        assert sum(s.width for s in row.segments) == pytest.approx(entry.total * scale, abs=0.05)
        assert row.max_x == pytest.approx(PLOT_X + entry.max * scale)
        assert [s.side for s in row.segments] == [
            "objective", "objective", "judge", "judge", "judge", "judge"][:len(row.segments)]
    assert chart.note == ""


def test_weights_that_do_not_give_the_total_draw_it_whole_and_say_so() -> None:
    """A stage refrozen with other weights than the first stage's (the contract in
    OBSERVATION.json is the first's): the bar is not split by a guess."""
    round_ = observed().rounds[0]
    chart = rubric(round_, {**WEIGHTS, "success": 1}, "k")
    fix = next(r for r in chart.rows if r.arm == "fix")
    assert [s.dim for s in fix.segments] == ["total"]
    assert "not split by dim" in chart.note and "fix" in chart.note


def test_an_arm_without_a_price_sits_in_the_lane_never_at_zero() -> None:
    round_ = observed().rounds[0]
    cost = usage(round_, 1.0, "k", "cost")
    tokens = usage(round_, 1.0, "k", "tokens")
    assert cost is not None and tokens is not None
    assert [p.arm for p in cost.points] == ["fix"] and [p.arm for p in cost.unpriced] == [
        "graft"]
    assert cost.unpriced[0].x == charts.LANE_X < charts.SCATTER_X
    assert "no price" in cost.unpriced[0].title
    assert [p.arm for p in tokens.points] == ["fix", "graft"] and tokens.unpriced == ()
    assert usage(observed().rounds[1], 1.0, "k", "cost") is None


@pytest.mark.parametrize(("value", "expected"), [
    (50, (50, 10)), (3, (3, 1)), (0, (1, 0.2)), (12345, (15000, 5000)), (0.0123, (0.015, 0.005))])
def test_an_axis_ends_on_a_round_number(value: float, expected: tuple[float, float]) -> None:
    assert nice_top(value) == pytest.approx(expected)


def test_no_template_marks_anything_safe() -> None:
    """Autoescape is the whole defence: no `|safe`, no autoescape switched off, and no
    Markup built in Python."""
    folder = resources.files("rig.report").joinpath("templates")
    texts = {f.name: f.read_text(encoding="utf-8") for f in folder.iterdir()}
    assert sorted(texts) == ["charts.html.j2", "pairs.html.j2", "report.html.j2",
                            "samples.html.j2"]
    unsafe = re.compile(r"\|\s*safe\b|autoescape\s+false|Markup")
    assert [name for name, text in texts.items() if unsafe.search(text)] == []
    code = [resources.files("rig.report").joinpath(name).read_text(encoding="utf-8")
            for name in ("page.py", "charts.py", "evidence.py")]
    assert not any("Markup" in text or "markupsafe" in text for text in code)
