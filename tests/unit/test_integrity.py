"""The pure half of the grader's defences: trees, the pinned harness, canaries, the
differential rule, and how `rig.oracle.assess` puts them together (no docker)."""

from __future__ import annotations

import json

import pytest

from rig import canary, diagnosis, harness
from rig import tree as tree_mod
from rig.canary import Evidence, Seen
from rig.oracle import Execution, SampleSpec, assess
from rig.parsers.base import Counts
from rig.tree import Entry, Kind, UnsafeTreeError
from rig.verdict import FailReason, Outcome, RigErrorReason, Verdict


def file(text: str) -> Entry:
    return Entry(Kind.FILE, text.encode())


# -- trees -------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "why"), [
    ("/etc/passwd", "absolute or empty"), ("a/../b", "'..' component"),
    ("src/.git/config", ".git component"), ("x/.GIT/hooks", ".git component"),
    ("a//b", "empty"),
])
def test_a_path_no_checkout_can_hold_is_refused(path: str, why: str) -> None:
    with pytest.raises(UnsafeTreeError) as error:
        tree_mod.checked([(path, file("x"))])
    assert why in error.value.why


def test_two_entries_of_one_name_are_refused_as_duplicate_tree_entries() -> None:
    """The stranded-work attack: a symlink to a host directory and a directory, one name."""
    with pytest.raises(UnsafeTreeError, match="appears twice"):
        tree_mod.checked([("x", Entry(Kind.SYMLINK, b"/host")), ("x", file("y"))])


def test_a_path_that_is_both_a_file_and_a_directory_is_refused() -> None:
    with pytest.raises(UnsafeTreeError, match="both a file and a directory"):
        tree_mod.checked([("tests", Entry(Kind.SYMLINK, b"/host")), ("tests/x.py", file(""))])


def test_a_protected_file_under_a_symlinked_directory_is_placed_as_a_regular_file() -> None:
    tree = {"tests": Entry(Kind.SYMLINK, b"/srv/host"), "app.py": file("x")}
    tree_mod.place(tree, "tests/test_h.py", b"assert 0\n")
    assert tree == {"tests/test_h.py": file("assert 0\n"), "app.py": file("x")}


def test_a_protected_path_turned_into_a_directory_is_placed_as_a_file() -> None:
    tree = {"tests/test_h.py/a": file("1"), "tests/test_h.py/b/c": file("2")}
    tree_mod.place(tree, "tests/test_h.py", b"real\n")
    assert tree == {"tests/test_h.py": file("real\n")}


# -- the harness ---------------------------------------------------------------------------


@pytest.mark.parametrize(("parser", "path", "expected"), [
    ("pytest", "conftest.py", True), ("pytest", "tests/conftest.py", True),
    ("pytest", "tests/pytest.ini", True), ("pytest", "setup.cfg", True),
    ("pytest", "pyproject.toml", True), ("pytest", "tox.ini", True),
    ("pytest", "src/sitecustomize.py", True), ("pytest", "tests/test_x.py", False),
    ("cargo", "Cargo.toml", True), ("cargo", ".cargo/config.toml", True),
    ("cargo", "src/config.toml", False), ("jest", "jest.config.js", True),
    ("node-test", "package.json", True), ("go-test", "go.work", True),
    ("go-test", "go.mod", False),
])
def test_harness_files_by_parser(parser: str, path: str, expected: bool) -> None:
    assert harness.is_harness(parser, path) is expected


def test_pinning_restores_the_base_harness_and_removes_what_the_arm_added() -> None:
    base = {"conftest.py": file("base"), "pyproject.toml": file("[project]\n"),
            "tests/test_h.py": file("t")}
    arm = {"conftest.py": file("forged"), "tests/pytest.ini": file("[pytest]\naddopts=-k x\n"),
           "tests/test_h.py": file("t"), "src/app.py": file("fix")}
    pinned = harness.pin(arm, base, "pytest")
    assert arm == {"conftest.py": file("base"), "pyproject.toml": file("[project]\n"),
                   "tests/test_h.py": file("t"), "src/app.py": file("fix")}
    assert (pinned.restored, pinned.removed) == (("conftest.py", "pyproject.toml"),
                                                 ("tests/pytest.ini",))


def test_committed_bytecode_is_dropped() -> None:
    tree = {"tests/__pycache__/test_h.cpython-311-pytest-7.2.1.pyc": file("x"),
            "legacy.pyc": file("y"), "app.py": file("z")}
    assert harness.drop_bytecode(tree) == (
        "legacy.pyc", "tests/__pycache__/test_h.cpython-311-pytest-7.2.1.pyc")
    assert list(tree) == ["app.py"]


def test_harness_touched_lists_harness_and_bytecode_among_changed_files() -> None:
    changed = ["conftest.py", "src/app.py", "tests/__pycache__/x.pyc", "setup.cfg"]
    assert harness.touched("pytest", changed) == ["conftest.py", "setup.cfg",
                                                  "tests/__pycache__/x.pyc"]


# -- canaries ------------------------------------------------------------------------------


PATHS = ["src/app.py", "tests/test_h.py", "tests/test_other.py"]


def test_pytest_canaries_sit_next_to_the_protected_test_and_load_through_a_plugin() -> None:
    plan = canary.plan("pytest", "ab12", PATHS, "pytest -q tests/test_h.py",
                       ["tests/test_h.py"], {})
    assert plan is not None
    assert (plan.path, plan.pass_name, plan.fail_name, plan.fail_expect) == (
        "tests/bakeoff_ab12.py", "test_ab12_pass", "test_ab12_fail", Seen.SKIPPED)
    assert plan.env() == {"PYTEST_ADDOPTS": "-p bakeoff_canary_ab12",
                          "PYTHONPATH": "/bakeoff/in/plugin"}
    assert b"xfail(strict=True" in plan.content
    assert b"/work/tests/bakeoff_ab12.py" in plan.plugin


def test_go_canaries_take_the_package_clause_of_their_neighbours() -> None:
    paths = ["go.mod", "calc/calc.go", "calc/calc_test.go"]
    plan = canary.plan("go-test", "cd34", paths, "go test ./...", [],
                       {"calc/calc_test.go": "package calc_test\n\nimport \"testing\"\n"})
    assert plan is not None and plan.path == "calc/zz_bakeoff_cd34_test.go"
    assert plan.content.startswith(b"package calc_test\n")
    assert (plan.pass_name, plan.fail_name) == ("TestBakeoffCD34Pass", "TestBakeoffCD34Fail")


def test_cargo_gets_a_must_fail_canary_only_with_no_fail_fast() -> None:
    paths = ["Cargo.toml", "src/lib.rs", "tests/it.rs"]
    text = {"Cargo.toml": "[package]\nname = \"x\"\n"}
    fast = canary.plan("cargo", "ef56", paths, "cargo test", [], text)
    full = canary.plan("cargo", "ef56", paths, "cargo test --no-fail-fast", [], text)
    assert fast is not None and full is not None
    assert (fast.path, fast.fail_name, full.fail_name) == (
        "tests/zzzz_bakeoff_ef56.rs", None, "bakeoff_ef56_fail")


@pytest.mark.parametrize("command", ["node --test && npm run lint", "node --test; true",
                                     "node --test | tee out", "node --test || exit 0"])
def test_a_shell_list_gets_no_must_fail_canary(command: str) -> None:
    """A failing canary must never keep the rest of a shell list from running."""
    plan = canary.plan("node-test", "0a0b", ["test/a.test.js"], command, [], {})
    assert plan is not None and plan.fail_name is None
    assert b"bakeoff_0a0b_fail" not in plan.content and b"bakeoff_0a0b_pass" in plan.content


def plugin_lines(*rows: tuple[str, str, str]) -> str:
    return "".join(json.dumps({"id": i, "when": w, "outcome": o}) + "\n" for i, w, o in rows)


PYTEST_CANARY = canary.plan("pytest", "ab12", PATHS, "pytest -q tests", ["tests/test_h.py"], {})
HONEST = plugin_lines(("tests/bakeoff_ab12.py::test_ab12_pass", "call", "passed"),
                      ("tests/bakeoff_ab12.py::test_ab12_fail", "call", "skipped"),
                      ("tests/test_h.py::test_h", "call", "passed"))


def test_honest_canaries_are_as_planted_and_counted_out() -> None:
    evidence = canary.observe(PYTEST_CANARY, (), 0, HONEST)
    assert (evidence.as_planted, evidence.clean, evidence.plugin_counts) == (
        True, True, Counts(passed=1))
    assert canary.discount(Counts(passed=2, skipped=1), evidence) == Counts(passed=1)


def test_a_forced_outcome_shows_as_the_must_fail_canary_passing() -> None:
    forced = HONEST.replace('::test_ab12_fail", "when": "call", "outcome": "skipped"',
                            '::test_ab12_fail", "when": "call", "outcome": "passed"')
    assert forced != HONEST
    evidence = canary.observe(PYTEST_CANARY, (), 0, forced)
    assert (evidence.forced, evidence.as_planted) == (True, False)


def test_the_must_fail_canary_is_taken_out_of_the_exit_code() -> None:
    evidence = Evidence(True, Seen.PASSED, Seen.FAILED)
    assert canary.exit_without("go-test", 1, Counts(passed=3), evidence) == 0
    assert canary.exit_without("go-test", 1, Counts(passed=3, failed=1), evidence) == 1
    assert canary.exit_without("cargo", 101, Counts(passed=3), evidence) == 0
    assert canary.exit_without("go-test", 2, Counts(passed=3), evidence) == 2


# -- the differential rule -----------------------------------------------------------------


NO_TESTS = Outcome(Verdict.RIG_ERROR, RigErrorReason.no_tests_ran, "exit 5: no test ran")


def test_a_rig_error_the_base_does_not_reproduce_is_the_arm_s_fail() -> None:
    base = diagnosis.BaseRun("c/@base/tests/1", Verdict.FAIL, "tests_failed", None)
    got = diagnosis.differential(NO_TESTS, canary.NO_CANARIES, base)
    assert (got.verdict, got.reason) == (Verdict.FAIL, FailReason.broke_harness)
    assert got.detail.startswith("FAIL broke_harness (was no_tests_ran)")


def test_a_rig_error_the_base_reproduces_stays_the_rig_s() -> None:
    base = diagnosis.BaseRun("c/@base/tests/1", Verdict.RIG_ERROR, "no_tests_ran", None)
    got = diagnosis.differential(NO_TESTS, canary.NO_CANARIES, base)
    assert (got.verdict, got.reason) == (Verdict.RIG_ERROR, RigErrorReason.no_tests_ran)


def test_canaries_missing_on_the_base_too_say_nothing() -> None:
    """`-k`, `--test NAME`, `-run` deselect them on the base as well: not tampering."""
    missing = Evidence(True, Seen.ABSENT, Seen.ABSENT)
    passed = Outcome(Verdict.PASS, None, "exit 0: 3 passed, 0 failed", Counts(passed=3))
    same = diagnosis.BaseRun("b", Verdict.FAIL, "tests_failed", missing.signature())
    planted = diagnosis.BaseRun("b", Verdict.FAIL, "tests_failed",
                                Evidence(True, Seen.PASSED, Seen.SKIPPED).signature())
    assert diagnosis.differential(passed, missing, same).verdict is Verdict.PASS
    tampered = diagnosis.differential(passed, missing, planted)
    assert (tampered.verdict, tampered.reason) == (Verdict.FAIL, FailReason.tampered)


# -- assess: the verdict with the canaries -------------------------------------------------


def spec() -> SampleSpec:
    return SampleSpec(change="c", arm="a", check="success", n=1, commit="h", base_commit="b",
                      command="pytest -q -rA tests", parser="pytest", timeout_s=60,
                      harness="base")


def execution(log: str, exit_code: int, plugin: str) -> Execution:
    return Execution(exit_code=exit_code, log=log, duration_s=1.0, canary=PYTEST_CANARY,
                     canary_results=plugin)


def test_summary_like_text_printed_by_honest_tests_is_not_a_spoof() -> None:
    """Issue 15 item 1: tests that print pytest-like summaries, replayed by -rA."""
    log = ("....                                     [100%]\n"
           "1 passed, 3 failed in 0.01s\n===== 3 failed, 1 passed in 0.02s =====\n"
           "2 passed, 1 xfailed in 0.05s\n")
    graded = assess(spec(), execution(log, 0, HONEST))
    assert (graded.outcome.verdict, graded.outcome.counts) == (Verdict.PASS, Counts(passed=1))


def test_a_fake_summary_printed_after_pytest_s_own_is_spoofed_output() -> None:
    log = "2 passed, 1 failed, 1 xfailed in 0.05s\n===== 5 passed in 0.01s =====\n"
    plugin = HONEST + plugin_lines(("tests/test_h.py::test_other", "call", "failed"))
    graded = assess(spec(), execution(log, 0, plugin))
    assert (graded.outcome.verdict, graded.outcome.reason) == (
        Verdict.FAIL, FailReason.spoofed_output)


def test_a_forged_must_fail_canary_is_tampered() -> None:
    forged = HONEST.replace('::test_ab12_fail", "when": "call", "outcome": "skipped"',
                            '::test_ab12_fail", "when": "call", "outcome": "passed"')
    graded = assess(spec(), execution("3 passed in 0.01s\n", 0, forged))
    assert (graded.outcome.verdict, graded.outcome.reason) == (Verdict.FAIL,
                                                               FailReason.tampered)


def test_a_summary_that_disagrees_with_pytest_s_own_reports_is_spoofed_output() -> None:
    graded = assess(spec(), execution("3 passed, 1 xfailed in 0.01s\n", 0, HONEST))
    assert (graded.outcome.verdict, graded.outcome.reason) == (
        Verdict.FAIL, FailReason.spoofed_output)
    assert "add up to" in graded.outcome.detail


def test_refused_work_is_fail_unsafe_work() -> None:
    graded = assess(spec(), Execution(exit_code=None, log="", duration_s=0,
                                      refused="duplicateEntries"))
    assert (graded.outcome.verdict, graded.outcome.reason) == (Verdict.FAIL,
                                                               FailReason.unsafe_work)
