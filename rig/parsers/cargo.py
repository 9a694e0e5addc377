"""`cargo test` output: one `test result:` line per test binary and per doc-test crate.

Counts are the SUM of every binary's result line (the first one, often a `0 passed` bin
target, is not the answer). A binary's run is framed by libtest: its `running N tests`
header, its tests' lines, then ONE result line, the last thing the binary prints. So
among the result-like lines between a header and the binary's end (the next `Running` /
`Doc-tests` line, the end of the output; with `cargo test -q`, which prints no
`Running` lines, the next header after a result line that closes it) the LAST one is
libtest's, and it must add up: its numbers sum to the header's N and it counts as many
failures as the binary listed `FAILED` lines. Earlier look-alikes (`running 99 tests`,
`test result: ok. 99 passed` printed by a test, under `--nocapture`, `--show-output` or
in a failing test's captured stdout) are the tests' output: noted, never counted. A last
line that does not add up, or a result line after the binary's own (no open header),
was printed by the code under test: a spoof (a lib that prints a passing report and
exits leaves no real result line after its forgery).
Under terse output (`cargo test -q`, libtest's `-q`/`--format terse`: dots, no
`test NAME ... STATUS` lines) libtest still names every failed test, in the indented
list after its last `failures:` line, before the binary's result line: those names are
read (`terse_failed`, for the rig's canaries), never the passing tests, which are not
named.
A header with no result means the test binary crashed (SIGABRT, SIGSEGV, ...): counted
as one error and reported as `incomplete`. A build script of the tree's own crate that
fails (`failed to run custom build command for `units v0.1.0 (/path)``) is the code's
build failure; libtest rejecting `cargo test -- ARGS` (`error: Unrecognized option`) is
a usage error. The parser needs stderr merged in order
(`2>&1`): cargo prints the `Running <binary>` lines there, and they qualify test ids
(`tests/api.rs::same_name`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rig.parsers.base import (
    Counts,
    ParseResult,
    TestCase,
    TestStatus,
    bounded,
    contains_any,
    output_lines,
    plain,
)

_DOCTESTS = re.compile(r"^\s+Doc-tests (?P<crate>\S+)$")
_HEADER = re.compile(r"^running (?P<n>\d{1,9}) tests?$")
_RESULT = re.compile(
    r"^test result: (?:ok|FAILED)\. (?P<passed>\d{1,9}) passed; (?P<failed>\d{1,9}) failed; "
    r"(?P<ignored>\d{1,9}) ignored; (?P<measured>\d{1,9}) measured;"
)
_TEST = re.compile(r"^test (?P<name>.+) \.\.\. (?P<st>ok|FAILED|ignored(?:, .*)?)$")
# One test thread: libtest prints `test NAME ... ` before the test runs and its status
# after it, so what the test prints under --nocapture sits between the two, and the
# status ends the last line before the next test (glued to a partial line:
# `test talks ... running 99 testsok`).
_STARTED = re.compile(r"^test (?P<name>.+?) \.\.\. ")
_ENDED = re.compile(r"(?P<st>ok|FAILED)$")
_STATUS = re.compile(r"^(?:ok|FAILED|ignored(?:, .*)?)$")
_CAPTURED = re.compile(r"^---- .+ std(?:out|err) ----$")
_FAILURE_NAMED = re.compile(r"^    (?P<name>\S+)$")  # `failures:` then `    NAME` lines
_HASH = re.compile(r"-[0-9a-f]{16}$")
_BUILD_FAILED = ("error[E", "error: could not compile")
_USAGE = (
    "error: Found argument",
    "error: unexpected argument",
    "error: no such command",
    "error: no such subcommand",
    "error: unrecognized subcommand",
    "error: no test target named",
    "error: no bin target named",
    "error: no example target named",
    "error: package(s) `",
    "error: invalid value",
    # libtest's own command line (`cargo test -- ARGS`), getopts' messages
    "error: Unrecognized option: '",
    "error: Argument to option '",
    "' given more than once",
    "' does not take an argument",
)
# `error: failed to run custom build command for `units v0.1.0 (/tmp/w/units)``: a build
# script failed; a local path in the parentheses makes it the tree's own crate.
_BUILD_SCRIPT = "error: failed to run custom build command for `"


def usage_error(exit_code: int | None, text: str) -> bool:
    """cargo rejected its command line. cargo has no usage-only exit code: text decides."""
    del exit_code  # clap exits 1, cargo 101: both also mean other things
    return contains_any(text, _USAGE)


@dataclass
class _Binary:
    label: str
    artifact: str
    header: int | None = None
    listed: int = 0  # its `test NAME ... STATUS` lines (none with --format=terse)
    listed_failed: int = 0
    started: str | None = None  # `test NAME ... ` whose status is still to come (one thread)
    tail: str = ""  # the last line of its output so far
    last: tuple[int, int, int, int, bool] | None = None  # its last result line, captured?
    earlier: int = 0  # result-like lines before the last one: the tests' output
    summing: tuple[int, int, int, int] | None = None  # the first one that adds up
    ambiguous: bool = False  # two lines that add up to the header with other numbers
    failures: list[str] = field(default_factory=list)  # its last `failures:` list


@dataclass
class _State:
    counts: Counts = field(default_factory=Counts)
    results: int = 0
    result_lines: int = 0
    binary: _Binary = field(default_factory=lambda: _Binary("binary#0", ""))
    in_captured: bool = False
    framed: bool = True  # cargo printed `Running` lines (not `cargo test -q`)
    printed: int = 0  # look-alike lines the tests printed inside a binary's run, ignored
    tests: list[tuple[_Binary, str, TestStatus]] = field(default_factory=list)
    listing: bool = False  # inside the indented names after a `failures:` line
    terse_failed: list[TestCase] = field(default_factory=list)
    spoof: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)


def _status(word: str) -> TestStatus:
    if word == "ok":
        return TestStatus.PASSED
    return TestStatus.FAILED if word == "FAILED" else TestStatus.SKIPPED


def _close_unfinished(state: _State) -> None:
    if state.binary.header is not None:
        state.counts += Counts(errors=1)
        state.incomplete.append(
            f"{state.binary.label}: `running {state.binary.header} tests` with no "
            "`test result:` line: the test binary crashed; counted as 1 error"
        )
        state.binary.header = None


def _mismatch(binary: _Binary) -> str | None:
    """Why the binary's last result line is not libtest's, or None when it adds up."""
    assert binary.last is not None
    passed, failed, ignored, measured, captured = binary.last
    total = passed + failed + ignored + measured
    if captured:
        return f"{binary.label}: its last `test result:` line is inside a test's output"
    if binary.header != total:
        return (f"{binary.label}: `running {binary.header} tests` but the result line adds "
                f"up to {total}")
    if binary.listed and binary.listed_failed != failed:
        return (f"{binary.label}: {binary.listed_failed} tests listed FAILED but the result "
                f"line says {failed} failed")
    if binary.ambiguous:
        return (f"{binary.label}: two `test result:` lines add up to `running "
                f"{binary.header} tests` with different numbers")
    return None


def _settle(state: _State) -> None:
    """The binary's run ended: its last result line is libtest's if it adds up (earlier
    ones were printed by its tests), else a spoof; no result line at all is a crash."""
    binary = state.binary
    _resolve(state)
    if binary.header is not None and binary.last is not None:
        why = _mismatch(binary)
        if why is not None:
            state.spoof.append(why)
        else:
            passed, failed, ignored, measured, _ = binary.last
            state.counts += Counts(passed=passed + measured, failed=failed, skipped=ignored)
            state.results += 1
            state.printed += binary.earlier
            binary.header = None
            if not binary.listed:  # terse: the failures list is all that names a test
                state.terse_failed += [TestCase(f"{binary.label}::{name}", TestStatus.FAILED)
                                       for name in binary.failures]
    _close_unfinished(state)
    binary.last, binary.earlier, binary.summing, binary.ambiguous = None, 0, None, False
    binary.listed = binary.listed_failed = 0
    binary.started, binary.failures = None, []
    state.in_captured = state.listing = False


def _result(state: _State, match: re.Match[str]) -> None:
    state.result_lines += 1
    binary = state.binary
    if binary.header is None:
        state.spoof.append(f"{binary.label}: a `test result:` line with no `running` header")
        return
    numbers = (int(match["passed"]), int(match["failed"]), int(match["ignored"]),
               int(match["measured"]))
    if sum(numbers) == binary.header and not state.in_captured:
        if binary.summing is None:
            binary.summing = numbers
        binary.ambiguous |= binary.summing != numbers
    binary.earlier += binary.last is not None
    binary.last = (*numbers, state.in_captured)


def _header(state: _State, count: int) -> None:
    binary = state.binary
    if (binary.header is not None and not state.framed and binary.last is not None
            and _mismatch(binary) is None):
        _settle(state)  # `cargo test -q`: the last binary's result closed it, a new one runs
    if binary.header is None:
        binary.header = count
    else:
        state.printed += 1  # printed by a test inside the binary's run


def _running(line: str) -> tuple[str, str | None] | None:
    r"""(label, path) of `   Running <label>[ (<path>)]`; linear in the line's length.

    The same reading as `^\s+Running (?P<label>.+?)(?: \((?P<path>[^)]+)\))?$`: the path
    is the text in the LAST parentheses at the end, opened by the first ` (` after any
    other `)`.
    """
    stripped = line.lstrip()
    if len(stripped) == len(line) or not stripped.startswith("Running "):
        return None
    rest = stripped[len("Running ") :]
    if not rest:
        return None
    if rest.endswith(")"):
        close = rest.rfind(")", 0, len(rest) - 1)
        opened = rest.find(" (", max(close + 1, 1))
        if opened != -1 and opened + 2 < len(rest) - 1:
            return rest[:opened], rest[opened + 2 : -1]
    return rest, None


def _binary(line: str) -> _Binary | None:
    """The binary a `Running ...` / `Doc-tests ...` line starts, if it is one."""
    if running := _running(line):
        label, path = running
        artifact = _HASH.sub("", (path or label).rsplit("/", 1)[-1])
        return _Binary(bounded(label), bounded(artifact))
    if doc := _DOCTESTS.match(line):
        crate = bounded(doc["crate"])
        return _Binary(f"Doc-tests {crate}", crate)
    return None


def _listed(state: _State, name: str, word: str) -> None:
    status = _status(word)
    state.tests.append((state.binary, name, status))
    state.binary.listed += 1
    state.binary.listed_failed += status is TestStatus.FAILED
    state.binary.started = None


def _resolve(state: _State) -> None:
    """A started test (one thread) ended where the next one starts: its status ends the
    last line it printed."""
    binary = state.binary
    if binary.started is not None and (ended := _ENDED.search(binary.tail)):
        _listed(state, binary.started, ended["st"])


def _glued(line: str) -> tuple[str, str] | None:
    """(name, status) of libtest's `test NAME ... STATUS` glued to the end of a partial
    line a test printed (`running 99 teststest keeps ... ok`, several threads)."""
    head, sep, word = line.rpartition(" ... ")
    at = head.rfind("test ")
    if not sep or at <= 0 or not _STATUS.match(word):
        return None
    name = head[at + len("test "):]
    return (name, word) if name and " " not in name else None


def _failure_named(state: _State, line: str) -> bool:
    """A name of the indented list after `failures:` (libtest's failed tests), taken."""
    if state.listing and (named := _FAILURE_NAMED.match(line)):
        state.binary.failures.append(named["name"])
        return True
    state.listing = state.listing and not line
    return False


def _line(state: _State, line: str) -> None:
    binary = state.binary
    if _failure_named(state, line):
        return
    if binary.started is not None and (line in ("failures:", "successes:") or (
            line.startswith("test ") and not line.startswith("test result:"))):
        _resolve(state)
    if new := _binary(line):
        _settle(state)
        state.binary = new
    elif header := _HEADER.match(line):
        _header(state, int(header["n"]))
    elif _CAPTURED.match(line):
        state.in_captured = True
    elif line in ("failures:", "successes:"):
        state.in_captured = False
        state.listing = line == "failures:"
        binary.failures = [] if state.listing else binary.failures
    elif result := _RESULT.match(line):
        _result(state, result)
    elif state.in_captured:
        return
    elif test := _TEST.match(line):
        _listed(state, test["name"], test["st"])
    elif (started := _STARTED.match(line)) and binary.header is not None:
        binary.started, binary.tail = started["name"], line[started.end():]
    elif glued := _glued(line):
        _listed(state, *glued)
    elif binary.started is not None and line:
        binary.tail = line


def _qualified(state: _State) -> tuple[TestCase, ...]:
    """Test ids `binary::name`; a label two binaries share gets its artifact appended, and
    a `unittests src/lib.rs` label always does (its path is the package's, so in a
    workspace whether it is shared depends on which binaries ran: without --no-fail-fast
    the base may stop before the second package's)."""
    artifacts: dict[str, set[str]] = {}
    for binary, _, _ in state.tests:
        artifacts.setdefault(binary.label, set()).add(binary.artifact)
    cases = []
    for binary, name, status in state.tests:
        label = binary.label
        if len(artifacts[label]) > 1 or label.startswith("unittests "):
            label = f"{label} ({binary.artifact})"
        cases.append(TestCase(f"{label}::{name}", status))
    return tuple(cases)


def _build_scripts(lines: list[str]) -> tuple[bool, tuple[str, ...]]:
    """Whether a build script of the tree's own crates failed (the code does not build),
    and a note for each failed build script of a dependency (often a system library
    missing from the image: not the code's fault by itself)."""
    own, notes = False, []
    for line in lines:
        if not line.startswith(_BUILD_SCRIPT):
            continue
        crate = line[len(_BUILD_SCRIPT) :].rstrip("`")
        if " (/" in crate:
            own = True
        else:
            notes.append(f"the build script of dependency {bounded(crate)} failed: a system "
                         "library or tool missing from the image?")
    return own, tuple(notes)


def _notes(text: str) -> tuple[str, ...]:
    if "error: test failed, to rerun pass" in text and " failed:\n" not in text:
        return ("cargo stopped at the first failing binary: pass --no-fail-fast to count all",)
    return ()


def _printed(state: _State) -> tuple[str, ...]:
    if not state.printed:
        return ()
    return (f"{state.printed} look-alike `running N tests` / `test result:` line(s) printed "
            "by the tests inside their binary's run were ignored (libtest's own result "
            "line is each binary's last)",)


def parse(text: str) -> ParseResult:
    """Sum every binary's `test result:` line; qualify test ids by binary."""
    text = plain(text)
    lines = [raw.rstrip() for raw in output_lines(text)]
    state = _State(framed=any(_running(line) for line in lines))
    for line in lines:
        _line(state, line)
    _settle(state)
    found = state.results > 0 or state.counts.errors > 0
    own_build_script, dependency_notes = _build_scripts(lines)
    return ParseResult(
        counts=state.counts if found else None,
        summaries=state.result_lines,
        tests=_qualified(state),
        build_failed=contains_any(text, _BUILD_FAILED) or own_build_script,
        usage_error=usage_error(None, text) and not found,
        notes=_notes(text) + dependency_notes + _printed(state),
        incomplete=tuple(state.incomplete),
        summed=True,
        spoof_evidence=tuple(state.spoof),
        terse_failed=tuple(state.terse_failed),
    )
