"""`protected` entries expanded to file paths: globs, `**`, directories, literal paths, and
a pattern that names nothing as a bad-input error naming the file, key path and pattern.

Pins issue 11: `protected = ["tests/*.py"]` silently protected nothing (the glob was
taken as a file name, absent at the base), and `protected = ["tests"]` crashed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rig.contract import freeze as freeze_lock
from rig.contract.content import ABSENT
from runner import contract, workspace
from runner.containers.images import BuiltImage
from runner.errors import ManifestError
from runner.manifest import LoadedManifest, load_manifest
from runner.manifest.protected import compile_glob, expand
from runner.store.layout import experiment_dir, stage_dir
from tests.integration.helpers import git, make_target

FILES = frozenset({
    "README.md", "conftest.py", "src/app.py", "src/tests/test_inner.py",
    "tests/conftest.py", "tests/test_a.py", "tests/test_b.py", "tests/data.json",
    "tests/unit/test_c.py", "tests/unit/deep/test_d.py", "tests/unit/helper.py",
})


def names(*patterns: str) -> tuple[str, ...]:
    return expand(patterns, FILES, manifest="/m/bakeoff.toml", change="first", base="0" * 40)


@pytest.mark.parametrize(("pattern", "expected"), [
    ("tests/*.py", ("tests/conftest.py", "tests/test_a.py", "tests/test_b.py")),
    ("tests/test_?.py", ("tests/test_a.py", "tests/test_b.py")),
    ("tests/test_[a].py", ("tests/test_a.py",)),
    ("tests/test_[!a].py", ("tests/test_b.py",)),
    ("tests/test_[a-b].py", ("tests/test_a.py", "tests/test_b.py")),
    ("tests/**/test_*.py", ("tests/test_a.py", "tests/test_b.py", "tests/unit/deep/test_d.py",
                            "tests/unit/test_c.py")),
    ("**/conftest.py", ("conftest.py", "tests/conftest.py")),
    ("tests/unit/**", ("tests/unit/deep/test_d.py", "tests/unit/helper.py",
                       "tests/unit/test_c.py")),
    ("*/tests", ("src/tests/test_inner.py",)),  # a glob that matches a directory
    ("tests/*/", ("tests/unit/deep/test_d.py", "tests/unit/helper.py", "tests/unit/test_c.py")),
])
def test_a_glob_names_exactly_the_files_it_matches(pattern: str,
                                                   expected: tuple[str, ...]) -> None:
    assert names(pattern) == expected


def test_star_and_question_mark_never_cross_a_slash() -> None:
    assert names("tests/*") == ("tests/conftest.py", "tests/data.json", "tests/test_a.py",
                                "tests/test_b.py", "tests/unit/deep/test_d.py",
                                "tests/unit/helper.py", "tests/unit/test_c.py")
    assert not compile_glob("tests/*.py").fullmatch("tests/unit/test_c.py")
    assert not compile_glob("tests?test_a.py").fullmatch("tests/test_a.py")
    assert not compile_glob("tests/test_[!x]").fullmatch("tests/test_/")


@pytest.mark.parametrize("pattern", ["tests", "tests/"])
def test_a_directory_with_or_without_slash_is_every_file_under_it(pattern: str) -> None:
    assert names(pattern) == tuple(sorted(p for p in FILES if p.startswith("tests/")))


def test_a_literal_path_is_itself_present_or_absent_and_entries_are_deduplicated() -> None:
    assert names("tests/test_a.py", "tests/fixtures.json", "tests/*.py") == (
        "tests/conftest.py", "tests/fixtures.json", "tests/test_a.py", "tests/test_b.py")


@pytest.mark.parametrize(("pattern", "kind"), [
    ("tests/*.txt", "glob"), ("nothing/**", "glob"), ("docs/", "directory"),
    ("README.md/", "directory"),
])
def test_a_pattern_that_matches_nothing_is_bad_input_naming_file_key_and_pattern(
        pattern: str, kind: str) -> None:
    with pytest.raises(ManifestError) as caught:
        names("tests/test_a.py", pattern)
    assert caught.value.exit_code == 2
    assert str(caught.value) == (
        f"/m/bakeoff.toml: changes[first].protected[1]: the {kind} matches no file at the "
        f"base 000000000000 (found {pattern!r})\n"
        "  fix: correct the entry (globs: * ? [...] within one path segment, ** for any "
        "depth; a directory protects every file under it) or remove it")


# --- against a real repository's base commit ----------------------------------------------

@pytest.fixture
def loaded(tmp_path: Path) -> LoadedManifest:
    """make_target's repo (tests/test_app.py) plus tests/test_more.py and tests/unit/x.py."""
    manifest = make_target(tmp_path / "repo", ["A"], database=False)
    repo = manifest.parent
    (repo / "tests" / "test_more.py").write_text("def test_more():\n    pass\n")
    (repo / "tests" / "unit").mkdir()
    (repo / "tests" / "unit" / "x.py").write_text("X = 1\n")
    set_protected(manifest, '["tests/*.py"]')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "more tests")
    return load_manifest(manifest)


def set_protected(manifest: Path, value: str) -> None:
    lines = manifest.read_text().splitlines(keepends=True)
    manifest.write_text("".join(f"protected = {value}\n" if line.startswith("protected = ")
                                else line for line in lines))


def test_expansion_reads_the_base_commit_never_the_working_tree(loaded: LoadedManifest) -> None:
    repo = loaded.repo_path
    base = workspace.resolve_commit(repo, "main")
    (repo / "tests" / "test_uncommitted.py").write_text("")
    (repo / "tests" / "test_more.py").unlink()
    assert workspace.files_at(repo, base) == [
        "app.py", "bakeoff.toml", "briefs/first.md", "tests/test_app.py", "tests/test_more.py",
        "tests/unit/x.py"]
    assert contract.expand_protected(loaded, "first", base) == (
        "tests/test_app.py", "tests/test_more.py")


def test_a_glob_that_matched_nothing_at_this_base_names_the_manifest(
        loaded: LoadedManifest) -> None:
    first = git(loaded.repo_path, "rev-list", "--max-parents=0", "main")
    set_protected(loaded.path, '["tests/test_app.py", "tests/test_more*.py"]')
    with pytest.raises(ManifestError, match=(
            rf"^{loaded.path}: changes\[first\]\.protected\[1\]: the glob matches no file at "
            rf"the base {first[:12]} \(found 'tests/test_more\*\.py'\)")):
        contract.expand_protected(load_manifest(loaded.path), "first", first)


def test_the_contract_freezes_the_expanded_list_and_consumers_get_the_same(
        loaded: LoadedManifest) -> None:
    repo = loaded.repo_path
    base = workspace.resolve_commit(repo, "main")
    image = BuiltImage("python", "bakeoff/python", "sha256:" + "1" * 64, "identity", True)
    frozen = contract.build_contract(loaded, "first", base, image).changes[0].protected
    assert sorted(frozen) == ["tests/test_app.py", "tests/test_more.py"]
    assert ABSENT not in frozen.values()
    assert contract.protected_paths(loaded, "first", base) == tuple(sorted(frozen))


def test_up_refreeze_proves_the_new_protected_list_not_the_frozen_one(
        loaded: LoadedManifest) -> None:
    """Pins: reading the list back from the lock would give `up --refreeze`'s proofs the
    OLD list (the new version is frozen only after them)."""
    repo = loaded.repo_path
    base = workspace.resolve_commit(repo, "main")
    image = BuiltImage("python", "bakeoff/python", "sha256:" + "1" * 64, "identity", True)
    stage = stage_dir(experiment_dir(repo, loaded.manifest.experiment.name), "first")
    freeze_lock(stage, contract.build_contract(loaded, "first", base, image), refreeze=False)
    set_protected(loaded.path, '["tests/unit"]')
    edited = load_manifest(loaded.path)
    assert contract.protected_paths(edited, "first", base) == ("tests/unit/x.py",)
    assert list(contract.build_contract(edited, "first", base, image).changes[0].protected) == [
        "tests/unit/x.py"]
