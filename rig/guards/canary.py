"""Canary tests read back: the rig's proof that a test runner reported honestly (principle 7).

Every sample of a test runner (pytest, node --test, go test, cargo, vitest, jest) gets
one rig-written test file next to the tests it runs (node, vitest, jest: only where the
command's files and name filters select it, `rig.guards.js_selection`), in the runner's own
language, with per-sample random names: one test that must pass and one that must fail (vitest and
jest: the must-fail one only). node, go and cargo also get canaries inside the protected
tests' own process or binary (`rig.guards.inprocess`: twins, sentinels), read back with
`split` (a node twin shares its protected test's name). They are read back from
per-test results (pytest: the rig's observer, `rig.guards.observer`, which tells "did not run"
from "failed as planted"; the others: the runner's per-test lines). A run that forces
outcomes (a conftest hook rewriting reports, code that patches the runner in-process, a
fake summary) cannot keep both canaries as planted
without knowing their names, and the runner's own summary carries the must-fail canary:
a summary without it was not the runner's.

A canary must not change what the command does. pytest's must-fail canary is a strict
xfail (reported `xfailed`, exit status untouched; forced to pass it reads `passed` or
`XPASS(strict)`). The others really fail, which makes the runner exit non-zero: that
is planted only when the command is one simple command or an `&&` list whose last step,
and only that one, starts the runner (`rig.guards.shell.may_fail`: a failing canary
must never skip the rest of a shell list), and the exit status is read as if the canary
had not failed (`exit_without`).

A command can also legitimately not run the canaries (`-k`, `--test NAME`, `-run`):
whether it does is asked of the base in the same image (`rig.sample.verdict`).
They are planted by `rig.guards.plant`. Pure: text and typed values in, never docker.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from dataclasses import dataclass

from rig.guards.observer import NOTHING, ObserverReport, Status
from rig.parsers import node_test
from rig.parsers.base import (
    ID_SEPARATORS,
    Counts,
    ParseResult,
    TestCase,
    TestStatus,
    count_statuses,
    where_of,
)

CANARY_RUNNERS = ("pytest", "node-test", "go-test", "cargo", "vitest", "jest")
# The exit status each runner uses for "a test failed" (the must-fail canary's).
FAILURE_EXIT = {"pytest": 1, "node-test": 1, "go-test": 1, "cargo": 101, "vitest": 1, "jest": 1}
PLUGIN_DIR = "/bakeoff/in/plugin"  # the rig's inputs, read-only in the sample
PLUGIN_MODULE = "bakeoff_observer"  # the observer's pytest plugin (rig/guards/insample/)


class Seen(enum.StrEnum):
    """How a canary came out."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    XFAILED = "xfailed"  # ran and failed as a strict xfail expects: pytest's must-fail canary
    ABSENT = "absent"


@dataclass(frozen=True)
class Canary:
    """The canaries planted in one sample."""

    runner: str
    token: str
    path: str  # repo-relative, in the sample's tree
    content: bytes
    pass_name: str
    fail_name: str | None  # None: no must-fail canary (a shell list; cargo without
    #                        --no-fail-fast)
    fail_expect: Seen = Seen.FAILED  # how the must-fail canary reads when honest
    # In the protected tests' own process (`rig.guards.inprocess`): more must-fail tests (node:
    # twins named as the protected tests), more must-pass ones (sentinels), the files they
    # need, the sample env that loads them, and where their code sits (node's `location`).
    twins: tuple[str, ...] = ()
    sentinels: tuple[str, ...] = ()
    files: tuple[tuple[str, bytes], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    marker: str = ""
    notes: tuple[str, ...] = ()  # what these canaries cannot guard (`SampleRecord.unguarded`)
    # node: files the command runs that register no test (helpers under test/), as node
    # names them; node reports each as one passing test (`spared`).
    helpers: tuple[str, ...] = ()

    def as_record(self) -> dict[str, object]:
        found: dict[str, object] = {
            "runner": self.runner, "token": self.token, "path": self.path,
            "pass": self.pass_name, "fail": self.fail_name,
            "fail_expect": str(self.fail_expect)}
        if self.twins or self.sentinels:
            found.update({"twins": list(self.twins), "sentinels": list(self.sentinels),
                          "files": [path for path, _ in self.files]})
        return found


@dataclass(frozen=True)
class CanaryReading:
    """The canaries as the run reported them."""

    planted: bool
    pass_seen: Seen = Seen.ABSENT
    fail_seen: Seen | None = None
    exit_agrees: bool = True  # a failed must-fail canary came with a failing exit code
    detail: str = ""
    fail_expect: Seen = Seen.FAILED
    removed: Counts | None = None  # the canaries' own results among the runner's counts

    @property
    def as_planted(self) -> bool:
        return self.pass_seen is Seen.PASSED and self.fail_seen in (None, self.fail_expect)

    @property
    def clean(self) -> bool:
        """Nothing to explain: either no canaries, or both as planted with an honest exit."""
        return not self.planted or (self.as_planted and self.exit_agrees)

    @property
    def forced(self) -> bool:
        """The must-fail canary passed: no honest run does that."""
        return self.fail_seen is Seen.PASSED

    @property
    def contradicted(self) -> bool:
        """A must-pass canary failed: on a run that otherwise passed, the process's own
        testimony (go: its TestMain's status) contradicts what its output says."""
        return self.pass_seen is Seen.FAILED

    def signature(self) -> tuple[str, str, bool]:
        return (str(self.pass_seen), str(self.fail_seen), self.exit_agrees)

    def as_record(self) -> dict[str, object]:
        return {"pass": str(self.pass_seen),
                "fail": None if self.fail_seen is None else str(self.fail_seen),
                "exit_agrees": self.exit_agrees}


NO_CANARIES = CanaryReading(planted=False)


# -- reading back ------------------------------------------------------------------------


_SEEN = {TestStatus.PASSED: Seen.PASSED, TestStatus.FAILED: Seen.FAILED,
         TestStatus.ERROR: Seen.FAILED, TestStatus.SKIPPED: Seen.SKIPPED}
_OBSERVED = {Status.PASSED: Seen.PASSED, Status.XPASSED: Seen.PASSED,
             Status.FAILED: Seen.FAILED, Status.ERROR: Seen.FAILED, Status.ABORTED: Seen.FAILED,
             Status.SKIPPED: Seen.SKIPPED, Status.XFAILED: Seen.XFAILED,
             Status.ABSENT: Seen.ABSENT}


def _seen(found: Sequence[Seen]) -> Seen:
    """The worst of a canary's readings (a runner that reports it twice, differently, is
    read at its worst)."""
    for worst in (Seen.FAILED, Seen.XFAILED, Seen.SKIPPED, Seen.PASSED):
        if worst in found:
            return worst
    return Seen.ABSENT


def _from_observer(observation: ObserverReport, name: str) -> Seen:
    """pytest's canaries as the rig's observer saw them: a pass counts only when the rig
    saw the call return, a strict xfail only when it saw the call raise."""
    found = []
    for test in observation.tests:
        if not test.id.endswith(f"::{name}"):
            continue
        seen = _OBSERVED[test.status]
        if seen in (Seen.PASSED, Seen.XFAILED) and not test.attested:
            seen = Seen.ABSENT  # pytest says so; the rig never saw it run
        found.append(seen)
    return _seen(found)


def observe(canary: Canary | None, tests: Sequence[TestCase], exit_code: int | None,
            observation: ObserverReport | None = None) -> CanaryReading:
    """How the canaries came out: from the rig's observer (pytest) or the runner's
    per-test lines (the others, `_from_cases`)."""
    if canary is None:
        return NO_CANARIES
    if canary.runner != "pytest":
        return _from_cases(canary, tests, exit_code)
    def seen(name: str) -> Seen:
        return _from_observer(observation or NOTHING, name)
    pass_seen = seen(canary.pass_name)
    fail_seen = None if canary.fail_name is None else seen(canary.fail_name)
    exit_agrees = not (fail_seen is Seen.FAILED and exit_code == 0)
    detail = (f"canary {canary.pass_name}: {pass_seen}"
              + ("" if canary.fail_name is None else
                 f", canary {canary.fail_name}: {fail_seen} (planted to read "
                 f"{canary.fail_expect})")
              + ("" if exit_agrees else f", but exit {exit_code}"))
    return CanaryReading(True, pass_seen, fail_seen, exit_agrees, detail, canary.fail_expect)


def split(canary: Canary | None,
          tests: Sequence[TestCase]) -> tuple[list[TestCase], list[TestCase]]:
    """(the canaries' cases, the others) among a runner's per-test lines. A twin shares a
    protected test's name (node): it is the case of that name located in the canaries'
    file (node's TAP locates failures), else the first of that name (it runs first)."""
    if canary is None:
        return [], list(tests)
    names = {n for n in (canary.pass_name, canary.fail_name, *canary.sentinels) if n}
    twins = set(canary.twins) - names
    ours: list[int] = []
    by_twin: dict[str, list[int]] = {}
    for at, case in enumerate(tests):
        name = _name_of(case.id, names | twins)
        if name in names:
            ours.append(at)
        elif name is not None:
            by_twin.setdefault(name, []).append(at)
    for found in by_twin.values():
        located = [at for at in found if where_of(tests[at]) == canary.marker]
        ours += located or (found[:1] if canary.marker else found)
    taken = set(ours)
    return ([tests[at] for at in sorted(taken)],
            [case for at, case in enumerate(tests) if at not in taken])


def _name_of(test_id: str, names: set[str]) -> str | None:
    if test_id in names:
        return test_id
    # cargo's and go's `binary::name`, jest's file and name, vitest's (its verbose lines)
    for separator in ID_SEPARATORS:
        tail = test_id.rpartition(separator)[2]
        if tail in names:
            return tail
    return None


def _from_cases(canary: Canary, tests: Sequence[TestCase], exit_code: int | None) -> CanaryReading:
    """A line-read runner's canaries: every must-pass one (the canary file's and the
    sentinels in the protected tests' process) passed, every must-fail one (the file's
    and the twins) failed; `removed` is what they add to the runner's counts."""
    ours, _ = split(canary, tests)
    def seen(name: str, must_fail: bool = False) -> Seen:
        found = [_SEEN[t.status] for t in ours if _name_of(t.id, {name}) == name]
        if must_fail and Seen.PASSED in found:  # one line saying it passed is enough
            return Seen.PASSED
        return _seen(found)
    musts = [seen(n) for n in (canary.pass_name, *canary.sentinels) if n]
    fails = [seen(n, True) for n in (*([canary.fail_name] if canary.fail_name else []),
                                      *canary.twins)]
    # go's sentinel mirrors its binary's status (FAIL on an honestly failing run): that a
    # canary is missing (a `-run` filter sparing them) is what a base's run can share.
    worst = (Seen.ABSENT, Seen.FAILED) if canary.runner == "go-test" else \
        (Seen.FAILED, Seen.ABSENT)
    pass_seen = _all(musts, (*worst, Seen.SKIPPED, Seen.XFAILED)) \
        if musts else Seen.PASSED  # vitest, jest: a must-fail canary alone (rig.guards.inprocess)
    fail_seen = _all(fails, (Seen.PASSED, Seen.ABSENT, Seen.SKIPPED)) if fails else None
    exit_agrees = not (fail_seen is Seen.FAILED and exit_code == 0)
    shown = [canary.pass_name, *canary.sentinels]
    detail = ((f"must-pass canaries ({_few(shown)}): {pass_seen}" if musts else
               "no must-pass canary")
              + ("" if fail_seen is None else
                 f", must-fail canaries ({_few([canary.fail_name or '', *canary.twins])}): "
                 f"{fail_seen} (planted to read failed)")
              + ("" if exit_agrees else f", but exit {exit_code}"))
    return CanaryReading(True, pass_seen, fail_seen, exit_agrees, detail,
                    removed=count_statuses(ours))


def _all(found: Sequence[Seen], worst_first: Sequence[Seen]) -> Seen:
    """Several canaries of one kind read as one: the first of `worst_first` any of them
    reads, else how they all read."""
    for worst in worst_first:
        if worst in found:
            return worst
    return found[0] if found else Seen.ABSENT


def _few(names: Sequence[str]) -> str:
    names = [n for n in names if n]
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def spared(parsed: ParseResult, canary: Canary | None) -> ParseResult:
    """node: a helper that registers no test, run because node's patterns pick it up, is
    one passing test to node (as for a bare run), not a file whose process ended early."""
    if canary is None or not canary.helpers:
        return parsed
    helpers = {node_test.ended_early(name) for name in canary.helpers}
    kept = tuple(s for s in parsed.incomplete if s not in helpers)
    return parsed if kept == parsed.incomplete else dataclasses.replace(parsed, incomplete=kept)


def discount(counts: Counts | None, evidence: CanaryReading) -> Counts | None:
    """The runner's counts without the canaries, as they came out."""
    if counts is None or not evidence.planted:
        return counts
    if evidence.removed is not None:
        out = evidence.removed
        return Counts(passed=max(0, counts.passed - out.passed),
                      failed=max(0, counts.failed - out.failed),
                      skipped=max(0, counts.skipped - out.skipped),
                      errors=max(0, counts.errors - out.errors))
    seen = [evidence.pass_seen, evidence.fail_seen]
    return Counts(passed=max(0, counts.passed - seen.count(Seen.PASSED)),
                  failed=max(0, counts.failed - seen.count(Seen.FAILED)),
                  skipped=max(0, counts.skipped - seen.count(Seen.SKIPPED)
                              - seen.count(Seen.XFAILED)),
                  errors=counts.errors)


def in_summary(summary: Counts, evidence: CanaryReading) -> bool:
    """The runner's own summary holds the canaries as they came out (a fake printed
    after it, or a summary of a run that never reached them, does not)."""
    if evidence.removed is not None:
        out = evidence.removed
        return (summary.passed >= out.passed and summary.skipped >= out.skipped
                and summary.failed + summary.errors >= out.failed + out.errors)
    seen = [evidence.pass_seen, evidence.fail_seen]
    return (summary.passed >= seen.count(Seen.PASSED)
            and summary.failed + summary.errors >= seen.count(Seen.FAILED)
            and summary.skipped >= seen.count(Seen.SKIPPED) + seen.count(Seen.XFAILED))


def exit_without(runner: str, exit_code: int | None, counts: Counts | None,
                 evidence: CanaryReading) -> int | None:
    """The exit code the run would have had without the must-fail canary: the runner's
    failure status becomes 0 when the canary was the only failure. A must-fail canary
    that ran and failed counts even when another was left out by the command's selection
    (`cargo test --no-fail-fast --test it`: the twins in the protected binary failed, the
    canary binary did not run)."""
    failed = evidence.fail_seen is Seen.FAILED or (
        runner == "cargo" and evidence.removed is not None and evidence.removed.failed > 0)
    if (exit_code is None or counts is None or not failed
            or exit_code != FAILURE_EXIT.get(runner)):
        return exit_code
    return 0 if counts.failed + counts.errors == 0 else exit_code
