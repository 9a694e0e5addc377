"""RESULTS.md across every change: the scoreboard (arms x rounds), the per-model pattern,
where the merge beat every single arm, and the scoring-integrity caveats.

Pure: an `Observation` in, Markdown out (the artifact is the single source of the report).
"""

from __future__ import annotations

from collections.abc import Sequence

from rig.report import headroom
from rig.report.observation import ArmEntry, Observation, Round
from rig.report.pairs import Pair, Paired
from rig.report.scorecard import PAIRS_INTRO, cell, interval_text, pair_table, signed
from rig.standings import TIE_BREAKER_TEXT, TIE_RULE, describe_flag, total_key
from rig.wire import ModelUsage


def _arms_in_order(obs: Observation) -> dict[str, ArmEntry]:
    """Every arm id, in order of first appearance, with its first entry (its identity)."""
    first: dict[str, ArmEntry] = {}
    for round_ in obs.rounds:
        for entry in round_.arms:
            first.setdefault(entry.arm, entry)
    return first


def shared_places(round_: Round) -> dict[str, int]:
    """The rank of every valid arm that shares its total with another (1, 1, 3)."""
    totals = [total_key(a.total) for a in round_.arms if a.valid]
    return {a.arm: 1 + sum(t > total_key(a.total) for t in totals)
            for a in round_.arms if a.valid and totals.count(total_key(a.total)) > 1}


def _total(round_: Round, arm: str) -> str:
    entry = next((a for a in round_.arms if a.arm == arm), None)
    if entry is None:
        return "—"
    text = f"{entry.total:.2f} / {entry.max:g}"
    if not entry.valid:
        return text + " (invalid)"
    tied = shared_places(round_).get(arm)
    text += "" if tied is None else f" (tied, rank {tied})"
    return text + (" ★" if round_.winner == arm else "")


def scoreboard(obs: Observation) -> list[str]:
    """Rows: arms (labelled model @ effort / mode); columns: rounds; ★ the round's winner."""
    changes = [r.change for r in obs.rounds]
    lines = ["| arm | model @ effort / mode | " + " | ".join(changes) + " |",
             "|" + "---|" * (len(changes) + 2)]
    for arm, entry in _arms_in_order(obs).items():
        control = " · control" if entry.control else ""
        totals = [_total(r, arm) for r in obs.rounds]
        lines.append("| " + " | ".join(cell(t) for t in [arm, entry.label + control, *totals])
                     + " |")
    return lines


def per_model(obs: Observation) -> list[str]:
    """Mean total per model over its valid entries, with the share of max and the wins."""
    entries: dict[str, list[ArmEntry]] = {}
    wins: dict[str, int] = {}
    for round_ in obs.rounds:
        for entry in round_.arms:
            entries.setdefault(entry.model, []).append(entry)
            wins[entry.model] = wins.get(entry.model, 0) + (round_.winner == entry.arm)
    lines = ["| model | arms | valid / entries | mean total | mean % of max | wins |",
             "|---|---|---|---|---|---|"]
    for model, seen in entries.items():
        valid = [e for e in seen if e.valid]
        mean = f"{sum(e.total for e in valid) / len(valid):.2f}" if valid else "—"
        shares = [e.total / e.max for e in valid if e.max]
        share = f"{100 * sum(shares) / len(shares):.0f} %" if shares else "—"
        arms = ", ".join(sorted({e.arm for e in seen}))
        lines.append("| " + " | ".join(cell(t) for t in [
            model, arms, f"{len(valid)} / {len(seen)}", mean, share, str(wins[model])]) + " |")
    return lines


def merge_lines(obs: Observation) -> list[str]:
    """Per round: the merge, and whether it beat every single arm (a verified graft kept)."""
    lines: list[str] = []
    for round_ in obs.rounds:
        kept = [g for g in round_.grafts if g.verified]
        dropped = [g for g in round_.grafts if not g.verified]
        tie = round_.tie_break
        if round_.winner is None:
            why = ("no valid arm reached the threshold" if tie is None else
                   f"{', '.join(tie.arms)} tie at {tie.total:.2f} and the tie-break cannot "
                   "separate them: no winner")
            lines.append(f"- **{round_.change}**: {why}; nothing merged.")
            continue
        if kept:
            what = "; ".join(f"{g.what} from {g.from_arm}" for g in kept)
            lines.append(f"- **{round_.change}**: the merge beat every single arm: winner "
                         f"{round_.winner} plus {len(kept)} verified graft(s) it lacked "
                         f"({what}), re-verified with nothing regressing.")
        else:
            lines.append(f"- **{round_.change}**: the merge is {round_.winner} alone "
                         "(no graft kept).")
        lines.extend(f"  - dropped: {g.what} from {g.from_arm}: {g.rationale}" for g in dropped)
        lines.extend(tie_lines(round_))
    return lines


def tie_lines(round_: Round) -> list[str]:
    """The tie the round's winner decision broke, or that the winner was picked out of."""
    tie, won = round_.tie_break, round_.winner
    if tie is None or won is None:
        return []
    if tie.decided_by is None or tie.arms[0] != won:
        return [f"  - {', '.join(tie.arms)} tied at {tie.total:.2f}; the rule picked "
                f"{tie.arms[0] if tie.decided_by else 'no winner'}, {won} was merged by hand "
                "(merge --base)"]
    others = ", ".join(a for a in tie.arms if a != won)
    return [f"  - {won} tied at {tie.total:.2f} with {others}: broken by "
            f"{TIE_BREAKER_TEXT[tie.decided_by]}"]


def integrity_lines(obs: Observation) -> list[str]:
    """Every flag and every invalid arm (with its caveats), per round."""
    lines: list[str] = []
    for round_ in obs.rounds:
        lines.extend(f"- {round_.change}: {describe_flag(flag)}" for flag in round_.flags)
        for entry in round_.arms:
            if not entry.valid:
                why = "; ".join(entry.caveats) or "a rig error"
                lines.append(f"- {round_.change}: **{entry.arm} is invalid** (not ranked): {why}")
        lines += _unguarded(round_)
        lines += [f"- {round_.change}: {entry.arm}: {entry.retried} sample attempt(s) were no "
                  "result (cut by an outage, or a rig error set aside) and ran again"
                  for entry in round_.arms if entry.retried]
    return lines or ["None: every arm valid, no flag raised."]


def _unguarded(round_: Round) -> list[str]:
    """What a check's grading could not check, once per note (naming its arms)."""
    found: dict[tuple[str, str], list[str]] = {}
    for entry in round_.arms:
        for check, notes in entry.unguarded.items():
            for note in notes:
                found.setdefault((check, note), []).append(entry.arm)
    return [f"- {round_.change}: `{check}` unguarded ({', '.join(arms)}): {note}"
            for (check, note), arms in found.items()]


def _cost(value: float | None) -> str:
    return "— (no price)" if value is None else f"${value:.4f}"


def usage_lines(obs: Observation) -> list[str]:
    """Requests, tokens and cost through the model gateway: per arm and round, then per
    model over every round. Empty when no arm used the gateway."""
    rows = [(r.change, e) for r in obs.rounds for e in r.arms if e.usage is not None]
    if not rows:
        return []
    lines = ["| round | arm | requests (refused) | input | output | cache read / write | "
             "reasoning | cost |", "|---|---|---|---|---|---|---|---|"]
    by_model: dict[str, list[ModelUsage]] = {}
    for change, entry in rows:
        usage = entry.usage
        assert usage is not None
        refused = sum(usage.refused.values())
        lines.append("| " + " | ".join(cell(t) for t in [
            change, entry.arm, f"{usage.requests} ({refused})", str(usage.input),
            str(usage.output), f"{usage.cache_read} / {usage.cache_write}",
            str(usage.reasoning), _cost(usage.cost_usd)]) + " |")
        for model in usage.by_model:
            by_model.setdefault(model.model, []).append(model)
    lines += ["", "| model | requests | input | output | cost |", "|---|---|---|---|---|"]
    for name, seen in sorted(by_model.items()):
        costs = [m.cost_usd for m in seen]
        cost = None if any(c is None for c in costs) else sum(c or 0.0 for c in costs)
        lines.append("| " + " | ".join(cell(t) for t in [
            name, str(sum(m.requests for m in seen)), str(sum(m.input for m in seen)),
            str(sum(m.output for m in seen)), _cost(cost)]) + " |")
    return lines


def judge_lines(obs: Observation) -> list[str]:
    """An agent judge's requests, tokens and cost per judged arm: apart from the arms'.
    Empty when no round had an agent judge."""
    rows = [(r.change, j) for r in obs.rounds for j in r.judge_usage]
    if not rows:
        return []
    lines = ["| round | judged arm | judge | requests (refused) | input | output | cost | "
             "the wire |", "|---|---|---|---|---|---|---|---|"]
    for change, judged in rows:
        usage = judged.usage
        lines.append("| " + " | ".join(cell(t) for t in [
            change, judged.arm, f"{judged.judge} ({judged.version})",
            f"{usage.requests} ({sum(usage.refused.values())})", str(usage.input),
            str(usage.output), _cost(usage.cost_usd),
            judged.evidence + "".join(f"; {m}" for m in judged.marks)]) + " |")
    return lines


# --- which arm is better, and how sure (issue 33) -----------------------------------------


def runner_up(round_: Round) -> str | None:
    """The best valid arm by total after the round's winner (None: no winner, or alone)."""
    others = sorted((a for a in round_.arms if a.valid and a.arm != round_.winner),
                    key=lambda a: -total_key(a.total))
    return None if round_.winner is None or not others else others[0].arm


def find_pair(pairs: Sequence[Pair], one: str, other: str) -> Pair | None:
    return next((p for p in pairs if {p.a, p.b} == {one, other}), None)


def winner_line(round_: Round) -> list[str]:
    """Whether the winner's success pass-rate is distinguishable from the runner-up's."""
    second = runner_up(round_)
    pair = None if second is None else find_pair(round_.pairwise, round_.winner or "", second)
    if pair is None:
        return []
    rates = {e.arm: e.results.success.pass_rate for e in round_.arms}
    shown = (f"success {rates[round_.winner or '']:.2f} against {rates[second or '']:.2f}, "
             f"{pair.a} - {pair.b} {signed(pair.difference)} {interval_text(*pair.ci95)}")
    if pair.verdict == "not_distinguishable":
        return [f"- **{round_.change}**: the winner {round_.winner} is **not distinguishable** "
                f"from the runner-up {second} at these samples ({shown})."]
    return [f"- **{round_.change}**: the winner {round_.winner} is ahead of the runner-up "
            f"{second}: {pair.text()} at these samples ({shown})."]


def needed_lines(round_: Round) -> list[str]:
    """For each pair the rig could not separate, the samples that would."""
    lines = []
    for pair in round_.pairwise:
        if pair.verdict != "not_distinguishable":
            continue
        if pair.samples_needed is None:
            lines.append(f"- {round_.change}: {pair.a} and {pair.b} passed at the same rate: "
                         "no number of samples tells them apart on the success criterion.")
        else:
            lines.append(f"- {round_.change}: to tell {pair.a} from {pair.b}, run "
                         f"{pair.samples_needed} samples per arm.")
    return lines


def paired_lines(paired: Paired) -> list[str]:
    """The arms across the changes: the pairs, then the rank intervals."""
    lines = [f"Arms valid in every round ({', '.join(paired.arms)}), compared on the same "
             f"changes ({', '.join(paired.changes)}): per change, which had the higher "
             "success pass-rate; the exact two-sided sign test of wins against losses; the "
             "mean difference (a - b) with a bootstrap 95 % interval resampling the changes "
             f"and the samples within them (seed {paired.seed}, {paired.resamples} "
             "resamples). An interval of width 0 means every resample gave the same "
             "difference (all-or-nothing samples): it speaks only of these changes; the "
             "sign test cannot reach p < 0.05 with fewer than 6 changes.", "",
             "| a | b | wins / losses / ties | sign test p | mean a - b [95 %] | verdict |",
             "|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(cell(t) for t in [
        p.a, p.b, f"{p.wins} / {p.losses} / {p.ties}", f"{p.sign_p:.3g}",
        f"{signed(p.mean_difference)} {interval_text(*p.ci95)}", p.text()]) + " |"
        for p in paired.pairs]
    lines += ["", "Rank by mean success pass-rate over the same resamples (equal rates share "
              "a rank): the ranks each arm takes in 95 % of them, and how often it ranks "
              "first.", "", "| arm | rank interval (95 %) | ranked first |", "|---|---|---|"]
    lines += [f"| {cell(arm)} | {r.low}-{r.high} | {100 * r.first:.1f} % |"
              for arm, r in paired.rank_interval.items()]
    return lines


def better_lines(obs: Observation) -> list[str]:
    """RESULTS.md's "Which arm is better" section; empty when no round compared arms."""
    rounds = [r for r in obs.rounds if r.pairwise]
    if not rounds:
        return []
    lines = [PAIRS_INTRO, "", "Winner against runner-up:", ""]
    lines += [line for r in rounds for line in winner_line(r)] or ["- No round had a "
                                                                    "runner-up to compare."]
    needed = [line for r in rounds for line in needed_lines(r)]
    lines += ["", "Samples needed:", "", *(needed or ["- None: every pair was separated."])]
    for round_ in rounds:
        lines += ["", f"### {round_.change}", "", *pair_table(round_.pairwise)]
        ranks = round_.rank_interval
        if ranks:
            lines += ["", "Rank intervals (the change's samples resampled): " + ", ".join(
                f"{arm} {r.low}-{r.high} (first in {100 * r.first:.1f} %)"
                for arm, r in ranks.items())]
    if obs.paired is not None:
        lines += ["", "### Across changes (paired)", "", *paired_lines(obs.paired)]
    return lines


def _section(title: str, body: Sequence[str]) -> list[str]:
    return [f"## {title}", "", *body, ""]


def render_results(observation: Observation) -> str:
    """RESULTS.md of the experiment."""
    sha = observation.contract.get("sha256", "")
    parts = [
        f"# Results: {observation.experiment}", "",
        f"Contract sha256 `{sha}`; {len(observation.rounds)} round(s). Totals are weighted "
        "rubric scores over the dims that were scored; ★ marks a round's winner. Ties: "
        f"{TIE_RULE}.", "",
        *_section("Scoreboard", scoreboard(observation)),
        *_section("Per model", per_model(observation)),
        *(_section("Model usage (the gateway's records)", usage)
          if (usage := usage_lines(observation)) else []),
        *(_section("Judge usage (its gateway's records)", judged)
          if (judged := judge_lines(observation)) else []),
        *(_section("Headroom (memory and CPU per sample)", found)
          if (found := headroom.results_lines(observation)) else []),
        *_section("Merges", merge_lines(observation)),
        *(_section("Which arm is better, and how sure (success pass-rate)", better)
          if (better := better_lines(observation)) else []),
        *_section("Scoring integrity", integrity_lines(observation)),
    ]
    return "\n".join(parts).rstrip("\n") + "\n"
