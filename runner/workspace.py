"""Git: the target repository, one isolated checkout per arm, fetching arms' work back.

Every git call goes through `run_git` (a timeout, and `safe.directory=*` because arm
checkouts belong to the sandbox user while the orchestrator may be root).

An arm's checkout is `git init` + a fetch of the base commit ONLY from the main repo: it
holds the base history and nothing else — no rival's branch, no later commit, no tag,
no remote pointing back (DESIGN principle 6; FIELD-NOTES "Git").
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from runner.errors import BadInputError, DirtyTreeError, RunnerError

GIT_TIMEOUT_S = 120
SANDBOX_UID = 1000
SANDBOX_GID = 1000
ARM_BRANCH = "work"


class GitError(RunnerError):
    """A git command failed."""


def _env() -> dict[str, str]:
    # GIT_CONFIG_* is command-line scope, where safe.directory is honoured.
    return {**os.environ, "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory",
            "GIT_CONFIG_VALUE_0": "*", "GIT_TERMINAL_PROMPT": "0"}


def run_git(cwd: Path, *args: str, check: bool = True) -> str:
    """Run `git ARGS` in `cwd` with a timeout; return stdout (stripped)."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, env=_env(), capture_output=True,
                              text=True, timeout=GIT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        raise GitError(f"git {' '.join(args)} took over {GIT_TIMEOUT_S}s in {cwd}") from error
    if check and done.returncode != 0:
        raise GitError(f"git {' '.join(args)} failed in {cwd}: {done.stderr.strip()}")
    return done.stdout.strip()


def git_bytes(cwd: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """Run `git ARGS` in `cwd` with a timeout; return stdout as bytes (objects, -z lists)."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, env=_env(), input=stdin,
                              capture_output=True, timeout=GIT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        raise GitError(f"git {' '.join(args)} took over {GIT_TIMEOUT_S}s in {cwd}") from error
    if done.returncode != 0:
        raise GitError(f"git {' '.join(args)} failed in {cwd}: "
                       f"{done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def require_clean(repo_path: Path) -> None:
    """Refuse a dirty tree, untracked files included: an arm must start from a commit."""
    status = run_git(repo_path, "status", "--porcelain", "--untracked-files=all")
    if status:
        lines = status.splitlines()
        shown = ", ".join(line[3:] for line in lines[:5])
        more = f" and {len(lines) - 5} more" if len(lines) > 5 else ""
        raise DirtyTreeError(f"{repo_path} has uncommitted or untracked files: {shown}{more}",
                             hint="commit or stash them (git stash -u), then run again")


def commit_of(repo_path: Path, ref: str) -> str | None:
    """The commit `ref` names (a branch, tag, id...), or None when it names none."""
    sha = run_git(repo_path, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}",
                  check=False)
    return sha or None


def file_at(repo_path: Path, commit: str, path: str) -> bytes | None:
    """A file's bytes as `commit` has it, or None when the commit has no such file."""
    done = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=repo_path, env=_env(),
                          capture_output=True, check=False, timeout=GIT_TIMEOUT_S)
    return done.stdout if done.returncode == 0 else None


def files_at(repo_path: Path, commit: str) -> list[str]:
    """Every file of `commit`'s tree (regular files and symlinks; no submodule), read from
    git's objects, never from the working tree."""
    listing = run_git(repo_path, "ls-tree", "-r", "-z", "--full-tree", commit)
    entries = (entry.split("\t", 1) for entry in listing.split("\0") if entry)
    return [path for meta, path in entries if meta.split(" ")[1] == "blob"]


def resolve_commit(repo_path: Path, ref: str) -> str:
    sha = commit_of(repo_path, ref)
    if not sha:
        raise BadInputError(f"{repo_path}: ref {ref!r} does not name a commit",
                            hint="set [experiment].base to an existing branch, tag or commit")
    return sha


def make_checkout(repo_path: Path, base_sha: str, dest: Path) -> Path:
    """A fresh checkout at `dest` holding only the history of `base_sha`."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    run_git(dest, "init", "--quiet", f"--initial-branch={ARM_BRANCH}")
    # Fetch the one commit by id (protocol v2 allows any reachable id); no tags, no refs.
    run_git(dest, "-c", "protocol.version=2", "fetch", "--quiet", "--no-tags",
            str(repo_path.resolve()), base_sha)
    run_git(dest, "reset", "--quiet", "--hard", base_sha)
    run_git(dest, "update-ref", "-d", "FETCH_HEAD", check=False)
    (dest / ".git" / "FETCH_HEAD").unlink(missing_ok=True)
    give_to_sandbox(dest)
    return dest


def give_to_sandbox(path: Path) -> None:
    """Make the checkout writable by the sandbox's non-root user (when we can)."""
    if os.geteuid() != 0:
        return
    for root, dirs, files in os.walk(path):
        os.chown(root, SANDBOX_UID, SANDBOX_GID)
        for name in (*dirs, *files):
            os.lchown(os.path.join(root, name), SANDBOX_UID, SANDBOX_GID)


def sandbox_user() -> str:
    """The uid:gid sandboxes run as: the image's `agent` user, or ours when not root."""
    if os.geteuid() == 0:
        return f"{SANDBOX_UID}:{SANDBOX_GID}"
    return f"{os.getuid()}:{os.getgid()}"


def arm_branch(experiment: str, change: str, arm: str) -> str:
    # Not bakeoff/<experiment>/...: the experiment branch defaults to bakeoff/<experiment>,
    # and git cannot hold both a ref and refs below it of the same name.
    return f"bakeoff-arms/{experiment}/{change}/{arm}"


def fetch_back(repo_path: Path, checkout: Path, branch: str) -> str:
    """Fetch the arm's HEAD into the main repo as `branch`; return its commit."""
    head = run_git(checkout, "rev-parse", "HEAD")
    # Local transports drop GIT_CONFIG_*; the upload-pack side needs safe.directory itself.
    run_git(repo_path, "fetch", "--quiet", "--no-tags",
            "--upload-pack=git -c safe.directory=* upload-pack", str(checkout.resolve()),
            f"+HEAD:refs/heads/{branch}")
    return head

