"""The `exit-code` parser: the command's exit status is the whole result.

For checks that are not test runners (`python -m compileall`, a linter, a typecheck, a
build): no tests are expected, and the output never changes the verdict.
`rig.sample.verdict.decide` turns exit 0 into PASS and any other status into FAIL
check_failed, except 126/127 (the command itself was not found or not executable: a rig
error). What the reason says is read here: the last lines of the output, and the number
of errors where the tool prints one (`Found 3 errors in 2 files.` of tsc, mypy and ruff;
tsc without `--pretty`, as in a container with no terminal, prints only its
`file(3,5): error TS2322: ...` lines, which are counted).
"""

from __future__ import annotations

import re

from rig.parsers.base import ParseResult, output_lines, plain

LAST_LINES = 3
LINE_CHARS = 160
_FOUND = re.compile(r"^Found (\d{1,9}) errors?\b")
_TSC_ERROR = re.compile(r"(?:\(\d{1,9},\d{1,9}\): | - )error TS\d{1,6}: ")


def usage_error(exit_code: int | None, text: str) -> bool:
    """An arbitrary command has no known usage-error signal."""
    del exit_code, text
    return False


def _cut(line: str) -> str:
    """A line of the output as a reason shows it: what the code under test printed is
    the contestant's, so no control character (a bare CR, BEL, an OSC sequence's ESC
    that `plain` does not know) reaches a record, a terminal or a report; cut to size."""
    shown = "".join(c if c.isprintable() else " " for c in line)
    return shown if len(shown) <= LINE_CHARS else shown[:LINE_CHARS - 3] + "..."


def parse(text: str) -> ParseResult:
    """Nothing decides but the exit status; the last lines and an error count say why."""
    lines = [line.rstrip() for line in output_lines(plain(text)) if line.strip()]
    found = [int(m[1]) for line in lines if (m := _FOUND.match(line.strip()))]
    tsc = sum(1 for line in lines if _TSC_ERROR.search(line))
    errors = found[-1] if found else (tsc or None)
    return ParseResult(counts=None, expects_tests=False, errors=errors,
                       last_lines=tuple(_cut(line) for line in lines[-LAST_LINES:]))
