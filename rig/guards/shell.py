"""Shell commands read, once: the one reader every rule that needs to read a check's
command uses (the canaries, the tripwires, the Go and JavaScript selections, preflight).

A command is a POSIX shell list. It is never run here: it is cut into its steps (`steps`:
`&&`, `||`, `;`, a pipe, a newline; `&` too unless asked not to), each step into words as
`sh` would (`split`: quotes honoured, None when they do not close), and the words a rule
does not want are dropped (`words`: `VAR=value` prefixes; `arguments`: options).
`sh -c '...'` stays one word: what runs inside it is not read. Pure: text in, words out.
"""

from __future__ import annotations

import posixpath
import re
import shlex

ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")  # a `VAR=value` prefix
_STEP = re.compile(r"&&|\|\||[;|&\n]")  # every command of a list or a pipeline
_STEP_IN_FOREGROUND = re.compile(r"&&|\|\||[;|\n]")  # the same, a lone `&` kept in a step
_LIST = re.compile(r"&&|\|\||[;|&\n`]|\$\(")  # anything that makes more than one command


def steps(command: str, background: bool = True) -> list[str]:
    """The commands of a list or a pipeline, in order (`background`: a lone `&` separates
    too). Quotes are not read: a separator inside them cuts as well."""
    return (_STEP if background else _STEP_IN_FOREGROUND).split(command)


def split(step: str) -> list[str] | None:
    """A step's words as `sh` reads them (quotes honoured); None when they do not close."""
    try:
        return shlex.split(step)
    except ValueError:
        return None


def words(step: str) -> list[str] | None:
    """A step's words without its `VAR=value` prefixes (or any such word); None when its
    quotes do not close."""
    found = split(step)
    return None if found is None else [w for w in found if not ASSIGNMENT.fullmatch(w)]


def arguments(command: str) -> list[str]:
    """Every word of a command that is not an option (none when its quotes do not close)."""
    return [w for w in split(command) or [] if not w.startswith("-")]


def may_fail(command: str, runner: str) -> bool:
    """A must-fail canary can be planted: the command is one simple command, or a list of
    `&&` steps of which only the LAST starts the runner (a failing canary then changes
    only the exit status, which `rig.guards.canary.exit_without` reads
    back; it never skips a later step)."""
    parts = command.split("&&")
    if not all(part.strip() and simple(part) for part in parts):
        return False
    return len(parts) == 1 or (_runs(parts[-1], runner)
                               and not any(_runs(part, runner) for part in parts[:-1]))


_SCRIPTS = ("npm", "yarn", "pnpm")


def _runs(step: str, runner: str) -> bool:
    """Whether one simple command starts `runner` (a package script named test counts)."""
    found = words(step)
    if not found:
        return False
    program, rest = posixpath.basename(found[0]), found[1:]
    script = program in _SCRIPTS and bool(rest) and (
        rest[0] in ("test", "t") or (rest[0] == "run" and len(rest) > 1
                                     and rest[1].startswith("test")))
    if runner == "node-test":
        return (program == "node" and "--test" in rest) or script
    if runner == "go-test":
        return program == "go" and rest[:1] == ["test"]
    if runner == "cargo":
        return program == "cargo" and bool(rest) and rest[0] in ("test", "t", "nextest")
    return script or runner in (program, *rest[:2])


def simple(command: str) -> bool:
    """One simple command: nothing a failing test could stop from running after it."""
    return _LIST.search(command) is None
