"""Keeping an arm's work: every process stopped, a checked bundle imported, a diffstat.

The host never runs git in an arm's checkout. Once the agent has stopped: `sweep` kills
every process of the sandbox user, the sandbox is held still (`process.still`: paused, or
on a cluster emptied; nothing of the agent runs while its work is taken), a fresh rig
container bundles the work (`runner.containers.checkout`), the sandbox is unpaused, and
the bundle is imported with every object checked
(`runner.workspace.bundle`). Whatever the arm did to its `.git`, the outcome is a value: work
kept, no work (`no_work`, the branch at the base), or work refused (`work_refused`,
the branch at the base), never a rig error.
"""

from __future__ import annotations

import re
import shutil
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

from rig.sample.tree import Caps, UnsafeTreeError
from runner import workspace
from runner.commands.dispatch import process
from runner.containers import checkout
from runner.containers.backend import ContainerEngine
from runner.containers.checkout import ArmBox, Taken
from runner.containers.samples.tree import listing
from runner.manifest import MAX_FILES
from runner.workspace import bundle
from runner.workspace.bundle import WorkRefusedError


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
    work_refused: str | None = None
    no_work: str | None = None
    left_running: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)

    @property
    def new_work(self) -> bool:
        return self.commits > 0


@dataclass(frozen=True)
class Keeping:
    """Where one arm's work goes: the repo, the branch, the base, what to force-add."""

    repo: Path
    box: ArmBox
    container_id: str
    base: str
    branch: str
    message: str
    force_add: list[str]
    scratch: Path               # a host directory of the experiment's state, for this arm
    repo_lock: threading.Lock
    branch_on_base: bool = True  # point the branch at the base when there is no work
    max_files: int = MAX_FILES  # `[limits].max_files`: a larger tree is refused


def keep(engine: ContainerEngine, how: Keeping) -> KeptWork:
    """Stop the arm, take its work out, import it checked; the branch always exists."""
    left = process.sweep(engine, how.container_id)
    try:
        with process.still(engine, how.container_id):
            taken = checkout.take(engine, how.box, how.base, how.message, how.force_add,
                                  how.scratch)
        with how.repo_lock:
            kept = _import(how, taken)
    finally:
        shutil.rmtree(how.scratch, ignore_errors=True)
    return replace(kept, left_running=left)


def _import(how: Keeping, taken: Taken) -> KeptWork:
    refused, tip = taken.refused, None
    if taken.bundle is not None and refused is None:
        try:
            tip = bundle.import_work(how.repo, taken.bundle, how.base, how.branch,
                                     how.scratch, how.box.cap_bytes)
        except WorkRefusedError as error:
            refused = error.reason
        finally:
            taken.bundle.unlink(missing_ok=True)
    if tip is not None and (past := past_caps(how, tip)) is not None:
        refused, tip = past, None
    if tip is None and how.branch_on_base:  # no work, or refused: it stands on the base
        workspace.run_git(how.repo, "update-ref", f"refs/heads/{how.branch}", how.base)
    orchestrator = taken.orchestrator_commit if tip is not None else None
    kept = measure(how.repo, how.base, tip or how.base, how.branch, orchestrator)
    return replace(kept, work_refused=refused, no_work=taken.no_work,
                   caveats=list(taken.caveats))


def past_caps(how: Keeping, tip: str) -> str | None:
    """Why the work's tree is past what a sample can lay out (`rig.sample.tree.Caps`: its entries,
    bytes and names, listed streamed and stopped at the first past them), or None: such
    work is refused at once (every sample would be FAIL unsafe_work), and nothing reads
    or diffs it whole."""
    try:
        listing(how.repo, tip, Caps(how.max_files, how.box.cap_bytes))
    except UnsafeTreeError as error:
        return error.message
    return None


DIFFSTAT_FILES = 100  # files a diffstat names (its summary line counts them all)
DIFFSTAT_BYTES = 64 * 1024


def measure(repo: Path, base: str, head: str, branch: str,
            orchestrator_commit: str | None) -> KeptWork:
    count = int(workspace.run_git(repo, "rev-list", "--count", f"{base}..{head}") or 0)
    stat, more = workspace.git_capped(repo, "diff", "--stat", f"--stat-count={DIFFSTAT_FILES}",
                                      "--no-color", "--no-ext-diff", base, head,
                                      limit=DIFFSTAT_BYTES)
    stat = stat.strip() + (f"\n[bakeoff: diffstat cut: {more} bytes more]" if more else "")
    short = workspace.run_git(repo, "diff", "--shortstat", "--no-ext-diff", base, head)
    files, added, deleted = parse_shortstat(short)
    return KeptWork(head, branch, count, orchestrator_commit, stat, files, added, deleted)


def reset_to_base(engine: ContainerEngine, box: ArmBox, repo: Path, base: str, scratch: Path,
                  repo_lock: threading.Lock) -> None:
    """A redo starts where every arm started: the checkout made again from the base."""
    path = scratch / "base.bundle"
    with repo_lock:
        ref = workspace.base_bundle(repo, base, path)
    try:
        checkout.make(engine, box, path, base, ref)
    finally:
        path.unlink(missing_ok=True)


def secret_files(repo: Path, head: str, forms: list[str]) -> list[str]:
    """The files of the arm's commit that hold a secret, in any form the redactor knows."""
    return workspace.grep_files(repo, head, forms)


def parse_shortstat(text: str) -> tuple[int, int, int]:
    """`3 files changed, 10 insertions(+), 2 deletions(-)` -> (3, 10, 2)."""
    numbers = []
    for word in ("file", "insertion", "deletion"):
        match = re.search(rf"(\d+) {word}", text)
        numbers.append(int(match.group(1)) if match else 0)
    return numbers[0], numbers[1], numbers[2]
