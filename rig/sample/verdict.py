"""One sample's verdict, and the one place its rules live, in their order.

`judge` takes what one sample gave (`Evidence`, gathered by `rig.sample.evidence`) and,
when a rule depends on it, what the base gave for the same check in the same image
(`Base`: the differential rule, principle 7: a contestant can lose, never void a round).
The first rule that applies decides; its evidence is named beside it.

Before any output is read (what the executor saw):

1. the arm's work or tree was refused                   -> FAIL unsafe_work
2. the rig broke (engine, layout)                        -> RIG_ERROR infra (a layout
   the arm's tree broke: the base decides, rule 14)
3. a required tool is not in the image                   -> RIG_ERROR tool_missing
3b. `[toolchain] build` failed on the tree               -> FAIL build_failed, RIG_ERROR
   bad_invocation when the base's build fails too (or it is the base's)
4. no HTTP client for the server's health check          -> RIG_ERROR tool_missing (14)
5. the server never answered its health check            -> FAIL server_unhealthy
6. the stack never got healthy: the base's own           -> RIG_ERROR infra; an arm's
   -> FAIL server_unhealthy, RIG_ERROR infra when the base's fails the same way
7. the container outlived its deadline (the host killed it) -> FAIL timeout, RIG_ERROR
   infra when the base's outlived it too
7b. an exit-code check that exits 0 whose tripwire run (`rig.guards.tripwire`: a planted file
   that must make the tool fail) did not fail as planted, while the base's did
                                                          -> FAIL tampered

A ratchet (`rig.sample.metric`: the metric, not the exit code, decides):

8. no program / timeout / OOM / no exit code / 126-127   -> as rules 1-3 of `decide`;
   no value -> RIG_ERROR unparsed_output; two values -> FAIL spoofed_output; worse than
   the base beyond the tolerance -> FAIL ratchet_regressed; else PASS

A test run:

9. the observer (pytest, `rig.guards.observer`): no session although the base had one, a record
   no hook of the rig wrote, a gap, a contradiction between pytest's report and the rig's
   own attestation, a flag of the hook, another number of sessions, an overflow, another
   ini or plugin set than the base's -> FAIL tampered (what the base shows too says
   nothing); a session that never ended -> FAIL aborted; the process's exit code is not
   pytest's own status (one simple command) -> FAIL exit_mismatch
10. the output rules of `decide` (below), on the observer's counts for pytest
11. the must-fail canary passed                           -> FAIL tampered
11b. a PASS of a browser criterion whose flow never got the app server's answer an
   `expect_requests` entry names (a 2xx unless it names a status; an answer a service
   worker or the page made never counts)                -> FAIL not_real_path
12. a PASS (or a rig error the arm could cause) of the success criterion, by id: every
   test the base ran from the protected files ran and passed, each once (pytest:
   attested and, where the base's was, its code the pinned file's)
   -> else FAIL not_run / tests_failed / tampered
13. PASS with the canaries not as planted                 -> FAIL tampered, unless the
   base's came out the same (the command's own selection: they say nothing)
14. a rig error the arm's code could cause (126/127, no tests, unparsed, bad invocation,
   a broken layout)  -> FAIL broke_harness, unless the base gives a rig error too

Rules 9 and 12 (what the run attests beyond its summary) are `rig.sample.attested`'s.
`rig.sample.output.decide` (rule 10), pure, holds the output rules in their order: the program
absent, timeout or OOM, 126/127, the `exit-code` parser, a build that failed, a rejected
command line, output the runner cannot have printed, a process ended before reporting, no
summary, no test ran, an exit code that disagrees with the counts, failures.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from rig.guards import canary as canary_mod
from rig.guards import shell
from rig.guards.canary import CanaryReading
from rig.parsers import exit_code as exit_code_parser
from rig.parsers.base import ParseResult
from rig.sample import attested, metric
from rig.sample.evidence import Evidence
from rig.sample.outcome import Counts, FailReason, Judged, Outcome, RigErrorReason, Verdict
from rig.sample.output import before_parsing, decide, fail, rig_error, vouched
from rig.sample.recorded import Base

__all__ = ["Counts", "FailReason", "Judged", "Outcome", "RigErrorReason", "Verdict", "decide",
           "judge"]

# Rig errors an arm's own code can cause; `infra` (the engine broke) and a tool missing
# from the image itself are the rig's whatever the tree holds.
ARM_CAUSABLE = frozenset({RigErrorReason.command_not_found, RigErrorReason.bad_invocation,
                          RigErrorReason.no_tests_ran, RigErrorReason.unparsed_output})


Rule = Callable[[Evidence, "Base | None"], "Judged | None"]


def judge(evidence: Evidence, base: Base | None = None) -> Judged:
    """The verdict of one sample (the module docstring's rules, in order)."""
    for rule in _BEFORE_OUTPUT:
        found = rule(evidence, base)
        if found is not None:
            return found
    if evidence.ratchet is not None:
        outcome = _ratchet(evidence.ratchet, evidence)
        causable = outcome.reason in ARM_CAUSABLE
        return _differential(Judged(outcome, causable=causable,
                                    needs_base=causable), base)
    return _test_run(evidence, base)


# -- rules 1-7: before any output --------------------------------------------------------


def _refused(e: Evidence, _: Base | None) -> Judged | None:
    if e.refused is None:
        return None
    return Judged(Outcome(Verdict.FAIL, FailReason.unsafe_work, e.refused))


def _infra(e: Evidence, base: Base | None) -> Judged | None:
    if e.infra_error is None:
        return None
    judged = Judged(Outcome(Verdict.RIG_ERROR, RigErrorReason.infra, e.infra_error),
                    causable=e.layout_failed, needs_base=e.layout_failed and not e.of_base)
    return _differential(judged, base)


def _tools(e: Evidence, _: Base | None) -> Judged | None:
    if not e.missing_tools:
        return None
    return Judged(Outcome(Verdict.RIG_ERROR, RigErrorReason.tool_missing,
                          f"not on PATH in image {e.image}: {', '.join(e.missing_tools)}"))


def _build(e: Evidence, base: Base | None) -> Judged | None:
    """Rule 3b: `[toolchain] build` failed on the sample's tree (before the command or the
    server ran): the arm's FAIL, unless the base's own build fails the same way."""
    if e.build_exit in (None, 0):
        return None
    read = exit_code_parser.parse(e.build_log)  # its last lines and error count, as a check's
    errors = "" if read.errors is None else \
        f" with {read.errors} error{'s' if read.errors != 1 else ''}"
    what = "timed out" if e.build_exit in (124, 137) else f"failed: exit {e.build_exit}"
    tail = "; its last lines: " + " | ".join(read.last_lines) if read.last_lines else ""
    return _unless_the_base(
        e, base, f"the build ({e.build}) {what}{errors}{tail}", FailReason.build_failed,
        RigErrorReason.bad_invocation, lambda b: b.build_failed,
        own="it is the base's own tree: fix [toolchain].build",
        too="the base's build fails too ({sample}): fix [toolchain].build",
        fine=lambda b: "the base's build in the same image succeeds")


def _unless_the_base(e: Evidence, base: Base | None, detail: str, reason: FailReason,
                     rig: RigErrorReason, same: Callable[[Base], bool], *, own: str,
                     too: str, fine: Callable[[Base], str]) -> Judged:
    """The differential rule of a failure seen before any output: on the base's own tree
    it is the rig's (`own` says why), an arm's is its FAIL `reason` unless the base's run
    fails the same way (`same`; `too` says so, `{sample}` naming it)."""
    if e.of_base:
        return Judged(Outcome(Verdict.RIG_ERROR, rig, f"{detail}; {own}"))
    if base is None:
        return Judged(Outcome(Verdict.FAIL, reason, detail), needs_base=True)
    if same(base):
        return Judged(Outcome(Verdict.RIG_ERROR, rig,
                              f"{detail}; {too.format(sample=base.sample)}"))
    return Judged(Outcome(Verdict.FAIL, reason, f"{detail}; {fine(base)}"))


def _server(e: Evidence, base: Base | None) -> Judged | None:
    if e.server == "no_http_client":
        judged = Judged(Outcome(Verdict.RIG_ERROR, RigErrorReason.tool_missing,
                                f"no HTTP client (python3, node, wget or curl) in image "
                                f"{e.image} for the server's health check"),
                        causable=True, needs_base=not e.of_base)
        return _differential(judged, base)
    if e.server == "unhealthy":
        tail = e.server_log.strip().splitlines()[-3:]
        return Judged(Outcome(Verdict.FAIL, FailReason.server_unhealthy,
                              "the server never answered its health check: "
                              + " | ".join(tail)))
    return None


def _stack(e: Evidence, base: Base | None) -> Judged | None:
    if e.stack in ("none", "healthy"):
        return None
    detail = f"the stack never got healthy: {e.stack_detail}"
    if e.of_base:
        return Judged(Outcome(Verdict.RIG_ERROR, RigErrorReason.infra,
                              f"{detail}; it is the base's own stack: the rig's fault"))
    outcome = Outcome(Verdict.FAIL, FailReason.server_unhealthy, detail)
    if base is None:
        return Judged(outcome, needs_base=True, causable=True)
    if base.stack == "unhealthy":
        return Judged(Outcome(Verdict.RIG_ERROR, RigErrorReason.infra,
                              f"{detail}; the base's stack fails the same way "
                              f"({base.sample}): the rig's fault"))
    return Judged(Outcome(Verdict.FAIL, FailReason.server_unhealthy,
                          f"{detail}; {base.against()} with its stack healthy: the arm's "
                          "code broke it"))


def _outlived(e: Evidence, base: Base | None) -> Judged | None:
    """The container ran past its deadline and the host stopped it: the deadline inside
    is root's, so only code that froze the sample (or a broken engine) gets here."""
    if not e.outlived:
        return None
    return _unless_the_base(
        e, base, "the sample outlived its deadline and was stopped by the host (the command "
        "or what it left froze the sample)", FailReason.timeout, RigErrorReason.infra,
        lambda b: b.outlived, own="it is the base's own run: the rig's fault",
        too="the base's run outlived it too ({sample}): the rig's fault",
        fine=lambda b: f"{b.against()}, ending in time")


def _blind(e: Evidence, _: Base | None) -> Judged | None:
    """Rule 7b: the check's tripwire (a planted file that must make its tool fail) did not
    make it fail on the arm's tree, as it did on the base's: the tool was made blind, and
    its exit 0 here is no evidence (a failing sample keeps its own FAIL)."""
    if e.blind is None or e.exit_code != 0 or e.timed_out or e.oom_killed:
        return None
    return Judged(Outcome(Verdict.FAIL, FailReason.tampered,
                          f"exit 0, but the check's tool was made blind: {e.blind}"))


_BEFORE_OUTPUT: tuple[Rule, ...] = (_refused, _infra, _tools, _build, _server, _stack,
                                    _outlived, _blind)


# -- rule 8: a ratchet ---------------------------------------------------------------------


def _ratchet(ratchet: metric.Ratchet, e: Evidence) -> Outcome:
    """The metric's value against the frozen base. The exit code beyond 126/127 is not the
    verdict (a linter may exit 1 on findings): the value is."""
    early = before_parsing(e.timed_out, e.oom_killed, e.program_present)
    if early is None and e.exit_code is None:
        early = rig_error(RigErrorReason.infra, "no exit code was recorded for the command")
    if early is None and e.exit_code in (126, 127):
        early = rig_error(RigErrorReason.command_not_found,
                     f"exit {e.exit_code}: the shell could not run the command")
    if early is not None:
        return early
    found = metric.readings(ratchet.metric, e.log, e.files)
    if not found:
        return rig_error(RigErrorReason.unparsed_output,
                         metric.missing(ratchet.metric, e.files))
    if len(set(found)) > 1:
        values = ", ".join(metric.show(v) for v in dict.fromkeys(found))
        return fail(FailReason.spoofed_output,
                     f"{metric.describe(ratchet.metric)} reported different values: "
                     f"{values}", None)
    value = found[0]
    if ratchet.base is None:
        return Outcome(Verdict.PASS, None, f"measured {metric.show(value)} (the base's "
                                           "value)")
    trend = (f"base {metric.show(ratchet.base)} -> {metric.show(value)} "
             f"({ratchet.better} is better, tolerance {ratchet.tolerance:g})")
    if metric.passes(value, ratchet.base, ratchet.better, ratchet.tolerance):
        return Outcome(Verdict.PASS, None, trend)
    worse = metric.worse_by(value, ratchet.base, ratchet.better)
    return fail(FailReason.ratchet_regressed, f"{trend}: worse by {metric.show(worse)}",
                 None)


# -- rules 9-14: a test run ------------------------------------------------------------------


def _test_run(e: Evidence, base: Base | None) -> Judged:
    parsed = canary_mod.spared(e.parsed, e.canary)
    observed = e.observed and e.observation.present
    canaries = canary_mod.observe(e.canary, (*parsed.tests, *parsed.terse_failed),
                                  e.exit_code, e.observation)
    if observed:
        parsed = attested.observed_counts(parsed, e.observation, e.canary)
    else:
        parsed = vouched(e.parser, parsed, canaries)
    counts = canary_mod.discount(parsed.counts, canaries)
    exit_code = canary_mod.exit_without(e.parser, e.exit_code, counts, canaries)
    unguarded = _unguarded(e, observed)
    integrity = attested.observer_rules(e, base, exit_code) if e.observed else None
    if integrity is not None:
        return dataclasses.replace(integrity, canaries=canaries, exit_code=exit_code,
                                   unguarded=unguarded)
    outcome = decide(parser=e.parser, exit_code=exit_code,
                     parsed=dataclasses.replace(parsed, counts=counts),
                     timed_out=e.timed_out, oom_killed=e.oom_killed,
                     program_present=e.program_present)
    silent = e.observed and not observed and base is None and not e.of_base
    judged = Judged(outcome, canaries, exit_code, causable=outcome.reason in ARM_CAUSABLE,
                    unguarded=unguarded, needs_base=silent and (
                        outcome.verdict is Verdict.PASS or outcome.reason in ARM_CAUSABLE))
    if canaries.forced:
        return dataclasses.replace(judged, outcome=Outcome(
            Verdict.FAIL, FailReason.tampered,
            f"the must-fail canary passed: {canaries.detail}", outcome.counts), causable=False)
    contradicted = _contradicted(e, canaries, outcome)
    if contradicted is not None:
        return dataclasses.replace(judged, outcome=contradicted, causable=False)
    if outcome.verdict is Verdict.PASS and e.real_path.unmet:  # rule 11b: no base can change it
        return dataclasses.replace(judged, outcome=Outcome(
            Verdict.FAIL, FailReason.not_real_path,
            f"the flow did not take the real path: {e.real_path.detail()}", outcome.counts),
            needs_base=False)
    if e.by_id and not e.of_base and (outcome.verdict is Verdict.PASS or judged.causable):
        by_id = attested.by_id(e, base, observed, _without_canaries(parsed, e, observed),
                              outcome)
        if by_id is not None and (by_id.outcome.verdict is Verdict.FAIL or by_id.needs_base):
            return dataclasses.replace(judged, outcome=by_id.outcome,
                                       needs_base=by_id.needs_base)
    if outcome.verdict is Verdict.RIG_ERROR:
        judged = dataclasses.replace(judged, needs_base=judged.causable and not e.of_base)
        return _differential(judged, base)
    if judged.needs_base and base is not None:  # a silent observer: the base's had one?
        judged = dataclasses.replace(judged, needs_base=False)
    if outcome.verdict is Verdict.PASS and not canaries.clean and not e.of_base:
        return _canaries_differential(dataclasses.replace(judged, needs_base=True), base,
                                      e.parser)
    return judged


def _unguarded(e: Evidence, observed: bool) -> tuple[str, ...]:
    notes = list(e.unguarded)
    if e.canary is None and e.parser in canary_mod.CANARY_RUNNERS and e.ratchet is None:
        notes.append(f"no canary could be planted for this {e.parser} command"
                     + (f": {NO_CANARY[e.parser]}" if e.parser in NO_CANARY else ""))
    elif e.canary is None and e.ratchet is None and e.parser in UNCANARIED:
        notes.append(UNCANARIED[e.parser])
    elif e.canary is not None and e.canary.fail_name is None and not e.canary.twins:
        notes.append(_no_must_fail(e))
    if e.canary is not None:
        notes += e.canary.notes
    if e.observed and not observed:
        notes.append("the rig's observer saw no pytest session")
    return tuple(notes)


# Runners the rig reads but plants no canary for: what their criterion cannot check.
UNCANARIED = {
    "junit": "no canary for a junit report: the report file is the tests' to write, and "
             "a runner configuration or code that filters, skips or forces tests is not "
             "cross-checked",
}
# Why a canary runner's sample may get none (vitest, jest: only a must-fail canary).
_JS_NONE = ("no test file of its naming, a command whose files or name filter select none "
            "of the rig's, a shell list, or a bail on the first failure "
            "(the canary's failure would stop the run); a configuration or code that "
            "filters, skips or forces tests is not cross-checked")
NO_CANARY = {"vitest": _JS_NONE, "jest": _JS_NONE}


def _no_must_fail(e: Evidence) -> str:
    if e.canary is not None and not e.canary.path:
        return ("no canary file: the command's files, directories or name filter select "
                "none beside its own tests")
    if e.parser == "go-test" and shell.may_fail(e.command, e.parser):
        return ("no must-fail canary: the command builds only go packages with protected "
                "tests (a failing canary there would explain its binary's failing status)")
    if e.parser == "cargo" and shell.may_fail(e.command, e.parser):
        return ("no must-fail canary: without --no-fail-fast cargo stops at the first "
                "failing test binary")
    return ("no must-fail canary: the command is a shell list whose last step is not the "
            "runner (a failing canary could change what runs)")


def _contradicted(e: Evidence, canaries: CanaryReading, outcome: Outcome) -> Outcome | None:
    """A line-read runner's must-pass canary in the protected tests' process failed while
    everything else passed (go: its TestMain saw a test fail): the output lied."""
    if (outcome.verdict is not Verdict.PASS or not canaries.contradicted
            or e.canary is None or e.canary.runner == "pytest"):
        return None
    return Outcome(Verdict.FAIL, FailReason.tampered,
                   "the run's own status contradicts its output: "
                   f"{canaries.detail}", outcome.counts)


def _without_canaries(parsed: ParseResult, e: Evidence, observed: bool) -> ParseResult:
    """The per-test lines without the canaries' (a twin shares a protected test's name)."""
    if observed or e.canary is None:
        return parsed
    return dataclasses.replace(parsed, tests=tuple(canary_mod.split(e.canary, parsed.tests)[1]))


def _differential(judged: Judged, base: Base | None) -> Judged:
    """Rule 14: a rig error the arm could have caused is the rig's only if the base gives
    one too; otherwise the arm broke the harness."""
    outcome = judged.outcome
    if not judged.causable or base is None or outcome.verdict is not Verdict.RIG_ERROR:
        return judged
    if base.verdict is Verdict.RIG_ERROR:
        return dataclasses.replace(judged, needs_base=False, outcome=Outcome(
            outcome.verdict, outcome.reason,
            f"{outcome.detail}; {base.against()}: the rig's fault", outcome.counts))
    return dataclasses.replace(judged, needs_base=False, outcome=Outcome(
        Verdict.FAIL, FailReason.broke_harness,
        f"FAIL broke_harness (was {outcome.reason}): {outcome.detail}; {base.against()}",
        outcome.counts))


def _canaries_differential(judged: Judged, base: Base | None, parser: str = "") -> Judged:
    """Rule 13: canaries not as planted on a PASS say nothing only when the base's came
    out the same (the command's own selection); otherwise the run lied. cargo's record
    then says so in `unguarded` (`cargo test --lib`, a name filter: not a false FAIL)."""
    if base is None:
        return judged
    outcome, canaries = judged.outcome, judged.canaries
    if base.canaries is not None and base.canaries == canaries.signature():
        unguarded = judged.unguarded + ((
            f"the rig's canaries did not read as planted ({canaries.detail}), on the base "
            "either: the command's own selection or output; the output and the protected "
            "tests by id still count",) if parser == "cargo" else ())
        return dataclasses.replace(judged, needs_base=False, unguarded=unguarded, outcome=Outcome(
            outcome.verdict, outcome.reason,
            f"{outcome.detail}; canaries not as planted ({canaries.detail}), as on the "
            "base: they say nothing for this command", outcome.counts))
    return dataclasses.replace(judged, needs_base=False, outcome=Outcome(
        Verdict.FAIL, FailReason.tampered,
        f"the run did not report the rig's canaries as planted: {canaries.detail}; "
        f"{base.against()} with its canaries as planted", outcome.counts))
