"""Parsers of test-runner output, one module per output format (never per repository).

Each module exposes `parse(text) -> ParseResult` and `usage_error(exit_code, text) ->
bool`; `PARSERS` maps the manifest's `parser = "..."` names to them. Pure: text in,
typed result out, no docker, no git, no files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rig.parsers import cargo, exit_code, go_test, jest, junit, node_test, pytest, vitest
from rig.parsers.base import Counts, ParseResult, TestCase, TestStatus

__all__ = [
    "PARSERS",
    "Counts",
    "ParseResult",
    "Parser",
    "TestCase",
    "TestStatus",
    "UnknownParserError",
    "get_parser",
]


@dataclass(frozen=True)
class Parser:
    """One output format: how to read it and what its runner's exit codes mean.

    usage_error(exit_code, text): the runner rejected its command line; either argument
        may be absent (None / ""). `parse` fills `ParseResult.usage_error` from the text.
    no_tests_exit_codes: exit codes that mean "no tests were collected" (pytest: 5).
    """

    name: str
    parse: Callable[[str], ParseResult]
    usage_error: Callable[[int | None, str], bool]
    no_tests_exit_codes: frozenset[int] = frozenset()
    expects_tests: bool = True


class UnknownParserError(ValueError, KeyError):
    """A parser name no module handles; the message lists the known names."""

    def __init__(self, name: str) -> None:
        self.name = name
        known = ", ".join(sorted(PARSERS))
        super().__init__(f"unknown parser {name!r}: use one of {known}")

    def __str__(self) -> str:
        return str(self.args[0])


PARSERS: dict[str, Parser] = {
    "pytest": Parser(
        "pytest", pytest.parse, pytest.usage_error, no_tests_exit_codes=pytest.NO_TESTS_EXIT_CODES
    ),
    "cargo": Parser("cargo", cargo.parse, cargo.usage_error),
    "go-test": Parser("go-test", go_test.parse, go_test.usage_error),
    "node-test": Parser("node-test", node_test.parse, node_test.usage_error),
    "jest": Parser("jest", jest.parse, jest.usage_error),
    "vitest": Parser("vitest", vitest.parse, vitest.usage_error),
    "junit": Parser("junit", junit.parse, junit.usage_error),
    "exit-code": Parser("exit-code", exit_code.parse, exit_code.usage_error, expects_tests=False),
}


def get_parser(name: str) -> Parser:
    """The parser the manifest calls `name`; `UnknownParserError` lists the known names."""
    try:
        return PARSERS[name]
    except KeyError:
        raise UnknownParserError(name) from None
