"""Issue 30: a file a check's command names is measured as the ARM's.

A command that names a file of the tree (a TODO ratchet's `grep -c TODO app.py`, a
criterion that runs the program under test by path, `python3 -m py_compile app.py`, a
lint script given the file it checks) reads the arm's version of that file: the rig
replaces only the contract's protected files and the harness. A grader's own script is
protected (here `tools/lint.py`), so an arm that rewrites it still runs the base's.
Each case is one commit straight on one shared base (`Lab.variant`).
"""

from __future__ import annotations

import pytest

from rig.sample.metric import Ratchet
from rig.sample.record import SampleRecord
from tests.integration.attack_lab import BASE, Lab, verdict

APP = '''"""The program under test: cap() and its selftest."""
import sys

# TODO: negative values


def cap(x):
    return {body}


if __name__ == "__main__" and "--selftest" in sys.argv[1:]:
    assert cap(91) == 90, f"cap(91) is {{cap(91)}}, not 90"
    print("selftest: ok")
'''
BUG, FIX = APP.format(body="x"), APP.format(body="min(x, 90)")
LINT = '''import sys

found = [f"{path}:{n}: line too long" for path in sys.argv[1:]
         for n, line in enumerate(open(path), 1) if len(line.rstrip("\\n")) > 79]
print("\\n".join(found) or "lint: clean")
sys.exit(1 if found else 0)
'''
NAMED_BASE = {**BASE, "app.py": BUG, "tools/lint.py": LINT}
LONG_LINE = "\n\nMESSAGE = '" + "x" * 90 + "'\n"
SYNTAX_ERROR = FIX.replace("def cap(x):", "def cap(x:")
TODOS = "echo todos=$(grep -c TODO app.py)"
SELFTEST = "python3 app.py --selftest"
COMPILE = "python3 -m py_compile app.py"
LINT_APP = "python3 tools/lint.py app.py"


def grade(lab: Lab, files: dict[str, str], command: str, check: str,
          protected: tuple[str, ...] = (), **how: object) -> SampleRecord:
    head = lab.variant(files, NAMED_BASE)
    return lab.grade(head, command=command, check=check, protected=protected,
                     requires=("python3",), **how)


def exit_code(lab: Lab, files: dict[str, str], command: str,
              protected: tuple[str, ...] = ()) -> SampleRecord:
    return grade(lab, files, command, "exitcode", protected, parser="exit-code")


def test_a_todo_ratchet_fails_the_arm_that_added_todos_and_records_its_value(
        shared_lab: Lab) -> None:
    """`echo todos=$(grep -c TODO app.py)`, lower is better, base 1: the arm's app.py
    (the fix and two TODOs more) is what the command counts: 3, a regression. (Measured
    on the base's app.py, it was 1 and a PASS.)"""
    arm = FIX.replace("def cap", "# TODO: overflow\n# TODO: docs\ndef cap")
    record = grade(shared_lab, {"app.py": arm}, TODOS, "todos", parser="metric",
                   ratchet=Ratchet(r"todos=(?P<value>\d+)", "lower", base=1.0))
    assert verdict(record) == ("FAIL", "ratchet_regressed"), record.detail
    assert (record.metric_value, record.metric_base) == (3.0, 1.0)
    assert record.pinned["restored"] == [], record.pinned


@pytest.mark.parametrize(("files", "expected"), [
    ({}, ("FAIL", "check_failed")),
    ({"app.py": FIX}, ("PASS", None)),
], ids=["base", "fix"])
def test_a_criterion_that_runs_the_program_by_path_passes_the_fix_in_it(
        shared_lab: Lab, files: dict[str, str], expected: tuple[str, str | None]) -> None:
    """`python3 app.py --selftest`: the fix in app.py is the arm's and runs (it was
    reverted to the base's: a false FAIL); the base FAILs."""
    record = exit_code(shared_lab, files, SELFTEST)
    assert verdict(record) == expected, record.detail


def test_py_compile_of_a_named_file_fails_the_arm_s_syntax_error(shared_lab: Lab) -> None:
    """`python3 -m py_compile app.py` compiles the arm's app.py (a syntax error: FAIL),
    not the base's (which compiles)."""
    record = exit_code(shared_lab, {"app.py": SYNTAX_ERROR}, COMPILE)
    assert verdict(record) == ("FAIL", "check_failed"), record.detail
    assert "SyntaxError" in shared_lab.log(record)


@pytest.mark.parametrize(("files", "expected"), [
    ({"app.py": FIX}, ("PASS", None)),
    ({"app.py": FIX + LONG_LINE}, ("FAIL", "check_failed")),
], ids=["clean", "long-line"])
def test_a_lint_check_naming_a_file_measures_the_arm_s_file(
        shared_lab: Lab, files: dict[str, str], expected: tuple[str, str | None]) -> None:
    """The grader's lint script (protected) checks the file the command names: the arm's
    app.py, clean or with a line too long."""
    record = exit_code(shared_lab, files, LINT_APP, ("tools/lint.py",))
    assert verdict(record) == expected, record.detail


def test_the_arm_s_rewrite_of_a_protected_lint_script_is_not_run(shared_lab: Lab) -> None:
    """An arm that adds a long line and rewrites the grader's script to pass: the script
    is protected, so the base's runs and finds the line (FAIL)."""
    files = {"app.py": FIX + LONG_LINE, "tools/lint.py": "print('lint: clean')\n"}
    record = exit_code(shared_lab, files, LINT_APP, ("tools/lint.py",))
    assert verdict(record) == ("FAIL", "check_failed"), record.detail
    assert "app.py:16: line too long" in shared_lab.log(record)
    assert list(record.protected) == ["tools/lint.py"]
