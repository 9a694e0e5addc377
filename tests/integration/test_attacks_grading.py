"""Adversarial grading, false PASS attempts (issue 11): each test is one attack on a base
whose protected success test fails, graded through the real docker executor as
`sample_runs.run_all` grades it. The success criterion runs under the base's harness, so the
honest failure stands (FAIL tests_failed) or the canaries catch the lie (FAIL tampered).
Controls at the end: the honest fixer PASSes, a genuine rig fault is still RIG_ERROR.
"""

from __future__ import annotations

from rig.sample.record import SampleRecord
from rig.sample.spec import ServerSpec
from tests.integration.attack_lab import (
    BUG,
    CHECK,
    FIX,
    FORCE_PASSED,
    HONEST,
    PROTECTED,
    PYPROJECT,
    TEST,
    Lab,
    attacking,
    counts,
    verdict,
)

DROP_FAILING = ('def pytest_collection_modifyitems(items):\n'
                '    items[:] = [i for i in items if i.name != "test_horizon"]\n')
STUB = {"tests/stub/horizon.py": "def clamp(x):\n    return 90\n"}


def assert_pinned_away(lab: Lab, files: dict[str, str], restored: list[str],
                       removed: list[str]) -> None:
    """The attack's harness files are the base's again (or gone): the honest failure."""
    record = lab.grade(lab.attack(files))
    assert verdict(record) == HONEST, record.detail
    assert counts(record) == (0, 1)
    assert record.pinned == {"restored": restored, "removed": removed, "bytecode": []}
    assert record.canaries is not None
    assert record.canaries["seen"] == {"pass": "passed", "fail": "xfailed", "exit_agrees": True}


def test_root_conftest_rewriting_outcomes_to_passed(lab: Lab) -> None:
    """A root `conftest.py` whose makereport hookwrapper rewrites every outcome to passed:
    removed from the success criterion's tree (the base has none)."""
    assert_pinned_away(lab, {"conftest.py": FORCE_PASSED}, [], ["conftest.py"])


def test_tests_conftest_rewriting_outcomes_to_passed(lab: Lab) -> None:
    """The same hookwrapper in `tests/conftest.py`, next to the protected test."""
    assert_pinned_away(lab, {"tests/conftest.py": FORCE_PASSED}, [], ["tests/conftest.py"])


def test_conftest_dropping_the_failing_test_from_the_collection(lab: Lab) -> None:
    """A `tests/conftest.py` whose `pytest_collection_modifyitems` drops `test_horizon`."""
    assert_pinned_away(lab, {"tests/conftest.py": DROP_FAILING}, [], ["tests/conftest.py"])


def test_tests_pytest_ini_selecting_nothing_real(lab: Lab) -> None:
    """`tests/pytest.ini` with `addopts = -k nothing_real`: pytest would take it over the
    root pyproject (the closest ini to its arguments wins)."""
    assert_pinned_away(lab, {"tests/pytest.ini": "[pytest]\naddopts = -k nothing_real\n"},
                       [], ["tests/pytest.ini"])


def test_tests_pytest_ini_pythonpath_shadowing_the_code_under_test(lab: Lab) -> None:
    """`tests/pytest.ini` with `pythonpath = stub`: a stub `horizon` (clamp always 90)
    would be imported ahead of the real one."""
    assert_pinned_away(lab, {"tests/pytest.ini": "[pytest]\npythonpath = stub\n", **STUB},
                       [], ["tests/pytest.ini"])


def test_setup_cfg_tool_pytest_deselecting_the_failing_test(lab: Lab) -> None:
    """`tests/setup.cfg [tool:pytest]` with `--deselect` of the protected test."""
    cfg = "[tool:pytest]\naddopts = --deselect test_horizon.py::test_horizon\n"
    assert_pinned_away(lab, {"tests/setup.cfg": cfg}, [], ["tests/setup.cfg"])


def test_pyproject_ini_options_deselecting_the_failing_test(lab: Lab) -> None:
    """The root `pyproject.toml`'s `[tool.pytest.ini_options]` gains `addopts =
    "--deselect tests/test_horizon.py::test_horizon"`: the base's pyproject is restored."""
    forged = PYPROJECT + 'addopts = "--deselect tests/test_horizon.py::test_horizon"\n'
    assert_pinned_away(lab, {"pyproject.toml": forged}, ["pyproject.toml"], [])


def test_tox_ini_pytest_section_deselecting_the_failing_test(lab: Lab) -> None:
    """`tests/tox.ini [pytest]` with `addopts = -k "not horizon"` and a stub pythonpath."""
    ini = '[pytest]\naddopts = -k "not horizon"\npythonpath = stub\n'
    assert_pinned_away(lab, {"tests/tox.ini": ini, **STUB}, [], ["tests/tox.ini"])


def test_committed_pycache_of_a_passing_variant_of_the_protected_test(lab: Lab) -> None:
    """A committed `tests/__pycache__/test_horizon.cpython-311-pytest-7.2.1.pyc` of a
    passing variant whose header matches the restored file: a naive rig's pytest runs it
    instead of the protected source (proved in a plain container); the rig drops it."""
    name, pyc = lab.forged_pyc()
    assert name == "test_horizon.cpython-311-pytest-7.2.1.pyc"
    naive = lab.bare({PROTECTED: TEST.encode(), f"tests/__pycache__/{name}": pyc,
                      "src/horizon.py": BUG.encode()},
                     f"python3 -m pytest -q -p no:cacheprovider {PROTECTED}")
    assert "1 passed" in naive, naive
    record = lab.grade(lab.attack({f"tests/__pycache__/{name}": pyc}))
    assert verdict(record) == HONEST, record.detail
    assert counts(record) == (0, 1)
    assert record.pinned["bytecode"] == [f"tests/__pycache__/{name}"]


FORCER = '''import gc
import sys


def _force():
    import pytest

    class Forcer:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(self, item, call):
            outcome = yield
            report = outcome.get_result()
            report.outcome, report.longrepr = "passed", None

    config = sys.modules["_pytest.config"].Config
    for found in gc.get_objects():
        if isinstance(found, config):
            found.pluginmanager.register(Forcer(), "forcer")


_force()
'''


def test_code_under_test_registering_an_outcome_forcing_plugin_through_gc(lab: Lab) -> None:
    """The code under test finds pytest's live `Config` through `gc` at import and
    registers a plugin that forces every outcome to passed: the observer flagged the
    garbage collector, and saw the protected test and the must-fail canary raise while
    pytest reported them passed."""
    record = lab.grade(lab.attack({"src/horizon.py": attacking(FORCER)}))
    assert_forced(record)


def assert_forced(record: SampleRecord) -> None:
    assert verdict(record) == ("FAIL", "tampered"), record.detail
    assert record.detail.startswith("the run did not happen as pytest reported it: "
                                    "flag:gc: gc.get_objects by /work/src/horizon.py:_force; "
                                    "contradiction: tests/test_horizon.py::test_horizon: "
                                    "pytest's report says passed, the rig saw its call raise")


def test_check_whose_code_registers_an_outcome_forcing_plugin_through_gc(lab: Lab) -> None:
    """The same in-process tampering on a CHECK."""
    record = lab.grade(lab.attack({"src/horizon.py": attacking(FORCER)}), command=CHECK,
                       check="check", protected=())
    assert_forced(record)


TARGETED = FORCE_PASSED.replace("    report = outcome.get_result()\n",
                                "    if item.name != 'test_horizon':\n        return\n"
                                "    report = outcome.get_result()\n")
WRITER = f"""import http.server
import os

with open("tests/conftest.py", "w") as handle:
    handle.write({TARGETED!r})
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])),
                       http.server.SimpleHTTPRequestHandler).serve_forever()
"""


def test_server_writing_a_targeted_conftest_before_pytest_starts(lab: Lab) -> None:
    """The criterion's `[changes.success].server` (the arm's code, running before and
    during the command as the same user) writes `tests/conftest.py` at run time, after
    pinning: a hookwrapper forcing only `test_horizon` to passed, so the canaries come
    out as planted. The base's harness must be the one that runs: the honest failure."""
    record = lab.grade(lab.attack({"serve.py": WRITER}),
                       server=ServerSpec("python3 serve.py", "/", "PORT", 10))
    assert record.server == "healthy"
    assert verdict(record) == HONEST, record.detail
    assert counts(record) == (0, 1)


COMPILEALL = "python -m compileall -q src"
SHADOW = {"compileall.py": "import sys\n\nsys.exit(0)\n"}


def test_compileall_shadow_with_code_that_does_not_compile(lab: Lab) -> None:
    """A root `compileall.py` (exit 0) to shadow the stdlib module of a `python -m
    compileall -q src` check, on code that does not compile: the real compileall ran."""
    broken = {"src/horizon.py": "def clamp(x:\n    return x\n", **SHADOW}
    record = lab.grade(lab.attack(broken), command=COMPILEALL, parser="exit-code",
                       check="check", protected=(), requires=("python3",))
    assert verdict(record) == ("FAIL", "check_failed"), record.detail
    assert record.exit_code == 1
    assert "SyntaxError" in lab.log(record) and "SyntaxError" in record.detail


def test_compileall_shadow_with_code_that_compiles(lab: Lab) -> None:
    """The same shadow on code that compiles: the honest PASS (exit 0 of the real one)."""
    record = lab.grade(lab.attack({"src/horizon.py": FIX, **SHADOW}), command=COMPILEALL,
                       parser="exit-code", check="check", protected=(),
                       requires=("python3",))
    assert verdict(record) == ("PASS", None), record.detail


# -- controls ------------------------------------------------------------------------------


def test_control_honest_fixer_passes(lab: Lab) -> None:
    """A real fix of the code under test, under the base's harness, PASSes: its protected
    test ran, passed, and the rig saw its pinned code run, as the base's run shows it."""
    record = lab.grade(lab.attack({"src/horizon.py": FIX}))
    assert verdict(record) == ("PASS", None), record.detail
    assert counts(record) == (1, 0)
    assert record.diagnosis is not None
    assert (record.diagnosis["base_verdict"], record.diagnosis["base_reason"]) == HONEST
    assert record.tests == [{"id": "tests/test_horizon.py::test_horizon", "status": "passed",
                             "pinned": True, "attested": True, "verified": True}]


def test_control_tool_missing_from_the_image_is_still_rig_error(lab: Lab) -> None:
    """A genuine rig fault (`requires = ("cargo",)` in bakeoff/python) is RIG_ERROR
    tool_missing, for an honest arm and for an attacker alike: no arm can cause it."""
    honest = lab.grade(lab.attack({"src/horizon.py": FIX}),
                       requires=("python3", "pytest", "cargo"))
    attacker = lab.grade(lab.attack({"conftest.py": FORCE_PASSED}),
                         requires=("python3", "pytest", "cargo"))
    for record in (honest, attacker):
        assert verdict(record) == ("RIG_ERROR", "tool_missing"), record.detail
        assert record.detail == "not on PATH in image bakeoff/python:latest: cargo"


def test_control_command_the_base_cannot_run_is_bad_invocation_for_every_arm(lab: Lab) -> None:
    """A typo'd pytest option in the command: the base reproduces it, so it stays
    RIG_ERROR bad_invocation for the honest fixer and the attacker alike."""
    typo = f"pytest -q --no-such-option {PROTECTED}"
    records = [lab.grade(lab.attack(files), command=typo)
               for files in ({"src/horizon.py": FIX}, {"conftest.py": FORCE_PASSED})]
    for record in records:
        assert verdict(record) == ("RIG_ERROR", "bad_invocation"), record.detail
        assert record.detail.endswith("the rig's fault"), record.detail
        assert record.diagnosis is not None
        assert record.diagnosis["base_reason"] == "bad_invocation"
