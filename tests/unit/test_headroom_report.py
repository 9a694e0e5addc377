"""Headroom in the reports (issue 33, item 5): OBSERVATION.json's optional `headroom` per
arm, RESULTS.md's and SCORECARD.md's lines, REPORT.html's table, with exact values."""

from __future__ import annotations

import json
from pathlib import Path

from rig.report import (
    Observation,
    observation,
    read_observation,
    render_results,
    render_scorecard,
    round_of,
    write_observation,
)
from rig.report.page import render_page
from rig.rubric import ArmScore
from rig.sample.verdict import Verdict
from rig.standings import decide_winner, flags
from tests.unit.html_page import numbers_compared, parse, values
from tests.unit.test_headroom import used, with_records
from tests.unit.test_report import CONTRACT
from tests.unit.test_score import WEIGHTS


def arms() -> list[ArmScore]:
    """hungry: one sample at 95 % of 256 MiB; lean: 25 %; legacy: records from before
    headroom (no use read)."""
    return [with_records("hungry", [used("hungry/success/1", 243.2),
                                    used("hungry/success/2", 60)]),
            with_records("lean", [used("lean/success/1", 64), used("lean/success/2", 32)]),
            with_records("legacy", [used("legacy/success/1", None)])]


def built() -> tuple[list[ArmScore], str]:
    scored = arms()
    found = round_of("cap", "ba5e", 0.0, [Verdict.FAIL], scored, None, [], flags(scored))
    return scored, observation("horizon", CONTRACT, [found]).dump()


def test_observation_holds_each_arms_worst_headroom_and_leaves_it_out_when_unread(
        tmp_path: Path) -> None:
    scored, _ = built()
    path = tmp_path / "OBSERVATION.json"
    write_observation(path, observation("horizon", CONTRACT, [round_of(
        "cap", "ba5e", 0.0, [Verdict.FAIL], scored, None, [], flags(scored))]))
    doc = json.loads(path.read_text())["rounds"][0]
    by_arm = {a["arm"]: a for a in doc["arms"]}
    assert by_arm["hungry"]["headroom"] == {
        "samples": 2, "measured": 2, "worst_sample": "cap/hungry/success/1",
        "peak_mib": 243.19999980926514, "limit_mib": 256.0, "headroom": 0.05,
        "near_limit": ["cap/hungry/success/1"], "cpu_s_max": 1.5}
    assert by_arm["lean"]["headroom"]["near_limit"] == []
    assert by_arm["lean"]["headroom"]["headroom"] == 0.75
    assert "headroom" not in by_arm["legacy"]  # written as before issue 33
    assert doc["flags"] == ["near_limit:hungry", "no_separation"]
    assert read_observation(path).rounds[0].arms[0].headroom is not None


def test_results_md_has_a_headroom_line_per_arm() -> None:
    _, text = built()
    results = render_results(Observation.model_validate_json(text))
    section = results.split("## Headroom (memory and CPU per sample)\n\n", 1)[1].split("\n## ")[0]
    assert section.splitlines()[2:] == [
        "| round | arm | worst sample | near the limit | most CPU | read |",
        "|---|---|---|---|---|---|",
        "| cap | hungry | cap/hungry/success/1: 243.2 / 256 MiB, 5.0 % left | "
        "cap/hungry/success/1 | 1.50 s | 2/2 |",
        "| cap | lean | cap/lean/success/1: 64.0 / 256 MiB, 75.0 % left | none | 1.50 s | 2/2 |",
    ]
    assert "near_limit:hungry: a sample of the arm came within 10 % of its memory limit" in (
        results)


def test_scorecard_has_a_headroom_section() -> None:
    scored, _ = built()
    card = render_scorecard("cap", scored, WEIGHTS, flags(scored),
                            decide_winner(scored, 1.0), "", [])
    section = card.split("## Headroom\n\n", 1)[1].split("\n## ")[0]
    assert section.splitlines()[2:] == [
        "- **hungry**: cap/hungry/success/1: 243.2 / 256 MiB, 5.0 % left; near the limit: "
        "cap/hungry/success/1; most CPU in one sample: 1.50 s (2/2 samples read)",
        "- **lean**: cap/lean/success/1: 64.0 / 256 MiB, 75.0 % left; near the limit: none; "
        "most CPU in one sample: 1.50 s (2/2 samples read)",
        "- **legacy**: no sample's use was read"]


def test_scorecard_of_records_from_before_headroom_has_no_section() -> None:
    scored = [with_records("legacy", [used("legacy/success/1", None)])]
    card = render_scorecard("cap", scored, WEIGHTS, flags(scored),
                            decide_winner(scored, 1.0), "", [])
    assert "## Headroom" not in card


def test_report_html_has_the_headroom_table_with_its_exact_numbers() -> None:
    _, text = built()
    obs = Observation.model_validate_json(text)
    page = parse(render_page(obs))
    table = page.tables["r1-headroom-table"]
    assert table.caption.startswith("Each arm's sample closest to its memory limit")
    hungry = table.row("hungry")
    assert hungry["worst sample"].text == "cap/hungry/success/1"
    assert (values(hungry["peak MiB"]), hungry["peak MiB"].text) == (
        [243.19999980926514], "243.2")
    assert values(hungry["headroom"]) == [0.05]
    assert hungry["near the limit"].text == "cap/hungry/success/1"
    assert table.row("legacy")["worst sample"].text == "no sample's use was read"
    assert numbers_compared(page, obs) == len(page.data)
