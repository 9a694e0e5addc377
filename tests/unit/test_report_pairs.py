"""Which arm is better, and how sure (issue 33), as the reports show it: OBSERVATION.json's
pairwise, rank_interval and paired fields, SCORECARD.md's pair table and RESULTS.md's
section, exact, over tests/unit/test_report.py's two rounds (round one: ctl 0/3, fix 3/3,
graft 3/3, rigged invalid; round two: ctl 0/3, fix 3/3, graft 2/3, rigged 3/3)."""

from __future__ import annotations

import json

from rig.report import Observation, observation, render_results, round_of
from rig.report.pairs import Pair, RankInterval
from rig.sample.verdict import Verdict
from rig.standings import winner
from tests.unit.test_report import build, round_one, scorecard, scored


def test_each_round_compares_every_pair_of_valid_arms_with_newcombes_interval() -> None:
    cap, units = build().rounds
    assert cap.pairwise == [  # rigged had a rig error: never compared
        Pair(a="ctl", b="fix", difference=-1.0, ci95=(-1.0, -0.205923), verdict="b_better"),
        Pair(a="ctl", b="graft", difference=-1.0, ci95=(-1.0, -0.205923),
             verdict="b_better"),
        Pair(a="fix", b="graft", difference=0.0, ci95=(-0.561497, 0.561497),
             verdict="not_distinguishable", samples_needed=None)]
    assert [(p.a, p.b, p.difference, p.ci95, p.verdict, p.samples_needed)
            for p in units.pairwise if p.verdict == "not_distinguishable"] == [
        ("ctl", "graft", -0.666667, (-0.938508, 0.058569), "not_distinguishable", 12),
        ("fix", "graft", 0.333333, (-0.290507, 0.79234), "not_distinguishable", 63),
        ("fix", "rigged", 0.0, (-0.561497, 0.561497), "not_distinguishable", None),
        ("graft", "rigged", -0.333333, (-0.79234, 0.290507), "not_distinguishable", 63)]
    assert cap.rank_interval == {"ctl": RankInterval(low=3, high=3, first=0.0),
                                 "fix": RankInterval(low=1, high=1, first=1.0),
                                 "graft": RankInterval(low=1, high=1, first=1.0)}


def test_across_changes_only_arms_valid_in_every_round_are_paired() -> None:
    paired = build().paired
    assert paired is not None
    assert (paired.arms, paired.changes, paired.seed, paired.resamples) == (
        ["ctl", "fix", "graft"], ["cap", "units"], 33, 1000)
    assert [(p.a, p.b, p.wins, p.losses, p.ties, p.sign_p, p.mean_difference, p.verdict)
            for p in paired.pairs] == [
        ("ctl", "fix", 0, 2, 0, 0.5, -1.0, "b_better"),
        ("ctl", "graft", 0, 2, 0, 0.5, -0.833333, "b_better"),
        ("fix", "graft", 1, 0, 1, 1.0, 0.166667, "not_distinguishable")]
    assert paired.pairs[2].ci95 == (0.0, 0.666667)
    assert paired.rank_interval["graft"] == RankInterval(low=1, high=2, first=0.397)
    assert build().paired == paired  # seeded: the same numbers every time


def test_the_fields_are_additive_and_an_older_observation_still_reads() -> None:
    doc = json.loads(build().dump())
    for round_ in doc["rounds"]:
        del round_["pairwise"], round_["rank_interval"]
    del doc["paired"]
    older = Observation.model_validate(doc)
    assert older.paired is None and older.rounds[0].pairwise == []
    assert "Which arm is better" not in render_results(older)
    assert list(json.loads(older.dump())) == ["schema", "experiment", "contract", "rounds"]


def test_one_valid_arm_has_nothing_to_compare() -> None:
    arms = [scored("solo", "PPP"), scored("rigged", "PPR")]
    obs = observation("x", {"sha256": "ab" * 32}, [
        round_of("c", "ba5e", 0.0, [Verdict.FAIL], arms, winner(arms, 1.0), [], [])])
    assert (obs.rounds[0].pairwise, obs.rounds[0].rank_interval, obs.paired) == ([], {}, None)
    assert "pairwise" not in obs.dump() and "Which arm is better" not in render_results(obs)


def test_the_scorecard_has_the_pair_table_of_its_change() -> None:
    text = scorecard()
    pairs = text.split("## Pairs\n")[1].split("## Flags")[0]
    assert pairs.splitlines()[3:] == [
        "| a | b | a - b [95 %] | verdict | samples needed |",
        "|---|---|---|---|---|",
        "| ctl | fix | -1.00 [-1.00, -0.21] | fix better | — |",
        "| ctl | graft | -1.00 [-1.00, -0.21] | graft better | — |",
        "| fix | graft | 0.00 [-0.56, +0.56] | not distinguishable at these samples | never: "
        "the same observed pass-rate |", ""]
    assert "Newcombe's hybrid score interval" in pairs
    assert len(round_one()) == 4 and "rigged" not in pairs  # an invalid arm: never compared


def test_results_say_when_the_winner_is_not_distinguishable_and_what_samples_would() -> None:
    text = render_results(build())
    section = text.split("## Which arm is better, and how sure (success pass-rate)\n")[1]
    assert ("- **cap**: the winner fix is **not distinguishable** from the runner-up graft at "
            "these samples (success 1.00 against 1.00, fix - graft 0.00 [-0.56, +0.56]).") \
        in section
    assert "- units: to tell fix from graft, run 63 samples per arm." in section
    assert "- units: to tell ctl from graft, run 12 samples per arm." in section
    assert ("- cap: fix and graft passed at the same rate: no number of samples tells them "
            "apart on the success criterion.") in section
    assert ("| fix | graft | 1 / 0 / 1 | 1 | +0.17 [0.00, +0.67] | not distinguishable "
            "across these changes |") in section
    assert "| ctl | fix | 0 / 2 / 0 | 0.5 | -1.00 [-1.00, -1.00] | fix better |" in section
    assert "| graft | 1-2 | 39.7 % |" in section
    assert "(seed 33, 1000 resamples)" in section


def test_a_winner_ahead_of_its_runner_up_beyond_the_interval_is_said_so() -> None:
    arms = [scored("low", "FFF"), scored("high", "PPP"), scored("rigged", "PPR")]
    obs = observation("x", {"sha256": "ab" * 32}, [
        round_of("c", "ba5e", 0.0, [Verdict.FAIL], arms, winner(arms, 1.0), [], [])])
    text = render_results(obs)
    assert ("- **c**: the winner high is ahead of the runner-up low: high better at these "
            "samples (success 1.00 against 0.00, low - high -1.00 [-1.00, -0.21]).") in text
    assert "- None: every pair was separated." in text
