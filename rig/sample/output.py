"""What a runner's own output says: `rig.sample.verdict`'s rule 10 (`decide`), pure.

The exit code, the container's flags and a `ParseResult` in, an `Outcome` out, in this
order (the whole order of a sample's rules is `rig.sample.verdict`'s):

1. the program is absent (preflight)              -> RIG_ERROR tool_missing
2. timed out / OOM-killed                         -> FAIL timeout / oom_killed
3. no exit code / exit 127 or 126                 -> RIG_ERROR infra / command_not_found
4. `exit-code` parser: 0                          -> PASS, anything else FAIL check_failed
5. the code under test did not build/import       -> FAIL build_failed; a test
   file that defines no test (vitest)             -> FAIL tests_failed
6. the runner rejected its command, nothing ran   -> RIG_ERROR bad_invocation (no counts)
7. output the runner cannot have printed          -> FAIL spoofed_output
8. the test process ended before reporting        -> FAIL aborted
9. no summary found                               -> RIG_ERROR unparsed_output
10. no test ran (or the runner's no-tests exit)   -> RIG_ERROR no_tests_ran
11. exit code disagrees with the counts           -> FAIL exit_mismatch (never a PASS)
12. failures or errors                            -> FAIL tests_failed; else PASS

`vouched`: which of several summary-like lines is the runner's own, once the canaries
say the run was honest.
"""

from __future__ import annotations

import dataclasses
import signal

from rig.guards import canary as canary_mod
from rig.guards.canary import CanaryReading
from rig.parsers import get_parser
from rig.parsers.base import ParseResult
from rig.sample.outcome import Counts, FailReason, Outcome, RigErrorReason, Verdict


def vouched(parser: str, parsed: ParseResult, evidence: CanaryReading) -> ParseResult:
    """With the canaries as planted, a single-summary runner's own summary is its LAST
    one when it holds them (the runner prints it last; a fake printed after it does not
    know them): summary-like text the tests printed before it is theirs, not a spoof.
    Otherwise the old rule stands (more than one is a spoof)."""
    if not (evidence.planted and evidence.as_planted and evidence.exit_agrees):
        return parsed
    sequence = parsed.summary_sequence
    if len(sequence) < 2 or parsed.summed:
        return parsed
    last = sequence[-1]
    if not canary_mod.in_summary(last, evidence):  # without the canaries: not the runner's
        return parsed
    note = (f"{len(sequence) - 1} summary-like line(s) before {parser}'s own last one were "
            "printed by the tests and ignored")
    return dataclasses.replace(parsed, counts=last, summaries=1, spoof_evidence=(),
                               notes=(*parsed.notes, note))


_COMMAND_NOT_FOUND = {127: "not found", 126: "found but not executable"}


def _exit_text(code: int) -> str:
    if code > 128:
        try:
            return f"exit {code} ({signal.Signals(code - 128).name})"
        except ValueError:
            pass
    return f"exit {code}"


def _counts_text(counts: Counts) -> str:
    parts = [f"{counts.passed} passed", f"{counts.failed} failed"]
    extra = ((counts.skipped, "skipped"), (counts.errors, "errors"))
    return ", ".join(parts + [f"{n} {word}" for n, word in extra if n])


def fail(reason: FailReason, detail: str, counts: Counts | None) -> Outcome:
    return Outcome(Verdict.FAIL, reason, detail, counts)


def rig_error(reason: RigErrorReason, detail: str, counts: Counts | None = None) -> Outcome:
    return Outcome(Verdict.RIG_ERROR, reason, detail, counts)


def before_parsing(timed_out: bool, oom_killed: bool, program_present: bool) -> Outcome | None:
    """Rules 1-2: what preflight and the container say, before any output is read."""
    if not program_present:
        return rig_error(RigErrorReason.tool_missing, "preflight found the program absent")
    if timed_out:
        return fail(FailReason.timeout, "the check ran past its time limit", None)
    if oom_killed:
        return fail(FailReason.oom_killed, "the container was OOM-killed", None)
    return None


def _shell_failure(exit_code: int) -> Outcome | None:
    """Rule 3: the shell could not start the command (exit 127 / 126)."""
    if exit_code in _COMMAND_NOT_FOUND:
        return rig_error(
            RigErrorReason.command_not_found,
            f"exit {exit_code}: the shell reports a command {_COMMAND_NOT_FOUND[exit_code]}",
        )
    return None


def _exit_code_only(exit_code: int, parsed: ParseResult) -> Outcome:
    """Rule 4: the `exit-code` parser (no tests: the command is the check)."""
    if exit_code == 0:
        return Outcome(Verdict.PASS, None, "exit 0")
    errors = "" if parsed.errors is None else \
        f" with {parsed.errors} error{'s' if parsed.errors != 1 else ''}"
    last = "; its last lines: " + " | ".join(parsed.last_lines) if parsed.last_lines else \
        "; it printed nothing"
    return fail(FailReason.check_failed,
                f"{_exit_text(exit_code)}: the command failed{errors}{last}", None)


def _not_genuine(parser: str, exit_code: int, parsed: ParseResult) -> Outcome | None:
    """Rules 5-8: the code broke the build, the rig broke the command, or the output lies."""
    counts = parsed.counts
    if parsed.build_failed:
        detail = "the code under test did not compile or import" + (
            f" ({'; '.join(parsed.build_errors)})" if parsed.build_errors else "")
        return fail(FailReason.build_failed, detail, counts)
    if parsed.empty_files:
        shown = ", ".join(parsed.empty_files[:3]) + (
            f" and {len(parsed.empty_files) - 3} more" if len(parsed.empty_files) > 3 else "")
        detail = f"{_exit_text(exit_code)}: {parser} found no test in {shown} (a test file " \
                 "that defines none fails the run)"
        return fail(FailReason.tests_failed, detail, counts)
    nothing_ran = counts is None or counts.passed + counts.failed == 0
    if nothing_ran and (parsed.usage_error or get_parser(parser).usage_error(exit_code, "")):
        detail = f"{_exit_text(exit_code)}: {parser} rejected its command line"
        return rig_error(RigErrorReason.bad_invocation, detail)  # measured nothing: no counts
    if parsed.spoof_evidence or (parsed.summaries > 1 and not parsed.summed):
        evidence = "; ".join(parsed.spoof_evidence) or f"{parsed.summaries} summaries"
        return fail(FailReason.spoofed_output, f"output the runner did not print: {evidence}",
                     counts)
    if parsed.incomplete:
        return fail(FailReason.aborted, "; ".join(parsed.incomplete), counts)
    return None


def _trusted_counts(parser: str, exit_code: int, parsed: ParseResult) -> Outcome | Counts:
    """Rules 9-10: the counts, or the rig error that says why there are none to trust."""
    counts = parsed.counts
    if counts is None:
        why = "".join(f": {note}" for note in parsed.notes[:1])
        return rig_error(RigErrorReason.unparsed_output, f"no {parser} summary in the output{why}")
    if counts.ran == 0 or exit_code in get_parser(parser).no_tests_exit_codes:
        detail = f"{_exit_text(exit_code)}: no test ran ({_counts_text(counts)})"
        return rig_error(RigErrorReason.no_tests_ran, detail, counts)
    return counts


def _from_counts(exit_code: int, counts: Counts) -> Outcome:
    """Rules 11-12: the counts are trustworthy; the exit code must agree with them."""
    bad = counts.failed + counts.errors
    summary = _counts_text(counts)
    if exit_code == 0 and bad:
        detail = f"exit 0 but {bad} tests failed ({summary})"
        return fail(FailReason.exit_mismatch, detail, counts)
    if exit_code != 0 and not bad:
        detail = f"{_exit_text(exit_code)} but the summary reports no failure ({summary})"
        return fail(FailReason.exit_mismatch, detail, counts)
    if bad:
        return fail(FailReason.tests_failed, f"{_exit_text(exit_code)}: {summary}", counts)
    return Outcome(Verdict.PASS, None, f"exit 0: {summary}", counts)


def decide(
    *,
    parser: str,
    exit_code: int | None,
    parsed: ParseResult,
    timed_out: bool,
    oom_killed: bool,
    program_present: bool = True,
) -> Outcome:
    """The output rules (rule 10). `parser` is the manifest's name (`rig.parsers.PARSERS`).

    Raises `rig.parsers.UnknownParserError` for a name no parser has (a caller's bug).
    """
    get_parser(parser)
    early = before_parsing(timed_out, oom_killed, program_present)
    if early is not None:
        return early
    if exit_code is None:
        return rig_error(RigErrorReason.infra, "no exit code was recorded for the command")
    early = _shell_failure(exit_code)
    if early is not None:
        return early
    if not parsed.expects_tests:
        return _exit_code_only(exit_code, parsed)
    invalid = _not_genuine(parser, exit_code, parsed)
    if invalid is not None:
        return invalid
    counts = _trusted_counts(parser, exit_code, parsed)
    if isinstance(counts, Outcome):
        return counts
    return _from_counts(exit_code, counts)
