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
    bounded,
    contains_any,
    one_summary,
    output_lines,
    plain,
    word_counts,
)

_SUMMARY = re.compile(r"^Tests:\s+(?P<body>(?:\d{1,9} [a-z]+, )*\d{1,9} total)\s*$")
_FILE = re.compile(r"^ ?(?:PASS|FAIL) +(?P<file>\S+)$")
_TEST = re.compile(r"^(?P<indent> +)(?P<mark>✓|✕|○ skipped|✎ todo) (?P<rest>.+)$")
_DURATION = re.compile(r" \(\d+ m?s\)")  # ` (12 ms)` after the name, cut by hand (linear)
_MARKS = {"✓": TestStatus.PASSED, "✕": TestStatus.FAILED}
_SEP = " \u203a "  # SINGLE RIGHT-POINTING ANGLE QUOTATION MARK, as in Jest's failure titles
_BUILD_FAILED = ("● Test suite failed to run",)
_NO_TESTS = (  # the second with --passWithNoTests
    "No tests found, exiting with code 1",
    "No tests found, exiting with code 0",
)
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


def _name(rest: str) -> str:
    r"""The test name before a trailing ` (12 ms)`, as `(?P<name>.+?)(?: \(\d+ m?s\))?$`."""
    cut = rest.rfind(" (")
    return rest[:cut] if cut > 0 and _DURATION.fullmatch(rest, cut) else rest


def _kept(groups: list[str], depth: int) -> int:
    """How many of `groups` a line at `depth` sits under: `len(groups[:depth])`."""
    return len(range(len(groups))[:depth])


def _tests(lines: list[str]) -> tuple[TestCase, ...]:
    """Per-test marks in the listing under each `PASS|FAIL file` line (default reporter).

    `paths[k]` is `file SEP group0 SEP ... SEP groupk`, `bounded`, built once per describe
    line (not once per test), so a deep or long describe path costs linear time.
    """
    cases: list[TestCase] = []
    file = ""
    paths: list[str] = []
    for line in lines:
        stripped = line.lstrip()
        if header := _FILE.match(line):
            file, paths = bounded(header["file"]), []
        elif not stripped or stripped[0] == "●":
            file = ""
        elif not file:
            continue
        elif test := _TEST.match(line):
            kept = _kept(paths, len(test["indent"]) // 2 - 1)
            status = _MARKS.get(test["mark"], TestStatus.SKIPPED)
            prefix = paths[kept - 1] if kept else file
            cases.append(TestCase(f"{prefix}{_SEP}{_name(test['rest'])}", status))
        else:
            kept = _kept(paths, (len(line) - len(stripped)) // 2 - 1)
            del paths[kept:]
            paths.append(bounded(f"{paths[-1] if paths else file}{_SEP}{stripped.rstrip()}"))
    return tuple(cases)


_NOT_A_TEST = ("Test suite failed to run", "Console", "Validation Error",
               "Unrecognized CLI Parameter", "Invalid testPattern")


def _failures(lines: list[str], listed: tuple[TestCase, ...]) -> tuple[TestCase, ...]:
    """The `● describe SEP name` title of each failed test that the listing does not
    already hold (Jest lists per-test marks only when one test file ran)."""
    failed = [case.id for case in listed if case.status is TestStatus.FAILED]
    seen = {*failed, *(m.partition(_SEP)[2] for m in failed)}  # `file SEP title` -> title
    found: list[TestCase] = []
    for line in lines:
        if not line.startswith("  ● ") or line.startswith("   "):
            continue
        title = bounded(line[4:].strip())
        if title.startswith(_NOT_A_TEST) or title in seen:
            continue
        seen.add(title)
        found.append(TestCase(title, TestStatus.FAILED))
    return tuple(found)


def parse(text: str) -> ParseResult:
    """Read Jest's `Tests:` line(s), its test listing and its suite failures."""
    text = plain(text)
    lines = output_lines(text)
    counts, found, spoof = one_summary(lines, text, _SUMMARY, word_counts, _NO_TESTS,
                                       "Jest `Tests:`")
    listed = _tests(lines)
    return ParseResult(
        counts=counts,
        summaries=len(found),
        summary_sequence=found,
        tests=listed + (_failures(lines, listed) if "  ● " in text else ()),
        build_failed=contains_any(text, _BUILD_FAILED),
        usage_error=usage_error(None, text),
        spoof_evidence=spoof,
    )
