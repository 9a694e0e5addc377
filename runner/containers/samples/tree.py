"""A sample's tree, from git objects: what `/work` holds when the command starts.

The commit's tree is read out of the object store (`ls-tree -z` + `cat-file --batch`:
no checkout, no `.gitattributes` filter or export rule of the arm's, no working tree),
streamed and capped as it is read (`rig.sample.tree.Caps`: entries, bytes, bytes of names; git
is stopped at the first entry past them, so a tree bomb is refused in the time it takes
to list the caps' worth), checked (`rig.sample.tree.checked`: no `..`, no `.git`, no duplicate
entries, nothing the sample's filesystem cannot hold), then the rig's layer goes on top
(`rig.sample.layer`: what it is, decided there; this module only reads and writes). The
result is a tar FILE the sample container extracts itself (`runner.containers.samples.driver`): the
host never writes a file of the tree, so no symlink of the arm's can ever point it
anywhere.

Memory is bounded by construction: small blobs are held (each up to `rig.sample.tree.INLINE`,
together up to HELD_BYTES: first the files the rig's planning reads, then the rest,
smallest first), every other blob is left unheld and streamed from the object store
into the tar when it is written, and hashed on the way where a digest is needed.
"""

from __future__ import annotations

import hashlib
import io
import secrets
import tarfile
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from rig.contract.content import ABSENT
from rig.guards.canary import Canary
from rig.guards.harness import Pinned
from rig.sample import layer as layer_mod
from rig.sample import links
from rig.sample import tree as tree_mod
from rig.sample.spec import SampleSpec
from rig.sample.tree import Caps, Entry, Kind, Tree
from runner import workspace
from runner.manifest import MAX_FILES

_MODES = {"100644": Kind.FILE, "100755": Kind.EXECUTABLE, "120000": Kind.SYMLINK}
HELD_BYTES = 24 * 1024 * 1024  # small blobs held per tree; the rest stream at tar time
CAPS = Caps(MAX_FILES, 2048 * 1024 * 1024)  # a tree read without the manifest's limits
RECORD_MAX = tree_mod.PATH_MAX + 256  # a listing's record: its header and a path


@dataclass(frozen=True)
class Row:
    """One blob of a tree's listing."""

    path: str
    kind: Kind
    oid: str
    size: int


def read_tree(repo: Path, commit: str, caps: Caps = CAPS) -> Tree:
    """The files of `commit` as a checked tree (`UnsafeTreeError` when it holds a path no
    checkout can hold, or is past `caps`: it could not be laid out in a sample, and it is
    never read whole). Submodules (gitlinks) are left out, as `git archive` does."""
    rows = listing(repo, commit, caps)
    held = _to_hold(rows)
    blobs = {oid: part.read() for oid, _, part in workspace.cat_blobs(repo, sorted(held))}
    return tree_mod.checked((row.path, Entry(row.kind, blobs.get(row.oid, b""), row.oid,
                                             row.size)) for row in rows)


def listing(repo: Path, commit: str, caps: Caps) -> list[Row]:
    """The blobs of `commit`'s tree, streamed from `ls-tree -r -t -l -z` and counted as
    they come: every entry (directories and gitlinks too), the bytes of the files and of
    the names (paths, and symlinks' targets: they are held); git is stopped at the first
    past `caps` (`UnsafeTreeError`)."""
    rows: list[Row] = []
    entries = size = names = 0
    try:
        with workspace.git_stream(repo, "ls-tree", "-r", "-t", "-l", "-z", "--full-tree",
                                  commit) as out:
            for record in workspace.records(out, RECORD_MAX):
                meta, _, raw = record.partition(b"\t")
                mode, kind, oid, length = meta.decode("ascii", "replace").split()
                entries, names = entries + 1, names + len(raw)
                if kind == "blob" and mode in _MODES:
                    path = raw.decode("utf-8", "surrogateescape")
                    if not length.isdigit():  # `BAD`: git has no such object
                        raise tree_mod.UnsafeTreeError(path, "names a blob the repository "
                                                             "does not have (a broken tree)")
                    size += int(length)
                    if _MODES[mode] is Kind.SYMLINK:  # a target is a name, and always held
                        names += int(length)
                    rows.append(Row(path, _MODES[mode], oid, int(length)))
                problem = caps.problem(entries, size, names)
                if problem is not None:
                    raise tree_mod.UnsafeTreeError("", problem)
    except workspace.GitError as error:  # a tree git cannot read: a missing or bad object
        raise tree_mod.UnsafeTreeError("", f"git cannot list it: {error}") from error
    return rows


def _to_hold(rows: list[Row]) -> set[str]:
    """The blobs read into memory: every symlink's target, then files up to
    `rig.sample.tree.INLINE` each, HELD_BYTES together: first what the rig's layer reads
    (`rig.sample.layer.reads`: harness files, Go sources), then the rest, the smallest
    first in each."""
    held = {row.oid for row in rows if row.kind is Kind.SYMLINK and
            row.size <= tree_mod.PATH_MAX}
    budget = HELD_BYTES
    files = sorted((r for r in rows if r.kind is not Kind.SYMLINK and r.size <= tree_mod.INLINE),
                   key=lambda r: (not layer_mod.reads(r.path), r.size))
    for row in files:
        if row.oid in held:
            continue
        if row.size > budget:
            if layer_mod.reads(row.path):
                continue  # a smaller file of the rest may still fit
            break
        held.add(row.oid)
        budget -= row.size
    return held


class Trees:
    """One executor's checked trees: read within its caps; the last `kept` of them kept (a
    base serves every sample, an arm's tree its checks), and a refused commit remembered
    (a tree bomb is listed once per executor, not once per sample)."""

    def __init__(self, repo: Path, caps: Caps, kept: int = 3) -> None:
        self.repo, self.caps, self.kept = repo, caps, kept
        self.lock = threading.Lock()
        self.found: dict[str, Tree] = {}  # commit -> its tree, the most recent last
        self.refused: dict[str, tree_mod.UnsafeTreeError] = {}

    def checked(self, commit: str) -> Tree:
        """`commit`'s checked tree (`UnsafeTreeError` past the caps)."""
        with self.lock:
            if commit in self.refused:
                raise self.refused[commit]
            found = self.found.pop(commit, None)
            if found is None:
                try:
                    found = read_tree(self.repo, commit, self.caps)
                except tree_mod.UnsafeTreeError as error:
                    self.refused[commit] = error
                    raise
            self.found[commit] = found
            while len(self.found) > self.kept:
                del self.found[next(iter(self.found))]
            return found


@dataclass(frozen=True)
class SampleTree:
    """A sample's tree as the container receives it (written to a tar file), and what
    the rig did to it."""

    protected: dict[str, str]  # path -> sha256 of the base's content restored, or "absent"
    pinned: Pinned
    canary: Canary | None
    root_owned: tuple[str, ...]  # files the code under test must not change or remove
    root_dirs: tuple[str, ...]  # every directory above them ("" is /work itself)
    pinned_sha256: dict[str, str] = field(default_factory=dict)  # root-owned file -> sha256
    go_work: bool = False  # a go.work at the root of the laid-out tree


def build(spec: SampleSpec, tree: Tree, base: Tree | None, out: Path, repo: Path,
          token: str | None = None, canaries: bool = True, importable: Iterable[str] = (),
          caps: links.LayoutCaps = links.DEFAULT_CAPS) -> SampleTree:
    """The rig's layer over the arm's tree (`rig.sample.layer.lay`, in place), written as
    a tar to `out` (blobs not held stream from `repo`'s objects)."""
    layer = layer_mod.lay(spec, tree, base, token or secrets.token_hex(4),
                          lambda paths: _heads(repo, tree, paths), canaries, importable, caps)
    digests = write_tar(out, tree, repo, {*layer.owned, *spec.protected})
    protected = {p: digests.get(p, ABSENT) for p in sorted(spec.protected)}
    pinned_sha256 = {p: digests[p] for p in layer.owned
                     if p in tree and tree[p].kind is not Kind.SYMLINK}
    return SampleTree(protected, layer.pinned, layer.canary, layer.owned, layer.dirs,
                      pinned_sha256, go_work="go.work" in tree)


def _heads(repo: Path, tree: Tree, paths: Sequence[str]) -> dict[str, str]:
    """The head of each file of `paths` the tree does not hold, from `repo`'s objects."""
    blobs = workspace.cat_blobs(repo, [tree[p].oid for p in paths])
    return {path: part.read(tree_mod.INLINE).decode(errors="replace")
            for path, (_, _, part) in zip(paths, blobs, strict=True)}


def protected_hashes(repo: Path, base: str, protected: Iterable[str]) -> dict[str, str]:
    """The sha256 of each protected path as a sample restores it from `base`."""
    found = read_tree(repo, base)
    links.lay_out(found, found)  # as a sample restores them: a linked one as what it leads to
    wanted = [p for p in protected if p in found]
    digests = sha256_of(repo, {p: found[p] for p in wanted})
    return {p: digests.get(p, ABSENT) for p in protected}


class _Hashing:
    """A stream that hashes what is read through it."""

    def __init__(self, stream: _Readable) -> None:
        self.stream, self.digest = stream, hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        data = self.stream.read(n)
        self.digest.update(data)
        return data


_Readable = io.BytesIO | workspace.Part | _Hashing


def sha256_of(repo: Path, entries: Mapping[str, Entry]) -> dict[str, str]:
    """The sha256 of each entry's bytes (a symlink: its target); a blob not held is
    streamed from `repo`'s objects, never held."""
    found = {p: hashlib.sha256(e.data).hexdigest() for p, e in entries.items() if e.held}
    streamed = [p for p in sorted(entries) if p not in found]
    blobs = workspace.cat_blobs(repo, [entries[p].oid for p in streamed])
    for path, (_, _, part) in zip(streamed, blobs, strict=True):
        hashing = _Hashing(part)
        while hashing.read(1024 * 1024):
            pass
        found[path] = hashing.digest.hexdigest()
    return found


def write_tar(out: Path | IO[bytes], tree: Mapping[str, Entry], repo: Path,
              digest: Iterable[str] = (), extra: Mapping[str, bytes] | None = None
              ) -> dict[str, str]:
    """The tree as an uncompressed tar written to `out` (work-relative names, root-owned:
    the driver extracts it as root, then gives it to the sandbox user), then `extra`
    files; a blob not held is streamed from `repo`'s objects. The sha256 of each path of
    `digest` in the tree, taken as it is written."""
    wanted = set(digest)
    order = sorted(tree)
    blobs = workspace.cat_blobs(repo, [tree[p].oid for p in order if not tree[p].held])
    digests: dict[str, str] = {}
    try:
        with _tar(out) as tar:
            for path in order:
                entry, info = tree[path], _info(path, tree[path])
                if info.issym():
                    tar.addfile(info)
                    if path in wanted:
                        digests[path] = hashlib.sha256(entry.data).hexdigest()
                    continue
                source = _source(entry, blobs)
                if path in wanted:
                    source = _Hashing(source)
                tar.addfile(info, source)
                if isinstance(source, _Hashing):
                    digests[path] = source.digest.hexdigest()
            for name, data in (extra or {}).items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        next(blobs, None)  # to the end of git's output: it exits as it should
    finally:
        blobs.close()
    return digests


def _tar(out: Path | IO[bytes]) -> tarfile.TarFile:
    # Names are bytes as git has them (surrogateescape both ways), whatever the locale.
    if isinstance(out, Path):
        return tarfile.open(out, mode="w", format=tarfile.GNU_FORMAT, encoding="utf-8",
                            errors="surrogateescape")
    return tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT, encoding="utf-8",
                        errors="surrogateescape")


def _source(entry: Entry, blobs: Iterator[tuple[str, int, workspace.Part]]) -> _Readable:
    if entry.held:
        return io.BytesIO(entry.data)
    oid, size, part = next(blobs)
    if oid != entry.oid or size != entry.size:
        raise workspace.GitError(f"git cat-file gave {oid} ({size} bytes) for "
                                 f"{entry.oid} ({entry.size} bytes)")
    return part


def _info(path: str, entry: Entry) -> tarfile.TarInfo:
    info = tarfile.TarInfo(path)
    if entry.kind is Kind.SYMLINK:
        info.type = tarfile.SYMTYPE
        info.linkname = entry.data.decode("utf-8", errors="surrogateescape")
        info.mode = 0o777
        return info
    info.size = entry.length
    info.mode = 0o755 if entry.kind is Kind.EXECUTABLE else 0o644
    return info


def nul_list(paths: Iterable[str], prefix: str = "/work") -> bytes:
    """Paths as the driver's NUL-separated absolute list."""
    return b"".join(f"{prefix}/{p}".rstrip("/").encode("utf-8", "surrogateescape") + b"\0"
                    for p in paths)
