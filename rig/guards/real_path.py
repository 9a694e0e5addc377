"""The real path: which of the app's endpoints a browser sample's flow really reached.

The rig's browser plugin (`rig/guards/insample/browser_plugin/`, inside the browser's
container) writes one JSON line per request the page made to `requests.jsonl`: method,
URL, origin, path, status, and who answered it (`AnsweredBy`). This module reads those
lines back and decides a criterion's `expect_requests`, such as `POST /api/horizon`:

- it is met only by an answer **from the app's server** (a request to the app's origin
  that went to the network and came back), for that method and exactly that path, with a
  2xx status unless the expectation names another (`POST /api/horizon 400`, or a class,
  `POST /api/horizon 4xx`);
- a response a service worker produced, or the page itself (a route's fulfilment, a
  cache, a data: URL), never counts; nor does a request that failed or that the rig
  blocked, nor one to another origin.

The three ways a page passes a plain browser test without the real path (issue 22) read
here as: no request at all (the answer computed in the page), the server's 500 (and a
made-up result shown), a service worker's 200 (`service_worker`; with service workers
blocked it never registers and the POST reaches the server).

**Each test's own flow.** The expectations hold for the sample (some test reached each
endpoint) and for **every test of the criterion that passed**, on the requests made while
that test ran (the plugin's `tests.jsonl` names each test, its outcome and its own
`@pytest.mark.expect_requests`, which replaces the criterion's for that test; an empty
marker: that test need reach none). So a page that calls the server for the values it
can answer and makes up the rest (the UI's maximum computed in the page, the others sent)
is `not_real_path` by the test whose flow skipped the server, though some test reached
it. That the answer shown is the server's answer, and for the values typed, is the
criterion's to assert (docs/browser.md: bind the answer): a page that sends a request
the server can answer and shows its own result meets every expectation here.

Pure: text in, typed findings out. The in-sample writer cannot import this module (it
runs with the standard library, pytest and Playwright only): the format is pinned on
both sides by `tests/unit/test_real_path.py`.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from runner.manifest.expectation import Expectation, ExpectationError, parse_expectation

__all__ = ["NOT_ASKED", "REQUESTS_FILE", "TESTS_FILE", "AnsweredBy", "Decided",
           "ExpectationFinding", "RequestRecord", "Requests", "TestFlow", "check", "decide",
           "origin_of", "read_requests", "read_tests"]

FORMAT = 1  # of a request line; the plugin writes the same number
REQUESTS_FILE = "requests.jsonl"  # in the plugin's output directory
TESTS_FILE = "tests.jsonl"  # each test that ran, its outcome and its own expectations
REQUEST = "request"  # a line's `kind`
TEST = "test"
TRUNCATED = "truncated"  # the plugin's last line when its cap dropped records

class AnsweredBy(enum.StrEnum):
    """Who produced a request's response, as the browser reported it."""

    server = "server"                  # the network: a connection answered it
    service_worker = "service_worker"  # a service worker's fetch handler
    page = "page"                      # no network: a route's fulfilment, a cache, data:
    none = "none"                      # no response: the request failed or was blocked


@dataclass(frozen=True)
class RequestRecord:
    """One request the page made, as the plugin recorded it."""

    test: str
    method: str
    url: str
    origin: str
    path: str
    status: int | None
    answered_by: AnsweredBy
    resource_type: str = ""
    failure: str | None = None
    blocked: bool = False

    def shown(self) -> str:
        status = "no answer" if self.status is None else str(self.status)
        how = f" ({self.failure})" if self.failure else ""
        return f"{self.method} {self.origin}{self.path}: {status} by {self.answered_by}{how}"


@dataclass(frozen=True)
class Requests:
    """Every request line read back, and how many lines were not one (`malformed`) or
    were dropped by the plugin's cap (`dropped`)."""

    records: tuple[RequestRecord, ...]
    malformed: int = 0
    dropped: int = 0


def origin_of(url: str) -> str:
    """`scheme://host[:port]`, lower-cased, without the scheme's default port."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "https": 443}.get(scheme)
    return f"{scheme}://{host}" + ("" if port is None or port == default else f":{port}")


def read_requests(text: str) -> Requests:
    """The request lines of a `requests.jsonl`; other kinds are skipped, lines that do
    not read as a request are counted, never trusted."""
    records: list[RequestRecord] = []
    malformed = dropped = 0
    for data in _json_lines(text):
        if isinstance(data, dict) and data.get("kind") == TRUNCATED:
            dropped += _count(data.get("dropped"))
            continue
        record = _record(data)
        if record is None:
            malformed += 1
        else:
            records.append(record)
    return Requests(tuple(records), malformed, dropped)


_UNREADABLE = object()  # a line that is not JSON


def _json_lines(text: str) -> Iterator[object]:
    """Each non-blank line of a JSON-lines file, parsed (`_UNREADABLE` when it is not
    JSON: the readers count it, never trust it)."""
    for line in text.splitlines():
        if line.strip():
            try:
                yield json.loads(line)
            except ValueError:
                yield _UNREADABLE


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _record(data: object) -> RequestRecord | None:
    if not isinstance(data, dict) or data.get("kind") != REQUEST or data.get(
            "format") != FORMAT:
        return None
    texts = [data.get(key) for key in ("test", "method", "url", "origin", "path",
                                       "resource_type")]
    status, failure, blocked = data.get("status"), data.get("failure"), data.get("blocked")
    if not all(isinstance(t, str) for t in texts) or not isinstance(blocked, bool) or not (
            status is None or (isinstance(status, int) and not isinstance(status, bool))) \
            or not (failure is None or isinstance(failure, str)):
        return None
    try:
        answered = AnsweredBy(str(data.get("answered_by")))
    except ValueError:
        return None
    test, method, url, origin, path, kind = (str(t) for t in texts)
    return RequestRecord(test, method, url, origin, path, status, answered, kind, failure,
                         blocked)


@dataclass(frozen=True)
class TestFlow:
    """One test that ran, as the plugin recorded it: its outcome and its own
    expectations (None: the criterion's)."""

    test: str
    outcome: str
    expect_requests: tuple[str, ...] | None


def read_tests(text: str) -> tuple[tuple[TestFlow, ...], int]:
    """The test lines of a `tests.jsonl`, and how many lines were not one."""
    flows: list[TestFlow] = []
    malformed = 0
    for data in _json_lines(text):
        flow = _flow(data)
        if flow is None:
            malformed += not (isinstance(data, dict) and data.get("kind") == TRUNCATED)
        else:
            flows.append(flow)
    return tuple(flows), malformed


def _flow(data: object) -> TestFlow | None:
    if not isinstance(data, dict) or data.get("kind") != TEST or data.get("format") != FORMAT:
        return None
    test, outcome, expected = data.get("test"), data.get("outcome"), data.get(
        "expect_requests")
    if not isinstance(test, str) or not isinstance(outcome, str) or not (
            expected is None or (isinstance(expected, list)
                                 and all(isinstance(e, str) for e in expected))):
        return None
    return TestFlow(test, outcome, None if expected is None else tuple(expected))


@dataclass(frozen=True)
class ExpectationFinding:
    """One expectation against the records: met or not, the records that met it, the
    ones for the same method and path that did not, and a sentence saying which (`test`:
    a test's own flow; empty: the sample's)."""

    expectation: Expectation
    met: bool
    matched: tuple[RequestRecord, ...]
    near: tuple[RequestRecord, ...]
    detail: str
    test: str = ""


def check(expectations: Iterable[Expectation], records: Iterable[RequestRecord],
          origin: str) -> tuple[ExpectationFinding, ...]:
    """Each expectation decided on the records of the app at `origin` (the base URL)."""
    app = origin_of(origin)
    mine = tuple(r for r in records if origin_of(r.origin) == app)
    return tuple(_finding(e, mine) for e in expectations)


def _finding(expectation: Expectation, records: tuple[RequestRecord, ...],
             test: str = "") -> ExpectationFinding:
    same = tuple(r for r in records
                 if r.method == expectation.method and (r.path or "/") == expectation.path)
    matched = tuple(r for r in same if _meets(expectation, r))
    near = tuple(r for r in same if r not in matched)
    named = f"{expectation} in {test}" if test else str(expectation)
    if matched:
        detail = (f"{named}: {len(matched)} answer(s) from the app's server "
                  f"({', '.join(sorted({str(r.status) for r in matched}))})")
    elif not near:
        detail = f"{named}: never requested by the page"
    else:
        shown = "; ".join(r.shown() for r in near[:3])
        more = f" and {len(near) - 3} more" if len(near) > 3 else ""
        detail = f"{named}: no matching answer from the app's server: {shown}{more}"
    return ExpectationFinding(expectation, bool(matched), matched, near, detail, test)


def check_tests(expectations: Iterable[Expectation], flows: Iterable[TestFlow],
                records: Iterable[RequestRecord], origin: str,
                criterion: str) -> tuple[ExpectationFinding, ...]:
    """Each passed test of the criterion file `criterion` (its ids begin `criterion::`;
    the rig's canaries are other files) decided on its own requests: its marker's
    expectations, else `expectations`. Only what a test did not meet is a finding."""
    app = origin_of(origin)
    default = tuple(expectations)
    found: list[ExpectationFinding] = []
    for flow in flows:
        if flow.outcome != "passed" or not flow.test.startswith(f"{criterion}::"):
            continue
        own = default if flow.expect_requests is None else tuple(
            parse_expectation(e) for e in flow.expect_requests)
        mine = tuple(r for r in records if r.test == flow.test and origin_of(r.origin) == app)
        found += [f for f in (_finding(e, mine, flow.test) for e in own) if not f.met]
    return tuple(found)


def _meets(expectation: Expectation, record: RequestRecord) -> bool:
    return (record.answered_by is AnsweredBy.server and record.failure is None
            and not record.blocked and expectation.accepts(record.status))


@dataclass(frozen=True)
class Decided:
    """A criterion's expectations decided on one sample's requests: each finding, and
    how many lines were not a request (`malformed`) or were left out by the plugin's cap
    (`dropped`): neither ever meets an expectation."""

    findings: tuple[ExpectationFinding, ...] = ()
    malformed: int = 0
    dropped: int = 0

    @property
    def unmet(self) -> tuple[ExpectationFinding, ...]:
        return tuple(f for f in self.findings if not f.met)

    def detail(self) -> str:
        """What was not met, and what the records lacked."""
        found = "; ".join(f.detail for f in self.unmet)
        lost = [f"{n} {what}" for n, what in ((self.malformed, "unreadable request line(s)"),
                                              (self.dropped, "request(s) past the record's cap"))
                if n]
        return found + (f" ({', '.join(lost)})" if lost else "")


NOT_ASKED = Decided()


def decide(expectations: Iterable[str], data: bytes, base_url: str, tests: bytes | None,
           criterion: str) -> Decided:
    """`expect_requests` decided on a sample's `requests.jsonl` (`data`) for the app at
    `base_url`: for the sample, and for each passed test of the file `criterion` on its
    own requests (`tests`: the plugin's `tests.jsonl`, which it always writes; None, as
    when it is missing: no test's flow can be shown, so any expectation is unmet)."""
    read = read_requests(data.decode("utf-8", errors="replace"))
    asked = [parse_expectation(e) for e in expectations]
    found = check(asked, read.records, base_url)
    if asked and tests is None:
        nothing = ExpectationFinding(asked[0], False, (), (),
                                     f"no test's own flow was recorded ({TESTS_FILE} missing)")
        return Decided((*found, nothing), read.malformed, read.dropped)
    flows, malformed = read_tests(
        "" if tests is None else tests.decode("utf-8", errors="replace"))
    try:
        per_test = check_tests(asked, flows, read.records, base_url, criterion)
    except ExpectationError as error:
        per_test = (ExpectationFinding(Expectation("?", "/"), False, (), (),
                                       f"a test's expect_requests marker: {error}"),)
    # What no test met is said once, for the sample, not again for every test.
    unmet = {f.expectation for f in found if not f.met}
    return Decided(found + tuple(f for f in per_test if f.expectation not in unmet),
                   read.malformed + malformed, read.dropped)
