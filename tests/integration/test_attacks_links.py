"""Adversarial grading, class 9 (issue 20): a check and the runtime see the same files.

A symlink is followed by the interpreter and skipped by `compileall` (and by many tools):
a package linked to code elsewhere in the tree is imported at run time and never
compiled. The rig lays every in-tree link out as a copy of what it leads to before its
own layer goes on (`rig.sample.links`); a link it cannot lay out is refused. Each test is one
route, graded through the real docker executor; the controls at the end PASS.
"""

from __future__ import annotations

from tests.integration.attack_lab import (
    FIX,
    HONEST,
    PROTECTED,
    Lab,
    Link,
    counts,
    verdict,
)

COMPILE = "python -m compileall -q src"
BROKEN = "def clamp(x:\n    return x\n"
ELSEWHERE = {"src/horizon.py": None, "lib/horizon/__init__.py": BROKEN}


def compiled(lab: Lab, files: dict[str, str | Link | None]) -> tuple[str, str | None]:
    """The `compile` check (`python -m compileall -q src`, exit code) of an attack."""
    record = lab.grade(lab.attack(files), command=COMPILE, parser="exit-code", check="compile",
                       protected=(), requires=("python3",))
    if verdict(record) == ("FAIL", "check_failed"):
        assert "SyntaxError" in lab.log(record), lab.log(record)
    return verdict(record)


def test_package_linked_to_a_directory_elsewhere_with_a_syntax_error(lab: Lab) -> None:
    """`src/horizon -> ../lib/horizon`, whose `__init__.py` does not compile: Python
    imports it through the link, `compileall src` skipped the linked directory (exit 0).
    Laid out as a copy, compileall compiles it: FAIL check_failed."""
    assert compiled(lab, {**ELSEWHERE, "src/horizon": Link("../lib/horizon")}) == \
        ("FAIL", "check_failed")


def test_module_linked_to_a_file_elsewhere_with_a_syntax_error(lab: Lab) -> None:
    """`src/horizon.py -> ../lib/real.py`, which does not compile."""
    files = {"lib/real.py": BROKEN, "src/horizon.py": Link("../lib/real.py")}
    assert compiled(lab, files) == ("FAIL", "check_failed")


def test_package_behind_a_chain_of_links(lab: Lab) -> None:
    """`src/horizon -> ../a/pkg`, `a -> b`, `b -> /work/lib` (absolute, into the tree)."""
    files = {"src/horizon.py": None, "lib/pkg/__init__.py": BROKEN,
             "src/horizon": Link("../a/pkg"), "a": Link("b"), "b": Link("/work/lib")}
    assert compiled(lab, files) == ("FAIL", "check_failed")


def test_package_linked_out_of_the_tree_and_back_in(lab: Lab) -> None:
    """`src/horizon -> ../../work/lib/horizon`: `..` above the tree is `/`, and back into
    /work: laid out like any link into the tree."""
    files = {**ELSEWHERE, "src/horizon": Link("../../work/lib/horizon")}
    assert compiled(lab, files) == ("FAIL", "check_failed")


def test_package_linked_through_proc_self_cwd(lab: Lab) -> None:
    """`src/horizon -> /proc/self/cwd/lib/horizon`: out of the tree by its text, back in
    by the kernel's (the command's cwd is /work). Where it leads depends on the process
    that follows it: refused."""
    files = {**ELSEWHERE, "src/horizon": Link("/proc/self/cwd/lib/horizon")}
    assert compiled(lab, files) == ("FAIL", "unsafe_work")


def test_a_link_loop_beside_broken_code(lab: Lab) -> None:
    """`src/again -> ../src`: a directory that holds its own link (a copy would never
    end; a runtime imports `again.again.horizon`): refused."""
    assert compiled(lab, {"src/again": Link("../src")}) == ("FAIL", "unsafe_work")


def test_two_links_pointing_at_each_other(lab: Lab) -> None:
    assert compiled(lab, {"src/a.py": Link("b.py"), "src/b.py": Link("a.py")}) == \
        ("FAIL", "unsafe_work")


def test_protected_test_committed_as_a_link_to_a_passing_variant(lab: Lab) -> None:
    """The protected test a link to the arm's passing variant (and `tests/` itself a link
    to a directory holding another): restored as the base's regular file, both ways."""
    passing = "def test_horizon():\n    assert True\n"
    as_file = lab.grade(lab.attack({"stash/passing.py": passing,
                                    PROTECTED: Link("../stash/passing.py")}))
    as_dir = lab.grade(lab.commit({PROTECTED: None, "stash/test_horizon.py": passing,
                                   "tests": Link("stash")}, "tests as a link"))
    for record in (as_file, as_dir):
        assert verdict(record) == HONEST, record.detail
        assert counts(record) == (0, 1)


FORCE = '''import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
'''


def test_conftest_committed_as_a_link_to_a_module_of_the_arm(lab: Lab) -> None:
    """`tests/conftest.py -> ../src/hooks.py`, a hookwrapper forcing every outcome to
    passed: laid out as a file, then pinned away like any conftest the base lacks."""
    record = lab.grade(lab.attack({"src/hooks.py": FORCE,
                                   "tests/conftest.py": Link("../src/hooks.py")}))
    assert verdict(record) == HONEST, record.detail
    assert record.pinned["removed"] == ["tests/conftest.py"]
    assert record.pinned["materialized"] == ["tests/conftest.py -> src/hooks.py"]


# -- controls --------------------------------------------------------------------------------


def test_control_a_linked_package_that_compiles_passes(lab: Lab) -> None:
    """The honest use of a link: code kept elsewhere, linked into src: compiled, PASS; the
    record names what was laid out."""
    files = {"src/horizon.py": None, "lib/horizon/__init__.py": FIX,
             "src/horizon": Link("../lib/horizon")}
    record = lab.grade(lab.attack(files), command=COMPILE, parser="exit-code",
                       check="compile", protected=(), requires=("python3",))
    assert verdict(record) == ("PASS", None), record.detail
    assert record.pinned["materialized"] == ["src/horizon -> lib/horizon"]


def test_control_a_fix_imported_through_a_link_passes_the_success_criterion(lab: Lab) -> None:
    """The runtime is unchanged: the fixed module, linked from src, imports and passes."""
    record = lab.grade(lab.attack({"lib/real.py": FIX, "src/horizon.py": Link("../lib/real.py")}))
    assert verdict(record) == ("PASS", None), record.detail
    assert counts(record) == (1, 0)
