"""The harness around a run is the base's, not the tree's (docs/design.md principle 7).

What a runner loads by name or by location, without the tests importing it, is harness
wherever it sits in the tree, for every runner the rig reads:

- configuration by file name: pytest's conftest and ini sources, coverage's; npm's,
  yarn's and pnpm's (package.json, the lockfiles, .npmrc, .yarnrc, .pnpmfile.cjs), the
  Node version files, tsconfig, babel, jest, vite and vitest configs; Cargo.toml,
  Cargo.lock, build.rs, the toolchain file and everything under .cargo/; go.mod, go.sum,
  go.work; the linters' and type checkers' configs; a Makefile;
- what a loader finds by location: Python's plugin and path files (`*.dist-info`,
  `*.egg-info`, `*.egg-link`, `*.pth`) and its startup modules (sitecustomize,
  usercustomize), node's `node_modules/` (its `.bin/` is on `npm run`'s PATH), vendored
  code (`vendor/`, `.yarn/`), build output a tool would take as up to date (cargo's
  `target/`, `*.tsbuildinfo`), compiled bytecode;
- what decides where an import is resolved (`layout`): whether a test directory of the
  base or one of its parents is a package (`__init__.py` there or not: pytest's
  rootdir-relative import path follows it), and a module at a root of the import path
  (the tree's root, a test directory pytest puts first on `sys.path`, an ini
  `pythonpath`, as the layout will be with the arm's own new packages) whose name
  another module already answers to (the standard library's, the image's, the base's
  elsewhere): it would shadow it;
- a Go test file that defines `TestMain` in a package the base has (it decides how the
  test binary runs; `go_test_main_is_harness`: in a package the arm added it is the arm's);
- a file a pinned harness file names (a vitest `setupFiles` entry, a `-p` plugin module).

Every sample runs under the base's harness: each harness path of the arm's tree is the
base's version again, or dropped when the base has none (`pin`); the record says which,
and `touched` names what the arm changed (reported as `harness_touched`, never obeyed).

What cannot change how a base test is imported or collected is the arm's own and kept
(`own_conftests`, `_layout`): a package marker in a directory that is neither a test
directory of the base nor above one (a new test package: `tests/api/__init__.py`), and a
conftest in a directory the base does not have (its fixtures serve only the tests below
it; its hooks run session-wide, where the observer attests every protected test by id, so
a hook that deselects, skips or forces one is still FAIL).
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass

from rig.sample import tree as tree_mod
from rig.sample.tree import Entry, Kind, Tree

NAMES = (
    # pytest and coverage
    "conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini",
    "setup.cfg", "pyproject.toml", "setup.py", ".coveragerc", "noxfile.py",
    "sitecustomize.py", "usercustomize.py",
    # node, npm, yarn, pnpm, typescript, the JS test runners
    "package.json", "package-lock.json", "npm-shrinkwrap.json", "yarn.lock",
    "pnpm-lock.yaml", "pnpm-workspace.yaml", ".npmrc", ".yarnrc", ".yarnrc.yml",
    ".pnpmfile.cjs", ".nvmrc", ".node-version", "tsconfig*.json", "jsconfig.json",
    "babel.config.*", ".babelrc", ".babelrc.*", "jest.config.*", "jest.setup.*",
    "vitest.config.*", "vite.config.*", "vitest.workspace.*", "vitest.setup.*",
    ".mocharc*", ".swcrc",
    # cargo and go
    "Cargo.toml", "Cargo.lock", "build.rs", "rust-toolchain", "rust-toolchain.toml",
    "clippy.toml", ".clippy.toml", "go.mod", "go.sum", "go.work", "go.work.sum",
    # linters and type checkers a check may run
    "mypy.ini", ".mypy.ini", "ruff.toml", ".ruff.toml", ".flake8", ".pylintrc",
    "pylintrc", ".eslintrc*", "eslint.config.*", ".prettierrc*",
    "Makefile", "makefile", "GNUmakefile",
    # more checkers' configs, and the ignore files tools read to skip files (ruff and
    # ripgrep-based tools honour .gitignore: a committed file listed there is never read)
    "pyrightconfig.json", ".golangci.*", "biome.json", "biome.jsonc", "rustfmt.toml",
    ".rustfmt.toml", ".pycodestyle", ".isort.cfg", "deno.json", "deno.jsonc",
    ".gitignore", ".ignore", ".rgignore", ".eslintignore", ".prettierignore",
    ".stylelintignore",
)
DIRS = ("node_modules", "vendor", ".cargo", ".yarn", "__pycache__", "*.dist-info",
        "*.egg-info")
SUFFIXES = (".pth", ".egg-link", ".pyc", ".pyo", ".tsbuildinfo")
# Names the interpreter imports by itself when a path entry holds them.
STARTUP_MODULES = frozenset({"sitecustomize", "usercustomize"})
# Names pytest and pluggy import only when present (highlighting, colours, completion,
# backports): a module of the tree by one of them would run inside the runner.
OPTIONAL = frozenset({"pygments", "colorama", "argcomplete", "tomli", "exceptiongroup",
                      "importlib_metadata", "pexpect", "apport_python_hook", "_pytest",
                      "pytest", "pluggy", "py"})
STDLIB = frozenset(sys.stdlib_module_names) | STARTUP_MODULES | OPTIONAL
_TEST_MODULE = re.compile(r"(^test_.*|.*_test)\.py$")
_GO_TEST_MAIN = re.compile(rb"^func\s+TestMain\s*\(", re.MULTILINE)
_NAMED = re.compile(r"""["']([^"'\n]{1,300})["']|-p\s+([\w.]+)""")


# NAMES and DIRS as one pattern each, matched once per path (a tree of 100,000 paths, or
# of paths 200 directories deep, is not 70 globs per name and 7 per directory).
_NAME_GLOBS = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in NAMES))
_DIR_GLOBS = re.compile("(?:^|/)(?:" + "|".join(
    "[^/]*".join(re.escape(piece) for piece in p.split("*")) for p in DIRS) + ")/")


# Test files by the runners' own naming: pytest's test_*.py / *_test.py, Go's *_test.go,
# cargo's tests/*.rs, the JS runners' *.test.* / *.spec.* / *_test.* / *-test.* and
# anything under __tests__/.
_TEST_FILE = re.compile(r"(?:^|/)(?:test_[^/]*\.py|[^/]*_test\.(?:py|go)|tests/[^/]*\.rs"
                        r"|[^/]*[._-](?:test|spec)\.[cm]?[jt]sx?|__tests__/.*)$")


def is_test_file(path: str) -> bool:
    """A file some runner collects tests from by its name."""
    return bool(_TEST_FILE.search(path))


def is_harness(path: str) -> bool:
    """True when `path` is harness by its own name or place (any runner)."""
    name = path.rpartition("/")[2]
    if _NAME_GLOBS.match(name) or name.endswith(SUFFIXES):
        return True
    return _DIR_GLOBS.search(path) is not None


# What a check's tool trusts instead of reading the files: its cache of earlier results.
CACHES = (".mypy_cache", ".dmypy.json", ".ruff_cache", ".pytest_cache", ".eslintcache",
          ".stylelintcache", ".turbo", ".nx", ".parcel-cache", ".pyre", ".pytype")


def is_bytecode(path: str) -> bool:
    """Compiled Python or a tool's cache a tree must never supply: `__pycache__/`,
    `*.pyc` / `*.pyo`, `.mypy_cache/`, `.ruff_cache/`, ... (`CACHES`)."""
    parts = path.split("/")
    return "__pycache__" in parts or path.endswith((".pyc", ".pyo")) or \
        any(part in CACHES for part in parts)


@dataclass(frozen=True)
class Pinned:
    """What pinning changed in a sample's tree (kept in the sample record)."""

    restored: tuple[str, ...] = ()  # the base's version put back over the arm's
    removed: tuple[str, ...] = ()   # harness files the arm added, taken out
    bytecode: tuple[str, ...] = ()  # compiled files dropped from the tree
    # symlinks replaced by a copy of what they lead to (`rig.sample.links`), already shown
    materialized: tuple[str, ...] = ()

    def as_record(self) -> dict[str, list[str]]:
        found = {"restored": [tree_mod.shown(p) for p in self.restored],
                 "removed": [tree_mod.shown(p) for p in self.removed],
                 "bytecode": [tree_mod.shown(p) for p in self.bytecode]}
        if self.materialized:
            found["materialized"] = list(self.materialized)
        return found


def pin(tree: Tree, base: Tree, importable: Iterable[str] = ()) -> Pinned:
    """Make `tree`'s harness the base's (in place): restore, remove; never follow a link.
    `importable`: the top-level module names the image's python answers to. A file a
    check's command names (a script it runs, a file it measures) is not harness: it is the
    arm's unless the contract protects it (`rig.preflight.unprotected_named`); nor is a
    conftest in a directory the base does not have (`own_conftests`)."""
    wanted = {p for p in (*tree, *base) if is_harness(p)} - own_conftests(tree, base)
    wanted |= _go_test_mains(tree, base) | toolchain_harness(tree, base)
    restored, removed = _apply(tree, base, wanted)
    wanted = _named(tree) - set(restored) - set(removed)
    more = _apply(tree, base, wanted)
    layout = _layout(tree, base, frozenset(importable))
    restored_l, removed_l = _apply(tree, base, layout)
    return Pinned(tuple(sorted({*restored, *more[0], *restored_l})),
                  tuple(sorted({*removed, *more[1], *removed_l})))


def _apply(tree: Tree, base: Tree, paths: Iterable[str]) -> tuple[list[str], list[str]]:
    restored, removed = [], []
    for path in sorted(paths):
        mine, theirs = tree.get(path), base.get(path)
        if theirs is None:
            if mine is not None or tree_mod.is_directory(tree, path):
                tree_mod.remove(tree, path)
                removed.append(path)
        elif mine != theirs:
            put(tree, path, theirs)
            restored.append(path)
    return restored, removed


def put(tree: Tree, path: str, entry: Entry) -> None:
    """The base's entry at `path`: a regular file as a regular file, else as it is."""
    if entry.kind is Kind.SYMLINK:
        tree_mod.place(tree, path, b"")  # clears the way like a file would
        tree[path] = entry
        return
    tree_mod.place(tree, path, entry.data)
    tree[path] = entry


def drop_bytecode(tree: Tree) -> tuple[str, ...]:
    """Drop what a tool or the runtime would take instead of the tree's sources (class 9):
    bytecode and tool caches (`is_bytecode`), a cargo `target/` beside its Cargo.toml
    (fingerprints that call a changed crate up to date), and an extension module beside
    a source of the same module (the runtime imports the binary, a check reads the .py)."""
    targets = tuple(posixpath.join(posixpath.dirname(p), "target/").lstrip("/")
                    for p in tree if posixpath.basename(p) == "Cargo.toml")
    return tuple(tree_mod.drop(tree, lambda p: is_bytecode(p) or p.startswith(targets)
                               or _shadows_source(tree, p)))


def _shadows_source(tree: Tree, path: str) -> bool:
    directory, _, name = path.rpartition("/")
    if not name.endswith((".so", ".pyd")):
        return False
    module = posixpath.join(directory, name.split(".", 1)[0])
    return f"{module}.py" in tree or f"{module}/__init__.py" in tree


def own_conftests(tree: Tree, base: Tree) -> set[str]:
    """The arm's conftests in directories the base does not have (so holding none of the
    base's tests, above none of them): pytest loads one only while it collects that
    directory, its fixtures serve only the tests below it. Kept: the arm's own."""
    found = {p for p in tree if p.endswith("/conftest.py") and p not in base
             and _DIR_GLOBS.search(p) is None}  # never one in vendor/, node_modules/, ...
    if not found:
        return found
    theirs = tree_mod.ancestors(base)
    return {p for p in found if posixpath.dirname(p) not in theirs}


def touched(changed: Iterable[str]) -> list[str]:
    """The harness files among an arm's changed paths (for `harness_touched`)."""
    return sorted(p for p in changed if is_harness(p) or is_bytecode(p))


# -- by content and by layout ------------------------------------------------------------


def _go_test_mains(tree: Tree, base: Tree) -> set[str]:
    """A `_test.go` of the arm's that defines TestMain, or changes one the base has, in
    a package the base has (`go_test_main_is_harness`)."""
    found = set()
    based = go_packages(base)
    for path in {*tree, *base}:
        if not path.endswith("_test.go"):
            continue
        mine, theirs = tree.get(path), base.get(path)
        if mine is None or mine == theirs:
            continue
        if go_test_main_is_harness(path, mine, theirs, based):
            found.add(path)
    return found


def go_packages(base: Tree) -> set[str]:
    """The directories where the base has Go files: its Go packages."""
    return {posixpath.dirname(p) for p in base if p.endswith(".go")}


def go_test_main_is_harness(path: str, mine: Entry, theirs: Entry | None,
                            based: set[str]) -> bool:
    """The rule for an arm's `_test.go` (`mine`, the base's `theirs` at the same path):
    harness (the base's at scoring) when it defines `TestMain`, or replaces a file that
    does, in a package the base has (`based`: `go_packages`). A TestMain decides how its
    package's test binary runs, and a protected test, or the rig's sentinel beside it,
    runs only in a package the base has. In a package the arm added, a TestMain runs the
    arm's own tests only: the file is the arm's (its setup, then `m.Run()`). A file too
    large to read is taken to define one."""
    defines = not mine.held or _GO_TEST_MAIN.search(mine.data) is not None or (
        theirs is not None and (not theirs.held or _GO_TEST_MAIN.search(theirs.data)
                                is not None))
    return defines and posixpath.dirname(path) in based


_JS_CONFIGS = ("vitest.config.*", "vite.config.*", "vitest.workspace.*", "jest.config.*",
               "package.json")
_JS_NAMING = re.compile(r"""["']?(?:setupFiles|setupFilesAfterEnv|globalSetup|globalTeardown|"""
                        r"""snapshotSerializers|testEnvironment|reporters|resolver|"""
                        r"""testSequencer|testRunner|environment)["']?\s*:\s*"""
                        r"""(\[[^\]]{0,4000}\]|["'][^"'\n]{1,300}["'])""")
_PY_PLUGINS = re.compile(r"""pytest_plugins\s*=\s*(\[[^\]]{0,4000}\]|\([^)]{0,4000}\)|"""
                         r"""["'][^"'\n]{1,300}["'])""")
# `-p NAME` in an ini (`addopts = -p x`) or TOML (`addopts = "-p x"`, `["-p", "x"]`).
_ADDOPTS_PLUGIN = re.compile(r"""(?:^|[\s"'\[,=])-p[\s"',]*([\w.]+)""")
_QUOTED = re.compile(r"""["']([^"'\n]{1,300})["']""")


def _named(tree: Tree) -> set[str]:
    """Files the (now pinned) runner configurations name as part of the harness: a JS
    runner's setup files, environments and reporters; a pytest plugin module named by
    `-p` or `pytest_plugins`."""
    found: set[str] = set()
    modules = {p.removesuffix(".py").removesuffix("/__init__").replace("/", "."): p
               for p in tree if p.endswith(".py")}
    for path, entry in list(tree.items()):
        name = posixpath.basename(path)
        if entry.kind is Kind.SYMLINK or not entry.held:
            continue
        text = entry.data.decode("utf-8", "replace")
        here = posixpath.dirname(path)
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in _JS_CONFIGS):
            for value in _JS_NAMING.findall(text):
                for word in _QUOTED.findall(value) or [value.strip("'\"")]:
                    found.update(_files_named(tree, here, word))
        elif name == "conftest.py":
            for value in _PY_PLUGINS.findall(text):
                found.update(modules[w] for w in _QUOTED.findall(value) or [value.strip("'\"")]
                             if w in modules)
        elif name in ("pyproject.toml", "pytest.ini", "tox.ini", "setup.cfg"):
            found.update(modules[w] for w in _ADDOPTS_PLUGIN.findall(text) if w in modules)
    return found


def _files_named(tree: Tree, here: str, word: str) -> set[str]:
    found = set()
    for candidate in (posixpath.normpath(posixpath.join(here, word)), posixpath.normpath(word)):
        if candidate.startswith(".."):
            continue
        for suffix in ("", ".ts", ".js", ".mjs", ".cjs", ".mts", ".cts", ".tsx", ".jsx"):
            if candidate + suffix in tree:
                found.add(candidate + suffix)
    return found


def _packages(tree: Tree) -> set[str]:
    """Directories that are regular packages (hold an `__init__.py`)."""
    return {posixpath.dirname(p) for p in tree if posixpath.basename(p) == "__init__.py"}


def _test_dirs(*trees: Tree) -> set[str]:
    """Every directory pytest may import a test module or a conftest from."""
    return {posixpath.dirname(p) for t in trees for p in t
            if _TEST_MODULE.match(posixpath.basename(p)) or p.endswith("conftest.py")}


def _basedir(directory: str, packages: set[str]) -> str:
    """pytest's prepend import mode: the first directory up from a test module's that is
    not a package goes on sys.path."""
    while directory and directory in packages:
        directory = posixpath.dirname(directory)
    return directory


def _ini_paths(tree: Tree) -> set[str]:
    """`pythonpath` entries of pytest's ini sources at the root (the base's, pinned)."""
    found: set[str] = set()
    for name in ("pyproject.toml", "pytest.ini", "setup.cfg", "tox.ini"):
        entry = tree.get(name)
        if entry is None or entry.kind is Kind.SYMLINK:
            continue
        text = entry.data.decode("utf-8", "replace")
        for match in re.finditer(r"^\s*pythonpath\s*=\s*(.+)$", text, re.MULTILINE):
            found.update(w.strip("/") for w in re.findall(r"[\w./-]+", match.group(1))
                         if w not in ("true", "false"))
    return found


def marker_dirs(base: Tree) -> set[str]:
    """The directories whose package markers (`__init__.py` there or not) are the base's
    at scoring: the base's test and conftest directories and every directory above them
    ("" is the root). A marker elsewhere is the arm's own."""
    theirs = _test_dirs(base)
    return {""} | theirs | tree_mod.ancestors(theirs)


def _layout(tree: Tree, base: Tree, importable: frozenset[str]) -> set[str]:
    """Where the base's tests' imports resolve is the base's: the package markers of the
    base's test directories and their parents (existence only: an `__init__.py`'s content
    is code), and no module at an import root that shadows another one. A marker elsewhere
    (a new test package of the arm's) is kept: it decides only how the arm's own tests are
    named, and the roots are those of the layout as it will then be."""
    found: set[str] = set()
    dirs = _test_dirs(tree, base)
    held = marker_dirs(base)
    for directory in held:
        marker = posixpath.join(directory, "__init__.py") if directory else "__init__.py"
        if (marker in tree) != (marker in base):
            found.add(marker)
    packages = {d for d in _packages(base) if d in held} | \
        {d for d in _packages(tree) if d not in held}
    roots = {""} | {_basedir(d, packages) for d in dirs} | _ini_paths(base)
    mine, theirs_at = _modules(tree, roots), _modules(base, roots)
    homes: dict[str, set[str]] = {}  # a module name -> the roots the base has it at
    for other, names in theirs_at.items():
        for name in names:
            homes.setdefault(name, set()).add(other)
    for root in roots:
        for name, paths in mine.get(root, {}).items():
            if name in theirs_at.get(root, {}):
                continue
            elsewhere = bool(homes.get(name, set()) - {root})  # not a scan of every root
            if name in STDLIB or name in importable or elsewhere:
                found.update(paths)
    return found


def _modules(tree: Tree, roots: set[str]) -> dict[str, dict[str, list[str]]]:
    """root -> top-level module name -> the paths that make it there (a module file, an
    extension, or a package directory), in one pass over the tree."""
    found: dict[str, dict[str, list[str]]] = {}
    for path in tree:
        directory, _, name = path.rpartition("/")
        if name == "__init__.py":
            parent, _, package = directory.rpartition("/")
            if parent in roots and package:
                found.setdefault(parent, {}).setdefault(package, []).append(directory)
        elif directory in roots and name.endswith((".py", ".so")):
            found.setdefault(directory, {}).setdefault(name.split(".", 1)[0], []).append(path)
    return found


# -- cargo, go, node: by place and by a pinned manifest's naming ---------------------------
# (the toolchains' own rules; the Python ones are above)

_CARGO_BUILD = re.compile(r"""^\s*build\s*=\s*["']([^"'\n]{1,300})["']""", re.MULTILINE)


def toolchain_harness(tree: Tree, base: Tree) -> set[str]:
    """What cargo loads by place or by its manifest's naming, beyond the file names:

    - a `target/` beside a Cargo.toml (of the tree or the base): cargo's build directory,
      whose fingerprints and binaries it takes as up to date (a committed fake test
      binary, a build script's output);
    - the build script a pinned Cargo.toml names (`build = "tools/gen.rs"`): it runs
      before the tests with the sandbox user's rights.
    """
    crates = {posixpath.dirname(p) for t in (tree, base) for p in t
              if posixpath.basename(p) == "Cargo.toml"}
    built = {posixpath.join(c, "target") if c else "target" for c in crates}
    found = {p for t in (tree, base) for p in t
             if any(p.startswith(d + "/") for d in built)}
    for path, entry in base.items():
        if posixpath.basename(path) != "Cargo.toml" or not entry.held or \
                entry.kind is Kind.SYMLINK:
            continue
        here = posixpath.dirname(path)
        for named in _CARGO_BUILD.findall(entry.data.decode("utf-8", "replace")):
            candidate = posixpath.normpath(posixpath.join(here, named))
            if not candidate.startswith(".."):
                found.add(candidate)
    return found


def harness_of(base: Tree) -> list[str]:
    """The base's own files whose content `pin` holds to the base's: harness by name or
    place (not bytecode: dropped), a test file defining Go's TestMain, cargo's, the files
    a runner configuration names. (A test directory's package marker is held by its
    existence only, its content is code: `RULE_LAYOUT` says so in words.)"""
    found = {p for p in base if is_harness(p) and not is_bytecode(p)}
    found |= {p for p in base if p.endswith("_test.go") and (
        not base[p].held or _GO_TEST_MAIN.search(base[p].data))}
    found |= {p for p in toolchain_harness(base, base) if p in base} | _named(base)
    return sorted(p for p in found if not is_bytecode(p))
