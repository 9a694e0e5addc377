"""The outcome of one sample: PASS, FAIL(reason) or RIG_ERROR(reason), and why.

The vocabulary every part of the rig shares; the rules that choose one are in
`rig.sample.verdict`, in order.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from rig.guards import canary as canary_mod
from rig.guards.canary import CanaryReading
from rig.parsers.base import Counts

__all__ = ["Counts", "FailReason", "Outcome", "RigErrorReason", "Verdict"]


class Verdict(enum.StrEnum):
    """The result of one sample."""

    PASS = "PASS"
    FAIL = "FAIL"
    RIG_ERROR = "RIG_ERROR"


class RigErrorReason(enum.StrEnum):
    """Why the rig (image, command, parser) could not measure: never the model's fault."""

    tool_missing = "tool_missing"
    command_not_found = "command_not_found"
    bad_invocation = "bad_invocation"
    no_tests_ran = "no_tests_ran"
    unparsed_output = "unparsed_output"
    infra = "infra"


class FailReason(enum.StrEnum):
    """Why the code under test failed a trustworthy measurement."""

    tests_failed = "tests_failed"
    check_failed = "check_failed"  # an exit-code check's command exited non-zero
    timeout = "timeout"
    oom_killed = "oom_killed"
    exit_mismatch = "exit_mismatch"
    spoofed_output = "spoofed_output"
    build_failed = "build_failed"
    aborted = "aborted"
    server_unhealthy = "server_unhealthy"  # the code's server never answered its health check
    ratchet_regressed = "ratchet_regressed"  # a ratchet's metric got worse than the base
    tampered = "tampered"  # the rig's canaries did not come out as planted: the run lied
    unsafe_work = "unsafe_work"  # the arm's work could not be imported safely (fsck, paths)
    broke_harness = "broke_harness"  # looked like a rig fault, but the base does not reproduce it
    not_run = "not_run"  # a test the base ran from the protected files did not run and pass
    not_real_path = "not_real_path"  # a browser flow never got the app server's answer it expects


@dataclass(frozen=True)
class Outcome:
    """A verdict, its reason (None for PASS), a sentence saying why, and the counts."""

    verdict: Verdict
    reason: RigErrorReason | FailReason | None
    detail: str
    counts: Counts | None = None


@dataclass(frozen=True)
class Judged:
    """A verdict with what it rests on: `needs_base` when the base could still change it."""

    outcome: Outcome
    canaries: CanaryReading = canary_mod.NO_CANARIES
    exit_code: int | None = None  # the exit status graded (the must-fail canary's out)
    needs_base: bool = False
    causable: bool = False  # a rig error the arm's code could have caused
    unguarded: tuple[str, ...] = ()  # what this sample's grading could not check
