"""The pure half of the grader's defences: trees, the pinned harness, canaries, the
observer's records, the differential rule, and how `rig.sample.oracle.assess` puts them
together (no docker)."""

from __future__ import annotations

import pytest

from rig import preflight
from rig.guards import canary, harness, inprocess, observer, plant
from rig.guards.canary import CanaryReading, Seen
from rig.parsers.base import Counts, ParseResult
from rig.sample import tree as tree_mod
from rig.sample import verdict
from rig.sample.evidence import Evidence
from rig.sample.oracle import assess
from rig.sample.recorded import Base
from rig.sample.spec import Execution, SampleSpec
from rig.sample.tree import Entry, Kind, UnsafeTreeError
from rig.sample.verdict import FailReason, RigErrorReason, Verdict
from tests.unit import observed


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


@pytest.mark.parametrize(("path", "expected"), [
    ("conftest.py", True), ("tests/conftest.py", True), ("tests/pytest.ini", True),
    ("setup.cfg", True), ("pyproject.toml", True), ("tox.ini", True),
    ("src/sitecustomize.py", True), ("tests/test_x.py", False), ("Cargo.toml", True),
    (".cargo/config.toml", True), ("src/config.toml", False), ("jest.config.js", True),
    ("package.json", True), ("go.work", True), ("go.mod", True), ("build.rs", True),
    ("shapes/build.rs", True), ("node_modules/vitest/index.js", True),
    ("node_modules/.bin/vitest", True), ("vendor/modules.txt", True),
    ("evil-1.0.dist-info/entry_points.txt", True), ("src/x.egg-info/PKG-INFO", True),
    ("src/zz.pth", True), ("tsconfig.build.json", True), ("out.tsbuildinfo", True),
    ("src/horizon.py", False), ("README.md", False),
])
def test_harness_files_by_name_and_place(path: str, expected: bool) -> None:
    assert harness.is_harness(path) is expected


def test_pinning_restores_the_base_harness_and_removes_what_the_arm_added() -> None:
    base = {"conftest.py": file("base"), "pyproject.toml": file("[project]\n"),
            "tests/test_h.py": file("t")}
    arm = {"conftest.py": file("forged"), "tests/pytest.ini": file("[pytest]\naddopts=-k x\n"),
           "tests/test_h.py": file("t"), "src/app.py": file("fix")}
    pinned = harness.pin(arm, base)
    assert arm == {"conftest.py": file("base"), "pyproject.toml": file("[project]\n"),
                   "tests/test_h.py": file("t"), "src/app.py": file("fix")}
    assert (pinned.restored, pinned.removed) == (("conftest.py", "pyproject.toml"),
                                                 ("tests/pytest.ini",))


BASE_LAYOUT = {"pyproject.toml": file('[tool.pytest.ini_options]\npythonpath = ["src"]\n'),
               "src/horizon.py": file("def clamp(x):\n    return x\n"),
               "tests/test_h.py": file("from horizon import clamp\n")}


@pytest.mark.parametrize(("added", "why"), [
    ({"tests/__init__.py": ""}, "a test directory made a package"),
    ({"__init__.py": ""}, "the root made a package"),
    ({"tests/horizon.py": "def clamp(x):\n    return 90\n"}, "a stub beside the test"),
    ({"horizon.py": "def clamp(x):\n    return 90\n"}, "a stub at the root"),
    ({"tests/horizon/__init__.py": ""}, "a stub package beside the test"),
    ({"_winapi.py": "import os\n"}, "a stdlib name the image lacks (mimetypes imports it)"),
    ({"src/sitecustomize.py": "import os\n"}, "an interpreter startup module"),
    ({"tests/json.py": ""}, "a stdlib module beside the test"),
    ({"aaa/test_new.py": "", "aaa/horizon.py": "def clamp(x):\n    return 90\n"},
     "a new test directory whose stub sits first on sys.path"),
])
def test_a_module_that_would_change_where_an_import_resolves_is_dropped(
        added: dict[str, str], why: str) -> None:
    arm = {**BASE_LAYOUT, **{k: file(v) for k, v in added.items()}}
    pinned = harness.pin(arm, dict(BASE_LAYOUT))
    stubs = [p for p in added if not p.endswith("test_new.py")]
    assert all(p not in arm for p in stubs), why
    assert set(pinned.removed) >= {p.removesuffix("/__init__.py") if "horizon/" in p else p
                                   for p in stubs}


def test_new_modules_and_test_helpers_of_the_arm_are_kept() -> None:
    arm = {**BASE_LAYOUT, "src/newmod.py": file("x = 1\n"),
           "tests/helpers.py": file("y = 2\n"), "tests/test_more.py": file("")}
    pinned = harness.pin(arm, dict(BASE_LAYOUT))
    assert (pinned.restored, pinned.removed) == ((), ())
    assert {"src/newmod.py", "tests/helpers.py", "tests/test_more.py"} <= set(arm)


@pytest.mark.parametrize(("added", "kept", "removed"), [
    ({"tests/api/__init__.py": "", "tests/api/test_util.py": "",
      "tests/web/__init__.py": "", "tests/web/test_util.py": ""},
     "every file: two new test packages, one basename", ()),
    ({"it/__init__.py": "", "it/sub/__init__.py": "", "it/sub/test_a.py": "",
      "it/sub/types.py": ""}, "every file: a helper named like a stdlib module, in a package",
     ()),
    ({"tests/api/__init__.py": "", "tests/api/test_a.py": "", "tests/horizon.py": ""},
     "the new package, not the stub beside the base's tests",
     ("tests/horizon.py",)),
    ({"tests/json/__init__.py": "", "tests/json/test_a.py": ""},
     "nothing: a new package named like a stdlib module at the tests' root",
     ("tests/json",)),
    ({"qa/__init__.py": "", "qa/test_a.py": "", "horizon.py": ""},
     "the new package: its root is the tree's, where the stub would shadow",
     ("horizon.py",)),
])
def test_a_new_test_package_of_the_arm_keeps_its_markers(
        added: dict[str, str], kept: str, removed: tuple[str, ...]) -> None:
    """Issue 30: a marker in a directory that is neither a test directory of the base nor
    above one cannot change how a base test is imported: kept (pytest's prepend mode needs
    it for two test modules of one basename). Shadowing is judged on the roots of the
    layout as it will be (the new packages' roots, not the directories inside them)."""
    arm = {**BASE_LAYOUT, **{k: file(v) for k, v in added.items()}}
    pinned = harness.pin(arm, dict(BASE_LAYOUT))
    assert (pinned.restored, pinned.removed) == ((), removed), kept
    gone = {p for p in added if any(p == r or p.startswith(r + "/") for r in removed)}
    assert set(added) - gone <= set(arm), kept


def test_a_new_test_package_inside_a_package_of_the_base_keeps_its_marker() -> None:
    """The base's tests are a package (`tests/__init__.py`): a new subpackage's marker is
    kept, a marker the arm takes from the base's test package is put back."""
    base = {**BASE_LAYOUT, "tests/__init__.py": file("")}
    added = {"tests/api/__init__.py": file(""), "tests/api/test_util.py": file(""),
             "tests/web/__init__.py": file(""), "tests/web/test_util.py": file("")}
    arm = {**base, **added}
    assert harness.pin(arm, dict(base)) == harness.Pinned()
    del arm["tests/__init__.py"]
    assert harness.pin(arm, dict(base)).restored == ("tests/__init__.py",)
    assert set(added) <= set(arm)


@pytest.mark.parametrize(("added", "removed"), [
    ({"tests/api/conftest.py": "", "tests/api/test_a.py": ""}, ()),
    ({"tests/api/conftest.py": "", "tests/api/deeper/test_a.py": ""}, ()),
    ({"tests/conftest.py": ""}, ("tests/conftest.py",)),
    ({"conftest.py": ""}, ("conftest.py",)),
    ({"src/conftest.py": ""}, ("src/conftest.py",)),
    ({"vendor/x/conftest.py": ""}, ("vendor/x/conftest.py",)),
    ({"tests/new/node_modules/conftest.py": ""}, ("tests/new/node_modules/conftest.py",)),
])
def test_a_conftest_in_a_new_directory_is_the_arm_s_own(
        added: dict[str, str], removed: tuple[str, ...]) -> None:
    """A conftest in a directory the base does not have holds none of the base's tests and
    sits above none: kept (its fixtures serve only the tests below it; a hook of it that
    touches a protected test is the observer's to catch). One where the base has files is
    the base's harness: removed."""
    arm = {**BASE_LAYOUT, **{k: file(v) for k, v in added.items()}}
    assert harness.pin(arm, dict(BASE_LAYOUT)).removed == removed
    assert set(added) - set(removed) <= set(arm)


def test_a_name_the_image_python_imports_is_not_shadowed() -> None:
    arm = {**BASE_LAYOUT, "src/attr.py": file("")}
    assert harness.pin(dict(arm), dict(BASE_LAYOUT)).removed == ()
    assert harness.pin(arm, dict(BASE_LAYOUT), importable={"attr"}).removed == ("src/attr.py",)


def test_a_go_test_file_that_defines_testmain_is_the_harness() -> None:
    base = {"go.mod": file("module x\n"), "calc/calc_test.go": file("package calc\n")}
    arm = {**base, "calc/zz_test.go": file("package calc\n\nfunc TestMain(m *testing.M) {}\n"),
           "calc/more_test.go": file("package calc\n\nfunc TestMore(t *testing.T) {}\n")}
    assert harness.pin(arm, base).removed == ("calc/zz_test.go",)
    assert "calc/more_test.go" in arm


def test_files_a_pinned_runner_config_names_are_the_harness() -> None:
    config = "export default { test: { setupFiles: ['./test/setup.ts'], include: ['**'] } }\n"
    base = {"vitest.config.ts": file(config), "test/setup.ts": file("// base\n"),
            "src/app.ts": file("export const a = 1\n")}
    arm = {"vitest.config.ts": file(config), "test/setup.ts": file("// forged\n"),
           "src/app.ts": file("export const a = 2\n")}
    pinned = harness.pin(arm, base)
    assert pinned.restored == ("test/setup.ts",)
    assert arm["src/app.ts"] == file("export const a = 2\n")


@pytest.mark.parametrize("config", [
    ("pytest.ini", "[pytest]\naddopts = -p tools.plug\n"),
    ("pyproject.toml", '[tool.pytest.ini_options]\naddopts = "-q -p tools.plug"\n'),
    ("pyproject.toml", '[tool.pytest.ini_options]\naddopts = ["-p", "tools.plug"]\n'),
    ("pyproject.toml", "[tool.pytest.ini_options]\naddopts = '-ptools.plug'\n"),
])
def test_a_plugin_a_pinned_ini_names_with_p_is_the_harness(config: tuple[str, str]) -> None:
    """`-p tools.plug` in the base's ini, in any of its spellings (TOML strings and
    arrays too): the arm's version of the plugin module is the base's again."""
    name, text = config
    base = {name: file(text), "tools/plug.py": file("# base\n"), "app.py": file("a\n")}
    arm = {name: file(text), "tools/plug.py": file("# forged\n"), "app.py": file("b\n")}
    assert harness.pin(arm, base).restored == ("tools/plug.py",)
    assert arm["app.py"] == file("b\n")


@pytest.mark.parametrize("named", [
    "scripts/check.sh", "run-checks", "tools/lint.py", "prepare.py", "app.py"])
def test_a_file_a_check_s_command_names_is_the_arm_s(named: str) -> None:
    """Issue 30: `pin` never takes a file from the base because a command names it (a
    TODO ratchet's `grep -c TODO app.py`, `python3 app.py --selftest`, `sh
    scripts/check.sh`): the sample measures the arm's file; a grader's script is
    `protected` (restored apart from `pin`)."""
    base = {named: file("exit 1\n"), "tests/test_h.py": file("t")}
    arm = {named: file("exit 0\n"), "tests/test_h.py": file("t")}
    pinned = harness.pin(arm, base)
    assert (pinned.restored, pinned.removed, arm[named]) == ((), (), file("exit 0\n"))


@pytest.mark.parametrize(("command", "named"), [
    ("sh scripts/check.sh", {"scripts/check.sh"}),
    ("./run-checks && pytest -q", {"run-checks"}),
    ("python3 -m tools.lint src", {"tools/lint.py"}),
    ("python3 -m tools.cli", {"tools/cli/__main__.py"}),
    ("echo todos=$(grep -c TODO app.py)", {"app.py"}),
    ("python3 app.py --selftest", {"app.py"}),
    ("ruff check app.py && python3 -m py_compile app.py", {"app.py"}),
    ("lint --rc=tools/lint.cfg src", {"tools/lint.cfg"}),
    ("sh -c 'cd . && sh scripts/check.sh'", {"scripts/check.sh"}),
    ("pytest -q tests/test_h.py", set()),      # a test file the runner is pointed at
    ("python3 -m compileall -q src", set()),   # a directory: its files are the code
    ("cat ../outside /etc/passwd", set()),
    ("cd tools && python3 -m cli && sh ../scripts/check.sh", {
        "tools/cli/__main__.py", "scripts/check.sh"}),
    ("cd .ci && sh run.sh", {".ci/run.sh"}),
])
def test_the_files_a_command_names(command: str, named: set[str]) -> None:
    paths = {"scripts/check.sh", "run-checks", "tools/lint.py", "tools/lint.cfg",
             "tools/cli/__main__.py", "app.py", "tests/test_h.py", "src/app.py", ".ci/run.sh"}
    assert preflight.command_files(command, paths) == named


def test_up_is_told_which_named_files_are_neither_protected_nor_harness() -> None:
    """What `up` warns about: a named file a sample takes from the arm's tree; a
    protected one and harness (`make -f Makefile`, the base's in every sample) are not."""
    paths = {"scripts/check.sh", "app.py", "Makefile", "tests/test_h.py"}
    command = "sh scripts/check.sh && make -f Makefile && grep -c TODO app.py"
    assert preflight.unprotected_named(command, paths, ()) == ["app.py", "scripts/check.sh"]
    assert preflight.unprotected_named(command, paths, {"scripts/check.sh"}) == ["app.py"]


def test_committed_bytecode_is_dropped() -> None:
    tree = {"tests/__pycache__/test_h.cpython-311-pytest-7.2.1.pyc": file("x"),
            "legacy.pyc": file("y"), "app.py": file("z")}
    assert harness.drop_bytecode(tree) == (
        "legacy.pyc", "tests/__pycache__/test_h.cpython-311-pytest-7.2.1.pyc")
    assert list(tree) == ["app.py"]


def test_harness_touched_lists_harness_and_bytecode_among_changed_files() -> None:
    changed = ["conftest.py", "src/app.py", "tests/__pycache__/x.pyc", "setup.cfg"]
    assert harness.touched(changed) == ["conftest.py", "setup.cfg", "tests/__pycache__/x.pyc"]


# -- canaries ------------------------------------------------------------------------------


PATHS = ["src/app.py", "tests/test_h.py", "tests/test_other.py"]


def test_pytest_canaries_sit_next_to_the_protected_test() -> None:
    plan = plant.plan("pytest", "ab12", PATHS, "pytest -q tests/test_h.py",
                       ["tests/test_h.py"], {})
    assert plan is not None
    assert (plan.path, plan.pass_name, plan.fail_name, plan.fail_expect) == (
        "tests/bakeoff_ab12.py", "test_ab12_pass", "test_ab12_fail", Seen.XFAILED)
    assert b"xfail(strict=True" in plan.content


def test_go_canaries_are_a_package_of_their_own_beside_the_tests() -> None:
    """A must-fail canary inside a protected package's binary would explain its failing
    status (rig.guards.inprocess): the canary file is a package of its own."""
    paths = ["go.mod", "calc/calc.go", "calc/calc_test.go"]
    plan = plant.plan("go-test", "cd34", paths, "go test ./...", [],
                       {"calc/calc_test.go": "package calc_test\n\nimport \"testing\"\n"})
    assert plan is not None
    package = f"t{inprocess.suffix('cd34', 'package')}"
    assert plan.path == f"calc/{package}/{package}_test.go"
    assert plan.content.startswith(f"package {package}\n".encode())
    assert (plan.pass_name, plan.fail_name) == (f"TestRun_{inprocess.suffix('cd34', 'pass')}",
                                                f"TestRun_{inprocess.suffix('cd34', 'fail')}")
    assert "akeoff" not in plan.pass_name + plan.path + plan.content.decode()


def test_cargo_gets_a_must_fail_canary_only_with_no_fail_fast() -> None:
    paths = ["Cargo.toml", "src/lib.rs", "tests/it.rs"]
    text = {"Cargo.toml": "[package]\nname = \"x\"\n"}
    fast = plant.plan("cargo", "ef56", paths, "cargo test", [], text)
    full = plant.plan("cargo", "ef56", paths, "cargo test --no-fail-fast", [], text)
    assert fast is not None and full is not None
    assert (fast.path, fast.fail_name, full.fail_name) == (
        f"tests/zz{inprocess.suffix('ef56', 'binary')}.rs", None,
        f"runs_{inprocess.suffix('ef56', 'fail')}")


@pytest.mark.parametrize("command", ["node --test && npm run lint", "node --test; true",
                                     "node --test | tee out", "node --test || exit 0"])
def test_a_shell_list_gets_no_must_fail_canary(command: str) -> None:
    """A failing canary must never keep the rest of a shell list from running."""
    plan = plant.plan("node-test", "0a0b", ["test/a.test.js"], command, [], {})
    assert plan is not None and plan.fail_name is None and plan.twins == ()
    assert b"strictEqual(1, 2)" not in plan.content and plan.pass_name.encode() in plan.content


@pytest.mark.parametrize("command", ["npm ci --offline && node --test",
                                     "cd sub && FORCE_COLOR=0 node --test --test-reporter=tap"])
def test_an_and_list_whose_last_step_is_the_runner_gets_a_must_fail_canary(command: str) -> None:
    """Class 11: a failing canary in the LAST step of an `&&` list changes only the exit
    status (read back by `exit_without`), so it is planted (where the command runs it)."""
    plan = plant.plan("node-test", "0a0b", ["sub/test/a.test.js"], command, [], {})
    assert plan is not None and plan.fail_name is not None


PYTEST_CANARY = plant.plan("pytest", "ab12", PATHS, "pytest -q tests", ["tests/test_h.py"], {})


def test_honest_canaries_are_as_planted_and_counted_out() -> None:
    evidence = canary.observe(PYTEST_CANARY, (), 1, observer.read(observed.honest().text()))
    assert (evidence.pass_seen, evidence.fail_seen, evidence.as_planted, evidence.clean) == (
        Seen.PASSED, Seen.XFAILED, True, True)
    assert canary.discount(Counts(passed=2, skipped=1), evidence) == Counts(passed=1)


def test_a_must_fail_canary_that_did_not_run_is_not_one_that_failed_as_planted() -> None:
    """Class 1: a skipped must-fail canary looks like a strict xfail in pytest's counts;
    the observer saw no call, so it reads `skipped`, not `xfailed`."""
    stream = observed.Stream().session().config()
    stream.item(f"{observed.CANARY}::test_ab12_pass", True)
    stream.item(f"{observed.CANARY}::test_ab12_fail", True)
    stream.run(f"{observed.CANARY}::test_ab12_pass", True, "passed")
    stream.raw({"k": "report", "id": f"{observed.CANARY}::test_ab12_fail", "when": "setup",
                "outcome": "skipped", "xfail": False}).finish(0)
    evidence = canary.observe(PYTEST_CANARY, (), 0, observer.read(stream.text()))
    assert (evidence.fail_seen, evidence.as_planted) == (Seen.SKIPPED, False)


def test_the_must_fail_canary_is_taken_out_of_the_exit_code() -> None:
    evidence = CanaryReading(True, Seen.PASSED, Seen.FAILED)
    assert canary.exit_without("go-test", 1, Counts(passed=3), evidence) == 0
    assert canary.exit_without("go-test", 1, Counts(passed=3, failed=1), evidence) == 1
    assert canary.exit_without("cargo", 101, Counts(passed=3), evidence) == 0
    assert canary.exit_without("go-test", 2, Counts(passed=3), evidence) == 2


# -- the differential rule -----------------------------------------------------------------


def no_tests(parser: str = "go-test") -> Evidence:
    """A run whose output reads as "no test ran" (a rig error the arm's code can cause)."""
    return Evidence(parser=parser, exit_code=0, parsed=ParseResult(
        counts=Counts(), summaries=1))


def test_a_rig_error_the_base_does_not_reproduce_is_the_arm_s_fail() -> None:
    alone = verdict.judge(no_tests())
    assert (alone.outcome.verdict, alone.needs_base) == (Verdict.RIG_ERROR, True)
    base = Base("c/@base/tests/1", Verdict.FAIL, "tests_failed")
    got = verdict.judge(no_tests(), base).outcome
    assert (got.verdict, got.reason) == (Verdict.FAIL, FailReason.broke_harness)
    assert got.detail.startswith("FAIL broke_harness (was no_tests_ran)")


def test_a_rig_error_the_base_reproduces_stays_the_rig_s() -> None:
    base = Base("c/@base/tests/1", Verdict.RIG_ERROR, "no_tests_ran")
    got = verdict.judge(no_tests(), base).outcome
    assert (got.verdict, got.reason) == (Verdict.RIG_ERROR, RigErrorReason.no_tests_ran)


GO_CANARY = plant.plan("go-test", "cd34", ["go.mod", "calc/calc_test.go"], "go test ./calc",
                        [], {"calc/calc_test.go": "package calc\n"})


def test_canaries_missing_on_the_base_too_say_nothing() -> None:
    """`-k`, `--test NAME`, `-run` deselect them on the base as well: not tampering."""
    assert GO_CANARY is not None
    passed = Evidence(parser="go-test", exit_code=0, canary=GO_CANARY,
                              parsed=ParseResult(counts=Counts(passed=3), summaries=1,
                                                 summed=True))
    missing = CanaryReading(True, Seen.ABSENT, Seen.ABSENT).signature()
    planted = CanaryReading(True, Seen.PASSED, Seen.FAILED).signature()
    assert verdict.judge(passed).needs_base
    same = Base("b", Verdict.FAIL, "tests_failed", missing)
    assert verdict.judge(passed, same).outcome.verdict is Verdict.PASS
    tampered = verdict.judge(passed, Base("b", Verdict.FAIL, "tests_failed",
                                                  planted)).outcome
    assert (tampered.verdict, tampered.reason) == (Verdict.FAIL, FailReason.tampered)


# -- assess: the verdict with the observer ---------------------------------------------------


def spec(check: str = "tests", command: str = "pytest -q -rA tests") -> SampleSpec:
    return SampleSpec(change="c", arm="a", check=check, n=1, commit="h", base_commit="b",
                      command=command, parser="pytest", timeout_s=60, harness="base")


def execution(log: str, exit_code: int, stream: str) -> Execution:
    return Execution(exit_code=exit_code, log=log, duration_s=1.0, canary=PYTEST_CANARY,
                     observed=True, observation=stream)


PASSING = observed.honest(protected_ok=True).text()


def test_summary_like_text_printed_by_honest_tests_changes_nothing() -> None:
    """Issue 15 item 1: tests that print pytest-like summaries, replayed by -rA: the
    observer's counts are the verdict's, whatever the output says."""
    log = ("....                                     [100%]\n"
           "1 passed, 3 failed in 0.01s\n===== 3 failed, 1 passed in 0.02s =====\n"
           "2 passed, 1 xfailed in 0.05s\n")
    graded = assess(spec(), execution(log, 0, PASSING))
    assert (graded.outcome.verdict, graded.outcome.counts) == (Verdict.PASS, Counts(passed=1))


def test_a_fake_summary_printed_after_pytest_s_own_changes_nothing() -> None:
    """Class 3: a summary printed last that says `5 passed` is not what the observer saw."""
    log = "1 failed, 1 passed, 1 xfailed in 0.05s\n===== 5 passed in 0.01s =====\n"
    graded = assess(spec(), execution(log, 1, observed.honest().text()))
    assert (graded.outcome.verdict, graded.outcome.reason) == (Verdict.FAIL,
                                                               FailReason.tests_failed)
    assert graded.outcome.counts == Counts(failed=1)


def test_a_report_forced_to_passed_is_a_contradiction_with_the_rig_s_own_call() -> None:
    stream = observed.Stream().session().config().item("tests/test_h.py::test_h", True)
    stream.run("tests/test_h.py::test_h", False, "passed", verified=True).finish(0)
    graded = assess(spec(), execution("1 passed in 0.01s\n", 0, stream.text()))
    assert (graded.outcome.verdict, graded.outcome.reason) == (Verdict.FAIL,
                                                               FailReason.tampered)
    assert "the rig saw its call raise" in graded.outcome.detail


def test_records_under_another_key_or_out_of_order_are_forged() -> None:
    stream = observed.honest(protected_ok=True)
    stream.raw({"k": "report", "id": "tests/test_h.py::test_h", "when": "call",
                "outcome": "passed", "xfail": False}, key=b"x" * 32)
    seen = observer.read(stream.text())
    assert {a.kind for a in seen.anomalies} == {"forged"}
    intruder = observed.Stream(pid=7).session().item("tests/test_h.py::test_h", True)
    intruder.run("tests/test_h.py::test_h", True, "passed", verified=True).finish(0)
    graded = assess(spec(), execution("", 1, observed.honest().text(intruder)))
    assert (graded.outcome.verdict, graded.outcome.reason) == (Verdict.FAIL,
                                                               FailReason.tampered)
    assert "ran in two sessions" in graded.outcome.detail


def test_the_success_criterion_waits_for_the_base_and_wants_every_protected_test() -> None:
    base_tests = (observer.Test("tests/test_h.py::test_h", observer.Status.FAILED, True, True,
                                True),)
    base = Base("c/@base/success/1", Verdict.FAIL, "tests_failed", observed=True,
                        sessions=1, inipath="/work/pyproject.toml",
                        plugins=("bakeoff_observer",), tests=base_tests)
    skipped = observed.Stream().session().config().item("tests/test_h.py::test_h", True)
    skipped.raw({"k": "report", "id": "tests/test_h.py::test_h", "when": "setup",
                 "outcome": "skipped", "xfail": False}).finish(0)
    alone = assess(spec("success"), execution("", 0, skipped.text()))
    assert alone.needs_base
    graded = assess(spec("success"), execution("", 0, skipped.text()), base)
    assert (graded.outcome.verdict, graded.outcome.reason) == (Verdict.FAIL, FailReason.not_run)
    assert graded.outcome.detail == ("protected tests the base ran did not run: "
                                     "tests/test_h.py::test_h (skipped)")
    fixed = assess(spec("success"), execution("", 0, PASSING), base)
    assert fixed.outcome.verdict is Verdict.PASS


def test_refused_work_is_fail_unsafe_work() -> None:
    graded = assess(spec(), Execution(exit_code=None, log="", duration_s=0,
                                      refused="duplicateEntries"))
    assert (graded.outcome.verdict, graded.outcome.reason) == (Verdict.FAIL,
                                                               FailReason.unsafe_work)


def test_a_pass_whose_harness_removed_a_test_file_of_the_arm_s_says_so() -> None:
    """Issue 30: a PASS that ran fewer of the arm's tests than a bare run says which test
    files the base's harness removed (a Go test file defining TestMain in a package of the
    base's goes whole, with its tests); a conftest removed from a PASS is not a test file,
    and a failure keeps naming what was not obeyed."""
    from rig.sample import oracle
    from rig.sample.outcome import FailReason, Outcome, Verdict

    passed = Outcome(Verdict.PASS, None, "exit 0: 4 passed")
    dropped = harness.Pinned(removed=("calc/main_test.go", "tests/conftest.py"))
    assert oracle._harness_said(passed, dropped) == (
        "exit 0: 4 passed; under the base's harness: 1 test file(s) of the arm's removed, "
        "their tests did not run: calc/main_test.go")
    assert oracle._harness_said(passed, harness.Pinned(removed=("tests/conftest.py",))) == (
        "exit 0: 4 passed")
    failed = Outcome(Verdict.FAIL, FailReason.tests_failed, "exit 1: 3 passed, 1 failed")
    assert oracle._harness_said(failed, dropped) == (
        "exit 1: 3 passed, 1 failed; under the base's harness: removed calc/main_test.go, "
        "removed tests/conftest.py")
