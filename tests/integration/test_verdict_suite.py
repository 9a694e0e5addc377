"""The labelled verdict suite: real containers, real pytest, each case an incident.

Every case commits a base tree and an "arm" commit on top, runs ONE sample of a command
through the oracle in a fresh container, and asserts the exact verdict and reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rig.sample.oracle import run_sample
from rig.sample.spec import SampleSpec
from runner.containers import images, sandbox
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.containers.samples.executor import DockerSampleExecutor
from tests.integration.helpers import git
from tests.trees import write_files

PASSING = "def test_one():\n    assert 1 + 1 == 2\n\n\ndef test_two():\n    assert True\n"
FAILING = "def test_one():\n    assert 1 + 1 == 3\n\n\ndef test_two():\n    assert True\n"
PYTEST = "pytest -q -p no:cacheprovider tests"


@dataclass(frozen=True)
class Case:
    command: str = PYTEST
    parser: str = "pytest"
    base: dict[str, str] = field(default_factory=lambda: {"tests/test_app.py": PASSING})
    arm: dict[str, str | None] = field(default_factory=dict)
    requires: tuple[str, ...] = ("python3", "pytest")
    protected: tuple[str, ...] = ()
    timeout_s: float = 60
    expect: tuple[str, str | None] = ("PASS", None)
    counts: tuple[int, int] | None = None  # (passed, failed)


CONFTEST_FAKE = ("def pytest_sessionstart(session):\n"
                 "    print('=' * 20 + ' 5 passed in 0.01s ' + '=' * 20)\n")
CONFTEST_ATEXIT = ("import atexit, os, sys\n\n\ndef _fake():\n"
                   "    sys.stdout.write('=' * 20 + ' 5 passed in 0.01s ' + '=' * 20 + '\\n')\n"
                   "    sys.stdout.flush()\n    os._exit(0)\n\n\natexit.register(_fake)\n")
CASES: dict[str, Case] = {
    "passing_suite_is_a_pass": Case(counts=(2, 0)),
    "failing_assertion_is_fail_tests_failed": Case(
        arm={"tests/test_app.py": FAILING}, expect=("FAIL", "tests_failed"), counts=(1, 1)),
    "required_tool_absent_from_image_is_rig_error_not_fail": Case(
        requires=("python3", "cargo"), expect=("RIG_ERROR", "tool_missing")),
    "command_program_absent_from_image_is_tool_missing": Case(
        command="nosuchrunner -q tests", expect=("RIG_ERROR", "tool_missing")),
    "missing_script_exit_127_is_command_not_found": Case(
        command="./scripts/run-tests.sh", expect=("RIG_ERROR", "command_not_found")),
    "non_executable_script_exit_126_is_command_not_found": Case(
        command="./run.sh", base={"run.sh": "pytest -q\n", "tests/test_app.py": PASSING},
        expect=("RIG_ERROR", "command_not_found")),
    "pytest_usage_error_exit_4_is_bad_invocation": Case(
        command="pytest -q --no-such-option tests", expect=("RIG_ERROR", "bad_invocation")),
    "pytest_collects_nothing_is_no_tests_ran": Case(
        base={"tests/test_app.py": "VALUE = 1\n"}, expect=("RIG_ERROR", "no_tests_ran")),
    "wrong_path_collects_nothing_is_no_tests_ran": Case(
        command="pytest -q -p no:cacheprovider nosuchdir", expect=("RIG_ERROR", "bad_invocation")),
    "no_summary_in_output_is_unparsed_output": Case(
        command="echo all good", expect=("RIG_ERROR", "unparsed_output")),
    "endless_test_is_fail_timeout": Case(
        arm={"tests/test_app.py": "import time\n\ndef test_forever():\n    time.sleep(600)\n"},
        timeout_s=3, expect=("FAIL", "timeout")),
    "memory_hog_is_fail_oom_killed": Case(
        arm={"tests/test_app.py": "def test_hog():\n    b = bytearray(2 * 1024 ** 3)\n"},
        expect=("FAIL", "oom_killed")),
    # A conftest printing a forged summary first: the base's harness has none (removed),
    # and text decides nothing: the honest failure stands.
    "fake_passed_lines_printed_by_code_under_test_are_not_a_pass": Case(
        arm={"tests/test_app.py": FAILING, "tests/conftest.py": CONFTEST_FAKE},
        expect=("FAIL", "tests_failed"), counts=(1, 1)),
    # The code under test prints a forged summary after pytest's own (atexit) and exits
    # 0: the observer saw pytest's session end with status 1.
    "fake_summary_printed_after_pytest_s_own_is_exit_mismatch": Case(
        arm={"tests/test_app.py": "import fake\n\n" + FAILING, "fake.py": CONFTEST_ATEXIT},
        command="python3 -m pytest -q -p no:cacheprovider tests",
        expect=("FAIL", "exit_mismatch")),
    # A command that sets its own PYTHONPATH: the observer comes in through the rig's
    # user site instead, and the verdict is still its own.
    "observer_survives_a_command_that_sets_pythonpath": Case(
        command=f"PYTHONPATH=. {PYTEST}", arm={"tests/test_app.py": FAILING},
        expect=("FAIL", "tests_failed"), counts=(1, 1)),
    "protected_test_edited_to_assert_true_is_restored_and_still_fails": Case(
        base={"tests/test_app.py": FAILING}, arm={"tests/test_app.py": PASSING},
        protected=("tests/test_app.py",), expect=("FAIL", "tests_failed"), counts=(1, 1)),
    "protected_test_deleted_by_contestant_is_restored_and_still_fails": Case(
        base={"tests/test_app.py": FAILING}, arm={"tests/test_app.py": None},
        protected=("tests/test_app.py",), expect=("FAIL", "tests_failed"), counts=(1, 1)),
    "exit_zero_with_failures_is_exit_mismatch": Case(
        command=f"{PYTEST}; true", arm={"tests/test_app.py": FAILING},
        expect=("FAIL", "exit_mismatch")),
    "nonzero_exit_with_all_passing_is_exit_mismatch": Case(
        command=f"{PYTEST} && exit 3", expect=("FAIL", "exit_mismatch")),
    "import_error_in_code_under_test_is_fail_build_failed": Case(
        arm={"tests/test_app.py": "import app_module_that_is_gone\n\n" + PASSING},
        expect=("FAIL", "build_failed")),
    "syntax_error_in_code_under_test_is_fail_not_rig_error": Case(
        base={"app.py": "VALUE = 1\n", "tests/test_app.py": "import app\n\n" + PASSING},
        arm={"app.py": "VALUE = (\n"}, command=f"PYTHONPATH=. {PYTEST}",
        expect=("FAIL", "build_failed")),
    "every_test_skipped_is_no_tests_ran": Case(
        arm={"tests/test_app.py": "import pytest\n\n@pytest.mark.skip\ndef test_x():\n    pass\n"},
        expect=("RIG_ERROR", "no_tests_ran")),
    "exit_code_check_success_is_pass": Case(
        command="python3 -m compileall -q .", parser="exit-code", requires=("python3",)),
    "exit_code_check_failure_is_fail": Case(
        command="python3 -m compileall -q .", parser="exit-code", requires=("python3",),
        arm={"broken.py": "def (\n"}, expect=("FAIL", "check_failed")),
    "sample_sees_no_network_at_all": Case(
        arm={"tests/test_net.py": "def test_no_route():\n"
             "    assert open('/proc/net/route').read().count('\\n') == 1\n"}, counts=(3, 0)),
    "sample_runs_as_non_root_in_work": Case(
        arm={"tests/test_who.py": "import os\n\ndef test_who():\n"
             "    assert os.getuid() == 1000 and os.getcwd() == '/work'\n"}, counts=(3, 0)),
    # PYTHONSAFEPATH keeps /work off the front of sys.path; a .pth puts it last, so a flat
    # layout's own modules still import and nothing of the tree shadows an installed one.
    "flat_layout_module_imports_under_python_m_pytest": Case(
        command="python3 -m pytest -q -p no:cacheprovider tests",
        base={"app.py": "VALUE = 2\n", "tests/test_app.py": "from app import VALUE\n\n\n"
              "def test_value():\n    assert VALUE == 2\n"}, counts=(1, 0)),
    "committed_pytest_py_does_not_shadow_pytest": Case(
        command="python3 -m pytest -q -p no:cacheprovider tests",
        arm={"tests/test_app.py": FAILING,
             "pytest.py": "print('===== 9 passed in 0.01s =====')\n"},
        expect=("FAIL", "tests_failed"), counts=(1, 1)),
    # The user site is the rig's: no .pth or customize module of the code under test can
    # make a later interpreter run it, and ~/.local cannot be swapped for another.
    "user_site_cannot_be_written_or_replaced_by_the_code_under_test": Case(
        arm={"tests/test_site.py": "import os, site, pytest\n\n\ndef test_site():\n"
             "    user = site.getusersitepackages()\n"
             "    with pytest.raises(PermissionError):\n"
             "        open(os.path.join(user, 'evil.pth'), 'w')\n"
             "    with pytest.raises(PermissionError):\n"
             "        os.rename(os.path.expanduser('~/.local'), os.path.expanduser('~/x'))\n"
             "    open(os.path.expanduser('~/cache-ok'), 'w').write('home stays writable')\n"},
        counts=(3, 0)),
    "file_left_by_contestant_outside_git_is_not_seen": Case(
        arm={"tests/test_clean.py": "import os\n\ndef test_clean():\n"
             "    mine = [n for n in os.listdir('tests') if not n.startswith('bakeoff_')]\n"
             "    assert sorted(mine) == ['test_app.py', 'test_clean.py']\n"},
        counts=(3, 0)),
}


@pytest.fixture(scope="module")
def executor_image(engine: Engine, built_images: dict[str, BuiltImage]) -> BuiltImage:
    return built_images["python"]


@pytest.fixture
def executor(engine: Engine, executor_image: BuiltImage, tmp_path: Path
             ) -> Iterator[DockerSampleExecutor]:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    limits = sandbox.SandboxLimits(cpus=1.0, memory_mb=256, pids=128)
    with DockerSampleExecutor(engine, repo, f"vs-{os.getpid()}", executor_image,
                              limits) as runner:
        yield runner


def commit(repo: Path, files: dict[str, str | None], message: str) -> str:
    write_files(repo, files)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
        "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.mark.parametrize("name", sorted(CASES))
def test_verdict(name: str, executor: DockerSampleExecutor, tmp_path: Path) -> None:
    case = CASES[name]
    base = commit(executor.repo, case.base, "base")
    head = commit(executor.repo, case.arm, "arm")
    spec = SampleSpec(change="suite", arm="arm", check="check", n=1, commit=head,
                      base_commit=base, command=case.command, parser=case.parser,
                      timeout_s=case.timeout_s, protected=case.protected,
                      requires=case.requires, harness="base")
    record = run_sample(executor, spec, tmp_path / "stage")
    assert (str(record.verdict), record.reason) == case.expect, record.detail
    if case.counts is not None:
        assert record.counts is not None
        assert (record.counts.passed, record.counts.failed) == case.counts
    assert (tmp_path / "stage" / "samples" / "arm" / "check" / "1.log").exists()


def test_infra_failure_is_rig_error_infra(engine: Engine, tmp_path: Path) -> None:
    """An image that vanished under the executor is the rig's failure, never the model's."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    head = commit(repo, {"tests/test_app.py": PASSING}, "base")
    ghost = images.BuiltImage("ghost", "bakeoff/ghost:none", "sha256:" + "0" * 64, "x", True)
    with DockerSampleExecutor(engine, repo, f"vs-{os.getpid()}", ghost,
                              sandbox.SandboxLimits()) as runner:
        spec = SampleSpec(change="suite", arm="arm", check="check", n=1, commit=head,
                          base_commit=head, command=PYTEST, parser="pytest", timeout_s=30)
        record = run_sample(runner, spec, tmp_path / "stage")
    assert (str(record.verdict), record.reason) == ("RIG_ERROR", "infra")
