"""The rig's browser plugin (`rig/guards/insample/browser_plugin/`), its pure parts on the host:
who answered a request, the caps of its records, one trace per run made of each test's,
and the settings it fixes. Its behaviour against a real page is proved in
tests/integration/test_browser.py."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from rig.guards import real_path
from rig.guards.insample import browser_plugin as plugin
from rig.guards.insample.browser_plugin import records


@pytest.mark.parametrize(("has_response", "from_sw", "from_network", "who"), [
    (False, False, False, "none"), (False, True, True, "none"),
    (True, True, False, "service_worker"), (True, True, True, "service_worker"),
    (True, False, True, "server"), (True, False, False, "page"),
])
def test_who_answered_a_request(has_response: bool, from_sw: bool, from_network: bool,
                                who: str) -> None:
    assert records.answered_by(has_response, from_sw, from_network) == who
    assert who in {member.value for member in real_path.AnsweredBy}


def test_a_long_url_is_clipped_in_the_record_but_its_origin_is_the_urls() -> None:
    url = "http://localhost:4321/" + "a" * 5000 + "?q=" + "b" * 10
    record = records.request_record("t", "GET", url, "document", 200, False, True)
    assert len(record["url"]) == len(record["path"]) == records.TEXT_CHARS + 3
    assert record["url"].endswith("...") and record["origin"] == "http://localhost:4321"


def test_a_sink_past_its_cap_counts_what_it_left_out_on_its_last_line(tmp_path: Path) -> None:
    sink = records.Sink(tmp_path / "requests.jsonl", limit=1000)
    for n in range(40):
        sink.write(records.request_record("t", "GET", f"http://localhost:1/{n}", "fetch", 200,
                                          False, True))
    sink.close()
    read = real_path.read_requests((tmp_path / "requests.jsonl").read_text())
    assert len(read.records) == sink.lines == 4 and read.dropped == sink.dropped == 36
    assert sink.written <= 1000 < sink.written + 240
    assert sink.summary() == {"file": "requests.jsonl", "lines": 4, "dropped": 36}


def trace(path: Path, marker: str, resources: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as part:
        part.writestr("trace.trace", f'{{"type":"context-options","title":"{marker}"}}\n')
        part.writestr("trace.network", "")
        part.writestr("trace.stacks", "{}")
        for name, data in resources.items():
            part.writestr(f"resources/{name}", data)
    return path


def test_each_tests_trace_is_a_context_of_its_own_in_one_zip(tmp_path: Path) -> None:
    """The trace viewer opens every `*.trace` of a zip (with its `.network` and
    `.stacks`) as one context; resources are named by their hash, so they are shared."""
    parts = [("t::a", trace(tmp_path / "1.zip", "a", {"x.json": b"1", "shared.html": b"s"})),
             ("t::b", trace(tmp_path / "2.zip", "b", {"shared.html": b"s", "y.png": b"2"}))]
    included, left_out = records.merge_traces(parts, tmp_path / "trace.zip")
    assert (included, left_out) == (["t::a", "t::b"], [])
    with zipfile.ZipFile(tmp_path / "trace.zip") as merged:
        assert sorted(merged.namelist()) == [
            "001-trace.network", "001-trace.stacks", "001-trace.trace",
            "002-trace.network", "002-trace.stacks", "002-trace.trace",
            "resources/shared.html", "resources/x.json", "resources/y.png"]
        assert b'"title":"b"' in merged.read("002-trace.trace")


def test_a_trace_past_the_cap_or_unreadable_is_left_out_and_named(tmp_path: Path) -> None:
    big = trace(tmp_path / "big.zip", "big", {"blob": bytes(range(256)) * 400})
    broken = tmp_path / "broken.zip"
    broken.write_bytes(b"PK\x03\x04 not a zip")
    small = trace(tmp_path / "small.zip", "small", {})
    parts = [("t::small", small), ("t::big", big), ("t::broken", broken),
             ("t::gone", tmp_path / "missing.zip")]
    limit = small.stat().st_size + 200
    assert records.merge_traces(parts, tmp_path / "trace.zip", limit=limit) == (
        ["t::small"], ["t::big", "t::broken", "t::gone"])
    with zipfile.ZipFile(tmp_path / "trace.zip") as merged:
        assert sorted(merged.namelist()) == ["001-trace.network", "001-trace.stacks",
                                             "001-trace.trace"]


def test_no_trace_kept_leaves_no_zip(tmp_path: Path) -> None:
    broken = tmp_path / "broken.zip"
    broken.write_bytes(b"nothing")
    assert records.merge_traces([("t::x", broken)], tmp_path / "trace.zip") == ([], ["t::x"])
    assert not (tmp_path / "trace.zip").exists()


def test_a_trace_that_would_unpack_past_its_budget_is_left_out(tmp_path: Path) -> None:
    bomb = trace(tmp_path / "bomb.zip", "bomb", {"zeros": bytes(2_000_000)})
    with zipfile.ZipFile(tmp_path / "deflated.zip", "w", zipfile.ZIP_DEFLATED) as part:
        for info_name in ("trace.trace", "resources/zeros"):
            with zipfile.ZipFile(bomb) as source:
                part.writestr(info_name, source.read(info_name))
    assert records.merge_traces([("t::bomb", tmp_path / "deflated.zip")],
                                tmp_path / "trace.zip", unpacked=1_000_000) == ([], ["t::bomb"])


@pytest.mark.parametrize(("nodeid", "name"), [
    ("ui/test_cap.py::test_cap[chromium-90]", "test_cap-chromium-90"),
    ("ui/test_cap.py::TestX::test_y", "TestX-test_y"), ("x.py", "x-py"),
    ("t.py::[../../etc]", "etc"), ("t.py::" + "z" * 100, "z" * 60), ("t.py::!!", "test"),
])
def test_a_screenshot_is_named_by_its_test_with_no_path_in_it(nodeid: str, name: str) -> None:
    assert records.slug(nodeid) == name


def test_the_plugin_writes_the_format_the_rig_reads() -> None:
    assert records.FORMAT == real_path.FORMAT


def test_the_context_is_fixed_and_what_defends_the_measurement_cannot_be_overridden() -> None:
    assert plugin.FORCED == {"service_workers": "block", "accept_downloads": False}
    assert {key: plugin.CONTEXT[key] for key in ("timezone_id", "locale", "reduced_motion",
                                                 "device_scale_factor")} == {
        "timezone_id": "UTC", "locale": "en-US", "reduced_motion": "reduce",
        "device_scale_factor": 1}
    assert not [arg for arg in plugin.LAUNCH_ARGS if "remote-debugging" in arg
                or arg.startswith("--disable-features")]
    # No name resolved but the app's origin's (every other origin is blocked anyway).
    assert plugin.RESOLVER_RULES == "MAP * ~NOTFOUND, EXCLUDE localhost"
    assert [a for a in plugin.LAUNCH_ARGS if "resolver" in a] == [
        f"--host-resolver-rules={plugin.RESOLVER_RULES}"]
    assert set(plugin.OWNED) >= {"browser_type_launch_args", "launch_browser", "new_context",
                                 "connect_options", "browser"}


def test_a_line_of_every_kind_is_json_with_its_format(tmp_path: Path) -> None:
    record = records.console_record("t", "console", "error", "5 passed in 0.01s", None)
    assert json.loads(json.dumps(record)) == {"format": 1, "kind": "console", "test": "t",
                                              "type": "error", "text": "5 passed in 0.01s",
                                              "url": ""}


CRITERION = '''import pytest

pytestmark = pytest.mark.expect_requests("POST /api/horizon")


@pytest.mark.parametrize("days", [1, 90])
def test_the_summary(days):
    pass


@pytest.mark.expect_requests()
def test_the_field_is_capped():
    pass


@pytest.mark.expect_requests("POST /api/login 4xx")
def test_refused():
    assert False


def test_unmarked_inherits_the_module_marker():
    pytest.skip("not this time")
'''


def run_plugin(tmp_path: Path, source: str) -> tuple[int, str, list[dict[str, object]]]:
    """pytest with only the rig's plugin (no browser is needed to collect and record)."""
    import os
    import subprocess
    import sys

    (tmp_path / "test_cap.py").write_text(source)
    out = tmp_path / "out"
    out.mkdir()
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "BAKEOFF_BROWSER_OUT": str(out), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-c", "/dev/null", "--rootdir", str(tmp_path),
         "-p", "no:cacheprovider", "-p", "rig.guards.insample.browser_plugin", "test_cap.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    tests = out / "tests.jsonl"
    lines = [json.loads(x) for x in tests.read_text().splitlines()] if tests.exists() else []
    return done.returncode, done.stdout + done.stderr, lines


def test_each_test_that_ran_is_recorded_with_its_outcome_and_its_own_expectations(
        tmp_path: Path) -> None:
    """The closest marker wins (a test's over its module's); an empty one asks nothing;
    the outcome is the call's (only a passed test's flow is decided); the rig reads the
    lines back as they are."""
    code, output, lines = run_plugin(tmp_path, CRITERION)
    assert code == 1, output
    assert [(x["test"], x["outcome"], x["expect_requests"]) for x in lines] == [
        ("test_cap.py::test_the_summary[1]", "passed", ["POST /api/horizon"]),
        ("test_cap.py::test_the_summary[90]", "passed", ["POST /api/horizon"]),
        ("test_cap.py::test_the_field_is_capped", "passed", []),
        ("test_cap.py::test_refused", "failed", ["POST /api/login 4xx"]),
        ("test_cap.py::test_unmarked_inherits_the_module_marker", "skipped",
         ["POST /api/horizon"])]
    flows, malformed = real_path.read_tests((tmp_path / "out" / "tests.jsonl").read_text())
    assert malformed == 0 and flows[2] == real_path.TestFlow(
        "test_cap.py::test_the_field_is_capped", "passed", ())


@pytest.mark.parametrize("marker", ['"post /api/horizon"', '"POST /x", 3',
                                    'method="POST"', '"POST /x 600"'])
def test_a_marker_that_does_not_read_as_expectations_is_a_usage_error(
        tmp_path: Path, marker: str) -> None:
    code, output, lines = run_plugin(tmp_path, (
        "import pytest\n\n\n"
        f"@pytest.mark.expect_requests({marker})\ndef test_x():\n    pass\n"))
    assert code == 4 and lines == [], output
    assert "test_cap.py::test_x: @pytest.mark.expect_requests takes entries such as" in output
