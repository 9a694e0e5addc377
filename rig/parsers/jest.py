"""Jest's summary: `Tests:       1 failed, 1 skipped, 1 todo, 3 passed, 6 total`.

Jest prints one `Tests:` line per run, at the start of a line (console output of the
code under test is indented under a `console.log` header, but `process.stdout.write`
is not): more than one is a spoof, and the counts come from the most failing one. Todo tests
count as skipped. `Test suite failed to run` (a test file that does not load, e.g. a
syntax error in the code it imports) is the code's build failure. Jest writes all of
this to stderr: capture it (`2>&1`).
"""

from __future__ import annotations

import re

from rig.parsers.base import (
    ParseResult,
    TestCase,
    TestStatus,
    contains_any,
    one_summary,
    plain,
    word_counts,
)

_SUMMARY = re.compile(r"^Tests:\s+(?P<body>(?:\d+ [a-z]+, )*\d+ total)\s*$")
_FILE = re.compile(r"^ ?(?:PASS|FAIL) +(?P<file>\S+)$")
_TEST = re.compile(r"^(?P<indent> +)(?P<mark>✓|✕|○ skipped|✎ todo) (?P<name>.+?)(?: \(\d+ m?s\))?$")
_MARKS = {"✓": TestStatus.PASSED, "✕": TestStatus.FAILED}
_SEP = " \u203a "  # SINGLE RIGHT-POINTING ANGLE QUOTATION MARK, as in Jest's failure titles
_BUILD_FAILED = ("● Test suite failed to run",)
_NO_TESTS = ("No tests found, exiting with code 1",)
_USAGE = (
    "● Unrecognized CLI Parameter",
    "● Invalid testPattern",
    "● Validation Error",
    "Error: Can't find a root directory",
    "Could not find a config file",
)


def usage_error(exit_code: int | None, text: str) -> bool:
    """Jest rejected its command line. Jest exits 1 for that and for failures: text decides."""
    del exit_code
    return contains_any(text, _USAGE)


def _tests(lines: list[str]) -> tuple[TestCase, ...]:
    """Per-test marks in the listing under each `PASS|FAIL file` line (default reporter)."""
    cases: list[TestCase] = []
    file = ""
    groups: list[str] = []
    for line in lines:
        if header := _FILE.match(line):
            file, groups = header["file"], []
        elif not line.strip() or line.lstrip().startswith("●"):
            file = ""
        elif file and (test := _TEST.match(line)):
            depth = len(test["indent"]) // 2 - 1
            status = _MARKS.get(test["mark"], TestStatus.SKIPPED)
            cases.append(TestCase(_SEP.join([file, *groups[:depth], test["name"]]), status))
        elif file:
            depth = (len(line) - len(line.lstrip())) // 2 - 1
            groups = [*groups[:depth], line.strip()]
    return tuple(cases)


def parse(text: str) -> ParseResult:
    """Read Jest's `Tests:` line(s), its test listing and its suite failures."""
    text = plain(text)
    lines = text.splitlines()
    counts, summaries, spoof = one_summary(lines, text, _SUMMARY, word_counts, _NO_TESTS,
                                           "Jest `Tests:`")
    return ParseResult(
        counts=counts,
        summaries=summaries,
        tests=_tests(lines),
        build_failed=contains_any(text, _BUILD_FAILED),
        usage_error=usage_error(None, text),
        spoof_evidence=spoof,
    )
