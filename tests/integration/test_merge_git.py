"""Merge mechanics with real git (no docker): a visible merge, graft candidates, grafts,
and the next change starting from the experiment branch."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.errors import BadInputError
from runner.manifest import load_manifest
from runner.workspace import merge
from tests.integration.helpers import git, make_target


def commit_on(repo: Path, base: str, files: dict[str, str], message: str) -> str:
    git(repo, "checkout", "-q", "--detach", base)
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    sha = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    return sha


def test_merge_candidates_graft_and_next_stage_base(tmp_path: Path) -> None:
    manifest = make_target(tmp_path / "repo", ["A", "B"], database=False)
    with manifest.open("a") as handle:  # a second change, after the first
        handle.write('\n[[changes]]\nid = "second"\nbrief = "briefs/first.md"\n\n'
                     '[changes.success]\nrun = "true"\nparser = "exit-code"\n')
    repo = manifest.parent
    git(repo, "commit", "-qam", "two changes")
    base = git(repo, "rev-parse", "HEAD")
    loaded = load_manifest(manifest)
    assert merge.stage_base(loaded, "first") == base
    with pytest.raises(BadInputError, match="score and merge 'first' first"):
        merge.stage_base(loaded, "second")

    winner = commit_on(repo, base, {"app.py": "VALUE = 2\n"}, "winner: the fix")
    other = commit_on(repo, base, {"app.py": "VALUE = 3\n", "docs.md": "why\n",
                                   "tests/test_app.py": "assert True\n"}, "other")
    found = merge.candidates(repo, base, winner, {"B": other}, {"tests/test_app.py"})
    assert found == [merge.Candidate("B", other, "docs.md")]

    merged = merge.merge(repo, base, winner, "merge A")
    assert git(repo, "rev-list", "--parents", "-n", "1", merged).split() == [
        merged, base, winner]
    grafted = merge.graft(repo, merged, found[0])
    assert git(repo, "show", f"{grafted}:docs.md") == "why"
    assert git(repo, "show", f"{grafted}:app.py") == "VALUE = 2"
    merge.advance(repo, loaded.manifest.experiment.branch, grafted)
    assert merge.stage_base(loaded, "second") == grafted
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "worktree", "list").count("\n") == 0  # the throwaway trees are gone
