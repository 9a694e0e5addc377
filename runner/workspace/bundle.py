"""An arm's bundle into the main repository, every object checked.

git 2.39's `git fetch <bundle>` does not fsck (`fetch.fsckObjects` is ignored for
bundles: a tree with two entries of one name is accepted), so the bundle is never
fetched. Its header (v2 or v3) is parsed here; its pack goes to `git index-pack --strict
--fix-thin` in a quarantine repository that borrows the main repository's objects: a
duplicate entry, a `.git` or `..` path or any malformed object is refused there and
never reaches the main repository. Then the tip must be a commit that descends from the
base. Only then do the pack files move into the main repository and the arm's branch
point at the tip. A refused bundle is `WorkRefusedError`: that arm's problem only.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from runner import workspace
from runner.errors import RunnerError

SIGNATURES = {b"# v2 git bundle\n": 2, b"# v3 git bundle\n": 3}
HEADER_MAX_BYTES = 64 * 1024
SHA = re.compile(rb"[0-9a-f]{40}(?:[0-9a-f]{24})?")
FSCK_LINE = re.compile(r"error: object [0-9a-f]+: (\w+): (.*)")
REASON_MAX = 160


class WorkRefusedError(RunnerError):
    """The arm's work is refused unseen: `reason` goes into its record (`work_refused`)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True)
class BundleHeader:
    version: int
    prerequisites: list[str]
    refs: list[tuple[str, str]]   # (object id, ref name)
    pack_offset: int


def read_header(path: Path) -> BundleHeader:
    """Parse a bundle's header; anything but a well-formed v2/v3 header is refused."""
    with path.open("rb") as handle:
        head = handle.read(HEADER_MAX_BYTES)
    end = head.find(b"\n\n")
    signature = next((s for s in SIGNATURES if head.startswith(s)), None)
    if signature is None or end < 0:
        raise WorkRefusedError("the bundle has no git bundle v2/v3 header")
    prerequisites: list[str] = []
    refs: list[tuple[str, str]] = []
    for line in head[len(signature):end].split(b"\n"):
        if line.startswith(b"@") and SIGNATURES[signature] == 3:
            if line not in (b"@object-format=sha1", b"@object-format=sha256"):
                raise WorkRefusedError("the bundle needs a capability we do not accept")
            continue
        prerequisite = line.startswith(b"-")
        oid, _, name = line[1 if prerequisite else 0:].partition(b" ")
        if not SHA.fullmatch(oid) or (not prerequisite and not name):
            raise WorkRefusedError("the bundle's header is malformed")
        if prerequisite:
            prerequisites.append(oid.decode())
        else:
            refs.append((oid.decode(), name.decode(errors="replace")))
    return BundleHeader(SIGNATURES[signature], prerequisites, refs, end + 2)


def import_work(repo: Path, bundle: Path, base: str, branch: str, scratch: Path,
                max_bytes: int) -> str:
    """Check `bundle` and point `branch` of `repo` at its tip; the tip.

    Raises WorkRefusedError with the reason when any check fails.
    """
    info = os.lstat(bundle)
    if not stat.S_ISREG(info.st_mode):
        raise WorkRefusedError("the bundle is not a regular file")
    if info.st_size > max_bytes:
        raise WorkRefusedError(f"bundle over {max_bytes // (1024 * 1024)} MiB")
    header = read_header(bundle)
    if len(header.refs) != 1:
        raise WorkRefusedError(f"the bundle carries {len(header.refs)} refs, not one")
    tip = header.refs[0][0]
    quarantine = _quarantine(repo, scratch)
    try:
        _index(quarantine, bundle, header.pack_offset)
        _check_descends(quarantine, base, tip)
        _migrate(quarantine, workspace.objects_dir(repo))
    finally:
        shutil.rmtree(quarantine, ignore_errors=True)
    workspace.run_git(repo, "update-ref", f"refs/heads/{branch}", tip)
    return tip


def _quarantine(repo: Path, scratch: Path) -> Path:
    """A bare repository of our own whose objects fall back on the main repository's."""
    quarantine = scratch / "quarantine.git"
    shutil.rmtree(quarantine, ignore_errors=True)
    scratch.mkdir(parents=True, exist_ok=True)
    workspace.run_git(scratch, "init", "-q", "--bare", str(quarantine))
    alternates = quarantine / "objects" / "info" / "alternates"
    alternates.write_text(f"{workspace.objects_dir(repo)}\n", encoding="utf-8")
    return quarantine


def _index(quarantine: Path, bundle: Path, offset: int) -> None:
    with bundle.open("rb", buffering=0) as handle:
        handle.seek(offset)
        done = workspace.git_run(quarantine, "index-pack", "--strict", "--fix-thin",
                                 "--stdin", stdin=handle)
    if done.returncode != 0:
        raise WorkRefusedError(fsck_reason(done.stderr))


def fsck_reason(stderr: str) -> str:
    """`fsck: duplicateEntries: contains duplicate file entries` from index-pack's errors.

    Only git's own message id and text are kept, printable and short: an object's
    content (a path, a URL) is the arm's and is never echoed whole.
    """
    for line in stderr.splitlines():
        match = FSCK_LINE.match(line.strip())
        if match:
            return _printable(f"fsck: {match.group(1)}: {match.group(2)}")
    last = next((line for line in reversed(stderr.splitlines()) if line.strip()), "")
    return _printable(f"the bundle's pack was refused: {last.strip() or 'index-pack failed'}")


def _printable(text: str) -> str:
    clean = "".join(c if c.isprintable() and c.isascii() else "?" for c in text)
    return clean if len(clean) <= REASON_MAX else clean[:REASON_MAX - 3] + "..."


def _check_descends(quarantine: Path, base: str, tip: str) -> None:
    kind = workspace.git_run(quarantine, "cat-file", "-t", tip).stdout.strip()
    if kind != "commit":
        raise WorkRefusedError(f"the bundle's tip is not a commit ({kind or 'missing'})")
    ancestor = workspace.git_run(quarantine, "merge-base", "--is-ancestor", base, tip)
    if ancestor.returncode != 0:
        raise WorkRefusedError("the work does not descend from the base")


def _migrate(quarantine: Path, objects: Path) -> None:
    """The checked pack into the main repository: data files first, the index last (git
    reads a pack only through its .idx, so a half-moved pack is never seen)."""
    packs = sorted((quarantine / "objects" / "pack").glob("pack-*"),
                   key=lambda p: p.suffix == ".idx")
    (objects / "pack").mkdir(parents=True, exist_ok=True)
    for path in packs:
        shutil.move(str(path), objects / "pack" / path.name)
