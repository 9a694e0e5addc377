"""The Go packages a `go test` command builds, resolved on the host from the tree.

The canaries must go where the command goes (`rig.guards.inprocess`): a test file in a package
the command never builds is absent on every honest run. This reads the command as the go
tool would, enough to plant: the `cd DIR` steps before the `go test` step, the package
patterns among its arguments (flags and their values skipped, `-args` ends them, none
means `.`), each resolved against the module the directory is in (the nearest `go.mod`
up from it): a relative path (`.`, `./calc`, `calc/`), a module import path
(`example.com/m/calc`), either with a trailing `/...` (every package under it in the same
module, not `testdata`, `vendor` or a directory named `_x` / `.x`), and `all`. What it
cannot read (a pattern with `...` inside it, `.go` files named, a package outside the
module, no `go.mod`) gives no selection: the sample is planted no canary and says so.
Pure: paths and the text of the `go.mod` files, never docker.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

from rig.guards import shell

# go test's flags (build and test flags) that take a value as the next word.
_VALUED = frozenset((
    "p", "o", "asmflags", "buildmode", "compiler", "gccgoflags", "gcflags",
    "installsuffix", "ldflags", "mod", "modfile", "overlay", "pkgdir", "tags", "toolexec",
    "exec", "C", "coverpkg", "covermode", "coverprofile", "cpu", "run", "skip", "bench",
    "benchtime", "count", "blockprofile", "blockprofilerate", "cpuprofile", "memprofile",
    "memprofilerate", "mutexprofile", "mutexprofilefraction", "outputdir", "parallel",
    "timeout", "trace", "shuffle", "fuzz", "fuzztime", "fuzzminimizetime", "list", "vet"))
_MODULE = re.compile(r"^\s*module\s+\"?([^\s\"]+)\"?", re.MULTILINE)
_REDIRECT = re.compile(r"\d*(?:>>?|<)&?")  # `2>&1`, `> out.txt`, `>out.txt`


@dataclass(frozen=True)
class PackageSelection:
    """What one `go test` command builds: package directories (repo-relative, "" the
    root), and the directories a `/...` pattern walks (a new package under one of them,
    in its module, is built too)."""

    dirs: frozenset[str]
    walked: tuple[str, ...]

    def walks(self, directory: str, paths: Set[str]) -> bool:
        """Whether a package at `directory` would be built by a `/...` pattern."""
        return any(_under(root, directory) and _module_of(directory, paths) ==
                   _module_of(root, paths) for root in self.walked)


def select(command: str, paths: Sequence[str],
           text_of: Mapping[str, str]) -> PackageSelection | None:
    """The packages the command's (last) `go test` step builds, or None when it cannot
    be read."""
    found = _go_test_step(command)
    if found is None:
        return None
    cwd, args = found
    patterns = _patterns(args)
    if patterns is None:
        return None
    present = frozenset(paths)
    module = _module_of(cwd, present)  # None: a go.work root (relative patterns only)
    dirs, walked = set(), []
    packages = _package_dirs(present)
    for pattern in patterns or ["."]:
        resolved = _resolve(pattern, cwd, module, text_of)
        if resolved is None:
            return None
        directory, recursive = resolved
        if _module_of(directory, present) is None:
            return None  # go refuses it: no module holds the directory
        if recursive:
            walked.append(directory)
            home = _module_of(directory, present)
            dirs |= {d for d in packages if _under(directory, d) and
                     _module_of(d, present) == home}
        elif directory in packages:
            dirs.add(directory)
    return PackageSelection(frozenset(dirs), tuple(walked))


def _go_test_step(command: str) -> tuple[str, list[str]] | None:
    """(the working directory, the arguments after `go test`) of the last step of a shell
    list (or pipeline) that runs `go test`, the `cd` steps before it applied."""
    cwd, found = "", None
    for step in shell.steps(command, background=False):
        words = shell.words(step)
        if words is None:
            return None
        if words[:1] == ["cd"] and len(words) == 2:
            target = words[1]
            if target.startswith("/"):
                if not (target == "/work" or target.startswith("/work/")):
                    return None
                target = target.removeprefix("/work").lstrip("/")
            cwd = posixpath.normpath(posixpath.join(cwd, target))
            if cwd.startswith(".."):
                return None
            cwd = "" if cwd == "." else cwd
        elif words and posixpath.basename(words[0]) == "go" and words[1:2] == ["test"]:
            found = (cwd, words[2:])
    return found


def _patterns(args: list[str]) -> list[str] | None:
    found: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in ("-args", "--args"):
            break
        if _REDIRECT.match(arg):
            skip = _REDIRECT.fullmatch(arg) is not None  # `>` alone: its file follows
            continue
        if arg.startswith("-"):
            name = arg.lstrip("-")
            skip = "=" not in name and name.removeprefix("test.") in _VALUED
            continue
        if arg.endswith(".go"):
            return None  # files named: one ad-hoc package
        found.append(arg)
    return found


def _resolve(pattern: str, cwd: str, module: str | None,
             text_of: Mapping[str, str]) -> tuple[str, bool] | None:
    """(the directory, recursive) of one pattern, or None when it cannot be read."""
    if pattern == "all":
        return None if module is None else (module, True)
    recursive = pattern == "..." or pattern.endswith("/...")
    stem = pattern.removesuffix("...").rstrip("/") if recursive else pattern.rstrip("/")
    if "..." in stem:
        return None
    if stem in ("", ".", "..") or stem.startswith(("./", "../")):
        if pattern == "...":
            return None  # every package go knows of, the standard library's too
        directory = posixpath.normpath(posixpath.join(cwd, stem or "."))
    elif module is None:
        return None  # an import path outside any module the rig reads
    else:
        path = _module_path(module, text_of)
        if path is None or not (stem == path or stem.startswith(path + "/")):
            return None
        directory = posixpath.join(module, stem[len(path):].lstrip("/"))
    directory = "" if directory == "." else directory.strip("/")
    return (None if directory.startswith("..") else (directory, recursive))


def _module_path(module: str, text_of: Mapping[str, str]) -> str | None:
    found = _MODULE.search(text_of.get(posixpath.join(module, "go.mod"), ""))
    return found.group(1) if found else None


def _module_of(directory: str, paths: Set[str]) -> str | None:
    """The directory of the nearest go.mod up from `directory` (itself included)."""
    here = directory
    while True:
        if posixpath.join(here, "go.mod") in paths:
            return here
        if not here:
            return None
        here = posixpath.dirname(here)


def _package_dirs(paths: Set[str]) -> set[str]:
    return {posixpath.dirname(p) for p in paths if p.endswith(".go")}


def _under(root: str, directory: str) -> bool:
    """`directory` is `root` or below it, and a `/...` pattern from `root` reaches it."""
    if root and not (directory == root or directory.startswith(root + "/")):
        return False
    below = directory[len(root):].strip("/")
    return not any(part in ("testdata", "vendor") or part.startswith(("_", "."))
                   for part in below.split("/") if part)
