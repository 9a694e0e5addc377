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
    output_lines,
    plain,
)

USAGE_EXIT_CODES = frozenset({4})
NO_TESTS_EXIT_CODES = frozenset({5})

_SUMMARY = re.compile(
    r"^(?:=+ )?(?P<body>no tests ran|\d{1,9} [a-z]+(?:, \d{1,9} [a-z]+)*)"
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
# A verbose line `ID STATUS[ (reason)][ +[ NN%]]` (ID = `\S+::.+`, the first STATUS that
# fits) and a short-summary line `STATUS ID[ - message]` (ID = `\S+::\S+`) are read by
# hand: as regexes (`\S+::.+?` before a status) they take quadratic time on one long line.
_VERBOSE_STATUS = re.compile(r" (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?= |$)")
_SHORT_STATUSES = frozenset({"PASSED", "FAILED", "ERROR", "XFAIL", "XPASS"})
_LEADING = re.compile(r"\S+")
_PERCENT = re.compile(r" *\d+%\]")
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


def _percent_start(line: str) -> int | None:
    """Where the trailing ` +[ *NN%]` progress of a verbose line starts, if it has one."""
    if not line.endswith("%]"):
        return None
    bracket = line.rfind("[")
    if bracket < 1 or not _PERCENT.fullmatch(line, bracket + 1):
        return None
    start = len(line[:bracket].rstrip(" "))
    return start if start < bracket else None


def _fits(line: str, status: re.Match[str] | None, ends: tuple[int, ...]) -> bool:
    """After `status` comes nothing or ` (reason)`, up to one of `ends`."""
    if status is None:
        return False
    after = status.end()
    return any(
        end == after
        or (end - after >= 3 and line.startswith(" (", after) and line[end - 1] == ")")
        for end in ends
    )


def _verbose(line: str) -> tuple[str, str] | None:
    r"""(id, status) of a `-v` line, or None; linear in the line's length.

    The same reading as the regex `^\S+::.+? STATUS( \(.*\))?( +\[ *\d+%\])?$`, whose
    greedy `\S+::` takes the LAST `::` of the leading word that leaves a match: a word
    ending in `::` is followed by its status only when an earlier `::` exists and no
    later status fits.
    """
    lead = _LEADING.match(line)
    word_end = lead.end() if lead else 0
    first = line.find("::", 1, word_end)
    if first == -1:
        return None
    percent = _percent_start(line)
    ends = (len(line),) if percent is None else (len(line), percent)
    word_ends_in_colons = word_end - 2 >= 1 and line.startswith("::", word_end - 2)
    start = word_end + 1 if word_ends_in_colons else word_end
    status = next((m for m in _VERBOSE_STATUS.finditer(line, start) if _fits(line, m, ends)),
                  None)
    if status is None and word_ends_in_colons and first < word_end - 2:
        status = _VERBOSE_STATUS.match(line, word_end)
        status = status if _fits(line, status, ends) else None
    return None if status is None else (line[: status.start()], status[1])


def _short(line: str) -> tuple[str, str] | None:
    """(id, status) of a short-summary (`-rA`) line, or None; linear in its length."""
    status, space, rest = line.partition(" ")
    if status not in _SHORT_STATUSES or not space:
        return None
    test_id, space, message = rest.partition(" ")
    if space and not message.startswith("- "):
        return None
    colons = test_id.find("::", 1)
    if colons == -1 or colons + 2 >= len(test_id) or not _LEADING.fullmatch(test_id):
        return None
    return test_id, status


def _tests(lines: list[str]) -> tuple[TestCase, ...]:
    status: dict[str, TestStatus] = {}
    for line in lines:
        found = _verbose(line) or _short(line)
        if found is None:
            continue
        test_id, word = found
        new = _STATUS[word]
        old = status.get(test_id, new)
        status[test_id] = max(old, new, key=_SEVERITY.index)
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


_COLLECTING = re.compile(r"^_+ ERROR collecting (.{1,300}?) _+$")


def _collection_errors(lines: list[str]) -> tuple[str, ...]:
    """Each module pytest could not collect, with the first line of its error (a marker
    the pinned ini does not declare, an import that failed): at most 3."""
    found: list[str] = []
    for at, line in enumerate(lines):
        match = _COLLECTING.match(line)
        if match is None:
            continue
        first = next((n.strip() for n in lines[at + 1:at + 4] if n.strip()), "")
        found.append(f"{match.group(1)}: {first[:200]}".rstrip(": "))
        if len(found) == 3:
            break
    return tuple(found)


def _incomplete(lines: list[str], found: list[Counts], text: str) -> tuple[str, ...]:
    """pytest began running tests and never printed its summary (nor an internal error)."""
    if found or "INTERNALERROR" in text:
        return ()
    if not any(_PROGRESS.match(line) or _verbose(line) for line in lines):
        return ()
    return ("pytest started running tests and never printed its summary line",)


def parse(text: str) -> ParseResult:
    """Read pytest's summary line(s), per-test lines (-v / -rA) and failure markers."""
    text = plain(text)
    lines = output_lines(text)
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
        build_errors=_collection_errors(lines) if build_failed else (),
        spoof_evidence=spoof,
        incomplete=_incomplete(lines, found, text),
        summary_sequence=tuple(found),
    )
