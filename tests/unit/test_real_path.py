"""The real path (issue 22): `expect_requests` decided on the browser plugin's request
records. Only an answer from the app's server, for that method and path, with the status
asked for (2xx by default) meets an expectation; the three ways a page passes a plain
browser test without the real path (the answer computed in the page, the server's 500
behind a made-up result, a service worker's fake 200) never do. The records are the
plugin's own `request_record` lines, so the format is pinned on both sides."""

from __future__ import annotations

import json

import pytest

from rig.guards import real_path
from rig.guards.insample.browser_plugin import records as plugin_records
from rig.guards.real_path import AnsweredBy, RequestRecord
from runner.manifest.expectation import Expectation, ExpectationError, parse_expectation

APP = "http://localhost:4321"
POST = parse_expectation("POST /api/horizon")


def line(method: str, url: str, status: int | None, *, sw: bool = False,
         network: bool = True, failure: str | None = None, blocked: bool = False,
         test: str = "ui/test_cap.py::test_cap[chromium-90]") -> str:
    return json.dumps(plugin_records.request_record(
        test, method, url, "fetch", status, sw, network, failure, blocked))


def records(*lines: str) -> tuple[RequestRecord, ...]:
    read = real_path.read_requests("\n".join(lines) + "\n")
    assert (read.malformed, read.dropped) == (0, 0)
    return read.records


def finding(*lines: str, expectation: Expectation = POST) -> real_path.ExpectationFinding:
    (found,) = real_path.check([expectation], records(*lines), APP)
    return found


@pytest.mark.parametrize(("text", "expected"), [
    ("POST /api/horizon", Expectation("POST", "/api/horizon", "2xx")),
    ("POST /api/horizon 400", Expectation("POST", "/api/horizon", "400")),
    ("GET /api/items/7 4xx", Expectation("GET", "/api/items/7", "4xx")),
    ("  DELETE /  ", Expectation("DELETE", "/", "2xx")),
])
def test_an_expectation_reads_as_method_path_and_status(text: str,
                                                        expected: Expectation) -> None:
    assert parse_expectation(text) == expected


@pytest.mark.parametrize("text", ["post /api/horizon", "POST api/horizon", "POST /x 600",
                                  "POST /x 2XX", "POST /x 20", "", "POST  /x", "/api/horizon",
                                  "POST /a b"])
def test_an_expectation_that_does_not_read_is_refused_with_the_form_to_write(text: str) -> None:
    with pytest.raises(ExpectationError, match=r"is not METHOD /path \[STATUS\]"):
        parse_expectation(text)


def test_a_status_class_or_an_exact_status_is_what_is_accepted() -> None:
    two = Expectation("POST", "/x")
    assert [two.accepts(s) for s in (200, 204, 299, 302, 400, 500, None)] == [
        True, True, True, False, False, False, False]
    exact = Expectation("POST", "/x", "400")
    assert [exact.accepts(s) for s in (400, 404, 200)] == [True, False, False]


def test_a_2xx_answer_from_the_apps_server_meets_the_expectation() -> None:
    found = finding(line("GET", f"{APP}/", 200), line("POST", f"{APP}/api/horizon", 200))
    assert (found.met, [r.status for r in found.matched], found.near) == (True, [200], ())
    assert found.detail == "POST /api/horizon 2xx: 1 answer(s) from the app's server (200)"


def test_an_answer_computed_in_the_page_is_not_the_real_path() -> None:
    """The client-side 'fix': the page shows the result and never calls the API."""
    found = finding(line("GET", f"{APP}/", 200), line("GET", f"{APP}/app.js", 200))
    assert (found.met, found.matched, found.near) == (False, (), ())
    assert found.detail == "POST /api/horizon 2xx: never requested by the page"


def test_the_servers_500_behind_a_made_up_result_is_not_the_real_path() -> None:
    found = finding(line("POST", f"{APP}/api/horizon", 500))
    assert not found.met
    assert found.detail == ("POST /api/horizon 2xx: no matching answer from the app's server: "
                            f"POST {APP}/api/horizon: 500 by server")


def test_a_service_workers_fake_200_is_not_the_real_path() -> None:
    found = finding(line("POST", f"{APP}/api/horizon", 200, sw=True, network=False))
    assert not found.met
    assert [r.answered_by for r in found.near] == [AnsweredBy.service_worker]
    assert found.detail.endswith("200 by service_worker")


@pytest.mark.parametrize(("record", "why"), [
    (line("POST", f"{APP}/api/horizon", 200, network=False), "200 by page"),
    (line("POST", f"{APP}/api/horizon", None, failure="net::ERR_BLOCKED_BY_CLIENT",
          blocked=True), "no answer by none (net::ERR_BLOCKED_BY_CLIENT)"),
    (line("POST", f"{APP}/api/horizon", 200, failure="net::ERR_ABORTED"),
     "200 by server (net::ERR_ABORTED)"),
])
def test_an_answer_the_page_made_or_a_request_that_failed_never_counts(record: str,
                                                                       why: str) -> None:
    found = finding(record)
    assert not found.met and found.detail.endswith(why)


@pytest.mark.parametrize("url", ["http://localhost:4322/api/horizon",
                                 "http://127.0.0.1:4321/api/horizon",
                                 "https://localhost:4321/api/horizon"])
def test_another_origins_answer_never_counts(url: str) -> None:
    found = finding(line("POST", url, 200))
    assert not found.met
    assert found.detail == "POST /api/horizon 2xx: never requested by the page"


@pytest.mark.parametrize("url", [f"{APP}/api/horizon/", f"{APP}/api/horizons",
                                 f"{APP}/API/horizon", f"{APP}/api/%68orizon"])
def test_the_path_is_matched_exactly(url: str) -> None:
    assert not finding(line("POST", url, 200)).met


def test_the_query_string_is_not_part_of_the_path_and_the_method_must_match() -> None:
    assert finding(line("POST", f"{APP}/api/horizon?days=90", 201)).met
    assert not finding(line("GET", f"{APP}/api/horizon", 200)).met


def test_a_named_status_is_met_by_that_status_only() -> None:
    rejected = parse_expectation("POST /api/horizon 422")
    assert finding(line("POST", f"{APP}/api/horizon", 422), expectation=rejected).met
    assert not finding(line("POST", f"{APP}/api/horizon", 200), expectation=rejected).met


def test_each_expectation_is_decided_on_its_own() -> None:
    read = records(line("GET", f"{APP}/api/passkeys/options", 200),
                   line("POST", f"{APP}/api/passkeys/verify", 401))
    found = real_path.check([parse_expectation("GET /api/passkeys/options"),
                             parse_expectation("POST /api/passkeys/verify")],
                            read, APP + "/")
    assert [f.met for f in found] == [True, False]


def test_lines_that_are_not_request_records_are_counted_never_trusted() -> None:
    good = line("POST", f"{APP}/api/horizon", 200)
    forged = [json.dumps({**json.loads(good), "format": 2}),
              json.dumps({**json.loads(good), "status": True}),
              json.dumps({**json.loads(good), "answered_by": "the server, honestly"}),
              json.dumps({**json.loads(good), "blocked": "no"}),
              json.dumps(["POST", "/api/horizon", 200]), "{not json", "5 passed in 0.01s"]
    marker = json.dumps({"format": 1, "kind": "truncated", "dropped": 12})
    console = json.dumps({"format": 1, "kind": "console", "text": "x"})
    read = real_path.read_requests("\n".join([good, *forged, console, marker]))
    assert (len(read.records), read.malformed, read.dropped) == (1, len(forged) + 1, 12)


def test_the_plugins_record_reads_back_as_the_same_facts() -> None:
    (record,) = records(line("POST", f"{APP}/api/horizon?x=1", 201, test="t::x"))
    assert record == RequestRecord(
        test="t::x", method="POST", url=f"{APP}/api/horizon?x=1", origin=APP,
        path="/api/horizon", status=201, answered_by=AnsweredBy.server,
        resource_type="fetch", failure=None, blocked=False)


@pytest.mark.parametrize(("url", "origin"), [
    ("http://LOCALHOST:80/x", "http://localhost"), ("https://a.b:443/", "https://a.b"),
    ("http://localhost:4321", "http://localhost:4321"), ("http://[::1]:8080/x", "http://[::1]:8080"),
    ("data:text/html,hi", "data://"), ("http://host:99999/", "http://host"),
])
def test_the_plugin_and_the_rig_agree_on_an_origin(url: str, origin: str) -> None:
    assert real_path.origin_of(url) == plugin_records.origin_of(url) == origin


def test_decide_reads_a_samples_requests_and_says_what_the_records_lacked() -> None:
    """What the verdict reads (`rig.guards.real_path.decide`): unmet expectations, and how many
    lines were not a request or were dropped by the plugin's cap (neither ever meets)."""
    from rig.guards.real_path import decide

    lines = (b'not json\n{"format": 1, "kind": "truncated", "dropped": 7}\n'
             b'{"format": 1, "kind": "request", "test": "t", "method": "POST", '
             b'"url": "http://localhost:8/api/horizon", "origin": "http://localhost:8", '
             b'"path": "/api/horizon", "status": 500, "answered_by": "server", '
             b'"resource_type": "fetch", "failure": null, "blocked": false}\n')
    tests = (json.dumps(plugin_records.test_record("test_cap.py::t", "passed", None))
             + "\n").encode()
    found = decide(["POST /api/horizon"], lines, "http://localhost:8", tests, "test_cap.py")
    assert (found.malformed, found.dropped, [f.met for f in found.findings]) == (1, 7, [False])
    assert found.detail() == (  # no test met it either: said once, for the sample
        "POST /api/horizon 2xx: no matching answer from the app's server: POST "
        "http://localhost:8/api/horizon: 500 by server (1 unreadable request line(s), 7 "
        "request(s) past the record's cap)")
    assert decide([], lines, "http://localhost:8", tests, "test_cap.py").unmet == ()


# -- each test's own flow ------------------------------------------------------------------

CAP = "test_cap.py::test_the_summary"


def flows(*tests: tuple[str, str, list[str] | None]) -> bytes:
    return "".join(json.dumps(plugin_records.test_record(*t)) + "\n" for t in tests).encode()


def decided(requests: list[str], tests: bytes | None,
            expectations: tuple[str, ...] = ("POST /api/horizon",)) -> real_path.Decided:
    return real_path.decide(expectations, ("\n".join(requests) + "\n").encode(), APP, tests,
                            "test_cap.py")


def test_every_passed_test_must_take_the_real_path_itself() -> None:
    """The varied client-side trick: the page sends what the server can answer (1, 45)
    and makes up the UI's maximum (90). Some test reached the server, so the sample's
    expectation is met; the test of 90 did not, so the flow is not the real path."""
    requests = [line("POST", f"{APP}/api/horizon", 200, test=f"{CAP}[1]"),
                line("POST", f"{APP}/api/horizon", 200, test=f"{CAP}[45]"),
                line("GET", f"{APP}/", 200, test=f"{CAP}[90]")]
    tests = flows((f"{CAP}[1]", "passed", None), (f"{CAP}[45]", "passed", None),
                  (f"{CAP}[90]", "passed", None))
    found = decided(requests, tests)
    assert [(f.met, f.test) for f in found.findings] == [(True, ""), (False, f"{CAP}[90]")]
    assert found.detail() == (f"POST /api/horizon 2xx in {CAP}[90]: never requested by "
                              "the page")
    honest = decided([*requests[:2], line("POST", f"{APP}/api/horizon", 200,
                                          test=f"{CAP}[90]")], tests)
    assert honest.unmet == () and [f.met for f in honest.findings] == [True]


def test_a_request_counts_for_the_test_that_was_running_only() -> None:
    """A 500 in the test of 90 is not made good by a 200 in the test of 45."""
    found = decided([line("POST", f"{APP}/api/horizon", 200, test=f"{CAP}[45]"),
                     line("POST", f"{APP}/api/horizon", 500, test=f"{CAP}[90]")],
                    flows((f"{CAP}[45]", "passed", None), (f"{CAP}[90]", "passed", None)))
    assert [f.detail for f in found.unmet] == [
        f"POST /api/horizon 2xx in {CAP}[90]: no matching answer from the app's server: "
        f"POST {APP}/api/horizon: 500 by server"]


def test_a_tests_marker_replaces_the_criterions_expectations_for_that_test() -> None:
    """A refusal test expects a 4xx; an empty marker needs no request; the rig's canaries
    (another file) and tests that did not pass are not the criterion's flows."""
    refused = "test_cap.py::test_a_forged_passkey_is_refused"
    requests = [line("POST", f"{APP}/api/horizon", 200, test=f"{CAP}[1]"),
                line("POST", f"{APP}/api/horizon", 403, test=refused)]
    tests = flows((f"{CAP}[1]", "passed", None),
                  (refused, "passed", ["POST /api/horizon 4xx"]),
                  ("test_cap.py::test_the_field_is_capped", "passed", []),
                  ("bakeoff_canary_1a2b.py::test_must_pass", "passed", None),
                  ("test_cap.py::test_skipped_in_its_call", "skipped", None))
    assert decided(requests, tests).unmet == ()
    wrong = flows((refused, "passed", ["POST /api/horizon 2xx"]))
    assert [f.test for f in decided(requests, wrong).unmet] == [refused]


def test_no_record_of_the_tests_flows_meets_nothing() -> None:
    """tests.jsonl missing (the plugin always writes it): the sample's expectation alone
    cannot show each flow took the real path. Present with no passed test of the
    criterion (they failed: the sample does too), there is no flow to decide."""
    requests = [line("POST", f"{APP}/api/horizon", 200, test=f"{CAP}[1]")]
    assert [f.detail for f in decided(requests, None).unmet] == [
        "no test's own flow was recorded (tests.jsonl missing)"]
    assert decided(requests, flows(("other.py::t", "passed", None),
                                   (f"{CAP}[1]", "failed", None))).unmet == ()
    assert decided(requests, None, expectations=()).unmet == ()


def test_test_lines_that_do_not_read_are_counted_never_trusted() -> None:
    read, malformed = real_path.read_tests(
        'nope\n{"format": 1, "kind": "test", "test": 3, "outcome": "passed"}\n'
        '{"format": 2, "kind": "test", "test": "a", "outcome": "passed"}\n'
        '{"format": 1, "kind": "truncated", "dropped": 2}\n'
        + flows(("t::a", "passed", ["GET /"])).decode())
    assert (read, malformed) == ((real_path.TestFlow("t::a", "passed", ("GET /",)),), 3)


@pytest.mark.parametrize("text", ["POST /api/horizon", "POST /api/horizon 400",
                                  "GET /api/items/7 4xx", "post /api/horizon", "POST api/x",
                                  "POST /x 600", "POST /x 2XX", "POST /a b", "/api/horizon"])
def test_the_plugins_marker_and_the_rig_read_an_expectation_alike(text: str) -> None:
    try:
        parse_expectation(text)
        rig_reads = True
    except ExpectationError:
        rig_reads = False
    assert bool(plugin_records.EXPECTATION.fullmatch(text.strip())) is rig_reads
