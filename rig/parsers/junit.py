"""JUnit XML from any runner (pytest --junitxml, vitest --reporter=junit, ...).

The counts come from the `<testcase>` elements themselves (a `<failure>` child is a
failure, `<error>` an error, `<skipped>` a skip, none a pass), not from the suites'
`tests=`/`failures=` attributes, which are checked against them (a mismatch is a note).
Several `<testsuite>` elements are normal: `summaries` counts them and `summed` is set.
The XML comes from the sandbox, so it is untrusted: a document with a DOCTYPE or an
entity declaration is refused (defusedxml is not available; expat would expand them).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from rig.parsers.base import Counts, ParseResult, TestCase, TestStatus, count_statuses

_FORBIDDEN = re.compile(r"<!(?:DOCTYPE|ENTITY)", re.IGNORECASE)
_START = re.compile(r"<\?xml|<testsuites?\b")
_CHILD_STATUS = {"failure": TestStatus.FAILED, "error": TestStatus.ERROR}
_BUILD_FAILED_MESSAGES = ("collection failure",)  # pytest's collection error
_DECLARED = re.compile(r"[0-9]{1,9}")  # a count: not `²` (isdigit), not 5,000 digits


def usage_error(exit_code: int | None, text: str) -> bool:
    """A report file cannot show a usage error: the runner's own output would."""
    del exit_code, text
    return False


def _status(case: ET.Element) -> TestStatus:
    for child in case:
        if child.tag in _CHILD_STATUS:
            return _CHILD_STATUS[child.tag]
    if case.find("skipped") is not None:
        return TestStatus.SKIPPED
    return TestStatus.PASSED


def _case_id(case: ET.Element) -> str:
    classname, name = case.get("classname", ""), case.get("name", "")
    return f"{classname}::{name}" if classname else name


def _declared(root: ET.Element) -> int | None:
    """The total the suites declare (`tests=`), or None when they do not say."""
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    values = [suite.get("tests") or "" for suite in suites]
    if not values or not all(_DECLARED.fullmatch(value) for value in values):
        return None
    return sum(int(value) for value in values)


def _refused(note: str) -> ParseResult:
    return ParseResult(counts=None, notes=(note,), summed=True)


def parse(text: str) -> ParseResult:
    """Count the `<testcase>` elements of one JUnit XML document."""
    if _FORBIDDEN.search(text):
        return _refused("JUnit XML with a DOCTYPE/ENTITY declaration refused (untrusted input)")
    start = _START.search(text)
    if start is None:
        return _refused("no JUnit XML document found")
    try:
        root = ET.fromstring(text[start.start() :])
    except ET.ParseError as error:
        return _refused(f"JUnit XML does not parse: {error}")
    if root.tag not in ("testsuites", "testsuite"):
        return _refused(f"root element is <{root.tag}>, not <testsuites>/<testsuite>")
    cases = root.iter("testcase")
    tests = tuple(TestCase(_case_id(case), _status(case)) for case in cases)
    counts: Counts = count_statuses(tests)
    declared = _declared(root)
    notes: tuple[str, ...] = ()
    if declared is not None and declared != counts.total:
        notes = (f"the suites declare {declared} tests but {counts.total} <testcase> are present",)
    messages = {el.get("message", "") for el in root.iter("error")}
    suites = 1 if root.tag == "testsuite" else len(root.findall("testsuite"))
    return ParseResult(
        counts=counts,
        summaries=suites,
        tests=tests,
        build_failed=any(m in messages for m in _BUILD_FAILED_MESSAGES),
        notes=notes,
        summed=True,
    )
