"""Vitest's summary: `      Tests  1 failed | 3 passed | 1 skipped | 1 todo (6)`.

Vitest prints one `Tests` line per run (`Tests  no tests` when a file failed to load);
the code under test can print a look-alike to stdout: more than one is a spoof, and the
counts come from the most failing one. Todo tests count as skipped. A `Failed Suites` section
(a test file that did not load or whose suite hook threw) is the code's build failure,
unless every failed suite is a file that defines no test (`No test suite found in file
PATH`): that is `empty_files`, not a build failure.
"""

from __future__ import annotations

import re

from rig.parsers.base import (
    ParseResult,
    TestCase,
    TestStatus,
    contains_any,
    one_summary,
    output_lines,
    plain,
    word_counts,
)
from rig.sample.tree import WORK

_SUMMARY = re.compile(
    r"^\s*Tests  (?P<body>no tests|(?:\d{1,9} [a-z]+ \| )*\d{1,9} [a-z]+ \(\d+\))\s*$"
)
_FAILED_MARK = "\u00d7"  # MULTIPLICATION SIGN: Vitest's mark of a failed test
_TEST = re.compile(f"^ +(?P<mark>[✓{_FAILED_MARK}↓]) (?P<rest>.+)$")
_DURATION = re.compile(r" \d+ms")  # ` 5ms` after the name, cut by hand (linear)
# A file's line `✓ test/x.test.mjs (6 tests | 2 skipped) 5ms` is not a test: its name
# holds `\(\d+ tests?( \|.*)?\)`, found by hand (as a regex search it is quadratic).
_FILE_COUNT = re.compile(r"\(\d+ tests?( \|)?")
_MARKS = {"✓": TestStatus.PASSED, _FAILED_MARK: TestStatus.FAILED, "↓": TestStatus.SKIPPED}
_BUILD_FAILED = re.compile(r"⎯ Failed Suites (\d{1,9}) ⎯")
_NO_SUITE = re.compile(r"^Error: No test suite found in file (?P<path>.+)$")
_NO_TESTS = (  # the second with --passWithNoTests
    "No test files found, exiting with code 1",
    "No test files found, exiting with code 0",
)
_USAGE = ("CACError: ", "Unknown option `")


def usage_error(exit_code: int | None, text: str) -> bool:
    """Vitest rejected its command line (its CLI parser, cac, threw). Text decides."""
    del exit_code
    return contains_any(text, _USAGE)


def _name(rest: str) -> str:
    r"""The test name before a trailing ` 5ms`, as `(?P<name>.+?)(?: \d+ms)?$`."""
    cut = rest.rfind(" ")
    return rest[:cut] if cut > 0 and _DURATION.fullmatch(rest, cut) else rest


def _is_file_line(name: str) -> bool:
    """`name` holds `(N tests)` or `(N tests | ...)` with a `)` somewhere after."""
    last_close = name.rfind(")")
    for count in _FILE_COUNT.finditer(name):
        if name.startswith(")", count.end()) or (count[1] and last_close >= count.end()):
            return True
    return False


def _tests(lines: list[str]) -> tuple[TestCase, ...]:
    cases = []
    for line in lines:
        test = _TEST.match(line)
        if test and not _is_file_line(name := _name(test["rest"])):
            cases.append(TestCase(name, _MARKS[test["mark"]]))
    return tuple(cases)


def parse(text: str) -> ParseResult:
    """Read Vitest's `Tests` line(s), its test marks and its suite failures."""
    text = plain(text)
    lines = output_lines(text)
    counts, found, spoof = one_summary(lines, text, _SUMMARY, word_counts, _NO_TESTS,
                                       "Vitest `Tests`")
    suites = _BUILD_FAILED.search(text)
    failed_suites = int(suites[1]) if suites else 0
    empty = tuple(dict.fromkeys(m["path"].removeprefix(WORK) for line in lines
                                if (m := _NO_SUITE.match(line))))
    return ParseResult(
        counts=counts,
        summaries=len(found),
        summary_sequence=found,
        tests=_tests(lines),
        build_failed=failed_suites > len(empty),
        empty_files=empty,
        usage_error=usage_error(None, text),
        spoof_evidence=spoof,
    )
