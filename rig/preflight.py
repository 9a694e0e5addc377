"""Preflight: before any agent runs and before any sample, prove the rig can measure.

Every `requires` tool and every check's program must be on PATH in the prepared image,
and every command must parse as shell. What is missing is a rig error (exit 3) that
names the tool and the image — never a column of FAILs later.

What a command names (`command_files`) is the arm's in every sample unless protected:
`up` warns of each such file that is neither protected nor harness
(`unprotected_named`), since a grader's own script among them must be protected.
"""

from __future__ import annotations

import posixpath
import re
import subprocess
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from rig.errors import RigError
from rig.guards import harness, shell

SHELL_WORDS = frozenset({"cd", "export", "set", "exec", "env", "if", "for", "test", "[", "true",
                         "false", "while", "case", "!", "{", "(", "."})


class PreflightError(RigError):
    """The rig cannot measure: a tool is missing or a command does not parse (exit 3)."""

    def __init__(self, problems: Sequence[str], image: str) -> None:
        self.problems = list(problems)
        super().__init__(
            f"preflight failed for image {image}:\n  - " + "\n  - ".join(problems),
            hint="add the tools to the toolchain image (images/<name>/Dockerfile or "
                 "[toolchain].setup) and rebuild, or fix the command in the manifest")


@dataclass(frozen=True)
class Command:
    """One command the rig will run: where it comes from (for messages) and its text."""

    where: str  # e.g. "checks[tests].run", "changes[cap-horizon].success.run"
    text: str


def program_of(command: str) -> str | None:
    """The program a command runs first, when it is a plain PATH lookup."""
    words = shell.split(command)
    if words is None:
        return None
    words = [w for w in words if "=" not in w.split("/")[0]]  # skip VAR=value prefixes
    if not words or "/" in words[0] or words[0] in SHELL_WORDS:
        return None
    return words[0]


def syntax_problem(command: str) -> str | None:
    """Why `sh` cannot parse a command (`sh -n`: parse only, nothing runs), else None."""
    done = subprocess.run(["sh", "-n", "-c", command], capture_output=True, text=True,
                          timeout=10, check=False)
    if done.returncode == 0:
        return None
    return done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "does not parse"


def check(requires: Sequence[str], commands: Sequence[Command], image: str,
          missing: Callable[[tuple[str, ...]], tuple[str, ...]]) -> None:
    """Raise `PreflightError` naming every missing tool and every unparseable command.

    `missing(tools)` answers which of `tools` are not on PATH in the image (the runner
    asks docker); this module stays free of docker.
    """
    problems = [f"{c.where}: does not parse as shell: {why}"
                for c in commands if (why := syntax_problem(c.text)) is not None]
    wanted: dict[str, str] = {tool: "[toolchain].requires" for tool in requires}
    for command in commands:
        program = program_of(command.text)
        if program is not None:
            wanted.setdefault(program, f"the program of {command.where}")
    absent = missing(tuple(wanted))
    problems += [f"{tool} is not on PATH (needed by {wanted[tool]})" for tool in absent]
    if problems:
        raise PreflightError(problems, image)


_SHELL_WORD = re.compile(r"""[^\s'"&|;<>()=`]+""")
def command_files(command: str, paths: Collection[str]) -> set[str]:
    """The files of `paths` (a tree's) that a check's command names as a word: a script it
    runs (`sh scripts/check.sh`, `./run`, `python3 app.py`), a module it runs with `-m`
    (`python3 -m tools.lint`: tools/lint.py or tools/lint/__main__.py), a file it reads or
    measures (`grep -c TODO app.py`, `ruff check app.py`). Not a test file the runner is
    pointed at, not a directory (a word that names one is not a file of `paths`)."""
    found: set[str] = set()
    words = _SHELL_WORD.findall(command)
    here = ""  # where a `cd DIR` before it moved the command (`cd calc && python3 main.py`)
    for at, word in enumerate(words):
        if at and words[at - 1] == "cd":
            moved = posixpath.normpath(posixpath.join(here, word))
            here = "" if moved == "." else moved
        candidates = [posixpath.normpath(word.removeprefix("./"))]
        if at and words[at - 1] == "-m":
            module = word.replace(".", "/")
            candidates += [f"{module}.py", f"{module}/__main__.py"]
        candidates += [posixpath.normpath(posixpath.join(here, c)) for c in candidates if here]
        for candidate in candidates:
            if candidate.startswith(("..", "/")) or harness.is_test_file(candidate):
                continue
            if candidate in paths:
                found.add(candidate)
    return found


def named_test_files(command: str, paths: Collection[str]) -> list[str]:
    """The test files of `paths` a command points its runner at, as words
    (`pytest -q tests/test_x.py::test_y`, `cd svc && go test ./x_test.go`): what a
    change's success criterion runs, and so what its `protected` must hold."""
    found: set[str] = set()
    words = _SHELL_WORD.findall(command)
    here = ""
    for at, word in enumerate(words):
        if at and words[at - 1] == "cd":
            moved = posixpath.normpath(posixpath.join(here, word))
            here = "" if moved == "." else moved
        candidate = posixpath.normpath(posixpath.join(
            here, word.split("::", 1)[0].removeprefix("./")))
        if harness.is_test_file(candidate) and candidate in paths:
            found.add(candidate)
    return sorted(found)


def unprotected_named(command: str, paths: Collection[str],
                      protected: Collection[str]) -> list[str]:
    """The files of the base (`paths`) a check's command names that a sample takes from
    the ARM's tree: neither protected nor harness (both are the base's in every sample).
    Each measures the arm's version: a grader's own script among them belongs in the
    change's `protected`, or an arm can rewrite what its check runs."""
    return sorted(p for p in command_files(command, paths)
                  if p not in protected and not harness.is_harness(p))
