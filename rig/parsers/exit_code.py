"""The `exit-code` parser: the command's exit status is the whole result.

For checks that are not test runners (`python -m compileall`, a linter, a build): no
tests are expected, nothing in the output is read. `rig.verdict.decide` turns exit 0
into PASS and any other status into FAIL, except 126/127 (the command itself was not
found or not executable: a rig error).
"""

from __future__ import annotations

from rig.parsers.base import ParseResult


def usage_error(exit_code: int | None, text: str) -> bool:
    """An arbitrary command has no known usage-error signal."""
    del exit_code, text
    return False


def parse(text: str) -> ParseResult:
    """Nothing to read: the exit status decides."""
    del text
    return ParseResult(counts=None, expects_tests=False)
