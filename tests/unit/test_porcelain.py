"""The dirty-tree error names the real files (issue 34): `require_clean` read
`git status --porcelain` stripped, then cut each line at [3:], so a modified README.md
was shown as `EADME.md`. It reads `-z` now; each shape of a name git can report."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from runner.errors import DirtyTreeError
from runner.workspace.git import dirty_paths, porcelain_paths, require_clean

IDENTITY = ("-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *IDENTITY, *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    _git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "README.md").write_text("# r\n")
    (tmp_path / "old.txt").write_text("moved\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "base")
    return tmp_path


def test_a_modified_readme_keeps_its_first_letter(repo: Path) -> None:
    """Regression: the first entry's leading space was stripped, then [3:] cut 'R'."""
    (repo / "README.md").write_text("# changed\n")
    with pytest.raises(DirtyTreeError) as caught:
        require_clean(repo)
    assert str(caught.value) == (f"{repo} has uncommitted or untracked files: README.md\n"
                                 "  fix: commit or stash them (git stash -u), then run again")
    assert caught.value.exit_code == 2


def test_spaces_quotes_and_non_ascii_names_are_shown_as_they_are(repo: Path) -> None:
    for name in ("a b.txt", 'say "hi".txt', "café.txt"):
        (repo / name).write_text("x\n")
    assert sorted(dirty_paths(repo)) == ["a b.txt", "café.txt", 'say "hi".txt']


def test_a_staged_rename_shows_both_names(repo: Path) -> None:
    _git(repo, "mv", "old.txt", "new name.txt")
    assert dirty_paths(repo) == ["old.txt -> new name.txt"]


def test_a_deleted_file_and_an_untracked_one_in_a_folder(repo: Path) -> None:
    (repo / "README.md").unlink()
    (repo / "deep" / "er").mkdir(parents=True)
    (repo / "deep" / "er" / "x.py").write_text("")
    assert dirty_paths(repo) == ["README.md", "deep/er/x.py"]


def test_more_than_five_are_counted(repo: Path) -> None:
    for n in range(7):
        (repo / f"f{n}.txt").write_text("x\n")
    with pytest.raises(DirtyTreeError) as caught:
        require_clean(repo)
    assert caught.value.message == (f"{repo} has uncommitted or untracked files: f0.txt, "
                                    "f1.txt, f2.txt, f3.txt, f4.txt and 2 more")


def test_a_clean_tree_passes(repo: Path) -> None:
    require_clean(repo)
    assert dirty_paths(repo) == []


def test_porcelain_z_entries_parse_without_git() -> None:
    raw = " M README.md\0R  new.txt\0old.txt\0?? dir/a b\0C  copy.txt\0orig.txt\0"
    assert porcelain_paths(raw) == ["README.md", "old.txt -> new.txt", "dir/a b",
                                    "orig.txt -> copy.txt"]
    assert porcelain_paths("") == []
