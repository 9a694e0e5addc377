"""`cargo test` output: one `test result:` line per test binary and per doc-test crate.

Counts are the SUM of every `test result:` line (the first one, often a `0 passed` bin
target, is not the answer). Each result must close a `running N tests` header of the
same binary with matching numbers (and as many failures as the binary listed FAILED
lines); a result line with no open header, or one inside a test's captured stdout
(`---- name stdout ----`), was printed by the code under test.
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
_CAPTURED = re.compile(r"^---- .+ std(?:out|err) ----$")
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


@dataclass
class _State:
    counts: Counts = field(default_factory=Counts)
    results: int = 0
    result_lines: int = 0
    binary: _Binary = field(default_factory=lambda: _Binary("binary#0", ""))
    in_captured: bool = False
    tests: list[tuple[_Binary, str, TestStatus]] = field(default_factory=list)
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


def _result(state: _State, match: re.Match[str]) -> None:
    passed, failed, ignored, measured = (
        int(match[k]) for k in ("passed", "failed", "ignored", "measured")
    )
    binary = state.binary
    if state.in_captured:
        state.spoof.append(f"{binary.label}: a `test result:` line inside a test's output")
    elif binary.header is None:
        state.spoof.append(f"{binary.label}: a `test result:` line with no `running` header")
    elif binary.header != passed + failed + ignored + measured:
        state.spoof.append(
            f"{binary.label}: `running {binary.header} tests` but the result line adds up to "
            f"{passed + failed + ignored + measured}"
        )
    elif binary.listed and binary.listed_failed != failed:
        state.spoof.append(
            f"{binary.label}: {binary.listed_failed} tests listed FAILED but the result line "
            f"says {failed} failed"
        )
    else:
        state.counts += Counts(passed=passed + measured, failed=failed, skipped=ignored)
        state.results += 1
        binary.header = None


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


def _line(state: _State, line: str) -> None:
    if binary := _binary(line):
        _close_unfinished(state)
        state.binary = binary
        state.in_captured = False
    elif header := _HEADER.match(line):
        if state.in_captured or state.binary.header is not None:
            state.spoof.append(f"{state.binary.label}: a second `running N tests` header")
        else:
            state.binary.header = int(header["n"])
    elif _CAPTURED.match(line):
        state.in_captured = True
    elif line == "failures:":
        state.in_captured = False
    elif result := _RESULT.match(line):
        state.result_lines += 1
        _result(state, result)
    elif (test := _TEST.match(line)) and not state.in_captured:
        status = _status(test["st"])
        state.tests.append((state.binary, test["name"], status))
        state.binary.listed += 1
        state.binary.listed_failed += status is TestStatus.FAILED


def _qualified(state: _State) -> tuple[TestCase, ...]:
    """Test ids `binary::name`; a label two binaries share gets its artifact appended."""
    artifacts: dict[str, set[str]] = {}
    for binary, _, _ in state.tests:
        artifacts.setdefault(binary.label, set()).add(binary.artifact)
    cases = []
    for binary, name, status in state.tests:
        label = binary.label
        if len(artifacts[label]) > 1:
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


def parse(text: str) -> ParseResult:
    """Sum every binary's `test result:` line; qualify test ids by binary."""
    text = plain(text)
    state = _State()
    lines = [raw.rstrip() for raw in output_lines(text)]
    for line in lines:
        _line(state, line)
    _close_unfinished(state)
    found = state.results > 0 or state.counts.errors > 0
    own_build_script, dependency_notes = _build_scripts(lines)
    return ParseResult(
        counts=state.counts if found else None,
        summaries=state.result_lines,
        tests=_qualified(state),
        build_failed=contains_any(text, _BUILD_FAILED) or own_build_script,
        usage_error=usage_error(None, text) and not found,
        notes=_notes(text) + dependency_notes,
        incomplete=tuple(state.incomplete),
        summed=True,
        spoof_evidence=tuple(state.spoof),
    )
