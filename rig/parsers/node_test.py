"""`node --test` output: the TAP reporter (the default without a TTY) and `spec`.

Both end with one summary block (`# tests 9`, or the spec reporter's INFORMATION SOURCE
sign instead of `#`; then pass, fail, cancelled, skipped, todo). The code under test can
print text that looks like it (the spec reporter passes a test's stdout through
unescaped): more than one block is a spoof. When a test
file's process ends early (`process.exit(0)` in the code under test), node reports the
FILE as one passing test and its real tests vanish from the counts: a top-level `ok`
whose name is a file path and which has no subtests is `incomplete`. A file that failed
to load with a `SyntaxError` is the code's build failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rig.parsers.base import (
    Counts,
    LocatedCase,
    ParseResult,
    TestCase,
    TestStatus,
    contains_any,
    output_lines,
    plain,
    where_of,
)

USAGE_EXIT_CODES = frozenset({9})  # node: "Invalid Argument"

_SUMMARY = re.compile(
    "^(?:# |\u2139 )"  # INFORMATION SOURCE: the spec reporter's prefix
    r"(?P<key>tests|suites|pass|fail|cancelled|skipped|todo|duration_ms)"
    r" (?P<value>\d{1,9}(?:\.\d{1,12})?)$"
)
_SUBTEST = re.compile(r"^# Subtest: ")
_POINT = re.compile(
    r"^(?P<indent> *)(?P<ok>ok|not ok) \d+ - (?P<name>.*?)(?: # (?P<dir>SKIP|TODO)\b.*)?$"
)
_SPEC = re.compile(r"^(?P<indent> *)(?P<mark>[✔✖﹣]) (?P<name>.+?)(?: \([\d.]+m?s\))?(?: # .*)?$")
_FILE = re.compile(r"^(?:/|[\w.-]+/)\S*\.(?:[cm]?[jt]s|[jt]sx)$")  # node 22: relative
# A test point's YAML block names where the test was defined (node 18.17+).
_LOCATION = re.compile(r"^ +location: '(?P<path>[^'\n]{1,4096}?):\d{1,9}:\d{1,9}'$")
_USAGE = ("node: bad option:", "Could not find '")


def usage_error(exit_code: int | None, text: str) -> bool:
    """node rejected its command line: exit 9 (invalid argument) or node's own message."""
    return exit_code in USAGE_EXIT_CODES or contains_any(text, _USAGE)


@dataclass
class _Reading:
    blocks: list[dict[str, int]] = field(default_factory=list)
    tests: list[TestCase] = field(default_factory=list)
    nested_since_top: int = 0
    file_failed: bool = False
    incomplete: list[str] = field(default_factory=list)


def _summary_line(reading: _Reading, line: str) -> bool:
    match = _SUMMARY.match(line)
    if match is None:
        return False
    if match["key"] == "tests":
        reading.blocks.append({})
    if reading.blocks:
        reading.blocks[-1][match["key"]] = int(float(match["value"]))
    return True


def ended_early(name: str) -> str:
    """What a file node reported as one passing test says (a file that registers no test,
    a helper node's patterns pick up, reads the same: `rig.guards.canary.spared`)."""
    return (f"node reported test file {name} as one passing test with no subtests: its "
            "process ended before reporting its tests")


def _top_level(reading: _Reading, name: str, passed: bool) -> None:
    if _FILE.match(name):
        if not passed:
            reading.file_failed = True
        elif reading.nested_since_top == 0:
            reading.incomplete.append(ended_early(name))
    reading.nested_since_top = 0


def _tap_point(reading: _Reading, match: re.Match[str]) -> None:
    passed = match["ok"] == "ok"
    status = TestStatus.PASSED if passed else TestStatus.FAILED
    if match["dir"]:
        status = TestStatus.SKIPPED
    reading.tests.append(TestCase(match["name"], status))
    if match["indent"]:
        reading.nested_since_top += 1
    else:
        _top_level(reading, match["name"], passed)


def _spec_line(reading: _Reading, match: re.Match[str]) -> None:
    mark = match["mark"]
    status = {"✔": TestStatus.PASSED, "✖": TestStatus.FAILED}.get(mark, TestStatus.SKIPPED)
    reading.tests.append(TestCase(match["name"], status))
    if match["indent"]:
        reading.nested_since_top += 1
    else:
        _top_level(reading, match["name"], mark != "✖")


def _counts(block: dict[str, int]) -> Counts:
    return Counts(
        passed=block.get("pass", 0),
        failed=block.get("fail", 0) + block.get("cancelled", 0),
        skipped=block.get("skipped", 0) + block.get("todo", 0),
    )


def _failures(block: dict[str, int]) -> int:
    """Blocks are ranked by failures: the code under test forges passes, not failures."""
    return block.get("fail", 0) + block.get("cancelled", 0)


def _notes(block: dict[str, int] | None) -> tuple[str, ...]:
    if block is None or "tests" not in block:
        return ()
    counted = sum(block.get(k, 0) for k in ("pass", "fail", "cancelled", "skipped", "todo"))
    if counted == block["tests"]:
        return ()
    return (f"node's summary says {block['tests']} tests but its parts add up to {counted}",)


_DOTS = re.compile(r"^[.X*]{1,20000}$")  # the dot reporter: a mark per test
_XML = re.compile(r"^(?:<\?xml |<testsuites>)")  # the junit reporter


def unread_reporter(text: str) -> tuple[str, ...]:
    """Why output with no summary block has none: node printed a reporter the rig cannot
    read (`dot`, `junit` to stdout), and how to keep it and still be read."""
    lines = output_lines(text)
    found = "dot" if any(_DOTS.match(x) for x in lines) else \
        "junit" if any(_XML.match(x) for x in lines) else ""
    if not found:
        return ()
    return (f"the command asks node for the `{found}` reporter, which the rig cannot read: "
            f"use --test-reporter=tap or spec (or send {found} to a file and tap to stdout: "
            f"--test-reporter={found} --test-reporter-destination=FILE "
            "--test-reporter=tap --test-reporter-destination=stdout)",)


def parse(text: str) -> ParseResult:
    """Read node's summary block(s) and test points (TAP) or marks (spec)."""
    text = plain(text)
    reading = _Reading()
    listing = True  # the spec reporter repeats failures after "✖ failing tests:"
    for line in output_lines(text):
        if _summary_line(reading, line) or not listing:
            continue
        if line == "✖ failing tests:":
            listing = False
        elif _SUBTEST.match(line) or line.startswith("▶ "):
            reading.nested_since_top = 0
        elif point := _POINT.match(line):
            _tap_point(reading, point)
        elif (where := _LOCATION.match(line)) and reading.tests and not where_of(reading.tests[-1]):
            case = reading.tests[-1]
            reading.tests[-1] = LocatedCase(case.id, case.status, where["path"])
        elif spec := _SPEC.match(line):
            _spec_line(reading, spec)
    last = max(reversed(reading.blocks), key=_failures) if reading.blocks else None
    spoof: tuple[str, ...] = ()
    if len(reading.blocks) > 1:
        spoof = (f"{len(reading.blocks)} node summary blocks; node prints one",)
    return ParseResult(
        counts=_counts(last) if last is not None else None,
        summaries=len(reading.blocks),
        summary_sequence=tuple(_counts(block) for block in reading.blocks),
        tests=tuple(reading.tests),
        build_failed=reading.file_failed and "SyntaxError" in text,
        usage_error=usage_error(None, text),
        notes=_notes(last) if last is not None else unread_reporter(text),
        spoof_evidence=spoof,
        incomplete=tuple(reading.incomplete),
    )
