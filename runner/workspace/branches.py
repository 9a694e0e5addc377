"""The branches an experiment leaves in the user's repository: listed, checked and, when
asked (`down --branches`), deleted, each through the git choke point."""

from __future__ import annotations

from pathlib import Path

from runner.workspace.git import run_git


def listed(repo: Path, *refs: str) -> dict[str, str]:
    """The local branches at or under each of `refs` (`bakeoff-arms/NAME` matches every
    branch below it): short name -> tip commit, sorted by name."""
    found = run_git(repo, "for-each-ref", "--format=%(refname:short) %(objectname)",
                    *(f"refs/heads/{ref}" for ref in refs))
    pairs = (line.split(" ", 1) for line in found.splitlines() if line)
    return dict(sorted((name, tip) for name, tip in pairs))


def checked_out(repo: Path) -> dict[str, str]:
    """Each branch checked out in a worktree of `repo` -> that worktree's path."""
    found: dict[str, str] = {}
    path = ""
    for line in run_git(repo, "worktree", "list", "--porcelain").splitlines():
        if line.startswith("worktree "):
            path = line.removeprefix("worktree ")
        elif line.startswith("branch refs/heads/"):
            found[line.removeprefix("branch refs/heads/")] = path
    return found


def unrecorded(repo: Path, tip: str, recorded: set[str]) -> int:
    """How many commits reachable from `tip` none of the `recorded` commits reaches."""
    known = sorted(c for c in recorded if _exists(repo, c))
    return int(run_git(repo, "rev-list", "--count", tip, "--not", *known, "--"))


def _exists(repo: Path, commit: str) -> bool:
    return run_git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}",
                   check=False) != ""


def delete(repo: Path, name: str, tip: str) -> None:
    """Delete branch `name`, only while it is still at `tip` (a branch moved since stays)."""
    run_git(repo, "update-ref", "-d", f"refs/heads/{name}", tip)
