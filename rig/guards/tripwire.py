"""Tripwires: the canary of a check graded by its exit code alone (class 9).

A compile check, a linter or a type checker (`python -m compileall -q src`, `ruff check`,
`mypy`, `tsc --noEmit`, `go vet ./...`, `cargo check`) reports nothing the rig can read
but its exit status, so a tool made blind (a bytecode cache written to look up to date,
a user config that excludes everything, a step before it that hides the files) passes
on code that does not compile. Once per (arm, check) the rig runs the check in a fresh
container with a TRIPWIRE planted: a file that must make the tool fail (a `.py` with a
syntax error in the directory the command names; a `.ts` type error next to an included
source; a Go file with a type error in the named package; a Rust binary that does not
compile). Its run must fail, and name the file where the base's run names it. When it
does not while the base's does (the differential rule: the same check, the same image),
the tool was made blind on the arm's tree: the check's passing samples are FAIL tampered
(`rig.sample.verdict`). Where no tripwire can be planted, or the base's run ignores it too, the
samples say so (`unguarded`).

Pure: a command and a tree in, a plan out; two runs in, a finding out.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass

from rig.guards import shell
from rig.sample.record import SampleRecord
from rig.sample.tree import WORK, Entry, Kind, directories

_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
PY_TOOLS = ("compileall", "py_compile", "pyflakes", "flake8", "mypy", "ruff", "pylint",
            "pycodestyle", "pytest")
_PREFIXES = {"env", "exec", "command", "nice", "nohup", "time", "npx", "uv", "poetry",
             "pipenv", "pnpm", "yarn", "run"}
_SKIP = ("node_modules", "vendor", "testdata", "target", ".git")
_GO_PACKAGE = re.compile(r"^package\s+(\w+)", re.MULTILINE)
_GO_BUILD = re.compile(r"^//\s*(go:build|\+build)\b", re.MULTILINE)
_CARGO_NAME = re.compile(r'^\s*name\s*=\s*"([^"]+)"', re.MULTILINE)


MAX_FILES = 64  # tripwires planted in one run (a Python tool: one per directory)


@dataclass(frozen=True)
class Tripwire:
    """The planted files of one run: where, what, for which tool."""

    tool: str
    paths: tuple[str, ...]  # repo-relative, in the sample's tree; distinct names
    content: bytes
    token: str
    after: bool = False  # steps of the command run before the tool's

    @property
    def names(self) -> tuple[str, ...]:
        """What the tool's output names of the files it saw."""
        return tuple(posixpath.basename(p) for p in self.paths)

    def named(self, log: str) -> list[str]:
        return [name for name in self.names if name in log]

    def as_record(self) -> dict[str, object]:
        return {"tool": self.tool, "paths": list(self.paths), "token": self.token,
                "after": self.after}


def plan(command: str, tree: Mapping[str, Entry], token: str) -> Tripwire | str:
    """The tripwire for `command` on `tree` (as laid out), or why none can be planted."""
    steps = [step for step in (_words(part) for part in shell.steps(command)) if step]
    why = "no step of the command is a tool the rig can plant a tripwire for"
    dirs = directories(tree)
    for n, step in enumerate(steps):
        found = _for_step(step, tree, dirs, token)
        if isinstance(found, Tripwire):
            after = any(s[0] not in _HARMLESS_STEPS for s in steps[:n])
            return dataclasses.replace(found, after=after)
        if found:
            why = found
    return why


_HARMLESS_STEPS = ("cd", "true", ":", "echo", "printf", "set", "export", "mkdir")
_SHELLS = ("sh", "bash", "dash", "zsh")


def _words(part: str) -> list[str]:
    """A step's words without what only runs it (`VAR=x`, `env`, `npx`, `timeout 60`)."""
    words = shell.split(part) or []
    while words:
        first = words[0]
        assignment = "=" in first and not first.startswith("-")
        if assignment or first in _PREFIXES or (first.startswith("-") and len(words) > 1):
            words = words[1:]
        elif first == "timeout" and len(words) > 2:
            words = words[2:]
        else:
            break
    return words


def _for_step(step: list[str], tree: Mapping[str, Entry], dirs: set[str],
              token: str) -> Tripwire | str | None:
    program, args = posixpath.basename(step[0]), step[1:]
    if program in _SHELLS:  # `sh -c 'SCRIPT'`: the script's own steps
        for n, word in enumerate(args[:-1]):
            if word.startswith("-") and "c" in word and not word.startswith("--"):
                return plan(args[n + 1], tree, token)
        return None
    if _PYTHON.match(program):
        module = _module(args)
        if module is None:
            return None
        program, args = module
    if program in ("py.test",):
        program = "pytest"
    if program in PY_TOOLS:
        return _python(program, args, tree, dirs, token)
    if program == "tsc":
        return _typescript(args, tree, dirs, token)
    if program == "go" and args[:1] and args[0] in ("vet", "build", "test"):
        return _go(args[1:], tree, dirs, token)
    if program == "cargo" and args[:1] and args[0] in ("check", "build", "clippy", "test"):
        return _cargo(args[1:], tree, token)
    if program == "node" and ("--check" in args or "-c" in args):
        return _node(args, dirs, token)
    return None


def _module(args: list[str]) -> tuple[str, list[str]] | None:
    """`python [opts] -m MODULE args` -> (MODULE, args); None for a script or `-c`."""
    n = 0
    while n < len(args):
        word = args[n]
        if word == "-m" and n + 1 < len(args):
            return args[n + 1], args[n + 2:]
        if word.startswith("-m") and len(word) > 2:
            return word[2:], args[n + 1:]
        if not word.startswith("-") or word.startswith("-c"):
            return None
        n += 2 if word in ("-X", "-W") else 1
    return None


def _scope(args: list[str], tree: Mapping[str, Entry], dirs: set[str]) -> list[str] | str:
    """The directories a tool's arguments name (the root when they name none); why none
    when they name only files."""
    named, found = False, []
    for word in args:
        if word.startswith("-"):
            continue
        path = _path(word)
        if path in dirs:
            named = True
            found.append(path)
        elif path in tree:
            named = True
    if found:
        return found
    return "the command names files, not a directory a file can be planted in" if named \
        else [""]


def _path(word: str) -> str:
    path = posixpath.normpath(word.removeprefix(WORK)).removeprefix("./")
    return "" if path in (".", WORK.rstrip("/")) else path.rstrip("/")


def _glob(args: list[str], dirs: set[str], names: tuple[str, ...]) -> str | None:
    """A file a glob argument (`src/*.py`) expands to, from `names`."""
    for word in args:
        head, pattern = posixpath.split(word.removeprefix("./"))
        if not any(c in pattern for c in "*?[") or any(c in head for c in "*?["):
            continue
        directory = _path(head) if head else ""
        for name in names:
            if directory in dirs and fnmatch.fnmatchcase(name, pattern):
                return posixpath.join(directory, name) if directory else name
    return None


def _python(tool: str, args: list[str], tree: Mapping[str, Entry], dirs: set[str],
            token: str) -> Tripwire | str:
    """A syntax error in every directory of the scope that holds Python (at most
    `MAX_FILES`): a tool kept from one directory misses that one's. Named by the
    directory, so the base's run and the arm's name the same file for a directory both
    trees hold."""
    content = f"def bakeoff_{token}(:\n    pass\n".encode()  # a syntax error in any Python
    if tool == "py_compile":
        globbed = _glob(args, dirs, (_py_name(tool, token, ""),))
        return Tripwire(tool, (globbed,), content, token) if globbed else \
            "py_compile compiles the files it is given, and no argument is a glob"
    args = [a for a in args if a not in ("check", "format")] if tool == "ruff" else args
    scope = _compileall_scope(args, tree) if tool == "compileall" else _scope(args, tree, dirs)
    if isinstance(scope, str):
        return scope
    levels, excluded = _compileall_limits(args) if tool == "compileall" else (None, None)
    if tool == "compileall" and not _positional(args):
        levels = 0  # no argument: every sys.path entry (/work last), one level each
    holding = {posixpath.dirname(p) for p in tree if p.endswith(".py")}
    chosen = []
    for directory in sorted(holding | set(scope if tool == "compileall" else scope[:1])):
        path = posixpath.join(directory, _py_name(tool, token, directory))
        within = [s for s in scope if _reaches(s, directory, levels)]
        if not within or all(_py_skipped(directory[len(s):]) for s in within) \
                or (excluded is not None and (excluded.search(path)
                                              or excluded.search("./" + path))):
            continue
        chosen.append(path)
    if not chosen:
        return "no directory the command names is one its tool walks"
    # mypy stops at the first file that does not parse: one tripwire, or it names one
    return Tripwire(tool, tuple(chosen[:1 if tool == "mypy" else MAX_FILES]), content, token)


_COMPILEALL_VALUES = ("-d", "-s", "-p", "-x", "-i", "-r", "-j", "-o", "-e",
                      "--invalidation-mode")


def _positional(args: list[str]) -> list[str]:
    """compileall's arguments that are paths (its options' values left out)."""
    found, n = [], 0
    while n < len(args):
        word = args[n]
        n += 2 if word in _COMPILEALL_VALUES else 1
        if not word.startswith("-"):
            found.append(word)
    return found


def _compileall_scope(args: list[str], tree: Mapping[str, Entry]) -> list[str] | str:
    """The directories compileall walks: each one it is given, in the tree or not (a
    directory the arm removed is planted again: compileall exits 0 on a missing one, and
    that is the command's own scope); the root when it is given none."""
    named = [_path(word) for word in _positional(args)]
    found = [path for path in named if path not in tree]
    if named and not found:
        return "the command names files, not a directory a file can be planted in"
    return found or [""]


def _compileall_limits(args: list[str]) -> tuple[int | None, re.Pattern[str] | None]:
    """compileall's own scope: `-l` / `-r N` (levels below a directory), `-x REGEX`."""
    levels, excluded = None, None
    for n, word in enumerate(args):
        value = args[n + 1] if n + 1 < len(args) else ""
        if word == "-l":
            levels = 0
        elif word == "-r" and value.isdigit():
            levels = int(value)
        elif word == "-x" and value:
            try:
                excluded = re.compile(value)
            except re.error:
                excluded = None  # compileall itself refuses it: every run fails alike
    return levels, excluded


def _reaches(scope: str, directory: str, levels: int | None) -> bool:
    if not _within(directory, scope):
        return False
    depth = 0 if directory == scope else directory.count("/") + 1 - (
        scope.count("/") + 1 if scope else 0)
    return levels is None or depth <= levels


def _py_name(tool: str, token: str, directory: str) -> str:
    digest = hashlib.sha1(directory.encode("utf-8", "surrogateescape")).hexdigest()[:6]
    return f"{'test_' if tool == 'pytest' else ''}bakeoff_{token}_{digest}.py"


_PY_SKIPPED = ("node_modules", "__pycache__", "site-packages", "venv", "build", "dist")


def _py_skipped(directory: str) -> bool:
    """Directories Python tools skip by default (a tripwire there says nothing)."""
    return any(part in _PY_SKIPPED or part.startswith(".") for part in directory.split("/"))


def _typescript(args: list[str], tree: Mapping[str, Entry], dirs: set[str],
                token: str) -> Tripwire | str:
    project = ""
    for n, word in enumerate(args):
        if word in ("-p", "--project") and n + 1 < len(args):
            found = _path(args[n + 1])
            project = found if found in dirs else posixpath.dirname(found)
        elif not word.startswith("-") and (n == 0 or args[n - 1] not in ("-p", "--project")) \
                and word.endswith((".ts", ".tsx")):
            return "tsc compiles the files it is given"
    sources = sorted(p for p in tree if p.endswith((".ts", ".tsx")) and not p.endswith(".d.ts")
                     and _within(p, project) and not _skipped(p))
    if not sources:
        return f"no TypeScript source under {project or 'the root'} to plant a tripwire beside"
    directory = posixpath.dirname(sources[0])
    content = (f"export const bakeoff_{token}: number = "
               "\"bakeoff tripwire: must not compile\";\n").encode()
    return Tripwire("tsc", (posixpath.join(directory, f"bakeoff_{token}.ts") if directory
                            else f"bakeoff_{token}.ts",), content, token)


def _go(args: list[str], tree: Mapping[str, Entry], dirs: set[str],
        token: str) -> Tripwire | str:
    """A type error in the first package the command names (`./...`: the first one)."""
    words = [w for w in args if not w.startswith("-")] or ["."]
    for word in words:
        recursive = word.endswith("/...")
        root = _path(word.removesuffix("/...") or ".")
        if root not in dirs:
            continue
        for path in sorted(tree):
            directory = posixpath.dirname(path)
            if not path.endswith(".go") or path.endswith("_test.go") or _skipped(path) or \
                    (directory != root and not (recursive and _within(directory, root))):
                continue
            text = _text(tree.get(path))
            package = _GO_PACKAGE.search(text)
            if package is None or _GO_BUILD.search(text):
                continue
            content = (f"package {package.group(1)}\n\nvar bakeoff{token.upper()} int = "
                       "\"bakeoff tripwire: must not compile\"\n").encode()
            name = f"zz_bakeoff_{token}.go"
            return Tripwire("go", (posixpath.join(directory, name) if directory else name,),
                            content, token)
    return "no Go package the command names to plant a tripwire in"


def _cargo(args: list[str], tree: Mapping[str, Entry], token: str) -> Tripwire | str:
    """A binary target that does not compile, in the package the command builds."""
    if any(w in ("--lib", "--bin", "--bins", "--example", "--test", "--bench") for w in args):
        return "the command selects its cargo targets"
    wanted = next((args[n + 1] for n, w in enumerate(args[:-1]) if w in ("-p", "--package")),
                  None)
    packages = []
    for path in sorted(tree):
        if posixpath.basename(path) != "Cargo.toml" or _skipped(path):
            continue
        text = _text(tree.get(path))
        if "[package]" in text:
            name = _CARGO_NAME.search(text.split("[package]", 1)[1])
            packages.append((posixpath.dirname(path), name.group(1) if name else ""))
    chosen = next((d for d, n in packages if n == wanted), None) if wanted else \
        next((d for d, _ in packages if d == ""), packages[0][0] if packages else None)
    if chosen is None:
        return "no cargo package the command builds to plant a tripwire in"
    content = (f"fn main() {{\n    let _bakeoff_{token}: i32 = "
               "\"bakeoff tripwire: must not compile\";\n}\n").encode()
    path = posixpath.join(chosen, f"src/bin/bakeoff_{token}.rs")
    return Tripwire("cargo", (path,), content, token)


def _node(args: list[str], dirs: set[str], token: str) -> Tripwire | str:
    names = tuple(f"bakeoff_{token}{suffix}" for suffix in (".js", ".cjs", ".mjs"))
    globbed = _glob(args, dirs, names)
    if globbed is None:
        return "node --check checks the file it is given, and no argument is a glob"
    return Tripwire("node", (globbed,), f"function bakeoff_{token}( {{\n".encode(), token)


def _within(path: str, directory: str) -> bool:
    return directory == "" or path == directory or path.startswith(directory + "/")


def _skipped(path: str) -> bool:
    return any(part in _SKIP or part.startswith((".", "_")) for part in path.split("/")[:-1])


def _text(entry: Entry | None) -> str:
    if entry is None or entry.kind is Kind.SYMLINK or not entry.held:
        return ""
    return entry.data.decode("utf-8", "replace")


# -- what a tripwire run showed ----------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One tripwire run, as its record says it ended."""

    sample: str
    exit_code: int | None
    planted: frozenset[str] = frozenset()  # the names of its tripwires
    named: frozenset[str] = frozenset()  # those its output names
    usable: bool = True  # it ended on its own with the command's status (no timeout,
    #                      OOM, rig error, 126/127)
    truncated: bool = False  # the kept log leaves part of the output out
    after: bool = False  # steps of the command ran before the tool's
    strict: bool = False  # the tool has no configuration of its own (compileall): any
    #                       tripwire it did not name, it did not see

    @property
    def tripped(self) -> bool:
        return self.usable and self.exit_code not in (None, 0)


@dataclass(frozen=True)
class Finding:
    """What a check's tripwire showed for the samples of one arm: `blind` (the tool did
    not see the planted files on the arm's tree, as it did on the base's) or `unguarded`
    (the tripwire says nothing); neither: the tool saw them, as planted."""

    sample: str = ""  # the arm's tripwire sample
    blind: str | None = None
    unguarded: str | None = None

    def as_record(self) -> dict[str, str | None]:
        return {"sample": self.sample, "blind": self.blind, "unguarded": self.unguarded}


AFTER = ("steps of the command run before its tool: code of the arm's they run could "
         "hide its own files from the tool and let the planted ones be seen")


def finding(arm: Run, base: Run | None) -> Finding | None:
    """The arm's run against the base's (None: the base's run is needed). Blind: exit 0
    where the base's failed, or a tripwire unnamed where the base's run named the one of
    the same directory. As planted after other steps: unguarded all the same (`AFTER`)."""
    found = _finding(arm, base)
    if found is None or not arm.after or found.blind or found.unguarded:
        return found
    return dataclasses.replace(found, unguarded=AFTER)


def _finding(arm: Run, base: Run | None) -> Finding | None:
    if not arm.usable:
        return Finding(arm.sample, unguarded=f"the tripwire run {arm.sample} did not end "
                                             "with the command's own status: it says nothing")
    if arm.tripped and (arm.named == arm.planted or arm.truncated):
        return Finding(arm.sample)
    if base is None:
        return None
    if not base.tripped:
        return Finding(arm.sample, unguarded=(
            f"files that must make the check fail did not, on the base either "
            f"({base.sample}, exit {base.exit_code}): the tripwire says nothing for it"))
    against = f"on the base it failed (exit {base.exit_code}, {base.sample})"
    if not arm.tripped:
        return Finding(arm.sample, blind=f"with files that must make it fail planted, the "
                                         f"check exited 0 ({arm.sample}); {against}")
    # What the tool does not name on the base says nothing; compileall names every file
    # it sees (its scope is the command's, which the plan honours), so when it named all
    # of the base's, each of the arm's it did not name was hidden from it.
    known = arm.planted if arm.strict and base.named == base.planted else base.named
    unseen = sorted((known & arm.planted) - arm.named)
    if not unseen:
        return Finding(arm.sample)
    shown = ", ".join(unseen[:3]) + (f" and {len(unseen) - 3} more" if len(unseen) > 3 else "")
    return Finding(arm.sample, blind=(
        f"with files that must make it fail planted, the check failed (exit "
        f"{arm.exit_code}) without naming {shown} ({arm.sample}), which the base's run "
        f"named; {against}: its tool did not see them"))


def run_of(record: SampleRecord) -> Run:
    """What a tripwire run's record says it came to."""
    seen = (record.canaries or {}).get("tripwire")
    seen = seen if isinstance(seen, dict) else {}
    paths, named = seen.get("paths"), seen.get("named")
    usable = (record.exit_code is not None and record.exit_code not in (126, 127)
              and record.rig_error is None and not record.timed_out
              and not record.oom_killed and not record.outlived)
    return Run(record.sample, record.exit_code,
               frozenset(posixpath.basename(str(p)) for p in paths)
               if isinstance(paths, list) else frozenset(),
               frozenset(str(n) for n in named) if isinstance(named, list) else frozenset(),
               usable, record.truncated_bytes > 0, bool(seen.get("after")),
               seen.get("tool") == "compileall")
