"""What a JavaScript runner's command selects: the files it runs and the test names it
keeps (`node --test`, vitest, jest), so the canaries go only where the command goes.

`read` follows the command as the shell and the runner would: `cd DIR &&` steps, an
`npm|yarn|pnpm test` script (the base's package.json: harness), `npx`, a runner reached
by path (`node_modules/.bin/jest`), the runner's options that take a value, file, directory
and glob arguments, name filters (`--test-name-pattern`, `--test-skip-pattern`, `-t`,
`--testNamePattern`). `runs_file` and `keeps_name` then say whether a file the rig plants
would run and a test name it gives would be kept; None when the rig cannot tell (a name
pattern that is no regular expression Python reads the same way): the caller plants
nothing it cannot predict.
Pure: the command and a few files' text in, never docker.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from rig.guards import shell

WORK = "/work"  # the sample's tree root (runner.containers.sandbox.WORKDIR)
_SCRIPTS = ("npm", "yarn", "pnpm")
# Options that take a value (as `--opt value` or `--opt=value`), per runner.
_VALUED = {
    "node-test": {"--test-name-pattern", "--test-skip-pattern", "--test-reporter",
                  "--test-reporter-destination", "--require", "-r", "--import", "--loader",
                  "--experimental-loader", "--test-concurrency", "--test-timeout",
                  "--test-shard", "--env-file", "--conditions", "-C", "--input-type",
                  "--test-isolation", "--test-coverage-include", "--test-coverage-exclude",
                  "--watch-path", "--title", "--stack-size", "--max-old-space-size"},
    "vitest": {"-t", "--testNamePattern", "--reporter", "--config", "-c", "--project",
               "--root", "-r", "--dir", "--environment", "--pool", "--shard", "--outputFile",
               "--exclude", "--maxWorkers", "--minWorkers", "--mode", "--testTimeout",
               "--workspace", "--sequence.seed", "--coverage.provider", "--bail", "--retry"},
    "jest": {"-t", "--testNamePattern", "--config", "-c", "--testPathPattern",
             "--testPathIgnorePatterns", "--reporters", "--roots", "--rootDir",
             "--selectProjects", "--shard", "--maxWorkers", "-w", "--testTimeout",
             "--outputFile", "--testMatch", "--testRegex", "--env", "--testEnvironment",
             "--bail", "--seed"},
}
_NAMES = {"--test-name-pattern", "-t", "--testNamePattern"}
_SKIPS = {"--test-skip-pattern"}
_PATHS = {"--testPathPattern"}
_REPORTERS = {"--test-reporter", "--reporter", "--reporters"}
_DESTINATIONS = {"--test-reporter-destination"}  # node: the n-th reporter's, in order


@dataclass(frozen=True)
class Selection:
    """One runner invocation: where it starts, what it was given."""

    runner: str
    cwd: str = ""  # repo-relative
    args: tuple[str, ...] = ()  # files, directories, globs (node); path filters (vitest, jest)
    names: tuple[str, ...] = ()  # test-name patterns: a test is kept when one matches
    skips: tuple[str, ...] = ()  # test-skip patterns: a test is dropped when one matches
    direct: bool = False  # `node FILE` without --test: that one file runs
    reporters: tuple[str, ...] = ()
    destinations: tuple[str, ...] = ()

    def printed(self) -> tuple[str, ...]:
        """The reporters whose output the rig reads (node's without a destination, or
        with stdout or stderr as theirs)."""
        where = (*self.destinations, *["stdout"] * len(self.reporters))
        return tuple(r for r, to in zip(self.reporters, where, strict=False)
                     if to in ("stdout", "stderr"))


def read(runner: str, command: str, text_of: Mapping[str, str]) -> Selection | None:
    """The runner's invocation in `command` (its last step that starts it), or None when
    the command does not show one the rig can follow."""
    return _steps(runner, command, "", text_of, depth=0)


def _steps(runner: str, command: str, cwd: str, text_of: Mapping[str, str],
           depth: int) -> Selection | None:
    found: Selection | None = None
    for step in shell.steps(command):  # `&&`, `||`, `;`, a pipe: each a command
        words = shell.words(step)
        if words is None:
            return None
        if words[:1] == ["cd"] and len(words) == 2:
            cwd = _resolve(cwd, words[1])
            continue
        here = _invocation(runner, words, cwd, text_of, depth)
        found = here or found
    return found


def _invocation(runner: str, words: list[str], cwd: str, text_of: Mapping[str, str],
                depth: int) -> Selection | None:
    if not words:
        return None
    program, rest = posixpath.basename(words[0]), words[1:]
    if program == "npx" and rest:
        rest = [w for w in rest if w not in ("--no-install", "--yes", "-y", "--offline")]
        program, rest = posixpath.basename(rest[0]) if rest else "", rest[1:]
    if program in _SCRIPTS and depth < 3:
        return _script(runner, rest, cwd, text_of, depth)
    if runner == "node-test" and program == "node":
        return _options(runner, rest, cwd, direct="--test" not in rest)
    if runner in ("vitest", "jest") and program == runner:
        if runner == "vitest" and rest[:1] and rest[0] in ("run", "watch", "dev", "related"):
            rest = rest[1:]
        return _options(runner, rest, cwd)
    return None


def _script(runner: str, rest: list[str], cwd: str, text_of: Mapping[str, str],
            depth: int) -> Selection | None:
    """`npm test [-- ARGS]`, `npm run test:unit`, `npm test -w packages/a` (npm's
    workspace, pnpm's `-C DIR`): the package.json script, in its directory, ARGS
    appended."""
    rest, cwd = _package_dir(rest, cwd)
    if rest[:1] == ["run"] or rest[:1] == ["run-script"]:
        rest = rest[1:]
    if not rest:
        return None
    name, extra = ("test" if rest[0] == "t" else rest[0]), rest[1:]
    if extra[:1] == ["--"]:
        extra = extra[1:]
    try:
        scripts = json.loads(text_of.get(_join(cwd, "package.json"), "")).get("scripts", {})
    except (ValueError, AttributeError):
        return None
    script = scripts.get(name) if isinstance(scripts, dict) else None
    if not isinstance(script, str):
        return None
    tail = " ".join(shlex.quote(w) for w in extra)
    return _steps(runner, f"{script} {tail}".strip(), cwd, text_of, depth + 1)


_DIRS = ("--workspace", "-w", "--prefix", "-C", "--dir")


def _package_dir(rest: list[str], cwd: str) -> tuple[list[str], str]:
    """The words without a package manager's directory option, and the directory."""
    kept: list[str] = []
    at = 0
    while at < len(rest):
        option, eq, value = rest[at].partition("=")
        if option in _DIRS and (eq or at + 1 < len(rest)):
            if not eq:
                value, at = rest[at + 1], at + 1
            cwd = _resolve(cwd, value)
        else:
            kept.append(rest[at])
        at += 1
    return kept, cwd


def _options(runner: str, rest: list[str], cwd: str, direct: bool = False) -> Selection:
    valued = _VALUED[runner]
    args: list[str] = []
    names: list[str] = []
    skips: list[str] = []
    reporters: list[str] = []
    destinations: list[str] = []
    at = 0
    while at < len(rest):
        word = rest[at]
        at += 1
        if direct and args:
            break  # `node FILE ARGS...`: the rest are the program's
        if not word.startswith("-") or word == "-":
            args.append(word)
            continue
        option, eq, value = word.partition("=")
        if not eq and option in valued and at < len(rest):
            value, at = rest[at], at + 1
        elif not eq:
            continue
        for keys, into in ((_NAMES, names), (_SKIPS, skips), (_REPORTERS, reporters),
                           (_PATHS, args), (_DESTINATIONS, destinations)):
            if option in keys:
                into.append(value)
    return Selection(runner, cwd, tuple(args), tuple(names), tuple(skips), direct,
                     tuple(reporters), tuple(destinations))


def _resolve(cwd: str, path: str) -> str:
    joined = posixpath.normpath(posixpath.join(cwd, path.removeprefix(WORK + "/")))
    return "" if joined in (".", "/") else joined.lstrip("/")


def _join(cwd: str, name: str) -> str:
    return posixpath.join(cwd, name) if cwd else name


# -- what runs --------------------------------------------------------------------------


def runs_file(selection: Selection, path: str) -> bool:
    """Whether the runner runs the test file `path` (repo-relative; named as its own test
    files are: the caller plants only files of the runner's naming)."""
    cwd = selection.cwd
    if cwd and not path.startswith(cwd + "/"):
        return False
    if "node_modules" in path.split("/"):
        return False
    if selection.runner == "node-test":
        return _node_runs(selection, path)
    absolute = f"{WORK}/{path}"
    if selection.runner == "vitest":  # filters: substrings of the file's path
        return not selection.args or any(a.removeprefix("./") in absolute
                                         for a in selection.args)
    for pattern in selection.args:  # jest: regular expressions on the absolute path
        try:
            if re.search(pattern, absolute):
                return True
        except re.error:
            return False
    return not selection.args


_NODE_NAMED = re.compile(r"^(?:test|test-.+|.+[-_.]test)\.[cm]?js$")


def node_default(path: str) -> bool:
    """node's own choice of test files in a directory it searches: a `.js`, `.cjs` or
    `.mjs` file named as a test, or any under a directory named `test` (node 18 to 24)."""
    name = posixpath.basename(path)
    return bool(_NODE_NAMED.match(name)) or (
        name.endswith((".js", ".cjs", ".mjs")) and "test" in path.split("/")[:-1])


def _node_runs(selection: Selection, path: str) -> bool:
    inside = path[len(selection.cwd) + 1:] if selection.cwd else path
    if not selection.args:
        return not selection.direct and node_default(inside)
    for arg in selection.args[:1] if selection.direct else selection.args:
        target = _resolve(selection.cwd, arg)
        if path == target:
            return True
        if not selection.direct and path.startswith(target + "/"):
            return node_default(path[len(target) + 1:]) or node_default(inside)
        if not selection.direct and _glob(target).fullmatch(path):
            return True
    return False


def _glob(pattern: str) -> re.Pattern[str]:
    """A shell or node glob (`*`, `?`, `**/`, `{a,b}`, `?(x|y)`) as a regular expression."""
    out, at = "", 0
    while at < len(pattern):
        char = pattern[at]
        if pattern.startswith("**/", at):
            out, at = out + "(?:.*/)?", at + 3
            continue
        if pattern.startswith("**", at):
            out, at = out + ".*", at + 2
            continue
        if pattern.startswith("?(", at) and ")" in pattern[at:]:
            end = pattern.index(")", at)
            out += "(?:" + "|".join(map(re.escape, pattern[at + 2:end].split("|"))) + ")?"
            at = end + 1
            continue
        if char == "{" and "}" in pattern[at:]:
            end = pattern.index("}", at)
            out += "(?:" + "|".join(map(re.escape, pattern[at + 1:end].split(","))) + ")"
            at = end + 1
            continue
        out += {"*": "[^/]*", "?": "[^/]"}.get(char, re.escape(char))
        at += 1
    return re.compile(out)


def keeps_name(selection: Selection, name: str) -> bool | None:
    """Whether the runner's name filters keep a test called `name` (None: a pattern the
    rig cannot read the way the runner does)."""
    try:
        kept = not selection.names or any(_js_regex(p).search(name) for p in selection.names)
        return kept and not any(_js_regex(p).search(name) for p in selection.skips)
    except re.error:
        return None


def _js_regex(pattern: str) -> re.Pattern[str]:
    """A JavaScript pattern (`/re/flags` or plain) as Python reads it; a construct the two
    read differently raises re.error."""
    flags = 0
    found = re.fullmatch(r"/(.*)/([a-z]*)", pattern, re.DOTALL)
    if found:
        pattern = found.group(1)
        flags = re.IGNORECASE if "i" in found.group(2) else 0
    if re.search(r"\(\?<[=!]|\\[pPk]|\(\?<\w", pattern):  # lookbehind, classes, named groups
        raise re.error("not read as JavaScript reads it")
    return re.compile(pattern, flags)
