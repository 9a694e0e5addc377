"""`bakeoff-sandbox init [DIR]`: the questions of a first bake-off, on a terminal or as
flags (registered in runner.cli). It asks only when stdin is a terminal and --yes is
not given; otherwise every answer is a flag or a guess, and a question with neither is
an error naming its flag."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from runner.cli.terminal import out
from runner.commands.init import InitFlags, Question, init, must_answer


def init_command(
    directory: Annotated[Path, typer.Argument(help="your repository (its root)")] = Path("."),
    test: Annotated[str | None, typer.Option("--test", help="the project's test command")
                    ] = None,
    success: Annotated[str | None, typer.Option(
        "--success", help="the command running the failing test that defines success")] = None,
    parser: Annotated[str | None, typer.Option(
        "--parser", help="its output's parser (default: guessed from the command)")] = None,
    image: Annotated[str | None, typer.Option(
        "--image", help="the toolchain image (default: guessed from the repository)")] = None,
    arm: Annotated[list[str] | None, typer.Option(
        "--arm", help="an arm's agent, the control first (repeatable)")] = None,
    model: Annotated[list[str] | None, typer.Option(
        "--model", help="the model of each non-command arm, in order (repeatable)")] = None,
    protected: Annotated[list[str] | None, typer.Option(
        "--protected", help="a test file to protect (repeatable; default: the test files "
                            "the success command names)")] = None,
    brief: Annotated[str | None, typer.Option("--brief", help="the brief's text")] = None,
    brief_file: Annotated[Path | None, typer.Option(
        "--brief-file", help="a file holding the brief")] = None,
    out_dir: Annotated[Path | None, typer.Option(
        "--out", help="where to write (default: <repo>-bakeoff beside the repository)")
                       ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="ask nothing: flags and "
                                      "guesses only")] = False,
) -> None:
    """Write a manifest for your repository that `up` accepts as it is (beside it)."""
    if brief_file is not None:
        brief = brief_file.read_text(encoding="utf-8")
    flags = InitFlags(test=test, success=success, parser=parser, image=image,
                      arms=tuple(arm or ()), models=tuple(model or ()),
                      protected=None if protected is None else tuple(protected),
                      brief=brief, out=out_dir)
    interactive = on_terminal() and not yes
    done = init(directory, flags, _prompt if interactive else must_answer)
    for path in done.written:
        out.print(f"wrote {path}", markup=False)
    out.print(f"next: {done.next_command}", markup=False, soft_wrap=True)


def on_terminal() -> bool:
    """Whether a person can answer: stdin is a terminal."""
    return sys.stdin.isatty()


def _prompt(question: Question) -> str:
    if question.default is None:
        return str(typer.prompt(question.text))
    return str(typer.prompt(question.text, default=question.default, show_default=True))
