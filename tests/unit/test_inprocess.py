"""The canaries of node --test, go test and cargo in the protected tests' own process
(`rig.guards.inprocess`), how they are read back (`rig.guards.canary.split`, `observe`), the verdict
rules that rest on them, the toolchains' harness by place, and the `unguarded` notes in
the record and the reports (class 11)."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from rig.guards import canary, harness, inprocess, plant, shell
from rig.guards.canary import Seen
from rig.parsers import get_parser
from rig.parsers.base import Counts, LocatedCase, ParseResult, TestCase, TestStatus, where_of
from rig.report.results import integrity_lines
from rig.report.scorecard import unguarded_lines
from rig.sample import verdict
from rig.sample.evidence import Evidence
from rig.sample.recorded import Base
from rig.sample.tree import Entry, Kind
from tests.unit.test_report import build, round_one

NODE_TEST = """const test = require('node:test');
test('applies discount', () => {});
test.skip('not yet', () => {});
describe('cart', () => { it("keeps \\"small\\" totals", () => {}); });
"""
NODE_PATHS = ["package.json", "src/cart.js", "test/cart.test.js"]


def node_plan(command: str = "node --test") -> canary.Canary:
    plan = plant.plan("node-test", "ab12cd34", NODE_PATHS, command, ["test/cart.test.js"],
                       {"test/cart.test.js": NODE_TEST})
    assert plan is not None
    return plan


def test_node_twins_carry_the_protected_tests_names_and_load_through_a_preload() -> None:
    plan = node_plan()
    assert plan.twins == ("applies discount", 'keeps "small" totals')
    preload, content = plan.files[0]
    assert plan.env == (("NODE_OPTIONS", f"--require /work/{preload}"),)
    assert plan.marker == f"/work/{preload}" and "/" not in preload
    assert b'"/work/test/cart.test.js": ["applies discount"' in content
    assert plan.sentinels[0].startswith("applies discount (")
    names = " ".join([plan.pass_name, plan.fail_name or "", *plan.sentinels, preload,
                      plan.path]) + plan.content.decode() + content.decode()
    assert "akeoff" not in names


def test_node_twins_need_a_must_fail_canary_to_be_plantable() -> None:
    plan = node_plan("node --test | tee out")
    assert (plan.fail_name, plan.twins, len(plan.sentinels)) == (None, (), 1)
    assert b'"/work/test/cart.test.js": []' in plan.files[0][1]


def test_node_sentinel_runs_after_the_file_s_tests_even_for_an_es_module() -> None:
    """An ES module main registers its tests after the preload's setImmediate: the
    sentinel goes in at the first beforeExit instead, the runner's own beforeExit handler
    (which would cancel it) held back until it has run."""
    preload = node_plan().files[0][1].decode()
    assert "if (event === 'beforeExit') { held.push(listener); return this; }" in preload
    assert "if (stage === 0) { stage = 1; test(plan.sentinel" in preload


def test_a_node_twin_is_told_from_its_protected_test_by_location() -> None:
    plan = node_plan()
    tests = [LocatedCase("applies discount", TestStatus.FAILED, plan.marker),
             LocatedCase("applies discount", TestStatus.PASSED, "/work/test/cart.test.js"),
             LocatedCase('keeps "small" totals', TestStatus.FAILED, plan.marker),
             LocatedCase('keeps "small" totals', TestStatus.PASSED, "/work/test/cart.test.js"),
             LocatedCase(plan.sentinels[0], TestStatus.PASSED, plan.marker),
             LocatedCase(plan.pass_name, TestStatus.PASSED, "/work/" + plan.path),
             LocatedCase(plan.fail_name or "", TestStatus.FAILED, "/work/" + plan.path)]
    ours, mine = canary.split(plan, tests)
    assert [t.status for t in mine] == [TestStatus.PASSED, TestStatus.PASSED]
    evidence = canary.observe(plan, tests, 1)
    assert (evidence.pass_seen, evidence.fail_seen, evidence.clean) == (
        Seen.PASSED, Seen.FAILED, True)
    assert evidence.removed == Counts(passed=2, failed=3) and len(ours) == 5
    # node locates failures only: a twin forged to pass is the first of its name
    forged = [TestCase("applies discount", TestStatus.PASSED), *tests[1:]]
    assert canary.observe(plan, forged, 0).forced
    assert canary.split(plan, forged)[1][0] == tests[1]


def test_unlocated_node_twins_are_the_first_of_their_name() -> None:
    """The spec reporter prints no location: a twin runs first, so it is the first."""
    plan = node_plan()
    tests = [TestCase("applies discount", TestStatus.FAILED),
             TestCase("applies discount", TestStatus.PASSED)]
    ours, mine = canary.split(plan, tests)
    assert (ours[0].status, [t.status for t in mine]) == (TestStatus.FAILED,
                                                          [TestStatus.PASSED])


def test_node_tap_locations_are_read_into_the_test_cases() -> None:
    text = ("TAP version 13\n# Subtest: applies discount\nnot ok 1 - applies discount\n"
            "  ---\n  duration_ms: 1.9\n  location: '/work/.x.cjs:4:3'\n  ...\n"
            "# Subtest: applies discount\nok 2 - applies discount\n  ---\n"
            "  location: '/work/test/cart.test.js:4:1'\n  ...\n1..2\n# tests 2\n# pass 1\n"
            "# fail 1\n")
    cases = get_parser("node-test").parse(text).tests
    assert [(t.status, where_of(t)) for t in cases] == [
        (TestStatus.FAILED, "/work/.x.cjs"), (TestStatus.PASSED, "/work/test/cart.test.js")]


GO_TEST = ("package mathx\n\nimport \"testing\"\n\nfunc TestClamp(t *testing.T) {}\n\n"
           "func TestKeeps(t *testing.T) {}\n")
GO_PATHS = ["go.mod", "mathx/mathx.go", "mathx/mathx_test.go"]


def test_go_gets_a_test_main_sentinel_in_the_protected_package() -> None:
    plan = plant.plan("go-test", "ab12cd34", GO_PATHS, "go test ./...",
                       ["mathx/mathx_test.go"], {"mathx/mathx_test.go": GO_TEST})
    assert plan is not None and plan.twins == ()
    (path, content), = plan.files
    assert path.startswith("mathx/mathx_") and path.endswith("_test.go")
    assert content.startswith(b"package mathx\n") and b"func TestMain(m *testing.M)" in content
    assert plan.sentinels[0].startswith("TestClamp_")
    assert plan.path.startswith("mathx/t") and b"t.Fatal" in plan.content  # its own package


def test_go_package_with_its_own_test_main_gets_no_sentinel_and_says_so() -> None:
    paths = [*GO_PATHS, "mathx/main_test.go"]
    plan = plant.plan("go-test", "ab12cd34", paths, "go test ./...", ["mathx/mathx_test.go"],
                       {"mathx/mathx_test.go": GO_TEST,
                        "mathx/main_test.go": "package mathx\n\nfunc TestMain(m *testing.M) {}\n"})
    assert plan is not None and (plan.files, plan.sentinels) == ((), ())
    assert plan.notes == ("no sentinel in go package mathx: its own TestMain "
                          "(mathx/main_test.go) runs the tests",)


def test_go_samples_list_every_test() -> None:
    assert inprocess.runner_env("go-test") == {"GOFLAGS": "-v"}
    assert inprocess.runner_env("cargo") == {}


CARGO = '[package]\nname = "edge"\nversion = "0.1.0"\n'
RUST_TEST = "mod common;\n\n#[test]\nfn clamps() {}\n\n#[test]\n#[should_panic]\nfn keeps() {}\n"
CARGO_PATHS = ["Cargo.toml", "src/lib.rs", "tests/it.rs", "tests/common/mod.rs"]


def cargo_plan(test: str = RUST_TEST, manifest: str = CARGO,
               command: str = "cargo test --no-fail-fast") -> canary.Canary:
    plan = plant.plan("cargo", "ab12cd34", CARGO_PATHS, command, ["tests/it.rs"],
                       {"Cargo.toml": manifest, "tests/it.rs": test})
    assert plan is not None
    return plan


def test_cargo_roots_the_protected_binary_in_the_rig_s_file_that_includes_it() -> None:
    plan = cargo_plan()
    files = dict(plan.files)
    root = next(p for p in files if p.startswith("tests/it_"))
    assert root.endswith("/it.rs") and files[root].startswith(b'include!("../it.rs");\n')
    targets = tomllib.loads(files["Cargo.toml"].decode())["test"]
    assert targets == [{"name": "it", "path": root}]
    assert [t.rsplit("_", 1)[0] for t in plan.twins] == ["clamps", "keeps"]
    assert all(f"fn {t}()".encode() in files[root] for t in (*plan.twins, *plan.sentinels))
    # a twin fails without a panic message (stderr in pieces would split libtest's
    # `test NAME ... ` from its status under --nocapture): as does the must-fail canary
    assert files[root].count(b"std::panic::resume_unwind(") == len(plan.twins)
    assert b"resume_unwind(" in plan.content and b"assert" not in plan.content
    again = cargo_plan()  # another sample (the base's): the same root, so the same ids
    assert root in dict(again.files)


def test_cargo_twins_need_no_fail_fast() -> None:
    plan = cargo_plan(command="cargo test")
    assert (plan.fail_name, plan.twins, len(plan.sentinels)) == (None, (), 1)


@pytest.mark.parametrize("command", ["cargo test -q", "cargo test --quiet -p edge",
                                     "cargo test -- -q", "cargo test -- --format terse"])
def test_cargo_terse_output_keeps_only_the_sentinel_and_says_so(command: str) -> None:
    """Issue 30: libtest's terse output (dots) names no passing test, and without
    --no-fail-fast nothing that fails can be planted: no canary test; the sentinel stays
    in the protected binary so its header still counts one test more than a forger's
    report of the protected tests."""
    plan = plant.plan("cargo", "ab12cd34", CARGO_PATHS, command, ["tests/it.rs"],
                       {"Cargo.toml": CARGO, "tests/it.rs": RUST_TEST})
    assert plan is not None
    assert (plan.fail_name, plan.twins, len(plan.sentinels)) == (None, (), 1)
    assert b"#[test]" not in plan.content
    assert plan.notes[0].startswith("libtest's terse output")


@pytest.mark.parametrize("command", ["cargo test --no-fail-fast -q",
                                     "cargo test --no-fail-fast --quiet -p edge",
                                     "cargo test --no-fail-fast -- -q",
                                     "cargo test --no-fail-fast -- --format=terse"])
def test_cargo_terse_output_with_no_fail_fast_plants_the_must_fail_canaries(
        command: str) -> None:
    """Issue 30: under terse output libtest still names every failed test in its
    `failures:` list, so with --no-fail-fast the twins and the canary binary's must-fail
    test are planted (read from that list); no sentinel and no must-pass canary (a passing
    test is never named; the twins already make the header count more)."""
    plan = plant.plan("cargo", "ab12cd34", CARGO_PATHS, command, ["tests/it.rs"],
                       {"Cargo.toml": CARGO, "tests/it.rs": RUST_TEST})
    assert plan is not None and plan.fail_name is not None
    assert (plan.pass_name, len(plan.twins), plan.sentinels) == ("", 2, ())
    assert plan.content.count(b"#[test]") == 1 and plan.fail_name.encode() in plan.content
    root = dict(plan.files)[next(p for p, _ in plan.files if p.endswith("/it.rs"))]
    assert root.count(b"#[test]") == 2
    assert plan.notes[0].startswith("libtest's terse output (`-q`, `--format terse`) names "
                                    "only failed tests")


def _terse_run(failures: list[str], passed: int) -> str:
    """A terse (`-q`) run of one binary: dots, libtest's failures list, its result line."""
    listed = "".join(f"    {name}\n" for name in failures)
    blocks = "".join(f"---- {name} stdout ----\nplanted\n\n" for name in failures)
    section = f"failures:\n\n{blocks}\nfailures:\n{listed}\n" if failures else ""
    status = "FAILED" if failures else "ok"
    return (f"\nrunning {passed + len(failures)} tests\n{'.' * passed}{'F' * len(failures)}\n"
            f"{section}test result: {status}. {passed} passed; {len(failures)} failed; 0 "
            "ignored; 0 measured; 0 filtered out; finished in 0.00s\n\n")


def test_cargo_terse_twins_are_read_from_the_failures_list() -> None:
    """Issue 30: under `cargo test --no-fail-fast -q` the twins fail as planted only when
    libtest's failures list names them; a forger's consistent report that does not (all
    dots, `ok`, exit 0) leaves them absent. The counts lose the planted failures."""
    plan = plant.plan("cargo", "ab12cd34", CARGO_PATHS, "cargo test --no-fail-fast -q",
                       ["tests/it.rs"], {"Cargo.toml": CARGO, "tests/it.rs": RUST_TEST})
    assert plan is not None and plan.fail_name is not None
    parser = get_parser("cargo")
    honest = parser.parse(_terse_run([*plan.twins], 2) + _terse_run([plan.fail_name], 0))
    assert honest.tests == () and len(honest.terse_failed) == 3
    evidence = canary.observe(plan, honest.terse_failed, 101)
    assert (evidence.pass_seen, evidence.fail_seen, evidence.clean) == (
        Seen.PASSED, Seen.FAILED, True)
    assert canary.discount(honest.counts, evidence) == Counts(passed=2)
    forged = parser.parse(_terse_run([], 4))
    assert forged.spoof_evidence == () and forged.terse_failed == ()
    assert canary.observe(plan, forged.terse_failed, 0).fail_seen is Seen.ABSENT


def test_cargo_twins_that_failed_explain_the_failure_status_without_the_canary_binary(
        ) -> None:
    """Issue 30: `cargo test --no-fail-fast --test it` runs the protected binary (its
    twins fail as planted) but not the canary binary: exit 101 with no other failure is
    the twins', read as 0 (it was `exit_mismatch` on an honest fix)."""
    plan = cargo_plan()
    lines = [f"test {name} ... FAILED" for name in plan.twins]
    lines += ["test clamps ... ok", "test keeps ... ok", f"test {plan.sentinels[0]} ... ok"]
    text = ("     Running tests/it.rs (target/debug/deps/it-0123456789abcdef)\n\n"
            f"running {len(lines)} tests\n" + "\n".join(lines) + "\n\ntest result: FAILED. "
            f"3 passed; {len(plan.twins)} failed; 0 ignored; 0 measured; 0 filtered out; "
            "finished in 0.00s\n\n")
    parsed = get_parser("cargo").parse(text)
    evidence = canary.observe(plan, parsed.tests, 101)
    assert evidence.fail_seen is Seen.ABSENT  # the canary binary's must-fail test
    counts = canary.discount(parsed.counts, evidence)
    assert counts == Counts(passed=2)
    assert canary.exit_without("cargo", 101, counts, evidence) == 0
    assert canary.exit_without("cargo", 101, Counts(passed=1, failed=1), evidence) == 101


@pytest.mark.parametrize(("test", "manifest", "why"), [
    ("#![allow(dead_code)]\n" + RUST_TEST, CARGO, "it has inner attributes"),
    (RUST_TEST, CARGO + '\n[[test]]\nname = "it"\nharness = true\n',
     "Cargo.toml declares its target"),
])
def test_cargo_protected_file_the_rig_cannot_root_is_said(test: str, manifest: str,
                                                          why: str) -> None:
    plan = cargo_plan(test, manifest)
    assert (plan.files, plan.twins, plan.sentinels) == ((), (), ())
    assert len(plan.notes) == 1 and plan.notes[0].startswith(
        "canaries for tests/it.rs in another binary: " + why)


@pytest.mark.parametrize(("command", "runner", "planted"), [
    ("go test ./...", "go-test", True),
    ("go vet ./... && go test -count=1 ./...", "go-test", True),
    ("go test ./... && go vet ./...", "go-test", False),
    ("npm ci --offline && npm test", "node-test", True),
    ("npm test && npm run lint", "node-test", False),
    ("cargo build && cargo test --no-fail-fast", "cargo", True),
    ("cargo test || true", "cargo", False),
    ("make && npx vitest run", "vitest", True),
])
def test_must_fail_canaries_for_and_lists_whose_last_step_is_the_runner(
        command: str, runner: str, planted: bool) -> None:
    assert shell.may_fail(command, runner) is planted


# -- the verdict -----------------------------------------------------------------------


def go_run(sentinel: TestStatus, plan: canary.Canary) -> Evidence:
    cases = (TestCase("m::TestClamp", TestStatus.PASSED),
             TestCase(f"m::{plan.sentinels[0]}", sentinel),
             TestCase(f"m/t::{plan.pass_name}", TestStatus.PASSED),
             TestCase(f"m/t::{plan.fail_name}", TestStatus.FAILED))
    return Evidence(parser="go-test", exit_code=1, canary=plan, parsed=ParseResult(
        counts=Counts(passed=3, failed=1), summaries=2, summed=True, tests=cases))


def test_a_go_sentinel_reading_fail_under_a_passing_report_is_tampered() -> None:
    """The binary's TestMain saw a test fail; its output says every test passed."""
    plan = plant.plan("go-test", "ab12cd34", GO_PATHS, "go test ./...",
                       ["mathx/mathx_test.go"], {"mathx/mathx_test.go": GO_TEST})
    assert plan is not None
    honest = verdict.judge(go_run(TestStatus.PASSED, plan)).outcome
    assert (honest.verdict, honest.counts) == (verdict.Verdict.PASS, Counts(passed=1))
    forged = verdict.judge(go_run(TestStatus.FAILED, plan)).outcome
    assert (forged.verdict, forged.reason) == (verdict.Verdict.FAIL,
                                               verdict.FailReason.tampered)
    assert forged.detail.startswith("the run's own status contradicts its output")


def test_by_id_reads_the_protected_test_not_its_twin() -> None:
    """A twin's failure under the protected test's name is not the protected test's."""
    plan = node_plan()
    cases = (LocatedCase("applies discount", TestStatus.FAILED, plan.marker),
             LocatedCase("applies discount", TestStatus.PASSED, "/work/test/cart.test.js"),
             LocatedCase('keeps "small" totals', TestStatus.FAILED, plan.marker),
             LocatedCase('keeps "small" totals', TestStatus.PASSED, "/work/test/cart.test.js"),
             LocatedCase(plan.sentinels[0], TestStatus.PASSED, plan.marker),
             TestCase(plan.pass_name, TestStatus.PASSED), TestCase(plan.fail_name or "",
                                                                    TestStatus.FAILED))
    evidence = Evidence(parser="node-test", exit_code=1, canary=plan, by_id=True,
                                parsed=ParseResult(counts=Counts(passed=4, failed=3),
                                                   summaries=1, tests=cases))
    base = Base("c/@base/success/1", verdict.Verdict.FAIL, "tests_failed",
                        tests=(verdict_test("applies discount"),
                               verdict_test('keeps "small" totals')))
    got = verdict.judge(evidence, base).outcome
    assert (got.verdict, got.reason) == (verdict.Verdict.PASS, None), got.detail


def verdict_test(test_id: str) -> object:
    from rig.guards.observer import Status, Test
    return Test(test_id, Status.FAILED)


@pytest.mark.parametrize("parser", ["junit"])
def test_a_runner_without_canaries_is_marked_unguarded(parser: str) -> None:
    evidence = Evidence(parser=parser, exit_code=0, parsed=ParseResult(
        counts=Counts(passed=2), summaries=1))
    assert verdict.judge(evidence).unguarded == (verdict.UNCANARIED[parser],)


def test_a_shell_list_s_missing_must_fail_canary_is_marked_unguarded() -> None:
    plan = plant.plan("go-test", "ab12cd34", GO_PATHS, "go test ./... | tee log", [], {})
    evidence = Evidence(parser="go-test", exit_code=0, canary=plan,
                                command="go test ./... | tee log",
                                parsed=ParseResult(counts=Counts(passed=1), summaries=1))
    assert verdict.judge(evidence).unguarded[0].startswith(
        "no must-fail canary: the command is a shell list")


# -- the reports ----------------------------------------------------------------------


def test_unguarded_checks_are_shown_on_the_scorecard_and_in_results() -> None:
    arms = round_one()
    note = "no canary for vitest: a runner configuration ..."
    records = arms[0].success.records
    unguarded = dataclasses.replace(arms[0].success, records=tuple(
        r.model_copy(update={"unguarded": [note]}) for r in records))
    arms[0] = dataclasses.replace(arms[0], success=unguarded)
    assert unguarded_lines(arms) == [f"- `success` (ctl): {note}"]
    assert unguarded_lines(round_one()) == [
        "None: every check's grading was guarded by its canaries."]
    obs = build()
    rounds = [obs.rounds[0].model_copy(update={"arms": [
        obs.rounds[0].arms[0].model_copy(update={"unguarded": {"success": [note]}}),
        *obs.rounds[0].arms[1:]]}), *obs.rounds[1:]]
    lines = integrity_lines(obs.model_copy(update={"rounds": rounds}))
    assert f"- cap: `success` unguarded (ctl): {note}" in lines


# -- the toolchains' harness by place -------------------------------------------------


def entry(text: str) -> Entry:
    data = text.encode()
    return Entry(Kind.FILE, data, "0" * 40, len(data))


def test_cargo_target_beside_a_cargo_toml_and_a_named_build_script_are_harness() -> None:
    base = {"crate/Cargo.toml": entry('[package]\nname = "x"\nbuild = "tools/gen.rs"\n'),
            "crate/tools/gen.rs": entry("fn main() {}\n"), "src/target/mod.rs": entry("x")}
    arm = {**base, "crate/target/debug/deps/it-0123": entry("#!/bin/sh\n"),
           "crate/tools/gen.rs": entry("fn main() { evil() }\n")}
    pinned = harness.pin(arm, base)
    assert pinned.removed == ("crate/target/debug/deps/it-0123",)
    assert pinned.restored == ("crate/tools/gen.rs",)
    assert "src/target/mod.rs" in arm  # a directory named target elsewhere is code


# -- vitest and jest: a must-fail canary read from the failure listing ------------------

FIXTURES = Path(__file__).resolve().parent / "parsers" / "fixtures"
JS_PATHS = ["package.json", "src/cart.js", "test/cart.vitest.test.mjs"]
VITEST_TEST = "import { describe, test, expect } from 'vitest';\ntest('totals', () => {});\n"


def js_plan(runner: str, command: str, config: str = "{}") -> canary.Canary | None:
    return plant.plan(runner, "ab12cd34", JS_PATHS, command, ["test/cart.vitest.test.mjs"],
                       {"test/cart.vitest.test.mjs": VITEST_TEST, "package.json": config})


def test_vitest_canary_is_a_failing_test_file_of_the_protected_file_s_naming() -> None:
    plan = js_plan("vitest", "npx vitest run")
    assert plan is not None and plan.pass_name == ""
    assert plan.path == f"test/cart-{inprocess.suffix('ab12cd34', 'file')}.vitest.test.mjs"
    assert plan.content.startswith(b"import { test } from 'vitest';\n")
    assert plan.fail_name == f"totals ({inprocess.suffix('ab12cd34', 'fail')})"


@pytest.mark.parametrize(("command", "config"), [
    ("npx vitest run --bail=1", "{}"), ("npx jest", '{"jest": {"bail": 1}}'),
    ("npx vitest run | tee out", "{}")])
def test_no_js_canary_where_its_failure_could_stop_the_run(command: str, config: str) -> None:
    """A run that bails at the first failure (or a shell list) would let the must-fail
    canary change what runs: none is planted, and the record says the runner is
    unguarded."""
    runner = "jest" if "jest" in command else "vitest"
    assert js_plan(runner, command, config) is None
    evidence = Evidence(parser=runner, exit_code=0, parsed=ParseResult(
        counts=Counts(passed=1), summaries=1))
    assert verdict.judge(evidence).unguarded == (
        f"no canary could be planted for this {runner} command: {verdict.NO_CANARY[runner]}",)


def with_canary_failure(runner: str, name: str) -> str:
    """The captured failing run, with the canary's failure listed as the runner lists
    a failed test of another file."""
    text = (FIXTURES / runner / "cart-fail.txt").read_text()
    if runner == "vitest":
        listed = f" \u276f test/c.test.mjs (1 test | 1 failed) 2ms\n   \u00d7 {name} 1ms\n\n"
        return text.replace("⎯⎯⎯⎯⎯⎯⎯ Failed Tests 1", f"{listed}⎯⎯⎯⎯⎯⎯⎯ Failed Tests 1", 1).replace(
            "Tests  1 failed | 3 passed", "Tests  2 failed | 3 passed")
    return text.replace("Test Suites:", f"FAIL test/c.test.js\n  ● {name}\n\n    boom\n\n"
                        "Test Suites:", 1).replace("Tests:       1 failed", "Tests:       2 failed")


@pytest.mark.parametrize("runner", ["vitest", "jest"])
def test_js_must_fail_canary_reads_failed_from_the_failure_listing(runner: str) -> None:
    plan = js_plan(runner, "npx vitest run" if runner == "vitest" else "npx jest")
    assert plan is not None and plan.fail_name is not None
    parsed = get_parser(runner).parse(with_canary_failure(runner, plan.fail_name))
    evidence = canary.observe(plan, parsed.tests, 1)
    assert (evidence.pass_seen, evidence.fail_seen, evidence.clean) == (
        Seen.PASSED, Seen.FAILED, True)
    assert canary.discount(parsed.counts, evidence) == Counts(passed=3, failed=1, skipped=2)
    quiet = get_parser(runner).parse((FIXTURES / runner / "cart-fail.txt").read_text())
    assert canary.observe(plan, quiet.tests, 1).fail_seen is Seen.ABSENT  # filtered out


def test_cargo_result_line_must_count_the_failures_the_binary_listed() -> None:
    """Class 4: libtest's output rewritten in place (fd 1 through a pipe): the protected
    test's `FAILED` line turned `ok` while its binary's result line still counts it (and
    the twins) failed. Without per-test lines (`--format=terse`) nothing is compared."""
    def run(lines: str, failed: int) -> str:
        return (" Running tests/it.rs (target/debug/deps/it-0123456789abcdef)\n\nrunning 3 tests\n"
                f"{lines}\ntest result: FAILED. {3 - failed} passed; {failed} failed; 0 "
                "ignored; 0 measured; 0 filtered out; finished in 0.00s\n\n").replace(
                    " Running", "     Running")
    honest = get_parser("cargo").parse(run(
        "test clamps ... FAILED\ntest clamps_1a2b3c ... FAILED\ntest keeps ... ok\n", 2))
    assert honest.spoof_evidence == ()
    forged = get_parser("cargo").parse(run(
        "test clamps ... ok\ntest clamps_1a2b3c ... FAILED\ntest keeps ... ok\n", 2))
    assert forged.spoof_evidence == (
        "tests/it.rs: 1 tests listed FAILED but the result line says 2 failed",)
    terse = get_parser("cargo").parse(run("..F\n", 1))
    assert terse.spoof_evidence == ()
