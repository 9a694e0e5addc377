"""Parsers against REAL captured output (tests/unit/parsers/fixtures/, see FIXTURES.md).

Every capture asserts exact counts. The captures were produced in our own images from
the fixture projects under tests/fixtures/ by tests/fixtures/capture-all.sh; each has a
`.meta` line saying which tool version, image and command produced it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rig.parsers import PARSERS, UnknownParserError, get_parser
from rig.parsers.base import Counts, ParseResult, TestStatus
from rig.sample.verdict import decide

FIXTURES = Path(__file__).parent / "parsers" / "fixtures"
PROJECTS = Path(__file__).parents[1] / "fixtures"
FORMAT_PARSER = {
    "pytest": "pytest",
    "cargo": "cargo",
    "go_test": "go-test",
    "node_test": "node-test",
    "jest": "jest",
    "vitest": "vitest",
    "junit": "junit",
    "rig": "pytest",  # samples captured through the rig: canaries planted (capture-rig.py)
}


def capture(fmt: str, name: str) -> tuple[str, dict[str, Any]]:
    """The captured text of `fmt/name` and its provenance line."""
    meta = json.loads((FIXTURES / fmt / f"{name}.meta").read_text())
    suffix = ".xml" if fmt == "junit" else ".txt"
    return (FIXTURES / fmt / f"{name}{suffix}").read_text(), meta


def parsed(fmt: str, name: str) -> ParseResult:
    text, _ = capture(fmt, name)
    return get_parser(FORMAT_PARSER[fmt]).parse(text)


def all_captures() -> list[tuple[str, str]]:
    return sorted((meta.parent.name, meta.stem) for meta in FIXTURES.glob("*/*.meta"))


# (format, capture) -> (passed, failed, skipped, errors) or None, summaries, flags
# flags: b = build_failed, u = usage_error, s = spoof evidence, i = incomplete
EXACT: dict[tuple[str, str], tuple[tuple[int, int, int, int] | None, int, str]] = {
    ("pytest", "proj-pass"): ((6, 0, 1, 0), 1, ""),
    ("pytest", "proj-fail"): ((3, 3, 1, 0), 1, ""),
    ("pytest", "proj-pass-verbose"): ((6, 0, 1, 0), 1, ""),
    ("pytest", "proj-fail-verbose"): ((3, 3, 1, 0), 1, ""),
    ("pytest", "proj-fail-color"): ((3, 3, 1, 0), 1, ""),
    ("pytest", "exit-swallowed"): ((3, 3, 1, 0), 1, ""),
    ("pytest", "exit-nonzero-after-pass"): ((6, 0, 1, 0), 1, ""),
    ("pytest", "spoof-captured-stdout"): ((5, 1, 1, 0), 2, "s"),
    ("pytest", "spoof-atexit"): ((3, 3, 1, 0), 2, "s"),
    ("pytest", "abort-os-exit"): (None, 0, "i"),
    ("pytest", "collection-error"): ((0, 0, 0, 1), 1, "b"),
    ("pytest", "conftest-error"): (None, 0, "b"),
    ("pytest", "usage-error"): (None, 0, "u"),
    ("pytest", "missing-path"): ((0, 0, 0, 0), 1, "u"),
    ("pytest", "no-tests-deselected"): ((0, 0, 0, 0), 1, ""),
    ("pytest", "no-tests-collected"): ((0, 0, 0, 0), 1, ""),
    ("pytest", "command-not-found"): (None, 0, ""),
    # issue 15 item 1 (the lead's rule): honest passing suites that print summary-like text
    **{("pytest", f"prints-summaries-s-pytest{v}"): ((0, 2, 0, 1), 2, "s") for v in (7, 8, 9)},
    **{("pytest", f"prints-summaries-q-s-pytest{v}"): ((0, 2, 0, 1), 3, "s") for v in (7, 8, 9)},
    **{("pytest", f"prints-summaries-ra-pytest{v}"): ((0, 2, 0, 1), 5, "s") for v in (7, 8, 9)},
    ("cargo", "ws-pass"): ((9, 0, 1, 0), 7, ""),
    ("cargo", "ws-fail"): ((8, 1, 1, 0), 7, ""),
    ("cargo", "ws-fail-color"): ((8, 1, 1, 0), 7, ""),
    ("cargo", "ws-fail-fast"): ((3, 1, 1, 0), 3, ""),
    ("cargo", "build-error"): (None, 0, "b"),
    # a test's own look-alike line, in its captured stdout or printed under --nocapture,
    # --show-output, one thread, -q: the binary's LAST result line is libtest's (issue 30)
    ("cargo", "spoof-captured-stdout"): ((8, 1, 1, 0), 8, ""),
    ("cargo", "lookalike-nocapture"): ((9, 1, 1, 0), 8, ""),
    ("cargo", "lookalike-one-thread"): ((9, 1, 1, 0), 8, ""),
    ("cargo", "lookalike-show-output"): ((9, 1, 1, 0), 8, ""),
    ("cargo", "lookalike-quiet"): ((9, 1, 1, 0), 8, ""),
    ("cargo", "lookalike-pass"): ((10, 0, 1, 0), 8, ""),
    ("cargo", "lookalike-glued"): ((3, 0, 0, 0), 1, ""),
    ("cargo", "lookalike-glued-one-thread"): ((3, 0, 0, 0), 1, ""),
    # `cargo test -q` (terse: dots; failed tests named only in libtest's failures list)
    ("cargo", "quiet-pass"): ((9, 0, 1, 0), 7, ""),
    ("cargo", "quiet-fail"): ((8, 1, 1, 0), 7, ""),
    ("cargo", "quiet-fail-fast"): ((3, 1, 1, 0), 3, ""),
    ("cargo", "quiet-fail-one-binary"): ((1, 1, 0, 0), 1, ""),
    ("cargo", "abort-test-binary"): ((6, 0, 1, 2), 5, "i"),
    ("cargo", "usage-error"): (None, 0, "u"),
    ("cargo", "no-such-test-target"): (None, 0, "u"),
    ("cargo", "filtered-to-nothing"): ((0, 0, 0, 0), 5, ""),
    ("cargo", "build-script-panic"): (None, 0, "b"),
    ("cargo", "libtest-usage-error"): (None, 0, "u"),
    ("go_test", "mod-pass-json"): ((7, 0, 1, 0), 3, ""),
    ("go_test", "mod-fail-json"): ((5, 2, 1, 0), 3, ""),
    ("go_test", "mod-pass-verbose"): ((7, 0, 1, 0), 3, ""),
    ("go_test", "mod-fail-verbose"): ((5, 2, 1, 0), 3, ""),
    ("go_test", "build-failed-json"): ((5, 0, 1, 1), 3, "b"),
    ("go_test", "build-failed-verbose"): ((5, 0, 1, 1), 3, "b"),
    # a test's output without a trailing newline glues go's result line to it (issue 30):
    # go's own line, for the announced test, serial or parallel, -v or -json
    ("go_test", "glued-verbose"): ((10, 0, 1, 0), 3, ""),
    ("go_test", "glued-json"): ((10, 0, 1, 0), 3, ""),
    ("go_test", "spoof-json"): ((5, 2, 1, 0), 3, "s"),
    ("go_test", "spoof-verbose"): ((5, 2, 1, 0), 3, "s"),
    ("go_test", "usage-error"): (None, 0, "u"),
    ("go_test", "test-binary-flag"): (None, 3, "u"),
    ("go_test", "no-such-package"): (None, 0, "u"),
    ("go_test", "no-test-files"): ((0, 0, 0, 0), 1, ""),
    ("go_test", "run-matches-nothing"): ((0, 0, 0, 0), 3, ""),
    ("go_test", "run-matches-nothing-plain"): ((0, 0, 0, 0), 3, ""),
    ("go_test", "run-matches-nothing-verbose"): ((0, 0, 0, 0), 3, ""),
    ("go_test", "test-binary-flag-plain"): (None, 3, "u"),
    ("go_test", "test-binary-flag-verbose"): (None, 3, "u"),
    ("node_test", "cart-pass-tap"): ((7, 0, 2, 0), 1, ""),
    ("node_test", "cart-fail-tap"): ((5, 2, 2, 0), 1, ""),
    ("node_test", "cart-pass-spec"): ((7, 0, 2, 0), 1, ""),
    ("node_test", "cart-fail-spec"): ((5, 2, 2, 0), 1, ""),
    ("node_test", "cart-fail-spec-color"): ((5, 2, 2, 0), 1, ""),
    ("node_test", "spoof-tap"): ((5, 2, 2, 0), 1, ""),
    ("node_test", "spoof-spec"): ((5, 2, 2, 0), 5, "s"),
    ("node_test", "syntax-error-tap"): ((0, 2, 0, 0), 1, "b"),
    ("node_test", "abort-process-exit-tap"): ((3, 0, 0, 0), 1, "i"),
    ("node_test", "usage-error"): (None, 0, "u"),
    ("node_test", "missing-file"): (None, 0, "u"),
    ("node_test", "no-tests"): ((0, 0, 0, 0), 1, ""),
    ("jest", "cart-pass"): ((4, 0, 2, 0), 1, ""),
    ("jest", "cart-fail"): ((3, 1, 2, 0), 1, ""),
    ("jest", "cart-fail-color"): ((3, 1, 2, 0), 1, ""),
    ("jest", "spoof-stdout"): ((3, 1, 2, 0), 3, "s"),
    ("jest", "suite-failed-to-run"): ((0, 0, 0, 0), 1, "b"),
    ("jest", "usage-error"): (None, 0, "u"),
    ("jest", "no-tests"): ((0, 0, 0, 0), 0, ""),
    ("jest", "no-tests-pass-with-no-tests"): ((0, 0, 0, 0), 0, ""),
    ("vitest", "cart-pass"): ((4, 0, 2, 0), 1, ""),
    ("vitest", "cart-fail"): ((3, 1, 2, 0), 1, ""),
    ("vitest", "cart-fail-color"): ((3, 1, 2, 0), 1, ""),
    ("vitest", "spoof-stdout"): ((3, 1, 2, 0), 3, "s"),
    ("vitest", "suite-failed-to-run"): ((0, 0, 0, 0), 1, "b"),
    ("vitest", "usage-error"): (None, 0, "u"),
    ("vitest", "no-tests"): ((0, 0, 0, 0), 0, ""),
    ("vitest", "no-tests-pass-with-no-tests"): ((0, 0, 0, 0), 0, ""),
    ("vitest", "no-suite-beside-a-pass"): ((1, 0, 0, 0), 1, ""),
    ("vitest", "no-suite-only"): ((0, 0, 0, 0), 1, ""),
    ("junit", "pytest-pass"): ((6, 0, 1, 0), 1, ""),
    ("junit", "pytest-fail"): ((3, 3, 1, 0), 1, ""),
    ("junit", "pytest-collection-error"): ((0, 0, 0, 1), 1, "b"),
    ("junit", "vitest-pass"): ((4, 0, 2, 0), 1, ""),
    ("junit", "vitest-fail"): ((3, 1, 2, 0), 1, ""),
    # The text alone of an honest run: the summary-like lines the tests printed are read
    # (the canaries sort them out: test_verdict's ..._passes_with_the_rig_s_canaries).
    ("rig", "prints-summaries-q-s-pytest7"): ((0, 2, 0, 1), 3, "s"),
    ("rig", "prints-summaries-q-s-pytest8"): ((0, 2, 0, 1), 3, "s"),
    ("rig", "prints-summaries-q-s-pytest9"): ((0, 2, 0, 1), 3, "s"),
    ("rig", "prints-summaries-ra-pytest7"): ((0, 2, 0, 1), 5, "s"),
    ("rig", "prints-summaries-ra-pytest8"): ((0, 2, 0, 1), 5, "s"),
    ("rig", "prints-summaries-ra-pytest9"): ((0, 2, 0, 1), 5, "s"),
    ("rig", "prints-summaries-s-pytest7"): ((0, 2, 0, 1), 2, "s"),
    ("rig", "prints-summaries-s-pytest8"): ((0, 2, 0, 1), 2, "s"),
    ("rig", "prints-summaries-s-pytest9"): ((0, 2, 0, 1), 2, "s"),
}


def test_every_capture_is_in_the_exact_table() -> None:
    """A capture nobody asserts on is a fixture that proves nothing."""
    assert set(all_captures()) == set(EXACT)


@pytest.mark.parametrize(("fmt", "name"), all_captures())
def test_every_capture_says_which_tool_image_and_command_produced_it(fmt: str, name: str) -> None:
    _, meta = capture(fmt, name)
    assert meta["tool"] and meta["command"]
    assert meta["image_id"].startswith("sha256:")
    if meta["image"].startswith("bakeoff-capture/"):  # a throwaway image: FROM one of ours
        assert meta["build"].startswith("FROM bakeoff/")
    else:
        assert meta["image"].startswith("bakeoff/")
    assert isinstance(meta["exit_code"], int)


@pytest.mark.parametrize(("fmt", "name"), sorted(EXACT))
def test_capture_parses_to_exact_counts(fmt: str, name: str) -> None:
    counts, summaries, flags = EXACT[fmt, name]
    result = parsed(fmt, name)
    assert result.counts == (Counts(*counts) if counts is not None else None)
    assert result.summaries == summaries
    assert result.build_failed == ("b" in flags)
    assert result.usage_error == ("u" in flags)
    assert bool(result.spoof_evidence) == ("s" in flags)
    assert bool(result.incomplete) == ("i" in flags)


def test_cargo_sums_every_binary_where_the_first_result_line_says_ok() -> None:
    """Regression: a first-match grep of `test result:` reads the lib binary (ok, 2
    passed) and misses the failure in tests/api.rs; the answer is the sum of all 7."""
    text, _ = capture("cargo", "ws-fail")
    first = next(line for line in text.splitlines() if line.startswith("test result:"))
    assert first.startswith("test result: ok. 2 passed; 0 failed; 1 ignored")
    result = parsed("cargo", "ws-fail")
    assert result.counts == Counts(passed=8, failed=1, skipped=1)
    assert result.summaries == 7


def test_cargo_keeps_same_named_tests_of_different_binaries() -> None:
    """Two integration binaries (and the lib) each hold a test named `same_name`: all
    three are distinct tests, and only the one in tests/api.rs failed."""
    status = {case.id: case.status for case in parsed("cargo", "ws-fail").tests}
    assert status["tests/api.rs::same_name"] is TestStatus.FAILED
    assert status["tests/props.rs::same_name"] is TestStatus.PASSED
    assert status["unittests src/lib.rs (shapes)::tests::same_name"] is TestStatus.PASSED
    assert "unittests src/lib.rs (units)::tests::converts_centimetres" in status
    assert "Doc-tests shapes::src/lib.rs - Rect::area (line 23)" in status
    assert len(status) == 10


@pytest.mark.parametrize(
    ("fmt", "colored", "uncolored"),
    [
        ("pytest", "proj-fail-color", "proj-fail"),
        ("cargo", "ws-fail-color", "ws-fail"),
        ("node_test", "cart-fail-spec-color", "cart-fail-spec"),
        ("jest", "cart-fail-color", "cart-fail"),
        ("vitest", "cart-fail-color", "cart-fail"),
    ],
)
def test_colored_output_reads_like_plain_output(fmt: str, colored: str, uncolored: str) -> None:
    """`--color=yes` / FORCE_COLOR wrap the summary in ANSI codes: same counts, same tests."""
    assert "\x1b[" in capture(fmt, colored)[0]
    with_color, without = parsed(fmt, colored), parsed(fmt, uncolored)
    assert with_color.counts == without.counts
    assert {c.id: c.status for c in with_color.tests} == {c.id: c.status for c in without.tests}


@pytest.mark.parametrize("name", ["lookalike-nocapture", "lookalike-one-thread",
                                  "lookalike-show-output", "lookalike-pass"])
def test_cargo_test_printing_look_alike_lines_keeps_every_test_s_status(name: str) -> None:
    """Issue 30: a test printing `running 99 tests` / `test result: ok. 99 passed` reads
    as the test's output, not a spoof; with one thread its status comes on a line of its
    own after what it printed (`test prints_a_report ... running 99 tests` ... `ok`)."""
    result = parsed("cargo", name)
    status = {case.id: case.status for case in result.tests}
    assert status["tests/props.rs::prints_a_report"] is TestStatus.PASSED
    failed = TestStatus.PASSED if name == "lookalike-pass" else TestStatus.FAILED
    assert status["tests/api.rs::same_name"] is failed
    assert len(status) == 11
    assert any("look-alike" in note for note in result.notes)


@pytest.mark.parametrize("name", ["lookalike-glued", "lookalike-glued-one-thread"])
def test_cargo_status_glued_to_a_partial_line_a_test_printed_is_read(name: str) -> None:
    """`print!` without a newline under --nocapture: libtest's next line is glued to it
    (`running 99 teststest same_name ... ok`; one thread: `test prints_a_partial_line
    ... running 99 testsok`). Every test keeps its status: none reads absent."""
    status = {case.id: case.status for case in parsed("cargo", name).tests}
    assert status == {f"tests/props.rs::{test}": TestStatus.PASSED
                      for test in ("same_name", "waits", "prints_a_partial_line")}


def test_cargo_one_thread_failure_after_printed_lines_reads_failed() -> None:
    """One thread, --nocapture: a test's panic message sits between `test clamps ... `
    and its `FAILED`; a test that printed `all ok` on a line of its own still ends with
    its own status line."""
    text = _binary("test clamps ... thread 'main' panicked at 'boom', tests/it.rs:3:5\n"
                   "note: run with `RUST_BACKTRACE=1`\nFAILED\ntest keeps ... all ok\n"
                   "FAILED\ntest low ... fine\nok\n\nfailures:\n\nfailures:\n    clamps\n"
                   "    keeps\n\n" + _result(1, 2))
    result = get_parser("cargo").parse(text)
    assert [(c.id, c.status) for c in result.tests] == [
        ("tests/it.rs::clamps", TestStatus.FAILED), ("tests/it.rs::keeps", TestStatus.FAILED),
        ("tests/it.rs::low", TestStatus.PASSED)]
    assert result.spoof_evidence == ()


def _binary(body: str, header: int = 3) -> str:
    return ("     Running tests/it.rs (target/debug/deps/it-0123456789abcdef)\n\n"
            f"running {header} tests\n{body}")


def _result(passed: int, failed: int = 0) -> str:
    return (f"test result: {'FAILED' if failed else 'ok'}. {passed} passed; {failed} failed; "
            "0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n")


@pytest.mark.parametrize(("text", "evidence"), [
    # the lib prints a passing report for two of three tests, then exits: its line is the
    # binary's last and does not add up
    (_binary("test a ... ok\ntest b ... ok\n\n" + _result(2)),
     "tests/it.rs: `running 3 tests` but the result line adds up to 2"),
    # a line printed after libtest's own (a child outliving its binary)
    (_binary("test a ... ok\ntest b ... ok\ntest c ... FAILED\n\n" + _result(2, 1)
             + _result(99)), "tests/it.rs: `running 3 tests` but the result line adds up to 99"),
    # the last line adds up but counts no failure where libtest listed one
    (_binary("test a ... ok\ntest b ... ok\ntest c ... FAILED\n\n" + _result(2, 1)
             + _result(3)), "tests/it.rs: 1 tests listed FAILED but the result line says 0 failed"),
    # without per-test lines (-q): two lines that add up with different numbers
    (_binary("..F\n" + _result(2, 1) + _result(3)),
     "tests/it.rs: two `test result:` lines add up to `running 3 tests` with different numbers"),
    # the last line inside a test's captured output
    (_binary("test a ... ok\n\nfailures:\n\n---- c stdout ----\n" + _result(3)),
     "tests/it.rs: its last `test result:` line is inside a test's output"),
])
def test_cargo_a_binary_s_last_result_line_that_does_not_add_up_is_a_spoof(
        text: str, evidence: str) -> None:
    """The look-alike rule never trusts a forged line: libtest's is the binary's last."""
    assert get_parser("cargo").parse(text).spoof_evidence == (evidence,)


def test_cargo_quiet_runs_without_running_lines_close_each_binary_at_the_next_header() -> None:
    """`cargo test -q` prints no `Running` lines: a header after a result line that adds
    up starts the next binary; a header before it is a test's output."""
    text = ("\nrunning 2 tests\n.running 99 tests\nrunning 99 tests\n" + _result(99) + ".\n"
            + _result(2) + "\nrunning 1 test\nF\n" + _result(0, 1))
    result = get_parser("cargo").parse(text)
    assert (result.counts, result.spoof_evidence) == (Counts(passed=2, failed=1), ())


@pytest.mark.parametrize(("name", "failed"), [
    ("quiet-pass", ()), ("quiet-fail", ("binary#0::same_name",)),
    ("quiet-fail-fast", ("binary#0::same_name",)),
    ("quiet-fail-one-binary", ("binary#0::same_name",)),
    ("lookalike-quiet", ("binary#0::same_name",)),
    ("ws-fail", ())])
def test_cargo_terse_output_names_its_failed_tests_from_the_failures_list(
        name: str, failed: tuple[str, ...]) -> None:
    """Issue 30: under `cargo test -q` libtest names no passing test but lists every
    failed one after its last `failures:` line (real output, cargo 1.65): those are read
    (`terse_failed`, for the rig's canaries), never as per-test lines; with per-test lines
    (ws-fail) the list adds nothing."""
    parsed = get_parser("cargo").parse((FIXTURES / "cargo" / f"{name}.txt").read_text())
    assert tuple(t.id for t in parsed.terse_failed) == failed
    assert {t.status for t in parsed.terse_failed} <= {TestStatus.FAILED}
    assert (parsed.tests == ()) == name.startswith(("quiet", "lookalike-quiet"))


def test_cargo_without_no_fail_fast_says_the_counts_are_partial() -> None:
    assert any("--no-fail-fast" in note for note in parsed("cargo", "ws-fail-fast").notes)
    assert parsed("cargo", "ws-fail").notes == ()


def test_go_counts_subtests_and_qualifies_ids_by_package() -> None:
    status = {case.id: case.status for case in parsed("go_test", "mod-fail-json").tests}
    assert status["example.com/gomod/mathx::TestClamp/above"] is TestStatus.FAILED
    assert status["example.com/gomod/mathx::TestClamp"] is TestStatus.FAILED
    assert status["example.com/gomod/strs::ExampleShout"] is TestStatus.PASSED


def test_go_json_and_verbose_modes_agree_on_the_same_run() -> None:
    for outcome in ("pass", "fail"):
        json_mode = parsed("go_test", f"mod-{outcome}-json")
        verbose = parsed("go_test", f"mod-{outcome}-verbose")
        assert json_mode.counts == verbose.counts
        assert {c.id: c.status for c in json_mode.tests} == {c.id: c.status for c in verbose.tests}


def test_plain_go_test_without_verbose_is_not_read_as_zero_tests() -> None:
    """Without -v, passing tests are not listed: counting them as 0 would be a lie."""
    result = get_parser("go-test").parse("ok  \texample.com/m\t0.01s\n")
    assert result.counts is None
    assert "-json" in result.notes[0]


GO_PRINTS = ("=== RUN   TestReport\n--- PASS: TestElsewhere (0.00s)\nFAIL to parse: x\n"
             "--- FAIL: TestSample (0.00s)\n"
             "ok 3 values\n--- PASS: TestReport (0.00s)\nPASS\nok  \texample.com/m\t0.01s\n")


def test_go_lines_a_test_prints_that_only_look_like_go_s_are_not_results() -> None:
    """A `--- PASS` line for a test go never announced (`=== RUN`) was printed by a test;
    `FAIL to parse`, `ok 3 values` are no package lines (go puts a tab after the word)."""
    result = get_parser("go-test").parse(GO_PRINTS)
    assert {c.id: c.status for c in result.tests} == {
        "example.com/m::TestReport": TestStatus.PASSED}
    assert (result.counts, result.summaries, result.spoof_evidence) == (
        Counts(passed=1), 1, ())
    assert result.notes[0].startswith("2 result line(s) of tests go never started")


def test_go_failures_without_v_are_read_unannounced() -> None:
    text = "--- FAIL: TestA (0.00s)\n    a_test.go:3: no\nFAIL\nFAIL\texample.com/m\t0.01s\n"
    result = get_parser("go-test").parse(text)
    assert result.counts == Counts(failed=1)


def test_go_json_pass_events_of_tests_never_run_are_not_counted() -> None:
    """test2json (go 1.19) turns a `--- PASS: X` line a test prints into a pass event of
    X, with no `run` event: not counted, nor a failure in a package whose tests go
    announced (run events); in one with none, a failure counts (q's TestC)."""
    events = [{"Action": "run", "Test": "TestA"}, {"Action": "pass", "Test": "TestFake"},
              {"Action": "pass", "Test": "TestA"}, {"Action": "fail", "Test": "TestPrinted"},
              {"Action": "fail", "Test": "TestB"}, {"Action": "fail"}]
    text = "".join(json.dumps({"Package": "m", **e}) + "\n" for e in events)
    text += json.dumps({"Package": "q", "Action": "fail", "Test": "TestC"}) + "\n"
    result = get_parser("go-test").parse(text)
    assert result.counts == Counts(passed=1, failed=1, errors=1)


def test_pytest_reports_the_most_failing_summary_when_spoofed() -> None:
    """The atexit spoof prints `7 passed` after the real `3 failed`: report the real one."""
    assert parsed("pytest", "spoof-atexit").counts == Counts(passed=3, failed=3, skipped=1)


# summary_sequence: every summary line, in output order (the lead's item 1 builds on it)

HEADER_S = (0, 2, 0, 1)  # `2 failed, 1 error in 1.50s` printed by test_report_is_multiline
PRINTED_SUMMARIES = {
    # -s: the other printed lines follow pytest's `tests/test_report.py ` or a progress dot
    "s": [HEADER_S, (6, 0, 0, 0)],
    # -q -s: no file name, so the first printed line starts the output
    "q-s": [(1, 3, 0, 0), HEADER_S, (6, 0, 0, 0)],
    # -rA replays every captured stdout at the start of a line, `no tests ran` included
    "ra": [(1, 3, 0, 0), (1, 3, 0, 0), HEADER_S, (0, 0, 0, 0), (6, 0, 0, 0)],
}


@pytest.mark.parametrize("version", [7, 8, 9])
@pytest.mark.parametrize("mode", sorted(PRINTED_SUMMARIES))
def test_honest_suite_printing_summaries_lists_every_summary_line_in_order(
    mode: str, version: int
) -> None:
    """Issue 15 item 1: six passing tests (exit 0) print `1 passed, 3 failed in 0.01s`,
    `===== 3 failed, 1 passed in 0.02s =====`, ... under pytest 7.2, 8.3 and 9.2. The
    parser lists every line it takes for a summary, pytest's own `6 passed` last; which
    of them counts is the verdict rule's business, not the parser's."""
    result = parsed("pytest", f"prints-summaries-{mode}-pytest{version}")
    assert result.summary_sequence == tuple(Counts(*c) for c in PRINTED_SUMMARIES[mode])
    assert result.summary_sequence[-1] == Counts(passed=6)


@pytest.mark.parametrize(
    ("fmt", "name", "sequence"),
    [
        ("pytest", "proj-pass", [(6, 0, 1, 0)]),
        ("pytest", "spoof-captured-stdout", [(5, 0, 0, 0), (5, 1, 1, 0)]),
        ("pytest", "spoof-atexit", [(3, 3, 1, 0), (7, 0, 0, 0)]),
        ("jest", "spoof-stdout", [(6, 0, 0, 0), (6, 0, 0, 0), (3, 1, 2, 0)]),
        ("vitest", "spoof-stdout", [(6, 0, 0, 0), (6, 0, 0, 0), (3, 1, 2, 0)]),
        ("node_test", "spoof-spec", [(9, 0, 0, 0)] * 4 + [(5, 2, 2, 0)]),
        ("node_test", "cart-pass-tap", [(7, 0, 2, 0)]),
        ("cargo", "ws-pass", []),
        ("go_test", "mod-pass-json", []),
        ("junit", "pytest-pass", []),
    ],
)
def test_summary_sequence_is_every_single_summary_in_output_order(
    fmt: str, name: str, sequence: list[tuple[int, int, int, int]]
) -> None:
    """Single-summary runners list every summary found (the forged ones too, where they
    were printed); the summing formats (cargo, go, JUnit) leave it empty."""
    result = parsed(fmt, name)
    assert result.summary_sequence == tuple(Counts(*c) for c in sequence)
    if sequence:
        assert result.summaries == len(sequence)


def test_a_dependencys_failed_build_script_is_noted_not_the_codes_build_failure() -> None:
    """Not a capture (crates.io is out of reach offline): the cargo/build-script-panic
    line with a registry crate instead of the tree's own. A system library missing from
    the image breaks `openssl-sys`; that alone is not the contestant's failure."""
    text = "error: failed to run custom build command for `openssl-sys v0.9.80`\n"
    result = get_parser("cargo").parse(text)
    assert not result.build_failed
    assert result.notes == ("the build script of dependency openssl-sys v0.9.80 failed: a "
                            "system library or tool missing from the image?",)


def test_pytest_notes_a_collection_error_on_a_missing_module() -> None:
    (note,) = parsed("pytest", "conftest-error").notes
    assert "no_such_helper_module" in note


STRICT_MARKERS = """============================= test session starts ==============================
platform linux -- Python 3.11.2, pytest-7.2.1, pluggy-1.0.0+repack
rootdir: /work, configfile: pyproject.toml
collected 3 items / 1 error

==================================== ERRORS ====================================
_____________________ ERROR collecting tests/test_slow.py ______________________
'slow' not found in `markers` configuration option
=========================== short test summary info ============================
ERROR tests/test_slow.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
=============================== 1 error in 0.02s ===============================
"""


def test_pytest_names_the_module_it_could_not_collect_and_why() -> None:
    """Issue 30 (captured from bakeoff/python, pytest 7.2.1): a marker the arm declared in
    its pyproject.toml, which is the base's at scoring, under `--strict-markers`. The
    reason names the module and pytest's words, not only "did not compile or import"."""
    result = get_parser("pytest").parse(STRICT_MARKERS)
    assert result.build_failed
    assert result.build_errors == (
        "tests/test_slow.py: 'slow' not found in `markers` configuration option",)
    outcome = decide(parser="pytest", exit_code=2, parsed=result, timed_out=False,
                     oom_killed=False)
    assert outcome.detail == ("the code under test did not compile or import (tests/"
                              "test_slow.py: 'slow' not found in `markers` configuration "
                              "option)")


def test_pytest_reads_per_test_statuses() -> None:
    status = {case.id: case.status for case in parsed("pytest", "proj-fail-verbose").tests}
    assert status["tests/test_calc.py::test_sub_table[2-3--1]"] is TestStatus.FAILED
    assert status["tests/test_calc.py::test_not_on_linux"] is TestStatus.SKIPPED
    assert status["tests/test_calc.py::test_add"] is TestStatus.PASSED


def test_jest_qualifies_tests_by_file_and_describe_block() -> None:
    status = {case.id: case.status for case in parsed("jest", "cart-fail").tests}
    failed = "test/cart.jest.test.js \u203a discount \u203a ten percent at the threshold"
    assert status[failed] is TestStatus.FAILED
    assert status["test/cart.jest.test.js \u203a a todo test"] is TestStatus.SKIPPED


def test_junit_refuses_a_doctype_with_entities() -> None:
    """The XML comes from the sandbox: an entity bomb must not be expanded."""
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        '<!ENTITY lol2 "&lol;&lol;&lol;&lol;">]><testsuite tests="1">'
        '<testcase name="&lol2;"/></testsuite>'
    )
    result = get_parser("junit").parse(bomb)
    assert result.counts is None
    assert "DOCTYPE" in result.notes[0]


@pytest.mark.parametrize(
    ("text", "note"),
    [("not xml at all", "no JUnit XML"), ("<testsuite><testcase", "does not parse")],
)
def test_junit_without_a_readable_document_has_no_counts(text: str, note: str) -> None:
    result = get_parser("junit").parse(text)
    assert result.counts is None
    assert note in result.notes[0]


def test_junit_notes_suites_that_declare_other_totals_than_their_cases() -> None:
    text = '<testsuite tests="3"><testcase name="a"/><testcase name="b"/></testsuite>'
    result = get_parser("junit").parse(text)
    assert result.counts == Counts(passed=2)
    assert "declare 3" in result.notes[0]


def test_exit_code_parser_expects_no_tests_and_keeps_only_the_last_lines() -> None:
    result = get_parser("exit-code").parse("anything\n\n10 passed in 0.1s\n")
    assert result == ParseResult(counts=None, expects_tests=False,
                                 last_lines=("anything", "10 passed in 0.1s"))


# tsc 5.9 in a container (no terminal: no --pretty, no `Found` line), then with --pretty,
# mypy's and ruff's summaries.
TSC_PLAIN = ("src/index.ts(3,7): error TS2322: Type 'string' is not assignable to type "
             "'number'.\nsrc/index.ts(9,1): error TS2304: Cannot find name 'nope'.\n")
TSC_PRETTY = ("\x1b[96msrc/index.ts\x1b[0m:\x1b[93m3\x1b[0m:\x1b[93m7\x1b[0m - \x1b[91merror"
              "\x1b[0m\x1b[90m TS2322: \x1b[0mType 'string' is not assignable to type 'number'."
              "\n\n\x1b[7m3\x1b[0m const n: number = 'x';\n\n\nFound 1 error in "
              "src/index.ts\x1b[90m:3\x1b[0m\n\n")


@pytest.mark.parametrize(("text", "errors", "last"), [
    (TSC_PLAIN, 2, "src/index.ts(9,1): error TS2304: Cannot find name 'nope'."),
    (TSC_PRETTY, 1, "Found 1 error in src/index.ts:3"),
    ("a.py:1: error: Name \"x\" is not defined  [name-defined]\nFound 3 errors in 2 files "
     "(checked 4 source files)\n", 3, "Found 3 errors in 2 files (checked 4 source files)"),
    ("F401 [*] `os` imported but unused\nFound 12 errors.\n", 12, "Found 12 errors."),
    ("make: *** [Makefile:3: all] Error 2\n", None, "make: *** [Makefile:3: all] Error 2"),
], ids=["tsc", "tsc --pretty", "mypy", "ruff", "no count"])
def test_exit_code_parser_counts_errors_where_the_tool_prints_them(
        text: str, errors: int | None, last: str) -> None:
    result = get_parser("exit-code").parse(text)
    assert (result.errors, result.last_lines[-1], result.counts) == (errors, last, None)


def test_exit_code_parser_shows_no_control_character_the_output_holds() -> None:
    """The last lines are the contestant's output: an OSC title sequence's ESC and BEL
    are shown as spaces (a bare CR splits the line, as `splitlines` does)."""
    result = get_parser("exit-code").parse("\x1b]0;PASS\x07error: x\rall good\x07\n")
    assert result.last_lines == (" ]0;PASS error: x", "all good ")


def test_exit_code_parser_cuts_long_lines_and_keeps_three() -> None:
    result = get_parser("exit-code").parse("".join(f"{c * 500}\n" for c in "abcde"))
    assert result.last_lines == tuple(c * 157 + "..." for c in "cde")


def expected_runs() -> list[tuple[str, str, str]]:
    runs = []
    for spec in sorted(PROJECTS.glob("*/EXPECTED.json")):
        for parser in json.loads(spec.read_text())["parsers"]:
            runs += [(spec.parent.name, parser, outcome) for outcome in ("pass", "fail")]
    return runs


@pytest.mark.parametrize(("project", "parser", "outcome"), expected_runs())
def test_fixture_project_capture_matches_its_expected_json(
    project: str, parser: str, outcome: str
) -> None:
    """EXPECTED.json of each fixture project states the exact counts of its command on the
    clean tree and with fail.patch applied; the capture of that very command agrees."""
    spec = json.loads((PROJECTS / project / "EXPECTED.json").read_text())
    command = spec["parsers"][parser]["command"]
    want = spec["parsers"][parser][outcome]
    patch = spec["fail_patch"] if outcome == "fail" else None
    fmt = next(f for f, p in FORMAT_PARSER.items() if p == parser)
    matches = [
        name
        for f, name in all_captures()
        if f == fmt
        and (meta := capture(f, name)[1])["fixture"] == f"tests/fixtures/{project}"
        and meta["command"] == command
        and meta["patch"] == patch
    ]
    assert matches, f"no capture of {command!r} on {project} ({outcome})"
    for name in matches:
        text, meta = capture(fmt, name)
        result = get_parser(parser).parse(text)
        keys = ("passed", "failed", "skipped", "errors")
        assert result.counts == Counts(*(want[k] for k in keys))
        assert meta["exit_code"] == want["exit_code"]
        outcome_ = decide(parser=parser, exit_code=meta["exit_code"], parsed=result,
                          timed_out=False, oom_killed=False)
        assert outcome_.verdict == want["verdict"]
        assert outcome_.reason == want.get("reason")


def test_registry_is_keyed_by_the_manifest_names() -> None:
    assert set(PARSERS) == {
        "pytest", "cargo", "go-test", "node-test", "jest", "vitest", "junit", "exit-code"
    }
    assert all(parser.name == name for name, parser in PARSERS.items())


def test_unknown_parser_name_lists_the_known_ones() -> None:
    with pytest.raises(UnknownParserError) as raised:
        get_parser("go-test-json")
    assert isinstance(raised.value, KeyError) and isinstance(raised.value, ValueError)
    assert "go-test-json" in str(raised.value) and "node-test" in str(raised.value)


def test_pure_core_imports_no_docker_git_or_runner() -> None:
    """rig.parsers and rig.sample.verdict are pure: a fresh interpreter can import them without
    pulling in docker, GitPython or the orchestration package (runner.manifest, the
    vocabulary they measure, `expect_requests` included, is not orchestration)."""
    code = (
        "import json, sys\n"
        "import rig.parsers, rig.sample.verdict\n"
        "print(json.dumps(sorted(m for m in sys.modules\n"
        "    if m.split('.')[0] in {'docker', 'git', 'runner'}\n"
        "    and m not in {'runner', 'runner.errors'}\n"
        "    and not (m + '.').startswith('runner.manifest.'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert json.loads(out) == []


@pytest.mark.parametrize("name", ["glued-verbose", "glued-json"])
def test_go_result_lines_glued_to_a_test_s_output_are_go_s_own(name: str) -> None:
    """A protected test whose code prints without a newline (`fmt.Print("computing")`)
    has go's `--- PASS` glued to that output on one line (test2json of go 1.19 leaves it as
    output, with no pass event): read by id, it was missing, so an honest fix of such code
    was FAIL not_run. Counted only for a test go announced and has no result yet."""
    status = {case.id: case.status for case in parsed("go_test", name).tests}
    for test in ("TestGluedSerial", "TestGluedParallel", "TestGluedOther"):
        assert status[f"example.com/gomod/mathx::{test}"] is TestStatus.PASSED, test


def test_a_glued_result_line_of_a_test_never_announced_is_not_counted() -> None:
    """The glued form is no way around the announced rule: a test that prints
    `x--- PASS: TestElse (0.00s)` for a test go never started counts nothing."""
    text = ("=== RUN   TestA\nx--- PASS: TestElse (0.00s)\n--- PASS: TestA (0.00s)\nPASS\n"
            "ok  \texample.com/m\t0.001s\n")
    found = get_parser("go-test").parse(text)
    assert [case.id for case in found.tests] == ["example.com/m::TestA"]
