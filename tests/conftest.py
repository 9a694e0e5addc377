"""The whole suite's hooks: how a distributed run's workers spent it (tests/schedule.py),
printed after the slowest tests (`--durations`, pyproject.toml)."""

from __future__ import annotations

import time

import pytest

from tests.schedule import Schedule

SCHEDULE = Schedule(time.monotonic())


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
