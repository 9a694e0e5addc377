"""`rig.sample.verdict.decide`: one test per rule, named after the incident it pins.

Where a real capture shows the situation it is used (tests/unit/parsers/fixtures/);
container-level facts (timeout, OOM, preflight) are given as the flags the oracle sets.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rig.guards.canary import Canary, Seen
from rig.parsers import UnknownParserError, get_parser
from rig.parsers.base import Counts, ParseResult
from rig.sample import verdict
from rig.sample.evidence import Evidence
from rig.sample.oracle import assess
from rig.sample.recorded import Base
from rig.sample.spec import Execution, SampleSpec
from rig.sample.verdict import FailReason, Outcome, RigErrorReason, Verdict, decide

FIXTURES = Path(__file__).parent / "parsers" / "fixtures"
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


def judge(fmt: str, name: str, *, exit_code: int | None = None, **flags: bool) -> Outcome:
    """decide() on a real capture, with its recorded exit code unless one is given."""
    meta = json.loads((FIXTURES / fmt / f"{name}.meta").read_text())
    text = (FIXTURES / fmt / f"{name}{'.xml' if fmt == 'junit' else '.txt'}").read_text()
    parser = FORMAT_PARSER[fmt]
    return decide(
        parser=parser,
        exit_code=meta["exit_code"] if exit_code is None else exit_code,
        parsed=get_parser(parser).parse(text),
        timed_out=flags.get("timed_out", False),
        oom_killed=flags.get("oom_killed", False),
        program_present=flags.get("program_present", True),
    )


def given(counts: Counts | None, exit_code: int, parser: str = "pytest", **fields: Any) -> Outcome:
    """decide() on a hand-made ParseResult, for situations no capture shows."""
    fields.setdefault("summaries", 0 if counts is None else 1)
    parsed = ParseResult(counts=counts, **fields)
    return decide(parser=parser, exit_code=exit_code, parsed=parsed, timed_out=False,
                  oom_killed=False)


def test_enum_values_are_the_record_strings() -> None:
    assert [v.value for v in Verdict] == ["PASS", "FAIL", "RIG_ERROR"]
    assert {r.value for r in RigErrorReason} == {
        "tool_missing", "command_not_found", "bad_invocation", "no_tests_ran",
        "unparsed_output", "infra",
    }
    assert {"tests_failed", "timeout", "oom_killed", "exit_mismatch", "spoofed_output",
            "build_failed"} <= {r.value for r in FailReason}


# Rule 1-3: what preflight, the container and the shell say


def test_tool_absent_at_preflight_is_a_rig_error_not_the_models_failure() -> None:
    """The image lacks pytest: exit 127 must not count against the arm."""
    outcome = judge("pytest", "command-not-found", program_present=False)
    assert (outcome.verdict, outcome.reason) == (Verdict.RIG_ERROR, RigErrorReason.tool_missing)


def test_typo_in_the_check_command_exit_127_is_command_not_found() -> None:
    """`pytset -q`: the shell says command not found; the code under test never ran."""
    outcome = judge("pytest", "command-not-found")
    assert (outcome.verdict, outcome.reason) == (
        Verdict.RIG_ERROR, RigErrorReason.command_not_found
    )


def test_exit_126_not_executable_is_command_not_found() -> None:
    outcome = given(None, 126)
    assert outcome.reason is RigErrorReason.command_not_found
    assert "not executable" in outcome.detail


def test_timeout_is_a_fail_even_when_a_passing_summary_was_printed() -> None:
    outcome = judge("pytest", "proj-pass", timed_out=True)
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, FailReason.timeout)


def test_oom_killed_container_is_a_fail() -> None:
    outcome = judge("cargo", "ws-pass", exit_code=137, oom_killed=True)
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, FailReason.oom_killed)


def test_no_recorded_exit_code_is_an_infra_rig_error() -> None:
    outcome = decide(parser="pytest", exit_code=None, parsed=ParseResult(counts=None),
                     timed_out=False, oom_killed=False)
    assert (outcome.verdict, outcome.reason) == (Verdict.RIG_ERROR, RigErrorReason.infra)


# Rule 4: the exit-code parser


@pytest.mark.parametrize(
    ("exit_code", "verdict", "reason"),
    [
        (0, Verdict.PASS, None),
        (1, Verdict.FAIL, FailReason.check_failed),
        (139, Verdict.FAIL, FailReason.check_failed),
        (127, Verdict.RIG_ERROR, RigErrorReason.command_not_found),
    ],
)
def test_exit_code_check_passes_on_zero_only(
    exit_code: int, verdict: Verdict, reason: FailReason | RigErrorReason | None
) -> None:
    outcome = decide(parser="exit-code", exit_code=exit_code,
                     parsed=get_parser("exit-code").parse("compiling...\n"),
                     timed_out=False, oom_killed=False)
    assert (outcome.verdict, outcome.reason) == (verdict, reason)


@pytest.mark.parametrize(("text", "detail"), [
    ("src/index.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.\n",
     "exit 2: the command failed with 1 error; its last lines: src/index.ts(3,7): error "
     "TS2322: Type 'string' is not assignable to type 'number'."),
    ("", "exit 2: the command failed; it printed nothing"),
], ids=["tsc", "silent"])
def test_a_failed_check_says_its_exit_its_error_count_and_its_last_lines(
        text: str, detail: str) -> None:
    """Issue 21 item 5: a failed `tsc --noEmit` read `tests_failed` with no more."""
    outcome = decide(parser="exit-code", exit_code=2, parsed=get_parser("exit-code").parse(text),
                     timed_out=False, oom_killed=False)
    assert (outcome.reason, outcome.detail) == (FailReason.check_failed, detail)


def test_signal_exit_is_named_in_the_detail() -> None:
    outcome = decide(parser="exit-code", exit_code=139, parsed=ParseResult(counts=None,
                     expects_tests=False), timed_out=False, oom_killed=False)
    assert "SIGSEGV" in outcome.detail


# Rule 5: the contestant broke the build


@pytest.mark.parametrize(
    ("fmt", "name"),
    [
        ("cargo", "build-error"),
        ("go_test", "build-failed-json"),
        ("go_test", "build-failed-verbose"),
        ("cargo", "build-script-panic"),
        ("pytest", "collection-error"),
        ("junit", "pytest-collection-error"),
        ("node_test", "syntax-error-tap"),
        ("jest", "suite-failed-to-run"),
        ("vitest", "suite-failed-to-run"),
    ],
)
def test_compile_error_in_the_code_under_test_is_build_failed_never_a_rig_error(
    fmt: str, name: str
) -> None:
    """cargo `error[E0277]`, go `[build failed]`, pytest exit 2 collection error, a JS
    syntax error: the contestant broke the code; no summary must not mean RIG_ERROR."""
    outcome = judge(fmt, name)
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, FailReason.build_failed)


@pytest.mark.parametrize(("name", "counts"), [("no-suite-beside-a-pass", Counts(passed=1)),
                                             ("no-suite-only", Counts())])
def test_a_vitest_file_that_defines_no_test_is_tests_failed_naming_it(name: str,
                                                                      counts: Counts) -> None:
    """Issue 21 item 5: `No test suite found in file` read as build_failed (the code
    compiled: a test file defines no test), and alone it is no rig error either."""
    outcome = judge("vitest", name)
    assert (outcome.verdict, outcome.reason, outcome.counts, outcome.detail) == (
        Verdict.FAIL, FailReason.tests_failed, counts,
        "exit 1: vitest found no test in /w/test/empty.test.mjs (a test file that defines "
        "none fails the run)")


def test_a_vitest_suite_that_failed_beside_an_empty_file_is_still_build_failed() -> None:
    text = (FIXTURES / "vitest" / "suite-failed-to-run.txt").read_text().replace(
        "Failed Suites 1", "Failed Suites 2") + (
        " FAIL  test/empty.test.mjs [ test/empty.test.mjs ]\n"
        "Error: No test suite found in file /work/test/empty.test.mjs\n")
    parsed = get_parser("vitest").parse(text)
    assert (parsed.build_failed, parsed.empty_files) == (True, ("test/empty.test.mjs",))


def test_crates_own_build_script_panicking_is_build_failed_not_unparsed_output() -> None:
    """Issue 15 item 2: units/build.rs panics ("failed to run custom build command for
    `units v0.1.0 (/tmp/w/units)`"): the tree's own code does not build; no test ran."""
    outcome = judge("cargo", "build-script-panic")
    assert (outcome.verdict, outcome.reason, outcome.counts) == (
        Verdict.FAIL, FailReason.build_failed, None
    )


def test_go_package_that_does_not_build_fails_the_run_while_others_pass() -> None:
    outcome = judge("go_test", "build-failed-json")
    assert outcome.counts == Counts(passed=5, skipped=1, errors=1)


def test_broken_conftest_exit_4_is_build_failed_not_bad_invocation() -> None:
    """pytest exits 4 (its usage-error code) when conftest.py fails to import: the
    conftest is the repository's code, so this is the contestant's failure."""
    outcome = judge("pytest", "conftest-error")
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, FailReason.build_failed)


# Rule 6: the rig's command line is wrong


@pytest.mark.parametrize(
    ("fmt", "name"),
    [
        ("pytest", "usage-error"),
        ("pytest", "missing-path"),
        ("cargo", "usage-error"),
        ("cargo", "no-such-test-target"),
        ("cargo", "libtest-usage-error"),
        ("go_test", "usage-error"),
        ("go_test", "test-binary-flag"),
        ("go_test", "no-such-package"),
        ("node_test", "usage-error"),
        ("node_test", "missing-file"),
        ("jest", "usage-error"),
        ("vitest", "usage-error"),
    ],
)
def test_runner_rejecting_the_check_command_is_bad_invocation(fmt: str, name: str) -> None:
    """An unknown flag or a test path that does not exist is the rig's fault; the rig
    measured nothing, so the outcome carries no counts (pytest's `no tests ran` zeros
    included)."""
    outcome = judge(fmt, name)
    assert (outcome.verdict, outcome.reason) == (Verdict.RIG_ERROR, RigErrorReason.bad_invocation)
    assert outcome.counts is None


def test_libtest_rejecting_its_own_arguments_is_bad_invocation_not_unparsed_output() -> None:
    """Issue 15 item 3: `cargo test -- --no-such-flag`: every test binary says "error:
    Unrecognized option: 'no-such-flag'" and runs nothing."""
    outcome = judge("cargo", "libtest-usage-error")
    assert (outcome.verdict, outcome.reason, outcome.counts) == (
        Verdict.RIG_ERROR, RigErrorReason.bad_invocation, None
    )
    assert outcome.detail == "exit 101: cargo rejected its command line"


@pytest.mark.parametrize(
    "name", ["test-binary-flag", "test-binary-flag-plain", "test-binary-flag-verbose"]
)
def test_unknown_go_test_flag_reports_no_counts_not_one_error_per_package(name: str) -> None:
    """Issue 15 item 7: `go test ./... -no-such-flag` fails both packages with "flag
    provided but not defined" and no test: the rig measured nothing, so there are no
    counts (it used to report one error per package), and the rig's command is at fault."""
    outcome = judge("go_test", name)
    assert (outcome.verdict, outcome.reason, outcome.counts) == (
        Verdict.RIG_ERROR, RigErrorReason.bad_invocation, None
    )
    assert outcome.detail == "exit 1: go-test rejected its command line"


def test_usage_text_printed_by_failing_code_does_not_turn_a_fail_into_a_rig_error() -> None:
    """Code under test that prints `error: unrecognized arguments:` while its tests fail
    must not escape its FAIL as bad_invocation."""
    outcome = given(Counts(passed=3, failed=3), 1, usage_error=True)
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, FailReason.tests_failed)


# Rule 7: output the runner did not print


@pytest.mark.parametrize(
    ("fmt", "name"),
    [
        ("pytest", "spoof-captured-stdout"),
        ("go_test", "spoof-json"),
        ("go_test", "spoof-verbose"),
        ("node_test", "spoof-spec"),
        ("jest", "spoof-stdout"),
        ("vitest", "spoof-stdout"),
    ],
)
def test_fake_passed_lines_printed_by_code_under_test_are_not_a_pass(fmt: str, name: str) -> None:
    """The patch prints its own `5 passed` / `test result: ok` / `--- PASS` lines."""
    outcome = judge(fmt, name)
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, FailReason.spoofed_output)


@pytest.mark.parametrize("name", ["spoof-captured-stdout", "lookalike-nocapture",
                                  "lookalike-quiet"])
def test_cargo_look_alike_lines_a_failing_test_printed_fail_with_the_real_counts(
        name: str) -> None:
    """Issue 30: libtest's own result line is its binary's last; a `test result: ok. 99
    passed` a test printed before it is the test's output: FAIL tests_failed with the
    binaries' real counts (it was spoofed_output with none)."""
    outcome = judge("cargo", name)
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, FailReason.tests_failed)
    assert outcome.counts is not None and outcome.counts.failed == 1


def test_fake_summary_printed_at_exit_after_the_real_one_is_spoofed() -> None:
    """An atexit hook prints `7 passed` after pytest's real `3 failed` summary line."""
    outcome = judge("pytest", "spoof-atexit")
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, FailReason.spoofed_output)
    assert outcome.counts == Counts(passed=3, failed=3, skipped=1)


def test_spoofed_summary_with_exit_0_is_still_not_a_pass() -> None:
    """Two summaries and exit 0 (the forged one agreeing with the exit code)."""
    outcome = given(Counts(passed=5), 0, summaries=2)
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, FailReason.spoofed_output)


@pytest.mark.parametrize("version", [7, 8, 9])
@pytest.mark.parametrize("mode", ["s", "q-s", "ra"])
def test_honest_suite_printing_summary_like_text_passes_with_the_rig_s_canaries(
        mode: str, version: int) -> None:
    """Issue 15 item 1: six passing tests print `1 passed, 3 failed in 0.01s` and the like
    (shown by -s, replayed by -rA); pytest exits 0 with `6 passed` as its own last line.
    Captured THROUGH THE RIG (tests/fixtures/capture-rig.py): the rig's observer saw
    every test's call and pytest's own reports; the text the tests printed is theirs and
    decides nothing: PASS with the real counts, canaries as planted."""
    name = f"prints-summaries-{mode}-pytest{version}"
    meta = json.loads((FIXTURES / "rig" / f"{name}.meta").read_text())
    planted = meta["canaries"]
    canary = Canary(runner="pytest", token=planted["token"], path=planted["path"],
                    content=b"", pass_name=planted["pass"], fail_name=planted["fail"],
                    fail_expect=Seen(planted["fail_expect"]))
    execution = Execution(exit_code=meta["exit_code"], duration_s=1.0,
                          log=(FIXTURES / "rig" / f"{name}.txt").read_text(), canary=canary,
                          observed=True,
                          observation=(FIXTURES / "rig" / f"{name}.observer.jsonl").read_text())
    spec = SampleSpec(change="c", arm="a", check="success", n=1, commit="h", base_commit="b",
                      command=meta["command"], parser="pytest", timeout_s=60, harness="base")
    graded = assess(spec, execution)
    assert (graded.outcome.verdict, graded.outcome.counts) == (Verdict.PASS, Counts(passed=6))
    assert graded.canaries.as_planted and graded.canaries.fail_seen is Seen.XFAILED


@pytest.mark.parametrize("version", [7, 8, 9])
@pytest.mark.parametrize("mode", ["s", "q-s", "ra"])
def test_honest_suite_printing_summary_like_text_without_canaries_reads_as_a_spoof(
        mode: str, version: int) -> None:
    """The limit of the text alone: without the rig's canaries the same output cannot be
    told from a forged summary printed after pytest's own one (the rule without them:
    more than one summary is a spoof). The rig always plants them for pytest."""
    outcome = judge("pytest", f"prints-summaries-{mode}-pytest{version}")
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, FailReason.spoofed_output)


def test_node_tap_escapes_printed_summary_lines_so_the_real_failure_stands() -> None:
    """node's TAP reporter turns printed `# tests 9` into `# \\# tests 9`: no spoof
    evidence is needed, the real counts say FAIL."""
    outcome = judge("node_test", "spoof-tap")
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, FailReason.tests_failed)


# Rule 8: the test process ended before the runner reported it all


def test_os_exit_before_pytest_summary_is_aborted_not_a_rig_error() -> None:
    """`os._exit(0)` in the code under test: progress dots, no summary, exit 0."""
    outcome = judge("pytest", "abort-os-exit")
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, FailReason.aborted)


def test_process_exit_in_code_under_test_hiding_node_tests_is_never_a_pass() -> None:
    """node reports the cut-short file as ONE passing test; 3 passed, exit 0."""
    outcome = judge("node_test", "abort-process-exit-tap")
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, FailReason.aborted)


def test_crashed_cargo_test_binary_is_aborted() -> None:
    """SIGABRT in two integration binaries: their `test result:` lines never come."""
    outcome = judge("cargo", "abort-test-binary")
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, FailReason.aborted)


# Rule 9: no summary


def test_output_without_any_summary_is_unparsed_output() -> None:
    parsed = get_parser("pytest").parse("Fatal Python error: Segmentation fault\n")
    outcome = decide(parser="pytest", exit_code=139, parsed=parsed, timed_out=False,
                     oom_killed=False)
    assert (outcome.verdict, outcome.reason) == (Verdict.RIG_ERROR, RigErrorReason.unparsed_output)
    assert outcome.detail == "no pytest summary in the output"


# node 18 and 22 print these for `node --test --test-reporter=dot` / `=junit` (to stdout).
UNREAD = {"dot": "X.\n\nFailed tests:\n\n\u2716 bad (0.5ms)\n",
          "junit": '<?xml version="1.0" encoding="utf-8"?>\n<testsuites>\n'
                   '\t<testcase name="fine" time="0.1" classname="test"/>\n</testsuites>\n'}


@pytest.mark.parametrize("reporter", list(UNREAD))
def test_a_node_reporter_the_rig_cannot_read_is_named_with_its_fix(reporter: str) -> None:
    parsed = get_parser("node-test").parse(UNREAD[reporter])
    outcome = decide(parser="node-test", exit_code=1, parsed=parsed, timed_out=False,
                     oom_killed=False)
    assert (outcome.verdict, outcome.reason) == (Verdict.RIG_ERROR, RigErrorReason.unparsed_output)
    assert outcome.detail == (
        f"no node-test summary in the output: the command asks node for the `{reporter}` "
        "reporter, which the rig cannot read: use --test-reporter=tap or spec (or send "
        f"{reporter} to a file and tap to stdout: --test-reporter={reporter} "
        "--test-reporter-destination=FILE --test-reporter=tap "
        "--test-reporter-destination=stdout)")


# Rule 10: no test ran


@pytest.mark.parametrize(
    ("fmt", "name"),
    [
        ("pytest", "no-tests-collected"),
        ("pytest", "no-tests-deselected"),
        ("cargo", "filtered-to-nothing"),
        ("go_test", "no-test-files"),
        ("go_test", "run-matches-nothing"),
        ("node_test", "no-tests"),
        ("jest", "no-tests"),
        ("vitest", "no-tests"),
    ],
)
def test_a_check_that_ran_no_test_is_no_tests_ran(fmt: str, name: str) -> None:
    """pytest exit 5, a filter matching nothing, `[no test files]`: the oracle executed
    nothing, so neither PASS nor FAIL can be trusted."""
    outcome = judge(fmt, name)
    assert (outcome.verdict, outcome.reason) == (Verdict.RIG_ERROR, RigErrorReason.no_tests_ran)


@pytest.mark.parametrize(
    ("fmt", "name", "detail"),
    [
        # issue 15 item 4: `ok pkg 0.008s [no tests to run]`, exit 0, in every output mode
        ("go_test", "run-matches-nothing", "exit 0: no test ran (0 passed, 0 failed)"),
        ("go_test", "run-matches-nothing-plain", "exit 0: no test ran (0 passed, 0 failed)"),
        ("go_test", "run-matches-nothing-verbose", "exit 0: no test ran (0 passed, 0 failed)"),
        # items 5 and 6: --passWithNoTests, "No tests found, exiting with code 0"
        ("jest", "no-tests-pass-with-no-tests", "exit 0: no test ran (0 passed, 0 failed)"),
        ("vitest", "no-tests-pass-with-no-tests", "exit 0: no test ran (0 passed, 0 failed)"),
    ],
)
def test_a_filter_matching_nothing_with_exit_0_is_no_tests_ran_not_unparsed_output(
    fmt: str, name: str, detail: str
) -> None:
    """The runner says it found nothing to run and exits 0: the oracle executed no test,
    and that is what the rig error says (not that it could not read the output)."""
    outcome = judge(fmt, name)
    assert (outcome.verdict, outcome.reason, outcome.counts) == (
        Verdict.RIG_ERROR, RigErrorReason.no_tests_ran, Counts()
    )
    assert outcome.detail == detail


def test_every_test_skipped_is_no_tests_ran() -> None:
    """All skipped (e.g. the service the tests need is absent in the image)."""
    outcome = given(Counts(skipped=4), 0)
    assert (outcome.verdict, outcome.reason) == (Verdict.RIG_ERROR, RigErrorReason.no_tests_ran)


# Rule 11: exit code against counts


def test_exit_0_with_failures_is_exit_mismatch() -> None:
    """`pytest ... || true` swallowed the exit code: 3 failed, exit 0."""
    outcome = judge("pytest", "exit-swallowed")
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, FailReason.exit_mismatch)
    assert outcome.detail == "exit 0 but 3 tests failed (3 passed, 3 failed, 1 skipped)"


def test_nonzero_exit_with_every_test_passed_is_exit_mismatch_never_a_pass() -> None:
    """All tests pass, then an atexit hook makes the process exit 3."""
    outcome = judge("pytest", "exit-nonzero-after-pass")
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, FailReason.exit_mismatch)


@pytest.mark.parametrize(
    ("fmt", "name"),
    sorted((p.parent.name, p.stem) for p in FIXTURES.glob("*/*.meta")),
)
@pytest.mark.parametrize("exit_code", [0, 1, 2, 3, 101])
def test_a_pass_always_has_exit_0_and_no_failure(fmt: str, name: str, exit_code: int) -> None:
    """Whatever a capture holds and whatever exit code comes with it."""
    outcome = judge(fmt, name, exit_code=exit_code)
    if outcome.verdict is Verdict.PASS:
        assert exit_code == 0
        assert outcome.counts is not None and outcome.counts.failed + outcome.counts.errors == 0


# Rule 12: the plain outcomes


@pytest.mark.parametrize(
    ("fmt", "name"),
    [("pytest", "proj-fail"), ("cargo", "ws-fail"), ("cargo", "ws-fail-fast"),
     ("go_test", "mod-fail-json"), ("node_test", "cart-fail-tap"), ("jest", "cart-fail"),
     ("vitest", "cart-fail"), ("junit", "vitest-fail")],
)
def test_failing_tests_with_a_nonzero_exit_are_tests_failed(fmt: str, name: str) -> None:
    outcome = judge(fmt, name)
    assert (outcome.verdict, outcome.reason) == (Verdict.FAIL, FailReason.tests_failed)


@pytest.mark.parametrize(
    ("fmt", "name"),
    [("pytest", "proj-pass"), ("cargo", "ws-pass"), ("go_test", "mod-pass-verbose"),
     ("node_test", "cart-pass-spec"), ("jest", "cart-pass"), ("vitest", "cart-pass"),
     ("junit", "pytest-pass")],
)
def test_all_tests_passed_with_exit_0_is_a_pass(fmt: str, name: str) -> None:
    outcome = judge(fmt, name)
    assert (outcome.verdict, outcome.reason) == (Verdict.PASS, None)


def test_unknown_parser_name_is_a_callers_bug_not_a_verdict() -> None:
    with pytest.raises(UnknownParserError):
        given(Counts(passed=1), 0, parser="go-test-json")


BUILD_LOG = ("\n> ts-router@1.4.0 build\n> tsc -p tsconfig.build.json\n\n"
             "src/extra.ts(1,59): error TS1005: ')' expected.\n")


def test_a_failed_build_is_the_arms_build_failed_unless_the_bases_fails_too() -> None:
    """Issue 21: `[toolchain] build` runs on the arm's tree before the command; its failure
    is decided before any output (the command never ran), by the differential rule."""
    sample = Evidence(parser="vitest", build="npm run build", build_exit=2,
                      build_log=BUILD_LOG, exit_code=None)
    shown = ("the build (npm run build) failed: exit 2 with 1 error; its last lines: > "
             "ts-router@1.4.0 build | > tsc -p tsconfig.build.json | src/extra.ts(1,59): "
             "error TS1005: ')' expected.")
    alone = verdict.judge(sample)
    assert (alone.outcome.verdict, alone.outcome.reason, alone.outcome.detail,
            alone.needs_base) == (Verdict.FAIL, FailReason.build_failed, shown, True)
    built = Base("c/@base/success/1", Verdict.FAIL, "tests_failed")
    assert verdict.judge(sample, built).outcome.detail == (
        f"{shown}; the base's build in the same image succeeds")
    broken = Base("c/@base/success/1", Verdict.RIG_ERROR, "bad_invocation", build_failed=True)
    both = verdict.judge(sample, broken).outcome
    assert (both.verdict, both.reason, both.detail) == (
        Verdict.RIG_ERROR, RigErrorReason.bad_invocation,
        f"{shown}; the base's build fails too (c/@base/success/1): fix [toolchain].build")
    own = verdict.judge(Evidence(parser="vitest", build="npm run build", build_exit=2,
                                 of_base=True)).outcome
    assert (own.verdict, own.reason, own.detail) == (
        Verdict.RIG_ERROR, RigErrorReason.bad_invocation,
        "the build (npm run build) failed: exit 2; it is the base's own tree: fix "
        "[toolchain].build")
    slow = verdict.judge(Evidence(parser="vitest", build="npm run build", build_exit=124),
                         built).outcome
    assert slow.detail == ("the build (npm run build) timed out; the base's build in the "
                           "same image succeeds")
    assert verdict.judge(Evidence(parser="exit-code", build="npm run build", build_exit=0,
                                  exit_code=0, parsed=get_parser("exit-code").parse(""))
                         ).outcome.verdict is Verdict.PASS


def test_a_passing_browser_criterion_off_the_real_path_fails_without_asking_the_base() -> None:
    """Issue 22: the tests passed, but the flow never got the app server's 2xx for an
    expected endpoint: FAIL not_real_path, decided at once (a reproduction, which has no
    base run, grades it the same); a failing run keeps its own reason."""
    from rig.guards import real_path

    passing = get_parser("pytest").parse(
        "ui/test_cap.py::test_summary[chromium-90] PASSED [100%]\n1 passed in 2.01s\n")
    requests = b'{"format": 1, "kind": "request", "test": "t::a", "method": "GET", ' \
        b'"url": "http://localhost:8/", "origin": "http://localhost:8", "path": "/", ' \
        b'"status": 200, "answered_by": "server", "resource_type": "document", ' \
        b'"failure": null, "blocked": false}\n'
    tests = b'{"format": 1, "kind": "test", "test": "t::a", "outcome": "passed", ' \
        b'"expect_requests": null}\n'
    unmet = real_path.decide(["POST /api/horizon"], requests, "http://localhost:8", tests, "t")
    judged = verdict.judge(Evidence(parser="pytest", exit_code=0, parsed=passing,
                                    by_id=True, real_path=unmet))
    assert (judged.outcome.verdict, judged.outcome.reason, judged.needs_base) == (
        Verdict.FAIL, FailReason.not_real_path, False)
    assert judged.outcome.detail == ("the flow did not take the real path: POST /api/horizon "
                                     "2xx: never requested by the page")
    failing = get_parser("pytest").parse(
        "ui/test_cap.py::test_summary[chromium-90] FAILED [100%]\n1 failed in 2.01s\n")
    assert verdict.judge(Evidence(parser="pytest", exit_code=1, parsed=failing,
                                  real_path=unmet)).outcome.reason is FailReason.tests_failed
    unrecorded = real_path.decide(["GET /"], requests, "http://localhost:8", None, "t")
    assert unrecorded.unmet == (unrecorded.findings[1],)  # tests.jsonl missing
    met = real_path.decide(["GET /"], requests, "http://localhost:8", tests, "t")
    assert verdict.judge(Evidence(parser="pytest", exit_code=0, parsed=passing,
                                  real_path=met)).outcome.verdict is Verdict.PASS
