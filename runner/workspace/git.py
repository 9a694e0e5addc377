"""Git on the host: the target repository (the main repo) and nothing else.

Every git call on the host goes through `run_git` (a timeout, and `safe.directory=*`
because sample trees belong to the sandbox user while the orchestrator may be root).

The host never runs git in an arm's checkout: the checkout is made inside the arm's
volume from `base_bundle` (the base commit's history only: no rival's branch, no later
commit, no tag, no remote; DESIGN principle 6), and the arm's work comes back as a
bundle that `runner.bundle` imports with every object checked (`runner.checkout`).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from runner.errors import BadInputError, DirtyTreeError, RunnerError

GIT_TIMEOUT_S = 120


class GitError(RunnerError):
    """A git command failed."""


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    # GIT_CONFIG_* is command-line scope, where safe.directory is honoured.
    return {**os.environ, "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory",
            "GIT_CONFIG_VALUE_0": "*", "GIT_TERMINAL_PROMPT": "0", **(extra or {})}


@dataclass(frozen=True)
class GitRun:
    returncode: int
    stdout: str
    stderr: str


def git_run(cwd: Path, *args: str, stdin: BinaryIO | None = None,
            env: Mapping[str, str] | None = None) -> GitRun:
    """Run `git ARGS` in `cwd` with a timeout; the outcome, whatever the exit code."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, env=_env(env), capture_output=True,
                              stdin=stdin, text=True, errors="replace",
                              timeout=GIT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        raise GitError(f"git {' '.join(args)} took over {GIT_TIMEOUT_S}s in {cwd}") from error
    return GitRun(done.returncode, done.stdout, done.stderr)


def run_git(cwd: Path, *args: str, check: bool = True, stdin: BinaryIO | None = None,
            env: Mapping[str, str] | None = None) -> str:
    """Run `git ARGS` in `cwd` with a timeout; return stdout (stripped)."""
    done = git_run(cwd, *args, stdin=stdin, env=env)
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


def git_capped(cwd: Path, *args: str, limit: int) -> tuple[str, int]:
    """`git ARGS` in `cwd`: at most `limit` bytes of its stdout, and how many more there
    were (output the arm controls, e.g. its diff, never held whole)."""
    with subprocess.Popen(["git", *args], cwd=cwd, env=_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL) as proc:
        assert proc.stdout is not None
        kept = proc.stdout.read(limit)
        more = 0
        while chunk := proc.stdout.read(1024 * 1024):
            more += len(chunk)
        try:
            proc.wait(timeout=GIT_TIMEOUT_S)
        except subprocess.TimeoutExpired as error:
            proc.kill()
            raise GitError(f"git {' '.join(args)} took over {GIT_TIMEOUT_S}s") from error
    if proc.returncode != 0:
        raise GitError(f"git {' '.join(args)} failed in {cwd} (exit {proc.returncode})")
    return kept.decode(errors="replace"), more


def grep_files(repo: Path, commit: str, needles: list[str]) -> list[str]:
    """The files of `commit` that contain any of `needles` (fixed strings), streamed by
    git: nothing of the tree is held in memory."""
    if not needles:
        return []
    args = ["grep", "-l", "-F", *[x for n in needles for x in ("-e", n)], commit]
    done = git_run(repo, *args)
    if done.returncode not in (0, 1):
        raise GitError(f"git grep failed in {repo}: {done.stderr.strip()}")
    return sorted(line.split(":", 1)[1] for line in done.stdout.splitlines() if ":" in line)


def commit_patch(repo: Path, base: str, patch: Path, message: str) -> str:
    """A commit of `patch` applied onto `base` in a private index: no branch moves, no
    working tree is touched. `GitError` when it does not apply."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        run_git(repo, "read-tree", base, env=env)
        run_git(repo, "apply", "--cached", str(patch), env=env)
        tree = run_git(repo, "write-tree", env=env)
        return run_git(repo, "-c", "user.name=bakeoff", "-c", "user.email=rig@bakeoff.invalid",
                       "commit-tree", tree, "-p", base, "-m", message, env=env)


def toplevel(path: Path) -> Path | None:
    """The root of the git working tree holding `path`, or None when there is none."""
    if not path.is_dir():
        return None
    done = git_run(path, "rev-parse", "--show-toplevel")
    return Path(done.stdout.strip()).resolve() if done.returncode == 0 else None


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


def base_bundle(repo_path: Path, base_sha: str, dest: Path) -> str:
    """Write a bundle of `base_sha`'s history only to `dest`; return the ref it carries.

    The ref is a temporary one of the main repo's, removed again at once.
    """
    ref = f"refs/bakeoff/tmp/base-{secrets.token_hex(4)}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    run_git(repo_path, "update-ref", ref, base_sha)
    try:
        run_git(repo_path, "bundle", "create", "-q", str(dest.resolve()), ref)
    finally:
        run_git(repo_path, "update-ref", "-d", ref, check=False)
    dest.chmod(0o644)
    return ref


def objects_dir(repo_path: Path) -> Path:
    """The main repository's object directory (shared by its worktrees)."""
    common = Path(run_git(repo_path, "rev-parse", "--git-common-dir"))
    return (common if common.is_absolute() else repo_path / common).resolve() / "objects"


def arm_branch(experiment: str, change: str, arm: str) -> str:
    # Not bakeoff/<experiment>/...: the experiment branch defaults to bakeoff/<experiment>,
    # and git cannot hold both a ref and refs below it of the same name.
    return f"bakeoff-arms/{experiment}/{change}/{arm}"
