"""The harness around a test run is the rig's, not the tree's (DESIGN principle 7).

For the success criterion the base's harness files (every `conftest.py`, the runner's
configuration: pytest's ini sources, `package.json`, `Cargo.toml`, `.cargo/config*`,
...) are restored over the arm's, and harness files the arm added are removed, so the
criterion runs exactly as it ran on the base. Checks that run the arm's own suite keep
the arm's harness (the canaries watch it). Bytecode never comes from a tree: a committed
`__pycache__/*.pyc` whose header matches the restored source would be run instead of it.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Callable
from dataclasses import dataclass

from rig import tree as tree_mod
from rig.tree import Tree

_PYTHON_STARTUP = ("sitecustomize.py", "usercustomize.py", "*.pth")
_PYTEST = ("conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml",
           "tox.ini", "setup.cfg", "pyproject.toml", *_PYTHON_STARTUP)
_JS = ("package.json", ".npmrc", "babel.config.*", ".babelrc", ".babelrc.*")
# By parser: the file names (fnmatch, at any depth) that configure how its runner starts.
HARNESS: dict[str, tuple[str, ...]] = {
    "pytest": _PYTEST,
    "junit": _PYTEST,
    "node-test": _JS,
    "jest": (*_JS, "jest.config.*", "jest.setup.*"),
    "vitest": (*_JS, "vitest.config.*", "vite.config.*", "vitest.workspace.*",
               "vitest.setup.*"),
    "cargo": ("Cargo.toml", "config.toml", "config", "rust-toolchain", "rust-toolchain.toml"),
    "go-test": ("go.work", "go.work.sum"),
    "exit-code": _PYTHON_STARTUP,
}
_CARGO_DIR_ONLY = frozenset({"config.toml", "config"})  # only as .cargo/config(.toml)


def is_harness(parser: str, path: str) -> bool:
    """True when `path` configures how `parser`'s runner starts."""
    name = posixpath.basename(path)
    for pattern in HARNESS.get(parser, ()):
        if not fnmatch.fnmatchcase(name, pattern):
            continue
        if pattern in _CARGO_DIR_ONLY and posixpath.basename(posixpath.dirname(path)) != ".cargo":
            continue
        return True
    return False


def is_bytecode(path: str) -> bool:
    """Compiled Python a tree must never supply: `__pycache__/` and `*.pyc` / `*.pyo`."""
    return "__pycache__" in path.split("/") or path.endswith((".pyc", ".pyo"))


@dataclass(frozen=True)
class Pinned:
    """What pinning changed in a sample's tree (kept in the sample record)."""

    restored: tuple[str, ...] = ()  # the base's version put back over the arm's
    removed: tuple[str, ...] = ()   # harness files the arm added, taken out
    bytecode: tuple[str, ...] = ()  # compiled files dropped from the tree

    def as_record(self) -> dict[str, list[str]]:
        return {"restored": list(self.restored), "removed": list(self.removed),
                "bytecode": list(self.bytecode)}


def pin(tree: Tree, base: Tree, parser: str) -> Pinned:
    """Make `tree`'s harness the base's (in place): restore, remove; never follow a link."""
    wanted: Callable[[str], bool] = lambda path: is_harness(parser, path)  # noqa: E731
    restored, removed = [], []
    for path in sorted({p for p in (*tree, *base) if wanted(p)}):
        mine, theirs = tree.get(path), base.get(path)
        if theirs is None:
            if mine is not None:
                tree_mod.remove(tree, path)
                removed.append(path)
        elif mine != theirs:
            put(tree, path, theirs)
            restored.append(path)
    return Pinned(tuple(restored), tuple(removed))


def put(tree: Tree, path: str, entry: tree_mod.Entry) -> None:
    """The base's entry at `path`: a regular file as a regular file, else as it is."""
    if entry.kind is tree_mod.Kind.SYMLINK:
        tree_mod.place(tree, path, b"")  # clears the way like a file would
        tree[path] = entry
        return
    tree_mod.place(tree, path, entry.data)
    tree[path] = entry


def drop_bytecode(tree: Tree) -> tuple[str, ...]:
    return tuple(tree_mod.drop(tree, is_bytecode))


def touched(parser: str, changed: list[str]) -> list[str]:
    """The harness files among an arm's changed paths (for `harness_touched`)."""
    return sorted(p for p in changed if is_harness(parser, p) or is_bytecode(p))
