r"""The typed result every parser returns: text in, `ParseResult` out, nothing else.

`Counts` lives here (and is re-exported by `rig.sample.verdict`) so that parsers never import
the verdict rules and the verdict rules can import the parser registry without a cycle.

Every parser runs in time linear in its input, whatever the code under test prints
(tests/unit/test_parser_limits.py holds 1 MB adversarial lines to it): no pattern in
which two unbounded quantifiers can trade characters (`\S+::.+?`, `.+?( \(.*\))?$`);
such lines are read by hand. A count is at most 9 digits (`\d{1,9}`): a longer number
is nobody's test count, and `int()` of one is slow or refused. A qualifier repeated in
many test ids is `bounded`, so the ids cost no more than the lines they come from.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_TRUNCATED = re.compile(r"\[bakeoff: output truncated: \d+ bytes omitted\]")
QUALIFIER_MAX = 256


@dataclass(frozen=True)
class Counts:
    """Test counts read from a runner's own summary (never guessed from per-test lines)."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0

    @property
    def total(self) -> int:
        """Every test the runner reported, skipped ones included."""
        return self.passed + self.failed + self.skipped + self.errors

    @property
    def ran(self) -> int:
        """Tests that really executed: passed + failed + errors (skips did not run)."""
        return self.passed + self.failed + self.errors

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.passed + other.passed,
            self.failed + other.failed,
            self.skipped + other.skipped,
            self.errors + other.errors,
        )


class TestStatus(enum.StrEnum):
    """The status of one test case, as the runner printed it."""

    __test__ = False  # not a pytest test class

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    ERROR = "error"


# What joins a test's file or binary to its name in an id: pytest's and cargo's/go's
# `::`, jest's single right-pointing angle quote, vitest's verbose ` > `.
ID_SEPARATORS = ("::", " \u203a ", " > ")


@dataclass(frozen=True)
class TestCase:
    """One test case. `id` is qualified enough to be unique (cargo: `binary::path`)."""

    __test__ = False  # not a pytest test class

    id: str
    status: TestStatus


@dataclass(frozen=True)
class LocatedCase(TestCase):
    """A test case with the file that defined it, where the runner prints it (node's
    TAP `location`). A subclass: the other runners' cases stay two fields (a parser
    builds up to millions of them)."""

    where: str = ""


def where_of(case: TestCase) -> str:
    return case.where if isinstance(case, LocatedCase) else ""


@dataclass(frozen=True)
class ParseResult:
    """What a parser read from one sample's output.

    counts: the runner's summary (summed where the format has one per binary/package);
        None when no summary was found.
    summaries: how many summary lines/blocks were found.
    summary_sequence: the counts of EVERY summary line/block found, in output order, for
        the runners that print one (pytest, jest, vitest, node-test); () for the others.
    summed: True when several summaries are normal for this format (cargo binaries, go
        packages) and `counts` is their sum; False when more than one means a spoof.
    spoof_evidence: sentences naming output the runner cannot have printed itself
        (e.g. a cargo `test result:` line with no `running N tests` header before it).
    incomplete: sentences showing the test process ended before the runner could report
        all of it (`os._exit` in the code under test, a crashed cargo test binary).
    tests: per-test statuses where the output lists them, in output order.
    summary_sequence: the counts of every summary line/block, in output order (the
        single-summary runners: pytest, jest, vitest, node-test).
    build_failed: the code under test did not compile / import (the contestant's fault).
    usage_error: the text shows the runner rejected its command line (the rig's fault).
    notes: anything odd a reviewer should see; never changes the verdict by itself.
    expects_tests: False only for the `exit-code` parser.
    last_lines: the `exit-code` parser's last few lines of output (plain, each cut), for
        the reason of a failed check.
    empty_files: test files the runner found no test in (vitest's `No test suite found
        in file`): the run failed because of them, not because the code did not build.
    errors: the `exit-code` parser's count of errors where the tool prints one
        (`Found 3 errors` of tsc, mypy, ruff; tsc's `error TS2322:` lines).
    """

    counts: Counts | None
    summaries: int = 0
    tests: tuple[TestCase, ...] = ()
    build_failed: bool = False
    usage_error: bool = False
    notes: tuple[str, ...] = ()
    expects_tests: bool = True
    summed: bool = False
    spoof_evidence: tuple[str, ...] = ()
    incomplete: tuple[str, ...] = ()
    summary_sequence: tuple[Counts, ...] = ()  # every summary found, in output order
    last_lines: tuple[str, ...] = ()
    errors: int | None = None
    empty_files: tuple[str, ...] = ()
    # where a failed build or collection failed, and its first line ("tests/test_x.py:
    # 'slow' not found in `markers` configuration option"), for the reason: at most 3
    build_errors: tuple[str, ...] = ()
    # cargo's terse output (`-q`): the tests it names only in its failures list, FAILED;
    # read for the rig's canaries, never by id (the passing tests are not named)
    terse_failed: tuple[TestCase, ...] = ()


def count_statuses(tests: Sequence[TestCase]) -> Counts:
    """Counts of a list of test cases (for formats whose summary is the case list)."""
    by = {status: 0 for status in TestStatus}
    for case in tests:
        by[case.status] += 1
    return Counts(
        by[TestStatus.PASSED], by[TestStatus.FAILED], by[TestStatus.SKIPPED], by[TestStatus.ERROR]
    )


def most_failing(found: list[Counts]) -> Counts | None:
    """The summary to report when a run printed several: the one with the most failures.

    A single-summary runner that printed more than one was spoofed (the verdict says so);
    the code under test forges passes, not failures, so the most failing one is likeliest
    the runner's own. Ties go to the last one (runners print their summary last).
    """
    if not found:
        return None
    return max(reversed(found), key=lambda counts: counts.failed + counts.errors)


def plain(text: str) -> str:
    """`text` without ANSI colour/cursor sequences (`--color=yes`, FORCE_COLOR, a TTY)."""
    return _ANSI.sub("", text)


def output_lines(text: str) -> list[str]:
    """The lines of `text` without the marker the rig writes where it cut the middle out
    of a capped log (`[bakeoff: output truncated: N bytes omitted]`): head and tail read
    as if they were contiguous."""
    return [line for line in text.splitlines() if not _TRUNCATED.fullmatch(line)]


def bounded(qualifier: str) -> str:
    """`qualifier` (a binary label, package or describe path that prefixes many test
    ids) cut to QUALIFIER_MAX characters, so each id costs no more than its own line; a
    cut one ends with a hash of the whole, so two long qualifiers stay distinct."""
    if len(qualifier) <= QUALIFIER_MAX:
        return qualifier
    digest = hashlib.sha256(qualifier.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{qualifier[:QUALIFIER_MAX]}\u2026{digest}"


def contains_any(text: str, needles: tuple[str, ...]) -> bool:
    """True when any of `needles` occurs in `text`."""
    return any(needle in text for needle in needles)


def one_summary(lines: list[str], text: str, summary: re.Pattern[str],
                counts_of: Callable[[str], Counts], no_tests: tuple[str, ...],
                what: str) -> tuple[Counts | None, tuple[Counts, ...], tuple[str, ...]]:
    """For runners that print ONE summary line (`summary` captures its `body`): the
    most-failing of the lines found (a spoof cannot hide a failure), every line's counts
    in output order, and the spoof evidence when there was more than one."""
    found = [counts_of(m["body"]) for m in map(summary.match, lines) if m]
    counts = most_failing(found)
    if counts is None and contains_any(text, no_tests):
        counts = Counts()
    spoof = (f"{len(found)} {what} lines; the runner prints one",) if len(found) > 1 else ()
    return counts, tuple(found), spoof


_WORD_COUNT = re.compile(r"(\d+) ([a-z]+)")
_JS_FIELDS = {"passed": "passed", "failed": "failed", "skipped": "skipped", "todo": "skipped"}


def word_counts(body: str) -> Counts:
    """`N word` pairs of a JS runner's summary (jest, vitest): todo counts as skipped,
    words it does not count (`total`, `suites`) are ignored."""
    found = {"passed": 0, "failed": 0, "skipped": 0}
    for number, word in _WORD_COUNT.findall(body):
        if word in _JS_FIELDS:
            found[_JS_FIELDS[word]] += int(number)
    return Counts(**found)
