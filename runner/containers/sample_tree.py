"""A sample's tree, from git objects: what `/work` holds when the command starts.

The commit's tree is read out of the object store (`ls-tree -z` + `cat-file --batch`:
no checkout, no `.gitattributes` filter or export rule of the arm's, no working tree),
checked (`rig.tree.checked`: no `..`, no `.git`, no duplicate entries), then the rig's
layer goes on top: committed bytecode out, the base's harness (for the success
criterion), the base's protected files as regular files, the canaries. The result is a
tar the sample container extracts itself (`runner.sample_driver`): the host never
writes a file of the tree, so no symlink of the arm's can ever point it anywhere.
"""

from __future__ import annotations

import hashlib
import io
import secrets
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rig import canary as canary_mod
from rig import harness
from rig import tree as tree_mod
from rig.canary import Canary
from rig.contract.content import ABSENT
from rig.harness import Pinned
from rig.oracle import SampleSpec
from rig.tree import Entry, Kind, Tree
from runner import workspace

_MODES = {"100644": Kind.FILE, "100755": Kind.EXECUTABLE, "120000": Kind.SYMLINK}


def read_tree(repo: Path, commit: str, limit_bytes: int | None = None) -> Tree:
    """The files of `commit` as a checked tree (`UnsafeTreeError` when it holds a path no
    checkout can hold, or more than `limit_bytes` of files: it could not be laid out in a
    sample, and it is never read into memory). Submodules (gitlinks) are left out, as
    `git archive` does."""
    listing = workspace.git_bytes(repo, "ls-tree", "-r", "-l", "-z", "--full-tree", commit)
    rows: list[tuple[str, Kind, str]] = []
    total = 0
    for item in listing.split(b"\0"):
        if not item:
            continue
        meta, _, raw_path = item.partition(b"\t")
        mode, kind, sha, size = meta.decode().split()
        if kind != "blob" or mode not in _MODES:
            continue
        total += int(size)
        rows.append((raw_path.decode("utf-8", errors="surrogateescape"), _MODES[mode], sha))
    if limit_bytes is not None and total > limit_bytes:
        raise tree_mod.UnsafeTreeError("", f"its files add up to {total} bytes, more than "
                                            f"the {limit_bytes} a sample can hold")
    blobs = _blobs(repo, sorted({sha for _, _, sha in rows}))
    return tree_mod.checked((path, Entry(kind, blobs[sha])) for path, kind, sha in rows)


def _blobs(repo: Path, shas: list[str]) -> dict[str, bytes]:
    """Blob contents by id, in one `cat-file --batch`."""
    if not shas:
        return {}
    raw = workspace.git_bytes(repo, "cat-file", "--batch", stdin="".join(
        f"{sha}\n" for sha in shas).encode())
    found: dict[str, bytes] = {}
    at = 0
    for sha in shas:
        end = raw.index(b"\n", at)
        header = raw[at:end].decode().split()
        size = int(header[2])
        found[sha] = raw[end + 1:end + 1 + size]
        at = end + 1 + size + 1
    return found


@dataclass(frozen=True)
class SampleTree:
    """A sample's tree as the container receives it, and what the rig did to it."""

    tar: bytes
    protected: dict[str, str]  # path -> sha256 of the base's content restored, or "absent"
    pinned: Pinned
    canary: Canary | None
    root_owned: tuple[str, ...]  # files the code under test must not change or remove
    root_dirs: tuple[str, ...]  # every directory above them ("" is /work itself)
    paths: tuple[str, ...] = field(default=())


def build(spec: SampleSpec, tree: Tree, base: Tree | None, token: str | None = None,
          canaries: bool = True) -> SampleTree:
    """The rig's layer over the arm's tree (in place): bytecode out, the base's harness
    (spec.harness == "base"), the base's protected files, the canaries."""
    bytecode = harness.drop_bytecode(tree)
    pinned = Pinned(bytecode=bytecode)
    fixed: list[str] = []
    if spec.harness == "base" and base is not None:
        pinned = harness.pin(tree, base, spec.parser)
        pinned = Pinned(pinned.restored, pinned.removed, bytecode)
        fixed += [p for p in tree if harness.is_harness(spec.parser, p)]
    protected = _restore(tree, base or {}, spec.protected)
    fixed += [p for p in spec.protected if p in tree]
    canary = _canary(spec, tree, token or secrets.token_hex(4)) if canaries else None
    if canary is not None:
        tree_mod.place(tree, canary.path, canary.content)
        fixed.append(canary.path)
    owned = tuple(sorted(set(fixed)))
    dirs = tuple(sorted({d for p in owned for d in ["", *tree_mod.parents(p)]}))
    return SampleTree(tar_of(tree), protected, pinned, canary, owned, dirs, tuple(tree))


def protected_hashes(repo: Path, base: str, protected: Iterable[str]) -> dict[str, str]:
    """The sha256 of each protected path as a sample restores it from `base`."""
    found = read_tree(repo, base)
    return {p: ABSENT if p not in found else hashlib.sha256(found[p].data).hexdigest()
            for p in protected}


def _restore(tree: Tree, base: Tree, protected: Iterable[str]) -> dict[str, str]:
    hashes: dict[str, str] = {}
    for path in sorted(protected):
        entry = base.get(path)
        if entry is None:
            tree_mod.remove(tree, path)
            hashes[path] = ABSENT
            continue
        harness.put(tree, path, entry)
        hashes[path] = hashlib.sha256(entry.data).hexdigest()
    return hashes


def _canary(spec: SampleSpec, tree: Tree, token: str) -> Canary | None:
    if spec.ratchet is not None or spec.parser not in canary_mod.CANARY_RUNNERS:
        return None
    paths = sorted(tree)
    wanted = set(canary_mod.go_sources_needed(paths, spec.command, spec.protected)
                 if spec.parser == "go-test" else canary_mod.cargo_manifests(paths)
                 if spec.parser == "cargo" else ())
    text_of = {p: tree[p].data.decode(errors="replace") for p in wanted if p in tree}
    return canary_mod.plan(spec.parser, token, paths, spec.command, spec.protected, text_of)


def tar_of(tree: Tree) -> bytes:
    """The tree as an uncompressed tar (work-relative names, root-owned: the driver
    extracts it as root, then gives it to the sandbox user)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for path in sorted(tree):
            entry = tree[path]
            info = tarfile.TarInfo(path)
            if entry.kind is Kind.SYMLINK:
                info.type = tarfile.SYMTYPE
                info.linkname = entry.data.decode("utf-8", errors="surrogateescape")
                info.mode = 0o777
                tar.addfile(info)
                continue
            info.size = len(entry.data)
            info.mode = 0o755 if entry.kind is Kind.EXECUTABLE else 0o644
            tar.addfile(info, io.BytesIO(entry.data))
    return out.getvalue()


def nul_list(paths: Iterable[str], prefix: str = "/work") -> bytes:
    """Paths as the driver's NUL-separated absolute list."""
    return b"".join(f"{prefix}/{p}".rstrip("/").encode("utf-8", "surrogateescape") + b"\0"
                    for p in paths)
