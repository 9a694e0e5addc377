"""`init`: a manifest for the user's own repository that passes `up` as it is.

Every question has a flag and a guess (`runner.manifest.guess`); `ask` gets the question
and the default, and answers it (a terminal) or returns the default (`--yes`, no
terminal). What it writes goes into a folder BESIDE the repository (default
`<repo>-bakeoff/`): the manifest, the brief, and a script per scripted arm in its
agents_dir. The repository is not touched: no file to commit, nothing to exclude, so
`up`'s clean-tree rule holds at once.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from runner import workspace
from runner.errors import BadInputError
from runner.manifest import guess
from runner.manifest.answers import KNOWN_AGENTS, Answers, ArmAnswer, brief_text
from runner.manifest.loader import init_manifest_of
from runner.manifest.models import PARSER_NAMES
from runner.manifest.scaffold import experiment_name, write_setup

DEFAULT_ARMS = ("command", "command")


@dataclass(frozen=True)
class Question:
    """One question of init: its text, the guess (None: no default) and its flag."""

    text: str
    default: str | None
    flag: str


Ask = Callable[[Question], str]


@dataclass(frozen=True)
class InitFlags:
    """What the command line said; None (or empty) is a question still to ask."""

    test: str | None = None
    success: str | None = None
    parser: str | None = None
    image: str | None = None
    arms: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    protected: tuple[str, ...] | None = None
    brief: str | None = None
    out: Path | None = None
    change: str = "first-change"


@dataclass(frozen=True)
class Initialised:
    written: list[Path]
    manifest: Path

    @property
    def next_command(self) -> str:
        return f"bakeoff-sandbox up -f {shlex.quote(str(self.manifest))}"


def init(directory: Path, flags: InitFlags, ask: Ask) -> Initialised:
    """Ask what is not given, write the files beside the repository, say where."""
    repo = _repository(Path(directory).expanduser().absolute())
    base = workspace.run_git(repo, "rev-parse", "--abbrev-ref", "HEAD")
    files = set(workspace.files_at(repo, "HEAD"))
    out = (flags.out or init_manifest_of(repo).parent).expanduser().absolute()
    answers = questions(repo, files, flags, ask)
    answers = replace(answers, repo=os.path.relpath(repo, out), base=base if base != "HEAD"
                      else workspace.run_git(repo, "rev-parse", "HEAD"))
    brief = flags.brief if flags.brief is not None else ask(Question(
        "the brief: the symptom, and what must hold once solved (Enter: one written from "
        "the commands)", "", "--brief TEXT or --brief-file FILE")) or brief_text(answers)
    written = write_setup(out, answers, brief if brief.endswith("\n") else brief + "\n")
    return Initialised(written, written[0])


def questions(repo: Path, files: set[str], flags: InitFlags, ask: Ask) -> Answers:
    """Every answer but the brief, from the flags, else asked with its guess."""
    image = flags.image or ask(Question("the image (python, node, rust, go, or yours)",
                                        guess.guess_image(files), "--image NAME"))
    defaults = guess.defaults_for(image)
    test = flags.test or ask(Question("the project's test command", defaults.test,
                                      "--test CMD"))
    success = flags.success or ask(Question(
        "the command that runs the failing test defining success (it FAILS now and "
        "PASSES once solved)", None, "--success CMD"))
    parser = _parser(flags.parser or ask(Question(
        f"its parser ({', '.join(PARSER_NAMES)})", guess.guess_parser(success),
        "--parser NAME")))
    protected = flags.protected if flags.protected is not None else tuple(_words(ask(
        Question("the test files to protect (restored before every sample)",
                 " ".join(guess.guess_protected(success, files)), "--protected PATH"))))
    arms = _arms(flags, ask)
    return Answers(
        name=experiment_name(repo), repo=".", success=success, test=test, image=image,
        change=flags.change, test_parser=flags.parser or guess.guess_parser(test),
        success_parser=parser, setup=defaults.setup, requires=defaults.requires,
        protected=protected, arms=arms)


def _arms(flags: InitFlags, ask: Ask) -> tuple[ArmAnswer, ...]:
    agents = list(flags.arms) or _words(ask(Question(
        f"the arms, the control first ({', '.join(KNOWN_AGENTS)})", " ".join(DEFAULT_ARMS),
        "--arm AGENT")))
    unknown = [agent for agent in agents if agent not in KNOWN_AGENTS]
    if unknown:
        raise BadInputError(f"init: unknown agent(s) {', '.join(unknown)}",
                            hint=f"use {', '.join(KNOWN_AGENTS)}")
    models = list(flags.models)
    found: list[ArmAnswer] = []
    for at, agent in enumerate(agents):
        model = None
        if agent != "command":
            model = models.pop(0) if models else ask(Question(
                f"the model of arm {at} ({agent})", None, "--model MODEL"))
        found.append(ArmAnswer(_arm_id(agent, at, agents), agent, model, control=at == 0))
    if len(found) < 2:
        raise BadInputError("init: a bake-off needs two arms at least (the control first)",
                            hint="pass --arm twice, e.g. --arm command --arm claude-code")
    return tuple(found)


def _arm_id(agent: str, at: int, agents: Sequence[str]) -> str:
    """`control` for the first arm; else the agent's name (`command` arms: `scripted`),
    numbered when several arms share it."""
    if at == 0:
        return "control"
    name = "scripted" if agent == "command" else agent
    same = [i for i in range(1, len(agents)) if agents[i] == agent]
    return name if len(same) == 1 else f"{name}-{same.index(at) + 1}"


def _parser(name: str) -> str:
    if name not in PARSER_NAMES:
        raise BadInputError(f"init: unknown parser {name!r}",
                            hint=f"use one of: {', '.join(PARSER_NAMES)}")
    return name


def _words(text: str) -> list[str]:
    return text.replace(",", " ").split()


def _repository(directory: Path) -> Path:
    top = workspace.toplevel(directory)
    if top is None or top != directory.resolve():
        raise BadInputError(f"init: {directory} is not the root of a git repository",
                            hint=f"run init in your repository's root (git -C {directory} "
                                 "rev-parse --show-toplevel), or `git init` there and commit")
    if workspace.commit_of(top, "HEAD") is None:
        raise BadInputError(f"init: {top} has no commit yet",
                            hint=f"commit your project first: git -C {top} add -A && "
                                 f"git -C {top} commit -m 'initial'")
    return top


def must_answer(question: Question) -> str:
    """`Ask` without a terminal (or with --yes): the default, or the flag to pass."""
    if question.default is None:
        raise BadInputError(f"init: no answer for {question.text!r} and no terminal to ask",
                            hint=f"pass {question.flag}")
    return question.default
