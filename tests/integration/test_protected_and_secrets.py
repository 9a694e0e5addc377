"""Issue 11, item 7, through the real command line: `protected` globs and directories are
expanded against the base and frozen; a secret in an error never reaches the terminal.

Pins: `protected = ["tests/*.py"]` silently protected nothing (a contestant's edit of the
success test was scored as written); `protected = ["tests"]` crashed the oracle; a git
error whose text held a secret was printed raw.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner import workspace
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.manifest import load_manifest
from tests.integration.helpers import cleanup, cli, flat_record, git, make_target

PASSING = "def test_app():\n    assert 1 + 1 == 2\n"


@pytest.fixture
def repo(tmp_path: Path, engine: Engine, built_images: dict[str, BuiltImage]
         ) -> Iterator[Path]:
    """make_target's repo plus tests/test_more.py and tests/unit/helper.py (committed)."""
    manifest = make_target(tmp_path / "repo", ["A"], database=False)
    root = manifest.parent
    (root / "tests" / "test_more.py").write_text("def test_more():\n    pass\n")
    (root / "tests" / "unit").mkdir()
    (root / "tests" / "unit" / "helper.py").write_text("HELPER = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "more tests")
    yield root
    cleanup(engine, load_manifest(manifest))


def set_protected(repo: Path, value: str) -> None:
    manifest = repo / "bakeoff.toml"
    text = manifest.read_text()
    assert 'protected = ["tests/test_app.py"]' in text
    manifest.write_text(text.replace('protected = ["tests/test_app.py"]', f"protected = {value}"))
    git(repo, "commit", "-qam", f"protected = {value}")


def sha256_at(repo: Path, ref: str, path: str) -> str:
    content = workspace.file_at(repo, ref, path)
    assert content is not None, path
    return hashlib.sha256(content).hexdigest()


def attack(repo: Path) -> str:
    """A contestant's commit that makes the protected success test pass by editing it."""
    git(repo, "checkout", "-qb", "attack")
    (repo / "tests" / "test_app.py").write_text(PASSING)
    (repo / "tests" / "unit" / "helper.py").write_text("HELPER = 2\n")
    git(repo, "commit", "-qam", "attack: edit the success test")
    commit = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    return commit


def oracle_record(repo: Path, commit: str) -> dict[str, object]:
    done = cli(repo, "oracle", "--commit", commit, "--check", "success", "--samples", "1")
    assert done.returncode == 0, done.stderr
    stage = Path(done.stderr.strip().splitlines()[-1].split("records: ", 1)[1])
    record: dict[str, object] = flat_record(next(stage.glob("samples/*/*/1.json")))
    return record


def test_up_freezes_a_protected_glob_as_the_exact_list_and_the_oracle_restores_it(
        repo: Path) -> None:
    set_protected(repo, '["tests/*.py"]')
    up = cli(repo, "up")
    assert up.returncode == 0, up.stderr
    name = load_manifest(repo / "bakeoff.toml").manifest.experiment.name
    lock = json.loads((repo / ".bakeoff" / name / "stages" / "first" /
                       "contract.lock.json").read_text())
    expected = {path: sha256_at(repo, "main", path)
                for path in ("tests/test_app.py", "tests/test_more.py")}
    assert lock["versions"][0]["contract"]["changes"][0]["protected"] == expected
    record = oracle_record(repo, attack(repo))
    assert (record["verdict"], record["reason"]) == ("FAIL", "tests_failed")
    assert record["protected"] == expected


def test_a_protected_directory_restores_every_file_under_it_without_crashing(
        repo: Path) -> None:
    set_protected(repo, '["tests"]')
    record = oracle_record(repo, attack(repo))
    assert (record["verdict"], record["reason"]) == ("FAIL", "tests_failed")
    assert record["protected"] == {
        path: sha256_at(repo, "main", path)
        for path in ("tests/test_app.py", "tests/test_more.py", "tests/unit/helper.py")}


def test_a_protected_glob_that_matches_nothing_is_refused_by_up_with_exit_2(
        repo: Path) -> None:
    set_protected(repo, '["tests/test_app.py", "tests/*.txt"]')
    base = git(repo, "rev-parse", "main")
    up = cli(repo, "up")
    assert up.returncode == 2, up.stderr
    assert (f"error: {repo / 'bakeoff.toml'}: changes[first].protected[1]: the glob matches "
            f"no file at the base {base[:12]} (found 'tests/*.txt')") in up.stderr
    assert "Traceback" not in up.stderr


def test_up_on_a_base_ref_holding_the_secret_prints_stars_never_the_value(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "s3cr3t-9d1c0ffee"
    manifest = repo / "bakeoff.toml"
    original = manifest.read_text()
    text = original.replace('network = "none"', 'network = "none"\nsecrets = ["IT_TOKEN"]')
    manifest.write_text(text.replace('base = "main"', f'base = "release-{secret}"'))
    monkeypatch.setenv("IT_TOKEN", secret)  # inherited by the command line's process
    try:
        up = cli(repo, "up")
    finally:
        manifest.write_text(original)  # the teardown loads it
    assert up.returncode == 2
    assert secret not in up.stdout and secret not in up.stderr
    assert "experiment.base: is not a ref or commit of" in up.stderr
    assert "(found 'release-***')" in up.stderr
