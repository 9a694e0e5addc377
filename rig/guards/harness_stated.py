"""What the brief states of the harness (issue 30): the protected files and the base's
harness files by path, then the rules of `rig.guards.harness` in words, one sentence per
rule, each only where the base holds a file it can apply to. A function of the base
alone: byte-identical for every arm.
"""

from __future__ import annotations

import textwrap
from collections.abc import Collection

from rig.guards.harness import harness_of
from rig.sample import tree as tree_mod
from rig.sample.tree import Tree

SHOWN = 30  # paths a statement names before it groups the rest by directory

# One sentence per rule above, each next to nothing but its rule's name: a change to a
# rule changes its sentence here, and `stated` is what every arm's brief says.
RULE_BY_NAME = (
    "Harness, by file name or place anywhere in the tree: test-runner and tool "
    "configuration (`conftest.py`, `pyproject.toml`, `setup.cfg`, `tox.ini`, "
    "`pytest.ini`, `package.json` and lockfiles, `tsconfig*.json`, jest/vitest/vite "
    "configs, `go.mod`, `go.sum`, `go.work`, `Cargo.toml`, `Cargo.lock`, `build.rs`, "
    "`.cargo/`, linters' configs, ignore files such as `.gitignore`, a `Makefile`), "
    "`sitecustomize.py`, `*.pth`, `node_modules/`, `vendor/`. In every sample each is the "
    "base's version; one the base does not have is removed. So a change to one is never "
    "obeyed: a fixture or hook added to a conftest.py the base has (or a new one in a "
    "directory the base has), a pytest marker or option declared in pyproject.toml, a new "
    "dependency or language version in go.mod / package.json / Cargo.toml. Keep what your "
    "tests need in the test files themselves, or in a conftest.py of a new test directory "
    "(one in a directory the base does not have is yours and is kept).")
RULE_NAMED = ("A file a (base) runner configuration names is harness too: a vitest/jest "
              "`setupFiles` entry, a pytest plugin named by `-p` or `pytest_plugins`.")
RULE_GO_TEST_MAIN = ("Go: a `_test.go` file that defines `TestMain` in a package the base "
                     "has (a directory where the base has Go files) is harness: one you "
                     "add there is removed whole, with every test in it; one you change "
                     "is the base's. Put those tests in files without a TestMain. A "
                     "TestMain in a package you add is yours and runs.")
RULE_LAYOUT = ("Python: where the base's tests' imports resolve is the base's. A test "
               "directory of the base (or a parent of one) is a package (`__init__.py`) "
               "exactly when it is one in the base (a new test directory of yours may be a "
               "package or not, as you make it); a "
               "module of yours at an import root (the repository root, a test directory, "
               "an ini `pythonpath`) named like a standard-library, installed or base "
               "module elsewhere is removed.")
RULE_RUNTIME = ("Python: a conftest, ini file or pytest plugin that is neither the base's "
                "nor the image's, or bytecode, that your code writes while the tests run "
                "fails the sample (tampered); so does a Python signal handler of your code "
                "left installed while tests run (one installed at import: install it in "
                "your program's entry point, or restore it within the test that needs it).")
RULE_DEPENDENCIES = ("New dependencies are not installed: every sample runs in the image "
                     "prepared from the base, with no network. Use what the base already "
                     "has.")
RULE_BYTECODE = ("Committed bytecode and tool caches (`__pycache__/`, `*.pyc`, "
                 "`.pytest_cache/`, `.mypy_cache/`, `.ruff_cache/`, ...), a cargo "
                 "`target/`, and an extension module beside a source of the same module "
                 "are dropped.")
RULE_COMMANDS = ("Any other file is measured as yours, including a file a check's command "
                 "names (a script it runs, a source file it reads or checks) unless it is "
                 "protected.")


def stated(base: Tree, protected: Collection[str] = ()) -> str:
    """What a sample takes from the base instead of an arm's tree, as the brief states it
    (Markdown): the protected files and the base's harness files by path, then this
    module's rules (each sentence only where the base holds a file it can apply to). A
    function of the base alone: byte-identical for every arm."""
    found = harness_of(base)
    lines = ["## What is the base's at scoring", "",
             _wrapped("Your last commit is scored in fresh containers. What is listed here "
                      "is the base's there, whatever your commits hold:", ""), ""]
    if protected:
        lines.append(_wrapped(f"Protected (restored to the base's version): "
                              f"{grouped(protected)}."))
    if found:
        lines.append(_wrapped(f"The base's harness files here: {grouped(found)}."))
    rules = [RULE_BY_NAME, RULE_NAMED]
    if any(p.endswith(".go") for p in base):
        rules.append(RULE_GO_TEST_MAIN)
    if any(p.endswith(".py") for p in base):
        rules += [RULE_LAYOUT, RULE_RUNTIME]
    rules += [RULE_DEPENDENCIES, RULE_BYTECODE, RULE_COMMANDS]
    lines += [_wrapped(rule) for rule in rules]
    return "\n".join(lines) + "\n"


def _wrapped(text: str, bullet: str = "- ") -> str:
    return textwrap.fill(text, 88, initial_indent=bullet, subsequent_indent=" " * len(bullet),
                         break_long_words=False, break_on_hyphens=False)


def grouped(paths: Collection[str], shown: int = SHOWN) -> str:
    """`paths` as backticked names, at most `shown` entries: the directories holding most
    of them collapsed first (`node_modules/` (4,120 files)), then the rest counted."""
    files = sorted(set(paths))
    per_dir: dict[str, int] = {}
    for path in files:
        for directory in tree_mod.ancestors([path]):
            if directory:
                per_dir[directory] = per_dir.get(directory, 0) + 1
    # Largest first, a parent before a child of the same count: never a child of one
    # already collapsed, so each collapse saves its count less one.
    collapsed: set[str] = set()
    count = len(files)
    for directory in sorted(per_dir, key=lambda d: (-per_dir[d], d.count("/"), d)):
        if count <= shown or per_dir[directory] < 2:
            break
        if collapsed & tree_mod.ancestors([directory]):
            continue
        collapsed.add(directory)
        count -= per_dir[directory] - 1
    loose = [p for p in files if not collapsed & tree_mod.ancestors([p])]
    entries = sorted([f"`{tree_mod.shown(p)}`" for p in loose] +
                     [f"`{tree_mod.shown(d)}/` ({per_dir[d]:,} files)" for d in collapsed])
    more = len(entries) - shown
    return ", ".join(entries[:shown]) + (f", and {more} more" if more > 0 else "")
