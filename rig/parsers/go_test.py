"""`go test -json` events and plain `go test -v` output (one parser, detected per line).

Every test counts, subtests included (`TestClamp/above` and its parent both fail), as
gotestsum counts them. Each package has one result (`ok`/`FAIL`/`?` line, or a package
`pass`/`fail`/`skip` event): results are summed across packages, and a package or a
test reported twice was partly printed by the code under test (test2json itself turns
a `--- PASS: TestX` line printed by a test into an event, so duplicates are the sign).
A package that failed with no failing test (a crash in TestMain) counts as one error;
when go's own usage text shows it rejected the command line (an unknown test-binary
flag fails every package) and no test ran, there are no counts at all: the rig measured
nothing. `ok pkg [no tests to run]` (`-run` matching nothing) is a package with zero
tests. Go 1.19 prints build errors as plain text even in -json mode (`FAIL pkg [build
failed]`); both modes are read. Plain output needs `-v`: without it passing tests are not
listed and the counts cannot be read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from rig.parsers.base import (
    Counts,
    ParseResult,
    TestCase,
    TestStatus,
    bounded,
    contains_any,
    count_statuses,
    output_lines,
    plain,
)

# go's own package lines: `ok  \tpkg\t0.01s`, `FAIL\tpkg\t0.01s`, `FAIL\tpkg [build
# failed]`, `?   \tpkg\t[no test files]` (a tab after the status word, as go prints it:
# a program's `FAIL to parse x` or `ok 3 items` is no package result).
_PACKAGE_LINE = re.compile(r"^(?P<st>ok  |FAIL|\?   )\t(?P<pkg>[^\s\[]+)(?:[\t ].*)?$")
_TEST_LINE = re.compile(r"^\s*--- (?P<st>PASS|FAIL|SKIP): (?P<name>\S+) \(")
# With -v go announces every test it starts (`=== RUN   TestX`, then PAUSE/CONT for a
# parallel one) before its result line: a `--- PASS`/`--- SKIP` line for a test never
# announced in its package's output was printed by a test, not by go. A `--- FAIL` line
# is read unannounced only where go announces nothing (without -v it prints failures
# alone).
_ANNOUNCED = re.compile(r"=== (?:RUN|CONT|PAUSE|NAME)\s+(?P<name>\S+)")  # anywhere: after
# a test's own output that lacked a newline too
# A result line glued to a test's output that lacked a newline (`fmt.Print("done")`, then
# go's `--- PASS: TestX (0.00s)` on the same line; test2json of go 1.19 leaves it as that
# test's output, with no pass event): go's own, for an announced test with no result yet.
_GLUED = re.compile(r"\S--- (?P<st>PASS|FAIL|SKIP): (?P<name>\S+) \(\d+\.\d+s\)$")
_STATUS = {
    "pass": TestStatus.PASSED,
    "PASS": TestStatus.PASSED,
    "fail": TestStatus.FAILED,
    "FAIL": TestStatus.FAILED,
    "skip": TestStatus.SKIPPED,
    "SKIP": TestStatus.SKIPPED,
    "ok": TestStatus.PASSED,
    "?": TestStatus.SKIPPED,
}
_BUILD_FAILED = ("[build failed]", "[setup failed]")
_NOTHING_TO_RUN = " [no tests to run]"  # `-run` matched no test in the package
_USAGE = (
    "flag provided but not defined",
    'invalid value "',
    "usage: go test",
    ": unknown command",
    "no required module provides package",
    "directory not found",
    "no Go files in",
    "matched no packages",
    "cannot find package",
    "is not in GOROOT",
    "malformed import path",
    "go.mod file not found",
)


def usage_error(exit_code: int | None, text: str) -> bool:
    """go rejected its command line. go exits 2 for build failures too: text decides."""
    del exit_code
    return contains_any(text, _USAGE)


@dataclass
class _Run:
    tests: dict[tuple[str, str], TestStatus] = field(default_factory=dict)
    packages: dict[str, TestStatus] = field(default_factory=dict)
    pending: list[tuple[str, TestStatus]] = field(default_factory=list)
    spoof: list[str] = field(default_factory=list)
    json_events: int = 0
    nothing_to_run: set[str] = field(default_factory=set)  # plain `ok pkg [no tests to run]`
    announced: set[str] = field(default_factory=set)  # plain: `=== RUN` names of this block
    started: set[tuple[str, str]] = field(default_factory=set)  # -json: (package, test) run
    verbose: set[str] = field(default_factory=set)  # -json: packages with a `run` event
    unannounced: list[str] = field(default_factory=list)  # result lines go never announced
    glued: dict[tuple[str, str], TestStatus] = field(default_factory=dict)  # -json: output

    def test(self, package: str, name: str, status: TestStatus) -> None:
        key = (package, name)
        if key in self.tests:
            self.spoof.append(f"{package} {name}: reported twice ({self.tests[key]}, {status})")
            status = max(self.tests[key], status, key=_severity)
        self.tests[key] = status

    def package(self, package: str, status: TestStatus) -> None:
        if package in self.packages:
            self.spoof.append(f"{package}: two package results")
        self.packages[package] = status
        for name, test_status in self.pending:
            self.test(package, name, test_status)
        self.pending.clear()
        self.announced.clear()


def _severity(status: TestStatus) -> int:
    return [TestStatus.SKIPPED, TestStatus.PASSED, TestStatus.FAILED].index(status)


def _event(run: _Run, line: str) -> bool:
    """Record one test2json event; False when `line` is not one."""
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than json allows
        return False
    if not isinstance(event, dict) or "Action" not in event:
        return False
    run.json_events += 1
    action, package = event["Action"], bounded(str(event.get("Package", "")))
    if action == "run" and event.get("Test"):
        run.started.add((package, str(event["Test"])))
        run.verbose.add(package)
    elif action in ("pass", "fail", "skip"):
        if event.get("Test"):
            name, status = str(event["Test"]), _STATUS[action]
            if (package, name) in run.started or (
                    status is TestStatus.FAILED and package not in run.verbose):
                run.test(package, name, status)
            else:
                run.unannounced.append(f"{package} {name}")
        else:
            for (of, name), status in list(run.glued.items()):
                if of == package and (of, name) not in run.tests:
                    run.test(of, name, status)
            run.package(package, _STATUS[action])
    elif action == "output" and event.get("Test"):
        glued = _GLUED.search(str(event.get("Output", "")).rstrip("\n"))
        if glued and glued["name"] == event["Test"] and (package, glued["name"]) in run.started:
            run.glued[(package, glued["name"])] = _STATUS[glued["st"]]
    return True


def _plain(run: _Run, line: str) -> None:
    if announced := _ANNOUNCED.search(line):
        run.announced.add(announced["name"])
    elif test := _TEST_LINE.match(line):
        status = _STATUS[test["st"]]
        if test["name"] in run.announced or (
                status is TestStatus.FAILED and not run.announced):
            run.pending.append((test["name"], status))
        else:
            run.unannounced.append(test["name"])
    elif package := _PACKAGE_LINE.match(line):
        name = bounded(package["pkg"])
        run.package(name, _STATUS[package["st"].strip()])
        if line.endswith(_NOTHING_TO_RUN):
            run.nothing_to_run.add(name)
    elif (glued := _GLUED.search(line)) and glued["name"] in run.announced and \
            glued["name"] not in {name for name, _ in run.pending}:
        run.pending.append((glued["name"], _STATUS[glued["st"]]))


def _cases(run: _Run) -> tuple[TestCase, ...]:
    return tuple(TestCase(f"{pkg}::{name}", st) for (pkg, name), st in run.tests.items())


def _counts(run: _Run) -> Counts:
    failed_packages = {pkg for pkg, st in run.packages.items() if st is TestStatus.FAILED}
    with_failing_test = {pkg for (pkg, _), st in run.tests.items() if st is TestStatus.FAILED}
    return count_statuses(_cases(run)) + Counts(errors=len(failed_packages - with_failing_test))


def _unlisted_passes(run: _Run) -> bool:
    """Plain output without -v: packages passed, yet no test is listed (and go did not
    say `[no tests to run]`), so how many tests passed cannot be read."""
    if run.tests or run.json_events:
        return False
    passed = (pkg for pkg, st in run.packages.items() if st is TestStatus.PASSED)
    return any(pkg not in run.nothing_to_run for pkg in passed)


def parse(text: str) -> ParseResult:
    """Read test and package results from -json events and plain lines alike."""
    text = plain(text)
    run = _Run()
    for raw in output_lines(text):
        line = raw.rstrip()
        if not (line.startswith("{") and _event(run, line)):
            _plain(run, line)
    notes: tuple[str, ...] = ()
    if run.unannounced:
        notes = (f"{len(run.unannounced)} result line(s) of tests go never started, not "
                 f"counted (printed by a test): {', '.join(run.unannounced[:3])}",)
    counts: Counts | None = _counts(run) if run.packages else None
    if _unlisted_passes(run):
        counts = None
        notes = ("plain `go test` output without -v lists no passing tests: use -json",)
    build_failed = contains_any(text, _BUILD_FAILED)
    usage = usage_error(None, text) and not run.tests
    if usage and not build_failed:
        counts = None  # go rejected its command line: the packages it failed ran no test
    return ParseResult(
        counts=counts,
        summaries=len(run.packages),
        tests=_cases(run),
        build_failed=build_failed,
        usage_error=usage,
        notes=notes,
        summed=True,
        spoof_evidence=tuple(run.spoof),
    )
