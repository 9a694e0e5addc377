"""What a JavaScript runner's command selects (`rig.guards.js_selection`), and the node --test
canaries planted only where it goes (issue 30: a command naming one file never ran the
canary file, and the twins' failing status read as `exit_mismatch`)."""

from __future__ import annotations

import json

import pytest

from rig.guards import canary, js_selection, plant

PACKAGE = json.dumps({"scripts": {"test": "node --test test/cart.test.js"}})
CANARY_FILE = "test/cart.abc123.test.cjs"


@pytest.mark.parametrize(("command", "runs"), [
    ("node --test", True),
    ("npm test", False),  # package.json's script names one file
    ("node --test test/cart.test.js", False),
    ("node --test test/", True),
    ("node --test ./test", True),
    ("node --test 'test/**/*.test.cjs'", True),
    ("node --test test/*.test.js", False),
    ("node test/cart.test.js", False),
    ("cd test && node --test", True),
    ("cd pkg && node --test", False),
    ("node --test --test-reporter spec", True),
    ("node --test | tee out", True),
])
def test_node_runs_the_canary_file_only_where_the_command_picks_it(command: str,
                                                                 runs: bool) -> None:
    selection = js_selection.read("node-test", command, {"package.json": PACKAGE})
    assert selection is not None
    assert js_selection.runs_file(selection, CANARY_FILE) is runs


def test_a_helper_under_test_runs_but_node_modules_never() -> None:
    selection = js_selection.read("node-test", "node --test", {})
    assert selection is not None
    assert js_selection.runs_file(selection, "test/helpers.js")
    assert not js_selection.runs_file(selection, "src/helpers.js")
    assert not js_selection.runs_file(selection, "node_modules/x/test/a.test.js")


@pytest.mark.parametrize(("command", "name", "kept"), [
    ("node --test --test-name-pattern=discount", "applies discount (ab12)", True),
    ("node --test --test-name-pattern '^keeps'", "applies discount", False),
    ("node --test --test-name-pattern=/DISCOUNT/i", "applies discount", True),
    ("npx vitest run -t 'keeps small'", "keeps small totals", True),
    ("npx jest -t '(?<=x)y'", "xy", None),  # read differently by Python: not predicted
])
def test_name_filters_are_read_as_the_runner_reads_them(command: str, name: str,
                                                       kept: bool | None) -> None:
    runner = "node-test" if command.startswith("node") else command.split()[1]
    selection = js_selection.read(runner, command, {})
    assert selection is not None
    assert js_selection.keeps_name(selection, name) is kept


TEST = "const test = require('node:test');\ntest('applies discount', () => {});\n"


def plan(command: str, paths: tuple[str, ...] = ("test/cart.test.js", "package.json"),
         extra: dict[str, str] | None = None) -> canary.Canary | None:
    return plant.plan("node-test", "ab12cd34", list(paths), command, ["test/cart.test.js"],
                       {"test/cart.test.js": TEST, "package.json": PACKAGE, **(extra or {})})


def test_one_named_file_gets_twins_and_a_sentinel_but_no_canary_file() -> None:
    named = plan("node --test test/cart.test.js")
    assert named is not None and named.path == "" and named.fail_name is None
    assert named.twins == ("applies discount",) and len(named.sentinels) == 1
    assert plan("npm test") == named  # the npm script names the same file


def test_a_command_running_none_of_the_protected_files_gets_no_canary() -> None:
    assert plan("node --test test/other.test.js") is None
    assert plan("node test/cart.test.js") is None  # no runner: the hold loses its summary
    assert plan("node --test --test-reporter=junit") is None  # a reporter rig cannot read


def test_a_reporter_sent_to_a_file_beside_tap_on_stdout_keeps_the_canaries() -> None:
    """node pairs reporters with destinations in order: junit to a file, tap to stdout is
    read as tap (the fix `unparsed_output` names for a reporter the rig cannot read)."""
    split = ("node --test --test-reporter=junit --test-reporter-destination=junit.xml "
             "--test-reporter=tap --test-reporter-destination=stdout")
    assert plan(split) is not None
    assert plan("node --test --test-reporter=dot --test-reporter-destination=stdout") is None


def test_a_helper_is_read_as_node_reports_it_and_its_process_says_if_it_ended_early() -> None:
    """A file under test/ not named as a test is a helper to the rig whatever its text
    (`require('node:test')` for `mock`, a wrapper that calls `test` for its callers, or
    tests of its own): node reports one that registers nothing as one passing test. The
    preload, in every helper's process, makes one that registered tests and ended before
    reporting them exit 1 (node reports the file failed)."""
    helper = "const { mock } = require('node:test');\nexports.cents = (v) => v * 100;\n"
    found = plan("node --test", ("test/cart.test.js", "test/helpers.js", "test/more.js"),
                 {"test/helpers.js": helper, "test/more.js": TEST})
    assert found is not None and found.helpers == (
        "/work/test/helpers.js", "test/helpers.js", "/work/test/more.js", "test/more.js")
    (_, preload), = found.files
    assert b'"helpers": ["/work/test/helpers.js", "/work/test/more.js"]' in preload
    assert b"if (registered && !settled) process.exitCode = 1;" in preload
    named = plan("node --test test/cart.test.js", ("test/cart.test.js", "test/helpers.js"),
                 {"test/helpers.js": helper})
    assert named is not None and named.helpers == ()  # the command never runs it


JS_PATHS = ["package.json", "src/cart.js", "test/cart.test.mjs"]
JS_TEST = "import { test } from 'vitest';\ntest('totals', () => {});\n"


def js_plan(runner: str, command: str) -> canary.Canary | None:
    return plant.plan(runner, "ab12cd34", JS_PATHS, command, ["test/cart.test.mjs"],
                       {"test/cart.test.mjs": JS_TEST, "package.json": "{}"})


@pytest.mark.parametrize(("runner", "command", "planted"), [
    ("vitest", "npx vitest run", True),
    ("vitest", "npx vitest run test/cart", True),  # a filter: a substring of its path
    ("vitest", "npx vitest run test/cart.test.mjs", False),
    ("vitest", "npx vitest run -t totals", True),
    ("vitest", "npx vitest run -t '^totals$'", False),
    ("jest", "npx jest", True),
    ("jest", "npx jest test/cart", True),  # a regular expression on its path
    ("jest", "npx jest test/cart.test.mjs", False),
    ("jest", "npx jest --testNamePattern 'totals$'", False),
])
def test_js_must_fail_file_only_where_the_command_selects_it(runner: str, command: str,
                                                            planted: bool) -> None:
    """vitest and jest: the must-fail canary file goes only where the command's path
    filters and name filter select it; elsewhere vitest keeps its listing of every test
    (no must-fail canary: unguarded), jest gets none."""
    found = js_plan(runner, command)
    if planted:
        assert found is not None and found.path and found.fail_name is not None
    elif runner == "vitest":
        assert found is not None and (found.path, found.fail_name) == ("", None)
        assert found.env and found.files  # every test still listed by id
    else:
        assert found is None


def test_vitest_verbose_ids_name_its_canary() -> None:
    """vitest's verbose lines give `file > name`: the must-fail canary's failure is the
    canary's (an honest whole-suite fix was FAIL tests_failed on the canary's own
    failure, read `absent`)."""
    from rig.parsers.base import TestCase, TestStatus
    found = js_plan("vitest", "npx vitest run")
    assert found is not None and found.fail_name is not None
    cases = [TestCase("test/cart.test.mjs > totals", TestStatus.PASSED),
             TestCase(f"{found.path} > {found.fail_name}", TestStatus.FAILED)]
    evidence = canary.observe(found, cases, 1)
    assert (evidence.fail_seen, evidence.clean) == (canary.Seen.FAILED, True)
    assert canary.split(found, cases)[1] == cases[:1]


def test_the_node_preload_never_acts_in_the_runner_s_own_process() -> None:
    """`node --test FILE`: the parent's argv[1] is the file too; twins registered there
    ran in a second TAP stream and named the protected tests twice (FAIL tampered)."""
    found = plan("node --test test/cart.test.js")
    assert found is not None
    assert b"!process.execArgv.includes('--test')" in found.files[0][1]


@pytest.mark.parametrize("command", ["npm test --workspace=packages/cart",
                                     "npm test -w packages/cart", "pnpm -C packages/cart test",
                                     "cd packages && npm --prefix cart run test"])
def test_a_workspace_script_runs_in_its_package(command: str) -> None:
    scripts = {"packages/cart/package.json": json.dumps(
        {"scripts": {"test": "node --test test/cart.test.js"}})}
    selection = js_selection.read("node-test", command, scripts)
    assert selection is not None
    assert (selection.cwd, selection.args) == ("packages/cart", ("test/cart.test.js",))
    assert js_selection.runs_file(selection, "packages/cart/test/cart.test.js")
    assert not js_selection.runs_file(selection, "packages/cart/test/cart.abc.test.cjs")


def test_a_glob_s_helper_outside_test_is_spared_too() -> None:
    helper = "module.exports = { cents: (v) => v * 100 };\n"
    found = plan("node --test 'tests/**/*.js' test/cart.test.js",
                 ("test/cart.test.js", "tests/helpers.js", "src/cart.js"),
                 {"tests/helpers.js": helper, "src/cart.js": helper})
    assert found is not None and found.helpers == ("/work/tests/helpers.js",
                                                   "tests/helpers.js")
