"""The one reader of shell commands (`rig.guards.shell`, issue 35): every shape a check's
command takes, read once, as every rule that reads a command (the canaries, the tripwires,
the Go and JavaScript selections, preflight) now reads it."""

from __future__ import annotations

import pytest

from rig.guards import shell

# command -> (its steps, each step's words without `VAR=value` prefixes: None = unreadable)
SHAPES: dict[str, tuple[list[str], list[list[str] | None]]] = {
    "pytest -q": (["pytest -q"], [["pytest", "-q"]]),
    "pytest -k 'a and b'": (["pytest -k 'a and b'"], [["pytest", "-k", "a and b"]]),
    'pytest -k "a b"': (['pytest -k "a b"'], [["pytest", "-k", "a b"]]),
    "cd sub && go test ./...": (["cd sub ", " go test ./..."],
                                [["cd", "sub"], ["go", "test", "./..."]]),
    "make build; make test": (["make build", " make test"],
                              [["make", "build"], ["make", "test"]]),
    "go test ./... | tee log": (["go test ./... ", " tee log"],
                                [["go", "test", "./..."], ["tee", "log"]]),
    "a || b": (["a ", " b"], [["a"], ["b"]]),
    "CI=1 FOO=x npm test": (["CI=1 FOO=x npm test"], [["npm", "test"]]),
    "sh -c 'pytest -q && echo ok'": (["sh -c 'pytest -q ", " echo ok'"], [None, None]),
    "sh -c 'pytest -q'": (["sh -c 'pytest -q'"], [["sh", "-c", "pytest -q"]]),
    "pytest 'unclosed": (["pytest 'unclosed"], [None]),
    "server & pytest": (["server ", " pytest"], [["server"], ["pytest"]]),
}


@pytest.mark.parametrize("command", sorted(SHAPES))
def test_each_shape_is_cut_into_its_steps_and_words(command: str) -> None:
    steps, words = SHAPES[command]
    assert shell.steps(command) == steps
    assert [shell.words(step) for step in steps] == words


def test_a_lone_ampersand_cuts_a_step_only_when_asked() -> None:
    assert shell.steps("a & b", background=False) == ["a & b"]
    assert shell.steps("a && b", background=False) == ["a ", " b"]


@pytest.mark.parametrize(("command", "arguments"), [
    ("go test -v ./calc", ["go", "test", "./calc"]),
    ("pytest 'tests/a b.py' -q", ["pytest", "tests/a b.py"]),
    ("pytest 'unclosed", []),
])
def test_arguments_are_the_words_that_are_not_options(command: str, arguments: list[str]) -> None:
    assert shell.arguments(command) == arguments


@pytest.mark.parametrize(("command", "simple"), [
    ("pytest -q", True), ("a && b", False), ("a; b", False), ("a | b", False),
    ("a & b", False), ("echo `x`", False), ("echo $(x)", False), ("a\nb", False),
])
def test_simple_is_one_command(command: str, simple: bool) -> None:
    assert shell.simple(command) is simple


@pytest.mark.parametrize(("command", "runner", "may"), [
    ("go test ./...", "go-test", True),
    ("cd sub && go test ./...", "go-test", True),
    ("go test ./a && go test ./b", "go-test", False),  # a failing canary would skip ./b
    ("go test ./... | tee log", "go-test", False),
    ("CI=1 npm test", "node-test", True),
    ("go vet ./... ; go test ./...", "go-test", False),
])
def test_may_fail_reads_the_list_once(command: str, runner: str, may: bool) -> None:
    assert shell.may_fail(command, runner) is may
