"""Differential diagnosis: a fault is the rig's only if the base reproduces it.

An arm's sample that looks like a rig fault (126/127, no tests ran, unparsed output, a
rejected command line, a tool the server check could not find) could have been caused
by the arm's own code (`os._exit(127)` at import, a conftest that empties the
collection, a fake summary). So the same check runs on the BASE tree in the SAME image:
if the base gives a rig error too, the rig is at fault (RIG_ERROR stands); if not, the
arm broke the harness and loses: `FAIL broke_harness (was no_tests_ran)`. A contestant
can lose; it can never void a round.

A stack (`[changes.success] stack`) that never gets healthy is judged the same way: the
arm's FAIL server_unhealthy stands unless the base's stack fails too (RIG_ERROR infra).

Canaries that did not come out as planted are judged the same way: when the base's
canaries came out the same (the command's own selection, `-k`, `--test NAME`, an exit
code it swallows), the canaries say nothing for this check; otherwise the run lied:
`FAIL tampered`.
"""

from __future__ import annotations

from dataclasses import dataclass

from rig.canary import Evidence
from rig.verdict import FailReason, Outcome, RigErrorReason, Verdict

# Rig errors an arm's own code can cause; `infra` (the engine broke) and a tool missing
# from the image itself are the rig's whatever the tree holds.
ARM_CAUSABLE = frozenset({RigErrorReason.command_not_found, RigErrorReason.bad_invocation,
                          RigErrorReason.no_tests_ran, RigErrorReason.unparsed_output})


@dataclass(frozen=True)
class BaseRun:
    """What the base gave for the same check in the same image."""

    sample: str
    verdict: Verdict
    reason: str | None
    canaries: tuple[str, str, bool] | None  # `Evidence.signature()`, None: none planted
    stack: str = "none"  # its stack: none | healthy | unhealthy


def needs_base(outcome: Outcome, evidence: Evidence, arm_causable: bool) -> bool:
    """Whether the verdict depends on what the base gives."""
    if outcome.verdict is Verdict.RIG_ERROR or outcome.reason is FailReason.server_unhealthy:
        return arm_causable  # an unhealthy server is causable when it is a stack's
    return outcome.verdict is Verdict.PASS and not evidence.clean


def causable(outcome: Outcome) -> bool:
    """A rig error the arm's code could have caused."""
    return outcome.reason in ARM_CAUSABLE


def differential(outcome: Outcome, evidence: Evidence, base: BaseRun) -> Outcome:
    """The verdict once the base has spoken (see the module docstring)."""
    against = f"the base in the same image gives {base.verdict}" + (
        f" {base.reason}" if base.reason else "") + f" ({base.sample})"
    if outcome.reason is FailReason.server_unhealthy:
        return _stack(outcome, base, against)
    if outcome.verdict is Verdict.RIG_ERROR:
        if base.verdict is Verdict.RIG_ERROR:
            return Outcome(outcome.verdict, outcome.reason,
                           f"{outcome.detail}; {against}: the rig's fault", outcome.counts)
        return Outcome(Verdict.FAIL, FailReason.broke_harness,
                       f"FAIL broke_harness (was {outcome.reason}): {outcome.detail}; "
                       f"{against}", outcome.counts)
    if base.canaries is not None and base.canaries == evidence.signature():
        return Outcome(outcome.verdict, outcome.reason,
                       f"{outcome.detail}; canaries not as planted ({evidence.detail}), "
                       f"as on the base: they say nothing for this command", outcome.counts)
    return Outcome(Verdict.FAIL, FailReason.tampered,
                   f"the run did not report the rig's canaries as planted: "
                   f"{evidence.detail}; {against} with its canaries as planted",
                   outcome.counts)


def _stack(outcome: Outcome, base: BaseRun, against: str) -> Outcome:
    """An arm's stack that never got healthy: the rig's fault when the base's stack fails
    the same way (RIG_ERROR infra), else the arm's code broke it (FAIL stands)."""
    if base.stack == "unhealthy":
        return Outcome(Verdict.RIG_ERROR, RigErrorReason.infra,
                       f"{outcome.detail}; the base's stack fails the same way "
                       f"({base.sample}): the rig's fault", outcome.counts)
    return Outcome(outcome.verdict, outcome.reason,
                   f"{outcome.detail}; {against} with its stack healthy: the arm's code "
                   "broke it", outcome.counts)
