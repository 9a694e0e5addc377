"""The whole suite's hooks: how a distributed run's workers spent it (tests/schedule.py),
printed after the slowest tests (`--durations`, pyproject.toml); a unit test's time limit."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.schedule import Schedule

SCHEDULE = Schedule(time.monotonic())
# A unit test runs no container and takes under a second: past this it hangs (a thread
# waiting on an emulator, a socket never answered) and fails alone, with its stacks,
# instead of holding its worker to the suite's end (pyproject.toml's `timeout`).
UNIT_TIMEOUT_S = 120
UNIT = Path(__file__).parent / "unit"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(UNIT) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(UNIT_TIMEOUT_S))


def pytest_sessionstart(session: pytest.Session) -> None:
    SCHEDULE.began = time.monotonic()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """On the controller of `-n N` every report names its worker (xdist's `report.node`);
    in a worker or a run without xdist none does, and nothing is counted."""
    node = getattr(report, "node", None)
    if node is not None:
        SCHEDULE.add(node.gateway.id, report.nodeid, report.duration, time.monotonic())


@pytest.hookimpl(trylast=True)  # after the slowest tests
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = SCHEDULE.lines()
    if lines:
        terminalreporter.write_sep("=", "the workers' schedule (tests/schedule.py)")
        for line in lines:
            terminalreporter.write_line(line)
