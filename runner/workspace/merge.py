"""The experiment branch: the best arm merged, then verified grafts of the others' wins.

All git work happens in a throwaway worktree (the user's checkout and index are never
touched); only the experiment branch ref moves, and only to a verified result.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from runner import workspace
from runner.errors import BadInputError
from runner.manifest import LoadedManifest

IDENTITY = ("-c", "user.name=bakeoff-sandbox", "-c", "user.email=merge@bakeoff.invalid")


@dataclass(frozen=True)
class Candidate:
    arm: str
    commit: str
    path: str


def branch_head(repo: Path, branch: str) -> str | None:
    return workspace.commit_of(repo, f"refs/heads/{branch}")


def stage_base(loaded: LoadedManifest, change: str) -> str:
    """Where a change starts: the manifest's base for the first change, else the
    experiment branch's head (the previous change's verified merge)."""
    ids = [c.id for c in loaded.manifest.changes]
    repo = loaded.repo_path
    if ids.index(change) == 0:
        return workspace.resolve_commit(repo, loaded.manifest.experiment.base)
    head = branch_head(repo, loaded.manifest.experiment.branch)
    if head is None:
        previous = ids[ids.index(change) - 1]
        raise BadInputError(f"change {change!r} starts from the experiment branch "
                            f"{loaded.manifest.experiment.branch}, which does not exist yet",
                            hint=f"score and merge {previous!r} first "
                                 f"(`bakeoff-sandbox run` does every change in order)")
    return head


@contextmanager
def worktree(repo: Path, commit: str) -> Iterator[Path]:
    """A detached throwaway worktree at `commit`, removed afterwards."""
    where = Path(tempfile.mkdtemp(prefix="bakeoff-merge-")) / "tree"
    workspace.run_git(repo, "worktree", "add", "--quiet", "--detach", str(where), commit)
    try:
        yield where
    finally:
        workspace.run_git(repo, "worktree", "remove", "--force", str(where), check=False)
        shutil.rmtree(where.parent, ignore_errors=True)
        workspace.run_git(repo, "worktree", "prune", check=False)


def merge(repo: Path, onto: str, commit: str, message: str) -> str:
    """A merge commit of `commit` onto `onto` (no fast-forward: the merge is visible)."""
    with worktree(repo, onto) as tree:
        workspace.run_git(tree, *IDENTITY, "merge", "--no-ff", "--no-edit", "-m", message,
                          commit)
        return workspace.run_git(tree, "rev-parse", "HEAD")


def changed(repo: Path, base: str, commit: str) -> set[str]:
    out = workspace.run_git(repo, "diff", "--name-only", "--no-renames", base, commit)
    return {line for line in out.splitlines() if line}


def candidates(repo: Path, base: str, winner: str, others: dict[str, str],
               protected: set[str]) -> list[Candidate]:
    """Files another (eligible) arm changed that the winner did not; never protected ones."""
    taken = changed(repo, base, winner) | protected
    found = []
    for arm, commit in sorted(others.items()):
        for path in sorted(changed(repo, base, commit) - taken):
            found.append(Candidate(arm, commit, path))
    return found


def graft(repo: Path, onto: str, candidate: Candidate) -> str:
    """A commit on top of `onto` taking `candidate.path` as the arm has it."""
    with worktree(repo, onto) as tree:
        exists = workspace.run_git(tree, "ls-tree", "--name-only", candidate.commit, "--",
                                   candidate.path)
        if exists:
            workspace.run_git(tree, "checkout", candidate.commit, "--", candidate.path)
        else:
            workspace.run_git(tree, "rm", "-q", "--", candidate.path)
        workspace.run_git(tree, *IDENTITY, "commit", "-q", "-m",
                          f"graft {candidate.path} from {candidate.arm}")
        return workspace.run_git(tree, "rev-parse", "HEAD")


def advance(repo: Path, branch: str, commit: str) -> None:
    workspace.run_git(repo, "update-ref", f"refs/heads/{branch}", commit)
