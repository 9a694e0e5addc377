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

from rig.guards import harness
from rig.sample import tree as tree_mod
from runner import workspace
from runner.errors import BadInputError
from runner.manifest import LoadedManifest

# No hook of the repository runs on a tree that holds a contestant's files.
NO_HOOKS = ("-c", "core.hooksPath=/dev/null")
IDENTITY = (*NO_HOOKS, "-c", "user.name=bakeoff-sandbox", "-c",
            "user.email=merge@bakeoff.invalid")
LITERAL = ("--literal-pathspecs",)
# Paths a diff lists: two trees of `[limits].max_files`' default each; an arm past that
# was refused in every sample (its tree could not be laid out) and is merged nowhere.
CHANGED_MAX = 200_000


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
    workspace.run_git(repo, *NO_HOOKS, "worktree", "add", "--quiet", "--detach", str(where),
                      commit)
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


def changed(repo: Path, base: str, commit: str, limit: int = CHANGED_MAX) -> set[str]:
    """The paths `commit` changed from `base` (any name git allows: `-z`, undecodable
    bytes kept as surrogates; `rig.sample.tree.shown` prints them), at most `limit` (`listed`)."""
    return set(listed(repo, base, commit, limit)[0])


def listed(repo: Path, base: str, commit: str, limit: int = CHANGED_MAX
           ) -> tuple[list[str], bool]:
    """The paths `commit` changed from `base` as git lists them (`-z`: any name), at most
    `limit`, and whether there were more (git is stopped there: the diff of a tree bomb
    is never read whole)."""
    return workspace.git_lines(repo, "diff", "--name-only", "-z", "--no-renames", base,
                               commit, limit=limit)


def offered(repo: Path, base: str, winner: str, others: dict[str, str],
            protected: set[str]) -> list[Candidate]:
    """Every file another (eligible) arm changed that the winner did not, never a
    protected one; harness files included (`candidates` leaves them out)."""
    taken = changed(repo, base, winner) | protected
    found = []
    for arm, commit in sorted(others.items()):
        for path in sorted(changed(repo, base, commit) - taken):
            found.append(Candidate(arm, commit, path))
    return found


def is_harness(path: str) -> bool:
    """A path a merge never grafts by its name or place alone (`rig.guards.harness`: any
    runner's configuration, loader files, vendored and build output; bytecode)."""
    return bool(harness.touched([path]))


def candidates(repo: Path, base: str, winner: str, others: dict[str, str],
               protected: set[str]) -> list[Candidate]:
    """Files another (eligible) arm changed that the winner did not; never protected
    ones, never harness (`is_harness`)."""
    return [c for c in offered(repo, base, winner, others, protected)
            if not is_harness(c.path)]


def graft(repo: Path, onto: str, candidate: Candidate) -> str | None:
    """A commit on top of `onto` taking `candidate.path` as the arm has it (None: the
    arm's is `onto`'s already, nothing to graft)."""
    return restore(repo, onto, candidate.commit, [candidate.path],
                   f"graft {tree_mod.shown(candidate.path)} from {candidate.arm}")


def restore(repo: Path, onto: str, source: str, paths: list[str], message: str) -> str | None:
    """A commit on top of `onto` where each of `paths` (a file or a directory) is as
    `source` has it, or gone where `source` has none; None when that changes nothing.
    Paths are literal (`--literal-pathspecs`): a file named `*` or `:(top)` is that file,
    never a pattern that would take the whole of `source`."""
    with worktree(repo, onto) as tree:
        for path in paths:
            workspace.run_git(tree, *LITERAL, "rm", "-r", "-q", "--ignore-unmatch",
                              "--", path)
            if workspace.run_git(tree, *LITERAL, "ls-tree", "--name-only", source, "--",
                                 path):
                workspace.run_git(tree, *LITERAL, "checkout", source, "--", path)
        if not workspace.git_run(tree, "diff", "--cached", "--quiet").returncode:
            return None
        workspace.run_git(tree, *IDENTITY, "commit", "-q", "-m", message)
        return workspace.run_git(tree, "rev-parse", "HEAD")


def advance(repo: Path, branch: str, commit: str) -> None:
    workspace.run_git(repo, "update-ref", f"refs/heads/{branch}", commit)
