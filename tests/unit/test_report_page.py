"""REPORT.html (issue 23): every number of its tables is OBSERVATION.json's, read back
with html.parser; what a contestant wrote renders as text wherever it appears; the charts
carry a role and an accessible name; no price is never a cost of 0."""

from __future__ import annotations

import math

import pytest

from rig.report import JudgeUsage, Observation
from rig.report.evidence import (
    ArmEvidence,
    Dispatch,
    LogExcerpt,
    MergeFacts,
    PageEvidence,
    Picture,
    RoundEvidence,
    SampleEvidence,
    WithheldFacts,
    Work,
)
from rig.report.page import CSP, flag_lines, flag_summary, render_page
from rig.standings import describe_flag
from rig.wire import WireSummary
from tests.unit.html_page import numbers_compared, parse
from tests.unit.test_report import build
from tests.unit.test_score import record

PRICED = WireSummary(records="gateway/records/cap/requests.jsonl", requests=7,
                     refused={"budget_exhausted": 1}, input=12345, output=678, cache_read=90,
                     cache_write=12, reasoning=345, cost_usd=0.123456)
UNPRICED = WireSummary(records="gateway/records/cap/requests.jsonl", requests=3, input=500,
                       output=40, cost_usd=None)
JUDGE = JudgeUsage(arm="fix", judge="claude-code:judge-m@high", version="2.1.328",
                   model_observed="judge-m", effort_observed="high", evidence="the wire",
                   usage=WireSummary(records="judge", requests=2, input=900, output=80,
                                     cost_usd=0.0042))


def observed() -> Observation:
    """test_report's two rounds, with gateway usage (one arm priced, one not) and an agent
    judge in the first."""
    obs = build()
    first = obs.rounds[0]
    arms = [a.model_copy(update={"usage": {"fix": PRICED, "graft": UNPRICED}.get(a.arm)})
            for a in first.arms]
    first = first.model_copy(update={"arms": arms, "judge_usage": [JUDGE]})
    return obs.model_copy(update={"rounds": [first, *obs.rounds[1:]]})


@pytest.mark.parametrize("with_evidence", [False, True])
def test_every_number_in_the_page_is_the_observation_s(with_evidence: bool) -> None:
    """Parsed back from the tables: each number is a <data> element whose value is the
    observation's exact one, and every <data> of the page was compared."""
    obs = observed()
    page = parse(render_page(obs, hostile() if with_evidence else None))
    assert numbers_compared(page, obs) == len(page.data) > 150


def test_each_number_is_shown_rounded_from_its_exact_value() -> None:
    page = parse(render_page(observed()))
    for value, text in page.data:
        shown = text.removeprefix("$")
        places = len(shown.partition(".")[2])
        assert math.isclose(float(shown), float(value), abs_tol=0.5 * 10 ** -places + 1e-12), (
            value, text)


def test_no_price_is_shown_as_such_never_as_zero() -> None:
    page = parse(render_page(observed()))
    usage = page.tables["r1-usage-table"]
    assert usage.row("graft")["cost"].text == "no price"
    assert usage.row("fix")["cost"].text == "$0.1235"
    lane = [a for a in page.starts("text") if a.get("class") == "noprice"]
    assert len(lane) == 1  # the cost chart's lane holds graft, not the axis's 0
    assert "r2-usage-table" not in page.tables
    assert "no tokens or cost were recorded" in page.text


def test_the_judge_s_usage_is_a_table_apart() -> None:
    table = parse(render_page(observed())).tables["r1-judge-table"]
    assert table.caption.startswith("The judge's usage, apart from the arms'")
    assert table.row("fix")["judge"].text == "claude-code:judge-m@high (2.1.328)"


CHART_NAMES = ("Success pass-rate per arm with its 95 % Wilson interval, change {}",
               "Rubric total per arm, stacked by dimension (objective, judge), change {}",
               "Tokens against success pass-rate per arm, change {}",
               "Cost against success pass-rate per arm, change {}")
RANK_CHART = "Rank interval per arm across changes (95 % of bootstrap resamples)"  # issue 33


def test_every_chart_is_an_image_named_by_its_title_and_followed_by_its_table() -> None:
    """What a browser test finds by role and accessible name."""
    page = parse(render_page(observed()))
    names = []
    for svg in page.starts("svg"):
        assert svg["role"] == "img"
        title, desc = svg["aria-labelledby"], svg["aria-describedby"]
        names.append(page.titles[title])
        assert title.endswith("-title") and desc == title.replace("-title", "-desc")
    expected = [name.format("cap") for name in CHART_NAMES] + [
        name.format("units") for name in CHART_NAMES[:2]] + [RANK_CHART]
    assert sorted(names) == sorted(expected)
    order = [tag for tag, _ in page.tags if tag in ("svg", "table")]
    assert all(order[at + 1] == "table" for at, tag in enumerate(order) if tag == "svg"
               and order[at + 1:at + 2] != ["svg"])
    assert all(table.caption for table in page.tables.values())


def test_the_winner_and_the_flags_are_on_the_page_and_on_the_chart() -> None:
    """Round cap: fix won (and is flaky), ctl's unknown effort confounds the round, rigged
    had a rig error; each is written beside its bar, the round's flags above them."""
    page = parse(render_page(observed()))
    assert "Winner: fix" in page.text
    rows = [a["class"] for a in page.starts("g") if a["class"].startswith("row")]
    assert rows.count("row winner") == 4  # the pass-rate and rubric charts of both rounds
    notes = set(page.chunks)
    assert {"flags: effort_confounded, infra_asymmetric, rig_asymmetric",
            "1.00 \u2605 winner \u00b7 flaky", "0.00 control \u00b7 effort unknown",
            "1.00 invalid (rig error)", "46.67 / 50 \u2605 winner"} <= notes


def test_the_page_forbids_scripts_and_loads_nothing() -> None:
    html = render_page(observed(), hostile())
    page = parse(html)
    metas = page.starts("meta")
    assert {"http-equiv": "Content-Security-Policy", "content": CSP} in metas
    assert CSP == "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    assert html.index("Content-Security-Policy") < html.index("<body>")
    assert not page.starts("script") and not page.starts("link") and not page.starts("iframe")


# -- what a contestant wrote -----------------------------------------------------------------

PAYLOAD = ('<script>alert(1)</script><img src=x onerror=alert(2)></details>'
           '<a href="javascript:alert(3)">x</a>')


def hostile_text(place: str) -> str:
    return f"{place}:{PAYLOAD}"


PLACES = ("diff", "commit message", "test name", "log head", "log tail", "reason", "detail",
          "command", "dispatch last line", "dispatch log", "dispatch error", "merge note",
          "withheld path", "picture name")


def hostile() -> PageEvidence:
    """The page's evidence of round cap where every contestant-written field holds the payload."""
    obs, samples = observed(), {}
    for entry in obs.rounds[0].arms:
        for name in [*entry.results.success.samples,
                     *(s for c in entry.results.checks.values() for s in c.samples)]:
            _, arm, check, n = name.split("/")
            base = record(arm, check, int(n), "F")
            samples[name] = SampleEvidence(
                base.model_copy(update={"reason": hostile_text("reason"),
                                        "detail": hostile_text("detail"),
                                        "command": hostile_text("command"),
                                        "tests": [{"id": hostile_text("test name"),
                                                   "status": "failed"}]}),
                f"stages/cap/samples/{arm}/{check}/{n}.json",
                LogExcerpt(f"stages/cap/samples/{arm}/{check}/{n}.log", 9000,
                           hostile_text("log head"), hostile_text("log tail"), 100),
                (Picture(hostile_text("picture name"), None, "not embedded: not an image"),))
    dispatch = Dispatch(state="finished", adapter="command", command="sh agent.sh",
                        image_id="sha256:ab", started_at="2024-01-01T00:00:00+00:00",
                        last_line=hostile_text("dispatch last line"),
                        error=hostile_text("dispatch error"))
    arm = ArmEvidence(dispatch, LogExcerpt("stages/cap/arms/fix/dispatch.log", 10,
                                           hostile_text("dispatch log"), "", 0),
                      Work(diff=hostile_text("diff"), messages=hostile_text("commit message")))
    withheld = WithheldFacts.model_validate({"from": "fix",
                                             "paths": [hostile_text("withheld path")],
                                             "count": 1, "why": "harness"})
    merge = MergeFacts(head="abc", note=hostile_text("merge note"), withheld=[withheld])
    return PageEvidence({"cap": RoundEvidence({e.arm: arm for e in obs.rounds[0].arms}, samples,
                                          merge)})


def test_contestant_text_renders_as_text_in_every_place_it_appears() -> None:
    """A diff, a test name, a log, a reason, a commit message and an arm's output holding
    <script>, <img onerror>, </details> and a javascript: link: each is shown as written,
    none becomes an element, an attribute or a link."""
    page = parse(render_page(observed(), hostile()))
    missing = [place for place in PLACES if hostile_text(place) not in page.text]
    assert missing == []
    assert not page.starts("script")
    assert [a for a in page.starts("img")] == []  # the hostile picture is not an image
    assert not [(tag, name) for tag, attrs in page.tags for name in attrs
                if name.startswith("on")]
    hrefs = [a["href"] for a in page.starts("a")]
    assert hrefs and all(h.startswith("#") or h.startswith("stages/") for h in hrefs)
    assert len(page.starts("details")) == page.ends["details"]


def test_an_embedded_picture_is_a_data_uri_image() -> None:
    evidence = hostile()
    cap = evidence.rounds["cap"]
    name = next(iter(cap.samples))
    png = Picture("end.png", "data:image/png;base64,iVBORw0KGgo=")
    remote = Picture("remote.png", "https://example.com/x.png")  # never made by `picture`
    samples = {**cap.samples, name: SampleEvidence(cap.samples[name].record, "x.json", None,
                                                   (png, remote))}
    evidence = PageEvidence({"cap": RoundEvidence(cap.arms, samples, cap.merge)})
    images = parse(render_page(observed(), evidence)).starts("img")
    assert images == [{"src": "data:image/png;base64,iVBORw0KGgo=", "alt": "end.png"}]


def test_a_grid_cell_links_to_its_sample_s_details_and_a_missing_record_says_so() -> None:
    obs, evidence = observed(), hostile()
    page = parse(render_page(obs, evidence))
    grid = next(t for t in page.tables.values() if t.caption.startswith("Samples of change cap"))
    assert grid.rows[0][0].text == "arm" and [c.text for c in grid.rows[1]][:3] == [
        "1", "2", "3"]
    ids = {a["id"] for _, a in page.tags if "id" in a}
    cells = [a["href"] for a in page.starts("a") if a["href"].startswith("#r1-s")]
    assert len(cells) == len(evidence.rounds["cap"].samples) and all(
        c[1:] in ids for c in cells)
    units = next(t for t in page.tables.values()
                 if t.caption.startswith("Samples of change units"))
    assert {c.text.strip() for row in units.rows[2:] for c in row[1:]} == {
        "missing no stored record"}


def test_flags_are_listed_once_per_kind_with_the_arms_they_name() -> None:
    """At 100 arms a flag per arm and line buried the page: one line per kind."""
    units = observed().rounds[1]
    assert units.flags == ["effort_confounded", "flaky:graft", "flaky:rigged"]
    assert flag_lines(units) == (describe_flag("effort_confounded"),
                                 describe_flag("flaky") + " (2 arm(s)): graft, rigged")
    assert flag_summary(units) == "effort_confounded, flaky (2 arms)"
    assert parse(render_page(observed())).tables["winners"].row("units")["flags"].text == (
        "effort_confounded, flaky (2 arms)")


# --- which arm is better, and how sure (issue 33) -----------------------------------------


def test_each_round_has_its_pair_matrix_as_a_heat_map_and_the_samples_that_would_separate(
        ) -> None:
    """Row minus column above the diagonal, coloured by who is ahead beyond the interval;
    nothing below it (the mirror); an invalid arm is not in it."""
    html = render_page(observed())
    page = parse(html)
    cap, units = page.tables["r1-pairs-table"], page.tables["r2-pairs-table"]
    assert [[c.text for c in row] for row in cap.rows] == [
        ["row - column", "ctl", "fix", "graft"],
        ["ctl", "", "-1.00 [-1.00, -0.21]fix better", "-1.00 [-1.00, -0.21]graft better"],
        ["fix", "", "", "+0.00 [-0.56, +0.56]not distinguishable at these samples"],
        ["graft", "", "", ""]]
    assert units.head == ["row - column", "ctl", "fix", "graft", "rigged"]  # valid there
    assert ('<td class="heat-column heat-4" title="ctl - fix: -1.00 [-1.00, -0.21]: fix '
            'better">') in html
    assert ('<td class="heat-neither heat-0" title="fix - graft: +0.00 [-0.56, +0.56]: not '
            'distinguishable at these samples">') in html
    assert "<li>fix and graft passed at the same rate: no number of samples tells them " \
           "apart on the success criterion.</li>" in html
    assert "<li>To tell fix from graft, run 63 samples per arm.</li>" in html


def test_the_rank_intervals_across_changes_are_whiskers_with_their_table() -> None:
    page = parse(render_page(observed()))
    assert [[c.text for c in row] for row in page.tables["ranks-table"].rows] == [
        ["arm", "rank low", "rank high", "ranked first"], ["ctl", "3", "3", "0.00"],
        ["fix", "1", "1", "1.00"], ["graft", "1", "2", "0.40"]]
    assert page.tables["paired-table"].row("fix vs graft")["verdict"].text == (
        "not distinguishable across these changes")
    whiskers = [attrs for attrs in page.starts("line") if attrs.get("class") == "whisker"]
    assert len(whiskers) > 3 * 3  # three per arm in the rank chart, on top of the rates'
    assert page.titles["ranks-title"] == RANK_CHART


def test_an_observation_without_pairs_draws_none() -> None:
    obs = observed()
    bare = obs.model_copy(update={"paired": None, "rounds": [
        r.model_copy(update={"pairwise": [], "rank_interval": {}}) for r in obs.rounds]})
    page = parse(render_page(bare))
    assert not {"r1-pairs-table", "ranks-table", "paired-table"} & set(page.tables)
    assert numbers_compared(page, bare) == len(page.data)
