"""A sample's tree as data: the files of one commit, checked, then overlaid by the rig.

The runner reads a commit's tree out of git (`runner.sample_tree`); everything here is
pure. A tree is a mapping of repo-relative paths to `Entry` (a regular file, an
executable or a symlink). `checked` refuses what no honest checkout can hold and what
could make an extraction write outside its directory: absolute paths, `..`, `.git`
components, duplicate entries, a path that is both a file and a directory. Overlays
(`place`, `drop`) never follow a symlink: a protected file is restored as a REGULAR file
whatever the arm put at that path or on the way to it (a symlink `tests -> /host/dir`,
a directory where the file was).
"""

from __future__ import annotations

import enum
import posixpath
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from rig.errors import RigError


class Kind(enum.StrEnum):
    FILE = "file"
    EXECUTABLE = "executable"
    SYMLINK = "symlink"


@dataclass(frozen=True)
class Entry:
    kind: Kind
    data: bytes  # the file's bytes, or a symlink's target


Tree = dict[str, Entry]


class UnsafeTreeError(RigError):
    """A commit's tree holds a path no checkout can hold safely (the arm's FAIL
    `unsafe_work`, never something the rig writes)."""

    def __init__(self, path: str, why: str) -> None:
        self.path = path
        self.why = why
        super().__init__(f"unsafe path {path!r} in the tree: {why}" if path
                         else f"the tree cannot be laid out: {why}")


def path_problem(path: str) -> str | None:
    """Why `path` cannot be a file of a checkout, or None."""
    if not path or path.startswith("/"):
        return "absolute or empty"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "has an empty, '.' or '..' component"
    if any(part.lower() == ".git" for part in parts):
        return "has a .git component"
    if "\0" in path:
        return "has a NUL byte"
    return None


def checked(entries: Iterable[tuple[str, Entry]]) -> Tree:
    """The entries as a tree, or `UnsafeTreeError` for the first unsafe one."""
    tree: Tree = {}
    for path, entry in entries:
        problem = path_problem(path)
        if problem is not None:
            raise UnsafeTreeError(path, problem)
        if path in tree:
            raise UnsafeTreeError(path, "appears twice (duplicate tree entries)")
        tree[path] = entry
    for path in tree:
        for parent in parents(path):
            if parent in tree:
                raise UnsafeTreeError(path, f"{parent!r} is both a file and a directory")
    return tree


def parents(path: str) -> list[str]:
    """`a/b/c` -> [`a`, `a/b`]."""
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def place(tree: Tree, path: str, data: bytes) -> None:
    """Put a regular file at `path`, removing whatever stands in its way: a symlink or
    file where a parent directory must be, a directory (all below it) where it goes."""
    for parent in parents(path):
        tree.pop(parent, None)
    prefix = path + "/"
    for below in [p for p in tree if p.startswith(prefix)]:
        del tree[below]
    tree[path] = Entry(Kind.FILE, data)


def remove(tree: Tree, path: str) -> None:
    """Remove `path` (a file, a symlink or a whole directory), following nothing."""
    tree.pop(path, None)
    prefix = path + "/"
    for below in [p for p in tree if p.startswith(prefix)]:
        del tree[below]


def drop(tree: Tree, unwanted: Callable[[str], bool]) -> list[str]:
    """Remove every path `unwanted` names; return them, sorted."""
    gone = sorted(p for p in tree if unwanted(p))
    for path in gone:
        del tree[path]
    return gone


def directories(tree: Mapping[str, Entry]) -> set[str]:
    """Every directory the tree implies ("" is the root)."""
    found = {""}
    for path in tree:
        found.update(parents(path))
    return found


def dirname(path: str) -> str:
    return posixpath.dirname(path)
