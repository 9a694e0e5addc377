"""SCORECARD.md of one change: the rubric table (arms as columns, dims as rows), the
verdict per arm, the flags, the merge and graft rationale, and the caveats.

Pure: `ArmScore`s in, Markdown out. It can be regenerated from stored sample records.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rig.report import headroom
from rig.report import pairs as pairs_mod
from rig.report.pairs import Pair
from rig.rubric import SUBJECTIVE, ArmScore, CheckResult, RubricWeights
from rig.sample.metric import show
from rig.sample.verdict import Verdict
from rig.standings import TIE_BREAKER_TEXT, TIE_RULE, WinnerDecision, describe_flag, places


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def arm_heading(arm: ArmScore) -> str:
    """``fixer: scripted-fixer @ none / single_agent`` (+ ``· control``)."""
    return f"{arm.arm}: {arm.identity.label}" + (" · control" if arm.identity.control else "")


def rate_text(result: CheckResult) -> str:
    """``1.00 [0.44, 1.00] 3/3``, plus rig errors, flakiness and spoofing."""
    rate = result.rate
    text = f"{rate.rate:.2f} [{rate.low:.2f}, {rate.high:.2f}] {rate.passed}/{rate.n}"
    if rate.rig_errors:
        text += f" +{rate.rig_errors} RIG_ERROR"
    if rate.flaky:
        text += " flaky"
    if result.spoofed:
        text += " spoofed"
    return text


def metric_text(result: CheckResult) -> str:
    """A ratchet's ``base 80.32 → 79.79`` (every distinct sample value); "" for a test."""
    if result.metric_base is None:
        return ""
    values = " / ".join(dict.fromkeys(show(v) for v in result.metric_values))
    return f"base {show(result.metric_base)} → {values or '?'}"


def outcomes(result: CheckResult) -> str:
    """``3 FAIL spoofed_output``: what the samples of a check ended as."""
    seen = Counter(str(r.verdict) if r.verdict is Verdict.PASS else f"{r.verdict} {r.reason}"
                   for r in result.records)
    return ", ".join(f"{n} {what}" for what, n in sorted(seen.items()))


def _score(value: float | None, missing: str) -> str:
    return missing if value is None else f"{value:.2f}"


def _check_names(arms: Sequence[ArmScore]) -> list[str]:
    names: list[str] = []
    for arm in arms:
        names.extend(name for name in arm.checks if name not in names)
    return names


def _row(label: str, cells: Sequence[str]) -> str:
    return "| " + " | ".join([label, *(cell(c) for c in cells)]) + " |"


def rubric_table(arms: Sequence[ArmScore], weights: RubricWeights) -> list[str]:
    """Dims as rows, arms as columns; pass-rates with their 95 % Wilson intervals."""
    lines = [_row("dim (weight)", [arm_heading(a) for a in arms]),
             "|" + "---|" * (len(arms) + 1)]
    lines.append(_row(f"success (w={weights.success})", [
        f"{_score(a.scores['success'], '—')} · {rate_text(a.success)}" for a in arms]))
    lines.append(_row(f"checks (w={weights.checks})", [
        _score(a.scores["checks"], "— (no checks)" if not a.checks else "— (not measured)")
        for a in arms]))
    for name in _check_names(arms):
        lines.append(_row(f"↳ {name}", [
            " · ".join(filter(None, (rate_text(a.checks[name]), metric_text(a.checks[name]))))
            if name in a.checks else "—" for a in arms]))
    for dim in SUBJECTIVE:
        lines.append(_row(f"{dim} (w={getattr(weights, dim)})", [
            _score(a.scores[dim], "— (judge = none)") for a in arms]))
    lines.append(_row("**total / max**", [
        f"**{a.total:.2f}** / {a.max:g}" + ("" if a.valid else " (invalid)") for a in arms]))
    return lines


def winner_line(decision: WinnerDecision) -> str:
    """``**Winner: a**``, with the tie it broke; or ``**No winner**`` and why."""
    tie = decision.tie
    if decision.winner is None:
        hand = " (`merge --base ARM` merges one of them by hand)" if tie is not None else ""
        return f"**No winner**: {decision.no_winner_reason}{hand}"
    if tie is None or tie.decided_by is None:
        return f"**Winner: {decision.winner}**"
    others = ", ".join(a for a in tie.arms if a != decision.winner)
    return (f"**Winner: {decision.winner}** (tie at {tie.total:.2f} with {others}, broken by "
            f"{TIE_BREAKER_TEXT[tie.decided_by]})")


def verdict_lines(arms: Sequence[ArmScore], winner: str | None) -> list[str]:
    """One line per arm: valid (rank, shared or not, winner) or invalid (why), and its
    success samples."""
    ranked = places(arms)
    lines = []
    for arm in arms:
        if arm.valid:
            place = f"valid, rank {ranked[arm.arm]} of {len(ranked)}"
            tied = [a for a, at in ranked.items() if at == ranked[arm.arm] and a != arm.arm]
            place += f" (tied with {', '.join(tied)})" if tied else ""
            place += ", **winner**" if arm.arm == winner else ""
        else:
            errors = ", ".join(f"{s} {r}" for s, r in arm.rig_errors)
            place = f"**invalid**: RIG_ERROR in {errors}; not ranked until the rig is fixed"
        lines.append(f"- **{arm.arm}** ({arm.identity.label}): {place}; "
                     f"success: {outcomes(arm.success)}")
    return lines


def graft_lines(grafts: Sequence[Mapping[str, Any]]) -> list[str]:
    if not grafts:
        return ["No graft."]
    lines = []
    for graft in grafts:
        # merge.json says `kept` (verified but regressing: dropped); a graft given in
        # OBSERVATION's shape has only `verified`, which there means kept.
        kept = bool(graft.get("kept", graft.get("verified")))
        why = "" if kept or not graft.get("why") else f"; {graft.get('why')}"
        lines.append(f"- from **{graft.get('from')}**: {graft.get('what')} — "
                     f"{'kept (re-verified)' if kept else 'dropped'}: "
                     f"{graft.get('rationale')}{why}")
    return lines


def caveat_lines(arms: Sequence[ArmScore]) -> list[str]:
    """Caveats every arm shares once, then each arm's own."""
    shared = [c for c in arms[0].caveats if all(c in a.caveats for a in arms)] if arms else []
    lines = [f"- all arms: {c}" for c in shared]
    lines += [f"- {a.arm}: {c}" for a in arms for c in a.caveats if c not in shared]
    return lines or ["None."]


def unguarded_lines(arms: Sequence[ArmScore]) -> list[str]:
    """What each check's grading could not check (no canary, no must-fail canary, ...):
    a note every arm shares once, then each arm's own."""
    lines: list[str] = []
    for check in dict.fromkeys(name for a in arms for name in a.unguarded):
        notes = {a.arm: a.unguarded.get(check, []) for a in arms}
        for note in dict.fromkeys(n for found in notes.values() for n in found):
            who = [arm for arm, found in notes.items() if note in found]
            whom = "all arms" if len(who) == len(arms) else ", ".join(who)
            lines.append(f"- `{check}` ({whom}): {note}")
    return lines or ["None: every check's grading was guarded by its canaries."]


# --- which arm is better, and how sure (issue 33) -----------------------------------------

PAIRS_INTRO = ("Every pair of valid arms on the success criterion: the difference of their "
               "pass-rates (a - b) with its 95 % interval (Newcombe's hybrid score interval, "
               "from the two Wilson intervals); an interval that holds 0 is not "
               "distinguishable at these samples. Samples needed: per arm, to separate the "
               "observed rates at 95 % with 80 % power (normal approximation; an observed 0 "
               "or 1 moved off by half a sample).")


def signed(value: float) -> str:
    """``+0.33``, ``-1.00``, ``0.00``."""
    text = f"{abs(value):.2f}"
    return text if text == "0.00" else ("+" if value > 0 else "-") + text


def interval_text(low: float, high: float) -> str:
    return f"[{signed(low)}, {signed(high)}]"


def needed_text(pair: Pair) -> str:
    """What it would take to separate the pair: "—" when it is separated."""
    if pair.verdict != "not_distinguishable":
        return "—"
    if pair.samples_needed is None:
        return "never: the same observed pass-rate"
    return f"{pair.samples_needed} per arm"


def pair_table(pairs: Sequence[Pair]) -> list[str]:
    """One row per pair: a, b, difference [95 %], verdict, samples needed."""
    if not pairs:
        return ["Fewer than two valid arms: nothing to compare."]
    lines = ["| a | b | a - b [95 %] | verdict | samples needed |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(cell(t) for t in [
        p.a, p.b, f"{signed(p.difference)} {interval_text(*p.ci95)}", p.text(),
        needed_text(p)]) + " |" for p in pairs]
    return lines


def pair_lines(arms: Sequence[ArmScore]) -> list[str]:
    """SCORECARD.md's pair table of the change."""
    return [PAIRS_INTRO, "", *pair_table(pairs_mod.pairwise(pairs_mod.success_counts(arms)))]


@dataclass(frozen=True)
class BrowserEvidence:
    """What a browser sample kept, by path relative to SCORECARD.md's folder."""

    sample: str
    verdict: str
    trace: str | None
    screenshots: tuple[str, ...]


SHOW_TRACE = "pip install playwright=={version} && playwright show-trace {trace}"


def browser_lines(evidence: Sequence[BrowserEvidence], playwright: str) -> list[str]:
    """Each browser sample's trace and screenshots, linked, and how to open a trace."""
    if not evidence:
        return []
    lines = ["## Browser evidence", "",
             "Each browser sample's Playwright trace (open it on your machine: "
             f"`{SHOW_TRACE.format(version=playwright or 'VERSION', trace='TRACE')}`, or "
             "drop it on trace.playwright.dev) and its screenshots:", ""]
    for found in evidence:
        trace = f"[trace]({found.trace})" if found.trace else "no trace"
        shots = ", ".join(f"[{i + 1}]({s})" for i, s in enumerate(found.screenshots))
        lines.append(f"- {found.sample} ({found.verdict}): {trace}; screenshots "
                     f"{shots or 'none'}")
    return [*lines, ""]


def render_scorecard(change: str, arms: Sequence[ArmScore], weights: RubricWeights,
                     flags: Sequence[str], decision: WinnerDecision, merge_note: str,
                     grafts: Sequence[Mapping[str, Any]],
                     browser: Sequence[BrowserEvidence] = (), playwright: str = "") -> str:
    """SCORECARD.md of `change`; `decision`: `standings.decide_winner` of `arms`; `browser`:
    the browser samples' evidence (`playwright`: the version that wrote the traces)."""
    top = 5 * (weights.success + weights.checks + sum(getattr(weights, d) for d in SUBJECTIVE))
    parts = [
        f"# Scorecard: {change}", "",
        f"Each dim scores 0..5, weighted by w (max {top} when every dim is scored). "
        "Pass-rates: rate [95 % Wilson interval] passed/graded samples.", "",
        *rubric_table(arms, weights), "",
        "## Verdict", "", winner_line(decision), "", f"Rule: {TIE_RULE}.", "",
        *verdict_lines(arms, decision.winner), "",
        "## Pairs", "", *pair_lines(arms), "",
        "## Flags", "", *([f"- {describe_flag(f)}" for f in flags] or ["None."]), "",
        "## Unguarded", "", *unguarded_lines(arms), "",
        *headroom.scorecard_lines(arms),
        *browser_lines(browser, playwright),
        "## Merge", "", merge_note.strip() or "Nothing merged.", "",
        "### Grafts", "", *graft_lines(grafts), "",
        "## Caveats", "", *caveat_lines(arms),
    ]
    return "\n".join(parts) + "\n"
