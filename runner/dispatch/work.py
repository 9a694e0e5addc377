"""Keeping an arm's work: stranded edits committed, commits fetched back, diffstat.

The orchestrator's commit runs INSIDE the arm's sandbox, as the sandbox user, with hooks
off: the checkout's `.git` is the agent's to configure (hooks, filters, fsmonitor), and
none of that may ever run on the host. The host only fetches from the checkout (as
`runner.workspace.fetch_back` does) and reads the fetched commits in the main repository.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from runner import sandbox, workspace
from runner.engine import Engine
from runner.workspace import GitError

GIT_STEP_TIMEOUT_S = 300
ORCHESTRATOR = ("-c user.name='bakeoff-sandbox orchestrator' "
                "-c user.email=orchestrator@bakeoff.invalid")
# $1 = the message; the rest = ignored paths to force-add when they exist.
COMMIT_SCRIPT = f"""
msg="$1"; shift
rm -f .git/index.lock
git add -A || exit 3
for p in "$@"; do
  if [ -e "$p" ]; then git add -f -- "$p" || exit 3; fi
done
git diff --cached --quiet && exit 0
git -c core.hooksPath=/dev/null -c commit.gpgSign=false {ORCHESTRATOR} commit -q -m "$msg" \
  || exit 4
git rev-parse HEAD
"""
# $1 = the base commit: back to it, with no other ref, no reflog, no loose history.
RESET_SCRIPT = f"""
rm -f .git/index.lock
git checkout -q -f -B {workspace.ARM_BRANCH} "$1" || exit 3
git for-each-ref --format='%(refname)' | while read -r ref; do
  [ "$ref" = refs/heads/{workspace.ARM_BRANCH} ] || git update-ref -d "$ref"
done
git clean -q -ffdx && git reflog expire --expire=now --all && git gc -q --prune=now
"""


@dataclass(frozen=True)
class KeptWork:
    commit: str
    branch: str
    commits: int
    orchestrator_commit: str | None
    diffstat: str
    files_changed: int
    insertions: int
    deletions: int


def commit_stranded(engine: Engine, container_id: str, message: str,
                    force_add: list[str]) -> str | None:
    """Commit what the agent left uncommitted (force-adding `force_add`); the new commit."""
    result = sandbox.exec_in(engine, container_id, ["sh", "-c", COMMIT_SCRIPT, "commit",
                                                    message, *force_add],
                             timeout_s=GIT_STEP_TIMEOUT_S)
    if result.exit_code != 0:
        raise GitError(f"the orchestrator could not commit the arm's stranded work "
                       f"(exit {result.exit_code}): {(result.stderr or result.stdout).strip()}")
    lines = result.stdout.strip().splitlines()
    return lines[-1].strip() if lines else None


def reset_to_base(engine: Engine, container_id: str, base: str) -> None:
    """A redo starts where every arm started: the base commit, nothing else reachable."""
    result = sandbox.exec_in(engine, container_id, ["sh", "-c", RESET_SCRIPT, "reset", base],
                             timeout_s=GIT_STEP_TIMEOUT_S)
    if result.exit_code != 0:
        raise GitError(f"could not reset the checkout to the base {base[:12]} "
                       f"(exit {result.exit_code}): {result.stderr.strip()}")


def fetch_work(repo: Path, checkout: Path, branch: str, base: str,
               orchestrator_commit: str | None) -> KeptWork:
    """Fetch the checkout's HEAD into `repo` as `branch`; measure it against the base."""
    head = workspace.fetch_back(repo, checkout, branch)
    count = int(workspace.run_git(repo, "rev-list", "--count", f"{base}..{head}") or 0)
    stat = workspace.run_git(repo, "diff", "--stat", "--no-color", "--no-ext-diff", base, head)
    short = workspace.run_git(repo, "diff", "--shortstat", "--no-ext-diff", base, head)
    files, added, deleted = parse_shortstat(short)
    return KeptWork(head, branch, count, orchestrator_commit, stat, files, added, deleted)


def committed_diff(repo: Path, base: str, head: str) -> str:
    return workspace.run_git(repo, "diff", "--no-color", "--no-ext-diff", "--no-textconv",
                             base, head)


def parse_shortstat(text: str) -> tuple[int, int, int]:
    """`3 files changed, 10 insertions(+), 2 deletions(-)` -> (3, 10, 2)."""
    numbers = []
    for word in ("file", "insertion", "deletion"):
        match = re.search(rf"(\d+) {word}", text)
        numbers.append(int(match.group(1)) if match else 0)
    return numbers[0], numbers[1], numbers[2]
