"""What a round concludes from its arms' scores: its flags (each with what it means), the
standings (equal totals share a rank) and the winner, the best-ranked valid arm whose
success pass-rate reaches the threshold (`TIE_RULE`). Pure: `ArmScore`s in, names out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rig import headroom
from rig.rubric import ArmScore

FLAG_MEANINGS = {
    "no_separation": "every valid arm passed the success criterion: the task does not "
                     "separate the arms",
    "rig_asymmetric": "rig errors hit arms unequally: the comparison is not valid until the "
                      "rig is fixed",
    "effort_confounded": "an arm's effort_normalized is unknown: the comparison is "
                         "effort-confounded (directional only)",
    "flaky": "0 < pass-rate < 1 on the success criterion or a check",
    "spoofed": "the output disagreed with the real result (fake summary or exit mismatch); "
               "never scored as a PASS",
    "tampered": "the arm's run did not report the rig's canaries as planted, broke the "
                "harness, or handed in work that could not be imported safely: a FAIL",
    "harness_touched": "the arm's diff changed harness files (conftest, runner "
                       "configuration, bytecode; the first five named): every sample ran "
                       "under the base's, and a merge never puts them on the branch",
    "effort_mismatch": "the effort the gateway saw on the wire is not the effort the arm "
                       "declares",
    "model_mismatch": "the model the gateway saw on the wire is not the model the arm "
                      "declares",
    "budget_exhausted": "the arm ran past a [gateway] budget; requests past it were refused",
    "server_tools": "the arm was granted allow_server_tools and its model used provider-side "
                    "tools that reach the internet (web search, fetch, grounding): it could "
                    "look outside its sandbox",
    "unrestricted_network": "the arm had network = \"egress\": the whole internet, its key "
                            "inside the sandbox, nothing on the wire recorded",
    "continued_past_rig_errors": "`run --continue-on-rig-error` went on past this round's "
                                 "rig errors: its merge and every later change rest on a "
                                 "round that is not valid",
    "tie": "arms of equal total competed for the win: the tie-break (success pass-rate, "
           "then checks score) decided or, still equal, there is no winner",
    # headroom (rig.headroom)
    "near_limit": "a sample of the arm came within 10 % of its memory limit, or the OOM "
                  "killer ended it: the limit, not only the code, may have decided its "
                  "result",
    "infra_asymmetric": "the infrastructure's trouble (RIG_ERROR samples and sample "
                        "attempts that were no result and ran again) hit arms unequally: "
                        "the arms did not run under the same conditions, even where every "
                        "retry then ran (rig_asymmetric: the rig errors that remain make "
                        "the comparison itself invalid)",
}


def describe_flag(flag: str) -> str:
    """A flag and what it means, e.g. ``flaky:fixer: 0 < pass-rate < 1 ...``."""
    meaning = FLAG_MEANINGS.get(flag.split(":", 1)[0], "")
    return f"{flag}: {meaning}" if meaning else flag


FLAG_FILES = 5  # harness files a flag names


def harness_flag(arm: ArmScore) -> str:
    """`harness_touched:B (tests/conftest.py, vitest.config.mts)`: the arm and the first
    `FLAG_FILES` harness files its diff changed, `+N more` for the rest."""
    named = ", ".join(arm.harness_touched[:FLAG_FILES])
    more = len(arm.harness_touched) - FLAG_FILES
    return f"harness_touched:{arm.arm} ({named}{f', +{more} more' if more > 0 else ''})"


def flags(arms: Sequence[ArmScore], decision: WinnerDecision | None = None) -> list[str]:
    """The round's integrity flags, sorted: no_separation, rig_asymmetric,
    infra_asymmetric, near_limit:<arm>, effort_confounded, flaky:<arm>, spoofed:<arm>,
    tampered:<arm>,
    `harness_touched:<arm> (<file>, ...)` (`harness_flag`), and tie:<arm>,<arm>... when
    `decision` had to break a tie (or could not)."""
    found: set[str] = set()
    valid = [a for a in arms if a.valid]
    if valid and all(a.success.rate.n and a.success.rate.rate == 1.0 for a in valid):
        found.add("no_separation")
    if len({len(a.rig_errors) for a in arms}) > 1:
        found.add("rig_asymmetric")
    if any(a.identity.effort_normalized == "unknown" for a in arms):
        found.add("effort_confounded")
    found.update(f"flaky:{a.arm}" for a in arms if a.flaky)
    found.update(f"spoofed:{a.arm}" for a in arms
                 if any(check.spoofed for check in a.all_checks))
    found.update(f"tampered:{a.arm}" for a in arms
                 if any(check.tampered for check in a.all_checks))
    found.update(harness_flag(a) for a in arms if a.harness_touched)
    found.update(f"{mark}:{a.arm}" for a in arms for mark in a.marks)
    if decision is not None and decision.tie is not None:
        found.add("tie:" + ",".join(sorted(decision.tie.arms)))
    found.update(headroom_flags(arms))
    return sorted(found)


def headroom_flags(arms: Sequence[ArmScore]) -> set[str]:
    """near_limit:<arm> (a sample within 10 % of its memory limit, or OOM-killed) and
    infra_asymmetric (rig errors and retried attempts per arm differ)."""
    found = {f"near_limit:{a.arm}" for a in arms if a.headroom.near_limit}
    if headroom.asymmetric(a.infra_events for a in arms):
        found.add("infra_asymmetric")
    return found


# --- rank and winner ----------------------------------------------------------------------
#
# Ranks go by total; equal totals share a rank. A tie is never broken by the arm id (that
# would be arbitrary): only by measurements, objective first, and a tie they cannot break
# has no winner.

TIE_RULE = ("equal totals share a rank; the winner is the best-ranked valid arm whose "
            "success pass-rate reaches the threshold; between arms of equal total the higher "
            "success pass-rate wins, then the higher checks score; still equal: no winner "
            "(never the arm id)")
TieBreaker = Literal["success_pass_rate", "checks"]
TIE_BREAKER_TEXT: dict[TieBreaker, str] = {"success_pass_rate": "the success pass-rate",
                                           "checks": "the checks score"}
_DIGITS = 9  # totals and rates are sums of float products: equal to 9 digits is equal


@dataclass(frozen=True)
class Tie:
    """Arms of equal total in the winner decision, in the tie-break's order."""

    arms: tuple[str, ...]
    total: float
    decided_by: TieBreaker | None  # None: still equal after every tie-breaker: no winner


@dataclass(frozen=True)
class WinnerDecision:
    """The round's winner by the stated rule (`TIE_RULE`), and the tie it broke, if any."""

    winner: str | None
    tie: Tie | None = None

    @property
    def no_winner_reason(self) -> str:
        """Why there is no winner ("" when there is one)."""
        if self.winner is not None:
            return ""
        if self.tie is not None:
            return (f"{', '.join(self.tie.arms)} tie at {self.tie.total:.2f} and the "
                    "tie-break (success pass-rate, then checks score) cannot separate them")
        return "no valid arm reached the threshold"


def total_key(total: float) -> float:
    """A total as ranks compare it: two totals with the same key are a tie."""
    return round(total, _DIGITS)


def _tie_keys(arm: ArmScore) -> tuple[float, float]:
    """The tie-breakers, in order: success pass-rate, then checks score (unscored: lowest)."""
    checks = arm.scores["checks"]
    checks_key = -1.0 if checks is None else round(checks, _DIGITS)
    return round(arm.success.rate.rate, _DIGITS), checks_key


def standings(arms: Sequence[ArmScore]) -> list[list[ArmScore]]:
    """Valid arms grouped by total, best first; each group in the tie-break's order (arms
    equal on every tie-breaker are listed by id, which decides nothing)."""
    ordered = sorted((a for a in arms if a.valid), key=lambda a: (
        -total_key(a.total), *(-key for key in _tie_keys(a)), a.arm))
    groups: list[list[ArmScore]] = []
    for arm in ordered:
        if groups and total_key(groups[-1][0].total) == total_key(arm.total):
            groups[-1].append(arm)
        else:
            groups.append([arm])
    return groups


def rank(arms: Sequence[ArmScore]) -> list[str]:
    """Valid arms, best first: total, then success pass-rate, then checks score. Invalid
    arms are not ranked until the rig is fixed."""
    return [a.arm for group in standings(arms) for a in group]


def places(arms: Sequence[ArmScore]) -> dict[str, int]:
    """Each valid arm's rank by total; equal totals share it (1, 1, 3)."""
    found: dict[str, int] = {}
    for group in standings(arms):
        found.update({a.arm: len(found) + 1 for a in group})
    return found


def _broken_by(first: ArmScore, second: ArmScore) -> TieBreaker | None:
    (success_1, checks_1), (success_2, checks_2) = _tie_keys(first), _tie_keys(second)
    if success_1 > success_2:
        return "success_pass_rate"
    return "checks" if checks_1 > checks_2 else None


def decide_winner(arms: Sequence[ArmScore], threshold: float) -> WinnerDecision:
    """The first group of equal total (best first) holding an arm whose success pass-rate
    reaches `threshold` decides: alone, that arm wins; tied, the tie-break decides, and a
    tie it cannot break has no winner (a lower total never wins for it)."""
    for group in standings(arms):
        best = group[0]  # the group's highest success pass-rate
        if best.success.rate.rate < threshold:
            continue
        if len(group) == 1:
            return WinnerDecision(best.arm)
        tie = Tie(tuple(a.arm for a in group), best.total, _broken_by(best, group[1]))
        return WinnerDecision(best.arm if tie.decided_by else None, tie)
    return WinnerDecision(None)


def winner(arms: Sequence[ArmScore], threshold: float) -> str | None:
    """The winner by `decide_winner`, or None."""
    return decide_winner(arms, threshold).winner
