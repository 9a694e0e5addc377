"""Issue 20's control: a project whose real pytest plugins come from its image still works
under the rig's observer. pytest-xdist is installed by `[toolchain] setup` into the
prepared image (from wheels committed beside the project: no network at build time), and
the success criterion runs with `-n 2`: the observer sees a controller and two worker
sessions, attests the protected test in the worker that ran it, and the honest fix
PASSes while a forcing attack is still caught. Through the real `bakeoff-sandbox oracle`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rig.sample.record import SampleRecord
from tests.integration.attack_lab import FIX, attacking, commit, oracle
from tests.integration.helpers import git, make_target

WHEELS = Path.home() / ".cache" / "bakeoff-sandbox" / "test-wheels" / "xdist-3.6.1"
SETUP = 'setup = ["pip install --user --no-index --find-links wheels pytest-xdist==3.6.1"]'
SUCCESS = "pytest -q -p no:cacheprovider -n 2 tests/test_horizon.py tests/test_more.py"
FORCER = '''import gc
import pytest


class _Force:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        report.outcome, report.longrepr = "passed", None


for found in gc.get_objects():
    if type(found).__name__ == "Config" and hasattr(found, "pluginmanager"):
        found.pluginmanager.register(_Force(), "force")
        break
'''


def wheels() -> Path:
    """pytest-xdist and execnet for the image's python, downloaded once on the host."""
    if not (WHEELS / "done").exists():
        WHEELS.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:",
                        "--python-version", "3.11", "-d", str(WHEELS), "pytest-xdist==3.6.1",
                        "execnet==2.1.1"], check=True)
        (WHEELS / "done").write_text("")
    return WHEELS


@pytest.fixture(scope="module")
def xdist_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("xdist") / "repo"
    manifest = make_target(root, ["A"], database=False)
    text = manifest.read_text().replace('"tests/test_app.py"', '"tests/test_horizon.py"')
    text = text.replace("pytest -q -p no:cacheprovider tests/test_app.py", SUCCESS)
    text = text.replace('requires = ["python3", "pytest", "git"]',
                        'requires = ["python3", "pytest", "git"]\n' + SETUP)
    manifest.write_text(text)
    (root / "wheels").mkdir()
    for wheel in wheels().glob("*.whl"):
        shutil.copy(wheel, root / "wheels" / wheel.name)
    more = "".join(f"def test_more_{n}():\n    assert True\n\n\n" for n in range(6))
    commit(root, {"src/horizon.py": "def clamp(x):\n    return x\n",
                  "tests/test_horizon.py": "from horizon import clamp\n\n\ndef test_horizon():"
                                           "\n    assert clamp(91) == 90\n",
                  "tests/test_more.py": more,
                  "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["src"]\n'},
           "base: the protected test fails; pytest-xdist comes from setup")
    git(root, "checkout", "-q", "-b", "attack")
    return root


def attack(repo: Path, files: dict[str, str]) -> SampleRecord:
    git(repo, "reset", "-q", "--hard", "main")
    commit(repo, files, "attack")
    [record] = oracle(repo)
    return record


def test_xdist_from_setup_runs_under_the_observer_and_the_fix_passes(xdist_repo: Path) -> None:
    record = attack(xdist_repo, {"src/horizon.py": FIX})
    assert (str(record.verdict), record.reason) == ("PASS", None), record.detail
    assert record.observer is not None
    assert (record.observer["sessions"], record.observer["anomalies"]) == (3, [])
    assert {"xdist", "xdist.looponfail"} <= set(record.observer["plugins"])
    assert record.counts is not None and record.counts.passed == 7
    [horizon] = [t for t in record.tests if t["id"] == "tests/test_horizon.py::test_horizon"]
    assert horizon == {"id": "tests/test_horizon.py::test_horizon", "status": "passed",
                       "pinned": True, "attested": True, "verified": True}


def test_a_forcing_attack_is_caught_in_the_xdist_worker_that_ran_it(xdist_repo: Path) -> None:
    record = attack(xdist_repo, {"src/horizon.py": attacking(FORCER)})
    assert (str(record.verdict), record.reason) == ("FAIL", "tampered"), record.detail
    assert "contradiction: tests/test_horizon.py::test_horizon" in record.detail
