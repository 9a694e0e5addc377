"""What a test run attests beyond its summary: rules 9 and 12 of `rig.sample.verdict`.

- Rule 9, the observer's own integrity (pytest, `rig.guards.observer`): its records as the
  rig's hook wrote them, every session, no contradiction with pytest's report, the ini
  and plugins the base's: else FAIL tampered (what the base shows too says nothing), a
  session that never ended FAIL aborted, an exit code that is not pytest's FAIL
  exit_mismatch. Its counts replace the parsed ones (`observed`).
- Rule 12, the success criterion by id: every test the base ran from the protected files
  ran and passed here, each once (pytest: attested, and its code the pinned file's).
"""

from __future__ import annotations

from rig.guards import canary as canary_mod
from rig.guards.observer import RAN, ObserverReport, Status, Test
from rig.parsers.base import ParseResult, TestCase, TestStatus
from rig.sample.evidence import Evidence
from rig.sample.outcome import Counts, FailReason, Judged, Outcome, Verdict
from rig.sample.recorded import Base

SHOWN_IDS = 5  # test ids named in a detail


def observed_counts(parsed: ParseResult, observation: ObserverReport,
              canary: canary_mod.Canary | None) -> ParseResult:
    """pytest's results as the rig's observer saw them: the counts from its records (the
    canaries among them, as the parser would count them), never from printed text."""
    counts = observation.counts()
    notes = list(parsed.notes)
    printed = parsed.counts
    if printed is not None and printed != counts:
        notes.append(f"the output's summary says {printed}; the observer saw {counts}")
    failed_collecting = [c.removesuffix(": failed") for c in observation.collect_errors
                         if c.endswith(": failed")]
    said = {error.split(": ", 1)[0]: error for error in parsed.build_errors}  # pytest's words
    incomplete = () if observation.finished else ("pytest's session never ended",)
    return ParseResult(counts=counts, summaries=1, tests=tuple(
        _as_case(t) for t in observation.tests), build_failed=bool(failed_collecting),
        build_errors=tuple(said.get(c, c) for c in failed_collecting[:3]),
        notes=tuple(notes), incomplete=incomplete,
        usage_error=observation.status == 4)


def _as_case(test: Test) -> TestCase:
    status = {Status.PASSED: TestStatus.PASSED, Status.XPASSED: TestStatus.PASSED,
              Status.FAILED: TestStatus.FAILED, Status.ABORTED: TestStatus.FAILED,
              Status.ERROR: TestStatus.ERROR}.get(test.status, TestStatus.SKIPPED)
    return TestCase(test.id, status)


def observer_rules(e: Evidence, base: Base | None, exit_code: int | None) -> Judged | None:
    """Rule 9: the observer's own integrity, before its counts are believed."""
    seen = e.observation
    if not seen.present:
        if e.of_base or e.exit_code in (4, 126, 127) or e.timed_out or e.oom_killed:
            return None  # nothing to compare (or pytest never got as far as configuring)
        if base is None:
            return None  # read from the output; a pass or a rig error asks the base
        if base.observed:
            return Judged(Outcome(Verdict.FAIL, FailReason.tampered,
                                  "the rig's observer heard nothing from pytest; "
                                  f"{base.against()} with an observed session"))
        return None
    if e.of_base:
        return None
    kinds = _anomalies(e, base)
    if kinds:
        if base is None:
            return Judged(_tampered(seen, kinds, canary=e.canary), needs_base=True)
        return Judged(_tampered(seen, kinds, base, e.canary))
    if e.timed_out or e.oom_killed:
        return None  # the container's own account of why the session never ended
    later = base is None and e.by_id  # the base's sessions could still make it tampered
    if not seen.finished:
        return Judged(Outcome(Verdict.FAIL, FailReason.aborted,
                              "a pytest session never reported its end: the process stopped "
                              "mid-run", _mine_counted(e)), needs_base=later)
    if e.simple and seen.status is not None and exit_code is not None and \
            e.exit_code != seen.status and not e.timed_out and not e.oom_killed:
        return Judged(Outcome(Verdict.FAIL, FailReason.exit_mismatch,
                              f"exit {e.exit_code}, but pytest's own session ended with "
                              f"status {seen.status}", _mine_counted(e)), needs_base=later)
    return None


def _anomalies(e: Evidence, base: Base | None) -> list[str]:
    """The observer's anomaly kinds (and differences from the base) the base does not
    show: each one is a way the run did not happen as pytest reported it."""
    seen = e.observation
    kinds = sorted(seen.kinds() - (base.anomalies if base is not None else frozenset()))
    if seen.overflow and not (base is not None and "overflow" in base.anomalies):
        kinds.append("overflow")
    if base is not None and base.observed:
        if seen.sessions != base.sessions:
            kinds.append(f"sessions ({seen.sessions}, the base had {base.sessions})")
        if seen.inipath != base.inipath:
            kinds.append(f"ini file ({seen.inipath}, the base's {base.inipath})")
        extra = sorted(set(seen.plugins) - set(base.plugins))
        if extra:
            kinds.append(f"plugins the base did not load ({', '.join(extra[:5])})")
    return kinds


def _mine_counted(e: Evidence) -> Counts:
    """The observer's counts of the arm's tests (the rig's canaries left out)."""
    return e.observation.counts(None if e.canary is None else e.canary.token)


def _tampered(seen: ObserverReport, kinds: list[str], base: Base | None = None,
              canary: canary_mod.Canary | None = None) -> Outcome:
    details = [f"{a.kind}: {a.detail}" for a in seen.anomalies if a.kind in kinds][:5]
    detail = ("the run did not happen as pytest reported it: " + "; ".join(
        details or kinds))
    if len(details) < len(kinds):
        others = [k for k in kinds if not any(d.startswith(k + ":") for d in details)]
        if others and details:
            detail += "; " + "; ".join(others)
    if base is not None:
        detail += f"; {base.against()} without that"
    return Outcome(Verdict.FAIL, FailReason.tampered, detail,
                   seen.counts(None if canary is None else canary.token))


def by_id(e: Evidence, base: Base | None, observed: bool, parsed: ParseResult,
           outcome: Outcome) -> Judged | None:
    """Rule 12: every test the base ran from the protected files ran and passed here."""
    if base is None:
        return Judged(outcome, needs_base=True)
    wanted = [t for t in base.tests if t.status in RAN and (t.pinned or not observed)]
    if not wanted:
        return None
    mine = _mine(e, observed, parsed)
    if not observed and _duplicated(parsed) and not base.duplicates:
        return Judged(Outcome(Verdict.FAIL, FailReason.tampered,
                              "the output names one test twice with different outcomes; "
                              f"{base.against()} without that", outcome.counts))
    failed, missing, unproven = [], [], []
    for test in wanted:
        got = mine.get(test.id)
        if got is None or got.status not in RAN:
            missing.append(f"{test.id} ({'absent' if got is None else got.status})")
        elif got.status not in (Status.PASSED, Status.XPASSED):
            failed.append(f"{test.id} ({got.status})")
        elif observed and ((test.attested and not got.attested)
                           or (test.verified and not got.verified)):
            unproven.append(test.id)
    if unproven:
        return Judged(Outcome(Verdict.FAIL, FailReason.tampered,
                              f"the rig did not see the pinned code of {_ids(unproven)} run "
                              f"and return, as it did on the base ({base.sample})",
                              outcome.counts))
    if failed:
        return Judged(Outcome(Verdict.FAIL, FailReason.tests_failed,
                              f"protected tests did not pass: {_ids(failed)}", outcome.counts))
    if missing:
        return Judged(Outcome(Verdict.FAIL, FailReason.not_run,
                              f"protected tests the base ran did not run: {_ids(missing)}",
                              outcome.counts))
    return None


def _mine(e: Evidence, observed: bool, parsed: ParseResult) -> dict[str, Test]:
    if observed:
        return {t.id: t for t in e.observation.tests}
    status = {TestStatus.PASSED: Status.PASSED, TestStatus.FAILED: Status.FAILED,
              TestStatus.ERROR: Status.ERROR, TestStatus.SKIPPED: Status.SKIPPED}
    found: dict[str, Test] = {}
    for case in parsed.tests:
        new = status[case.status]
        old = found.get(case.id)
        if old is None or _rank(new) > _rank(old.status):
            found[case.id] = Test(case.id, new)
    return found


def _rank(status: Status) -> int:
    return [Status.PASSED, Status.SKIPPED, Status.FAILED, Status.ERROR].index(status) \
        if status in (Status.PASSED, Status.SKIPPED, Status.FAILED, Status.ERROR) else 0


def _duplicated(parsed: ParseResult) -> bool:
    """A test id the runner's lines give two different outcomes (a forged line beside the
    runner's own)."""
    seen: dict[str, TestStatus] = {}
    for case in parsed.tests:
        if case.id in seen and seen[case.id] is not case.status:
            return True
        seen[case.id] = case.status
    return False


def _ids(ids: list[str]) -> str:
    shown = ", ".join(ids[:SHOWN_IDS])
    return shown + (f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else "")
