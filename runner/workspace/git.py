"""Git on the host: the target repository (the main repo) and nothing else.

Every git call on the host goes through `run_git` (a timeout, and `safe.directory=*`
because sample trees belong to the sandbox user while the orchestrator may be root).

The host never runs git in an arm's checkout: the checkout is made inside the arm's
volume from `base_bundle` (the base commit's history only: no rival's branch, no later
commit, no tag, no remote; docs/design.md principle 6), and the arm's work comes back as a
bundle that `runner.workspace.bundle` imports with every object checked
(`runner.containers.checkout`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import tempfile
import threading
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

from runner.errors import BadInputError, DirtyTreeError, RunnerError

GIT_TIMEOUT_S = 120
STDERR_KEPT = 4096  # bytes of a streamed command's stderr its error quotes


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


@contextlib.contextmanager
def git_stream(cwd: Path, *args: str, stdin: bytes | None = None,
               ok: tuple[int, ...] = (0,)) -> Iterator[IO[bytes]]:
    """`git ARGS` in `cwd`, its stdout as a stream read while git writes it (output the
    arm controls, e.g. a tree's listing or its blobs, is never held whole); `stdin` is fed
    from a thread. A block that leaves before the end of the output kills git (a capped
    read stops it early); past GIT_TIMEOUT_S git is killed and the block ends in
    `GitError`, as does an exit status not in `ok` once the output was read to its end."""
    said = f"git {' '.join(args)[:200]}"
    with tempfile.TemporaryFile() as errors, subprocess.Popen(
            ["git", *args], cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=errors,
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            start_new_session=True) as proc:  # its own group: a stop reaches its children
        assert proc.stdout is not None
        fired = threading.Event()
        timer = threading.Timer(GIT_TIMEOUT_S, _expire, args=(fired, proc))
        timer.start()
        if stdin is not None:
            threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True).start()
        try:
            yield proc.stdout
            ended = proc.stdout.read(1) == b""
        except BaseException:
            _stop(proc)
            if fired.is_set():
                raise GitError(f"{said} took over {GIT_TIMEOUT_S}s in {cwd}") from None
            raise
        finally:
            timer.cancel()
        if not ended:
            _stop(proc)
        proc.wait()
        errors.seek(0)
        told = errors.read(STDERR_KEPT).decode(errors="replace").strip()
    if fired.is_set():
        raise GitError(f"{said} took over {GIT_TIMEOUT_S}s in {cwd}")
    if ended and proc.returncode not in ok:
        raise GitError(f"{said} failed in {cwd} (exit {proc.returncode}): {told}")


def _expire(fired: threading.Event, proc: subprocess.Popen[bytes]) -> None:
    fired.set()
    _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill a streamed git and whatever it started (its process group, its own; not once
    git is reaped, when its id could be another's)."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


def _feed(pipe: IO[bytes] | None, data: bytes) -> None:
    assert pipe is not None
    with contextlib.suppress(OSError, ValueError), pipe:
        pipe.write(data)


def git_capped(cwd: Path, *args: str, limit: int, count: int = 64 * 1024 * 1024
               ) -> tuple[str, int]:
    """`git ARGS` in `cwd`: at most `limit` bytes of its stdout, and how many more there
    were, counted up to `count` more (output the arm controls, e.g. its diff, is never
    held whole, nor read past that: git is stopped there)."""
    with git_stream(cwd, *args) as out:
        kept = out.read(limit)
        more = 0
        while more <= count and (chunk := out.read(1024 * 1024)):
            more += len(chunk)
    return kept.decode(errors="replace"), more


def work_diff(repo_path: Path, base: str, commit: str, *, limit: int,
              count: int = 64 * 1024 * 1024) -> tuple[str, int]:
    """The diff from `base` to `commit` (an arm's work: its text is the arm's), with no
    colour, no external diff and no textconv driver, at most `limit` bytes of it and how
    many more there were (`git_capped`)."""
    return git_capped(repo_path, "diff", "--no-color", "--no-ext-diff", "--no-textconv",
                      base, commit, limit=limit, count=count)


def work_messages(repo_path: Path, base: str, commit: str, *, limit: int) -> tuple[str, int]:
    """The commit messages from `base` to `commit`, newest first, each under its short id
    and author, at most `limit` bytes of them and how many more there were."""
    return git_capped(repo_path, "log", "--no-color", "--format=%h %an%n%B",
                      f"{base}..{commit}", limit=limit, count=limit)


def git_lines(cwd: Path, *args: str, limit: int, ok: tuple[int, ...] = (0,)
              ) -> tuple[list[str], bool]:
    """The NUL-separated records of `git ARGS` (a `-z` listing), at most `limit` of
    them, decoded with `surrogateescape`, and whether there were more (git is stopped
    at the limit: a listing of a million paths is never read whole)."""
    found: list[str] = []
    with git_stream(cwd, *args, ok=ok) as out:
        for record in records(out):
            if len(found) == limit:
                return found, True
            found.append(record.decode("utf-8", "surrogateescape"))
    return found, False


def records(stream: IO[bytes], longest: int = 64 * 1024) -> Iterator[bytes]:
    """The NUL-terminated records of a stream, as they arrive; a record longer than
    `longest` comes cut to its first `longest` bytes (a name of a megabyte is never
    held, and is still seen to be too long)."""
    rest = bytearray()
    over = False
    while data := stream.read1(256 * 1024):  # type: ignore[attr-defined]
        parts = data.split(b"\0")
        for part in parts[:-1]:
            if not over:
                rest += part[:longest + 1 - len(rest)]
            if rest:
                yield bytes(rest[:longest])
            rest.clear()
            over = False
        if not over:
            rest += parts[-1][:longest + 1 - len(rest)]
            over = len(rest) > longest
    if rest:
        yield bytes(rest[:longest])


class Part:
    """At most `size` bytes of a stream, read as asked (one blob of `cat-file --batch`)."""

    def __init__(self, stream: IO[bytes], size: int) -> None:
        self.stream, self.left = stream, size

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        data = self.stream.read(n) if n else b""
        if len(data) < n:
            raise GitError(f"git cat-file ended {self.left - len(data)} bytes early")
        self.left -= len(data)
        return data

    def drain(self) -> None:
        while self.left:
            self.read(min(self.left, 1024 * 1024))


def cat_blobs(cwd: Path, oids: Sequence[str]) -> Generator[tuple[str, int, Part], None, None]:
    """Each of `oids` (in order, repeats too) as (oid, size, its bytes as a stream), out
    of one `cat-file --batch`: a blob is read while git writes it, never held whole by
    this (what the caller keeps is its own). `GitError` for one that is not a blob."""
    if not oids:
        return
    with git_stream(cwd, "cat-file", "--batch",
                    stdin="".join(f"{oid}\n" for oid in oids).encode()) as out:
        for oid in oids:
            header = out.readline(256).split()
            if len(header) != 3 or header[1] != b"blob":
                raise GitError(f"git cat-file: {oid} is not a blob of {cwd} "
                               f"({b' '.join(header).decode(errors='replace')})")
            part = Part(out, int(header[2]))
            yield oid, int(header[2]), part
            part.drain()
            out.read(1)  # the newline after the blob


def grep_files(repo: Path, commit: str, needles: list[str], limit: int = 100) -> list[str]:
    """The files of `commit` that contain any of `needles` (fixed strings), streamed by
    git: nothing of the tree is held in memory, and at most `limit` names are read."""
    if not needles:
        return []
    args = ["grep", "-l", "-z", "-F", *[x for n in needles for x in ("-e", n)], commit]
    found, _ = git_lines(repo, *args, limit=limit, ok=(0, 1))  # 1: no file matched
    return sorted(line.split(":", 1)[1] for line in found if ":" in line)


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
    changed = dirty_paths(repo_path)
    if changed:
        shown = ", ".join(changed[:5])
        more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        raise DirtyTreeError(f"{repo_path} has uncommitted or untracked files: {shown}{more}",
                             hint="commit or stash them (git stash -u), then run again")


def dirty_paths(repo_path: Path) -> list[str]:
    """Every path `git status` reports (untracked files included), as git has it: read
    with -z, so a name keeps its first character, its spaces, quotes and non-ASCII
    letters; a rename shows as ``old -> new``."""
    raw = git_bytes(repo_path, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    return porcelain_paths(raw.decode("utf-8", errors="replace"))


def porcelain_paths(status: str) -> list[str]:
    """The paths of `git status --porcelain=v1 -z` output: ``XY PATH\0`` entries; a
    rename or copy (X or Y is R or C) is followed by its source path in the next entry."""
    entries = status.split("\0")
    paths: list[str] = []
    at = 0
    while at < len(entries):
        entry = entries[at]
        at += 1
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if "R" in code or "C" in code:
            source = entries[at] if at < len(entries) else ""
            at += 1
            path = f"{source} -> {path}"
        paths.append(path)
    return paths


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
    git's objects, never from the working tree; the listing streamed, never held whole."""
    found = []
    with git_stream(repo_path, "ls-tree", "-r", "-z", "--full-tree", commit) as out:
        for record in records(out):
            meta, _, path = record.partition(b"\t")
            if meta.split(b" ")[1:2] == [b"blob"]:
                found.append(path.decode("utf-8", "surrogateescape"))
    return found


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
