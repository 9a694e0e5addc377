"""What the host reads of an arm's work is bounded and checked (real git, no docker)."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest

from rig.sample.tree import Caps, UnsafeTreeError
from runner import workspace
from runner.commands.dispatch import work
from runner.commands.dispatch.redact import forms_of
from runner.containers.samples.tree import read_tree

SECRET = "sk-test-0123456789abcdef"


def commit(repo: Path, files: dict[str, bytes]) -> str:
    if not (repo / ".git").exists():
        subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    for name, data in files.items():
        (repo / name).write_bytes(data)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"],
                   cwd=repo, check=True)
    return workspace.run_git(repo, "rev-parse", "HEAD")


def test_a_secret_committed_base64_encoded_is_found(tmp_path: Path) -> None:
    """`secret_in_commit`: the arm's commit is searched for every form of the secret."""
    head = commit(tmp_path, {"app.py": b"V = 1\n",
                             "notes.txt": b"token: " + base64.b64encode(SECRET.encode()),
                             "blob.bin": b"\0\1" + SECRET.encode() + b"\0"})
    assert work.secret_files(tmp_path, head, sorted(forms_of(SECRET))) == ["blob.bin",
                                                                          "notes.txt"]
    assert work.secret_files(tmp_path, head, sorted(forms_of("not-in-there-at-all"))) == []


def test_a_tree_larger_than_a_sample_can_hold_is_refused_unread(tmp_path: Path) -> None:
    head = commit(tmp_path, {"big.bin": b"x" * 4096, "app.py": b"V = 1\n"})
    with pytest.raises(UnsafeTreeError, match="add up to more than 4000 bytes"):
        read_tree(tmp_path, head, Caps(100, 4000))
    assert sorted(read_tree(tmp_path, head, Caps(100, 5000))) == ["app.py",
                                                                               "big.bin"]


def test_the_judge_reads_at_most_the_limit_of_a_diff(tmp_path: Path) -> None:
    base = commit(tmp_path, {"app.py": b"V = 1\n"})
    head = commit(tmp_path, {"big.txt": b"line\n" * 100_000})
    kept, more = workspace.git_capped(tmp_path, "diff", base, head, limit=1000)
    assert len(kept) == 1000 and more > 500_000
    kept, more = workspace.git_capped(tmp_path, "diff", base, head, limit=1000, count=10_000)
    assert len(kept) == 1000 and 10_000 < more <= 10_000 + 1024 * 1024  # git was stopped
