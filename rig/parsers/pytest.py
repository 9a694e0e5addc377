"""pytest terminal output: the final `N failed, M passed in 0.12s` line.

pytest prints exactly one summary line per run, as its last line. A second one was
printed by the code under test (captured stdout replayed in a failure report, an
`atexit` print): `summaries > 1` is a spoof, and `counts` is the most failing one.
Progress (`....F`) with no summary means the process ended mid-run (`os._exit` in the
code under test): `incomplete`. Exit codes: 0 ok, 1 failed, 2 interrupted (collection
errors: the code's failure), 3 internal error, 4 usage error, 5 no tests collected.
"""

from __future__ import annotations

import re

from rig.parsers.base import (
    Counts,
    ParseResult,
    TestCase,
    TestStatus,
    contains_any,
    most_failing,
    plain,
)

USAGE_EXIT_CODES = frozenset({4})
NO_TESTS_EXIT_CODES = frozenset({5})

_SUMMARY = re.compile(
    r"^(?:=+ )?(?P<body>no tests ran|\d+ [a-z]+(?:, \d+ [a-z]+)*)"
    r" in \d+(?:\.\d+)?(?:s| seconds)(?: \(\d+:\d\d:\d\d\))?(?: =+)?$"
)
_PART = re.compile(r"(\d+) ([a-z]+)")
_WORDS = {
    "passed": "passed",
    "xpassed": "passed",
    "failed": "failed",
    "skipped": "skipped",
    "xfailed": "skipped",
    "error": "errors",
    "errors": "errors",
    "deselected": "",
    "warning": "",
    "warnings": "",
    "rerun": "",
}
_VERBOSE = re.compile(
    r"^(?P<id>\S+::.+?) (?P<st>PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)"
    r"(?: \(.*\))?(?: +\[ *\d+%\])?$"
)
_SHORT = re.compile(r"^(?P<st>PASSED|FAILED|ERROR|XFAIL|XPASS) (?P<id>\S+::\S+)(?: - .*)?$")
_STATUS = {
    "PASSED": TestStatus.PASSED,
    "XPASS": TestStatus.PASSED,
    "FAILED": TestStatus.FAILED,
    "ERROR": TestStatus.ERROR,
    "SKIPPED": TestStatus.SKIPPED,
    "XFAIL": TestStatus.SKIPPED,
}
_SEVERITY = [TestStatus.PASSED, TestStatus.SKIPPED, TestStatus.FAILED, TestStatus.ERROR]
_BUILD_FAILED = ("error during collection", "errors during collection", "while loading conftest")
_USAGE = (
    "ERROR: usage:",
    "error: unrecognized arguments:",
    "ERROR: file or directory not found:",
    "ERROR: not found:",
)
_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")
_PROGRESS = re.compile(r"^(?:\S+\.py )?[.FEsxX]+(?: +\[ *\d+%\])?$|^collected \d+ items?")


def usage_error(exit_code: int | None, text: str) -> bool:
    """pytest rejected its command line: exit 4, or pytest's own usage message."""
    return exit_code in USAGE_EXIT_CODES or contains_any(text, _USAGE)


def summary_counts(line: str) -> Counts | None:
    """The counts of one pytest summary line, or None when `line` is not one."""
    match = _SUMMARY.match(line.strip())
    if match is None:
        return None
    found = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}
    for number, word in _PART.findall(match["body"]):
        if word not in _WORDS:
            return None
        if _WORDS[word]:
            found[_WORDS[word]] += int(number)
    return Counts(**found)


def _tests(lines: list[str]) -> tuple[TestCase, ...]:
    status: dict[str, TestStatus] = {}
    for line in lines:
        match = _VERBOSE.match(line) or _SHORT.match(line)
        if match is None:
            continue
        new = _STATUS[match["st"]]
        old = status.get(match["id"], new)
        status[match["id"]] = max(old, new, key=_SEVERITY.index)
    return tuple(TestCase(test_id, st) for test_id, st in status.items())


def _notes(text: str, build_failed: bool) -> tuple[str, ...]:
    if not build_failed:
        return ()
    missing = sorted(set(_MISSING_MODULE.findall(text)))
    if not missing:
        return ()
    return (
        f"collection failed on missing module(s) {', '.join(missing)}: if the image should "
        "provide them, this is a rig fault, not the code's",
    )


def _incomplete(lines: list[str], found: list[Counts], text: str) -> tuple[str, ...]:
    """pytest began running tests and never printed its summary (nor an internal error)."""
    if found or "INTERNALERROR" in text:
        return ()
    if not any(_PROGRESS.match(line) or _VERBOSE.match(line) for line in lines):
        return ()
    return ("pytest started running tests and never printed its summary line",)


def parse(text: str) -> ParseResult:
    """Read pytest's summary line(s), per-test lines (-v / -rA) and failure markers."""
    text = plain(text)
    lines = text.splitlines()
    found = [c for c in (summary_counts(line) for line in lines) if c is not None]
    build_failed = contains_any(text, _BUILD_FAILED)
    spoof: tuple[str, ...] = ()
    if len(found) > 1:
        spoof = (f"{len(found)} pytest summary lines; pytest prints one",)
    return ParseResult(
        counts=most_failing(found),
        summaries=len(found),
        tests=_tests(lines),
        build_failed=build_failed,
        usage_error=usage_error(None, text),
        notes=_notes(text, build_failed),
        spoof_evidence=spoof,
        incomplete=_incomplete(lines, found, text),
        summary_sequence=tuple(found),
    )
