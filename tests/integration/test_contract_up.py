"""Principles 1, 2 and 7 at `up`, through the real command line: the contract is frozen
and verified, the base must fail, a reference must pass, the rig must be able to run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.manifest import load_manifest
from tests.integration.helpers import cleanup, cli, flat_record, git, make_target


@pytest.fixture
def repo(tmp_path: Path, engine: Engine, built_images: dict[str, BuiltImage]
         ) -> Iterator[Path]:
    manifest = make_target(tmp_path / "repo", ["A"], database=False)
    yield manifest.parent
    cleanup(engine, load_manifest(manifest))


def edit(repo: Path, old: str, new: str, *, path: str = "bakeoff.toml",
         commit: bool = True) -> None:
    target = repo / path
    text = target.read_text()
    assert old in text, old
    target.write_text(text.replace(old, new))
    if commit:
        git(repo, "commit", "-qam", f"edit {path}")


def lock_of(repo: Path) -> dict[str, object]:
    name = load_manifest(repo / "bakeoff.toml").manifest.experiment.name
    lock = repo / ".bakeoff" / name / "stages" / "first" / "contract.lock.json"
    loaded: dict[str, object] = json.loads(lock.read_text())
    return loaded


@pytest.mark.parametrize(("old", "new", "field"), [
    ('run = "pytest -q -p no:cacheprovider tests/test_app.py"',
     'run = "pytest -q -p no:cacheprovider -x tests/test_app.py"', "changes[first].success.run"),
    ('judge = "none"', 'judge = "none"\n\n[contract.weights]\nsuccess = 4', "weights.success"),
])
def test_manifest_changed_after_up_is_refused_with_exit_4_naming_the_field(
        repo: Path, old: str, new: str, field: str) -> None:
    assert cli(repo, "up").returncode == 0
    edit(repo, old, new, commit=False)
    refused = cli(repo, "oracle", "--commit", "HEAD", "--check", "success", "--samples", "1")
    assert refused.returncode == 4, refused.stderr
    assert field in refused.stderr and "--refreeze" in refused.stderr


def test_brief_changed_after_up_is_refused_and_refreeze_keeps_both_versions(
        repo: Path) -> None:
    assert cli(repo, "up").returncode == 0
    assert cli(repo, "down").returncode == 0
    edit(repo, "Make the test pass.", "Make the test pass, and say why.",
         path="briefs/first.md")
    refused = cli(repo, "up")
    assert refused.returncode == 4
    assert "changes[first].brief (brief file changed)" in refused.stderr
    again = cli(repo, "up", "--refreeze")
    assert again.returncode == 0, again.stderr
    versions = lock_of(repo)["versions"]
    assert isinstance(versions, list)
    assert [(v["version"], v["reason"]) for v in versions] == [(1, "up"), (2, "refreeze")]
    assert versions[0]["sha256"] != versions[1]["sha256"]


def test_passing_baseline_is_refused_as_no_signal_unless_allowed(repo: Path) -> None:
    edit(repo, "assert 1 + 1 == 3", "assert 1 + 1 == 2", path="tests/test_app.py")
    refused = cli(repo, "up")
    assert refused.returncode == 2
    assert "no signal: the task passes before any change; calibrate it until the control " \
           "fails" in refused.stderr
    allowed = cli(repo, "up", "--allow-passing-baseline")
    assert allowed.returncode == 0, allowed.stderr
    name = load_manifest(repo / "bakeoff.toml").manifest.experiment.name
    stage = json.loads((repo / ".bakeoff" / name / "stages" / "first" / "stage.json")
                       .read_text())
    assert stage["caveats"] == [
        "baseline passed 3 of 3 samples (--allow-passing-baseline)"]


FLAKY = '''import os


def test_app():
    # seeded by the sample number: samples 1 and 3 fail, sample 2 passes
    assert int(os.environ["BAKEOFF_SAMPLE"].rsplit("/", 1)[1]) % 2 == 0
'''


def test_flaky_baseline_is_refused(repo: Path) -> None:
    (repo / "tests" / "test_app.py").write_text(FLAKY)
    git(repo, "commit", "-qam", "a test that fails about half the time")
    refused = cli(repo, "up")
    assert refused.returncode == 2
    assert "flaky baseline: the untouched base passed 1 of 3 samples" in refused.stderr


def test_rig_broken_baseline_is_refused_as_a_rig_problem(repo: Path) -> None:
    edit(repo, 'run = "pytest -q -p no:cacheprovider tests/test_app.py"',
         'run = "pytest -q --no-such-option tests/test_app.py"')
    refused = cli(repo, "up")
    assert refused.returncode == 3
    assert "the baseline is a rig problem, not a task: RIG_ERROR(bad_invocation)" \
        in refused.stderr


def test_reference_that_fails_is_refused(repo: Path) -> None:
    (repo / "app.py").write_text("VALUE = 2  # not a fix\n")
    git(repo, "commit", "-qam", "a would-be reference that fixes nothing")
    not_a_fix = git(repo, "rev-parse", "HEAD")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    edit(repo, 'protected = ["tests/test_app.py"]',
         f'protected = ["tests/test_app.py"]\nreference = "{not_a_fix}"')
    refused = cli(repo, "up")
    assert refused.returncode == 3
    assert f"the rig cannot pass this task: the reference {not_a_fix[:12]}" in refused.stderr


def test_toolchain_without_pytest_fails_preflight_naming_pytest(repo: Path) -> None:
    edit(repo, 'image = "python"', 'image = "base"')
    refused = cli(repo, "up")
    assert refused.returncode == 3
    assert "preflight failed for image bakeoff/base:bookworm" in refused.stderr
    assert "pytest is not on PATH (needed by [toolchain].requires)" in refused.stderr


def test_samples_record_the_contract_version_they_were_graded_under(repo: Path) -> None:
    assert cli(repo, "up").returncode == 0
    done = cli(repo, "oracle", "--commit", "HEAD", "--check", "success", "--samples", "1")
    assert done.returncode == 0, done.stderr
    stage = Path(done.stderr.strip().splitlines()[-1].split("records: ", 1)[1])
    record = flat_record(next(stage.glob("samples/*/*/1.json")))
    versions = lock_of(repo)["versions"]
    assert isinstance(versions, list)
    assert record["contract"] == f"v1:{versions[0]['sha256']}"


def test_up_warns_of_a_file_a_check_names_that_is_not_protected(repo: Path) -> None:
    """Issue 30: a check `grep -c VALUE app.py` measures the arm's app.py (its files are
    never the base's unless protected); `up` says so on its progress lines, naming the
    check, the file and the key, and goes on (exit 0). The protected test the criterion
    names is silent."""
    edit(repo, 'parser = "pytest"\n',
         'parser = "pytest"\n\n[[checks]]\nname = "values"\nrun = "grep -c VALUE app.py"\n'
         'parser = "exit-code"\n')
    done = cli(repo, "up")
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, done.stderr
    assert warnings[0].startswith(
        "warning: checks[values].run names app.py, a file of the base that is not protected")
    assert "changes[first].protected" in " ".join(done.stderr.split())
