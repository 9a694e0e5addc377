"""The suite's own measures (issue 35): every run prints its slowest tests, and a
distributed run how its workers spent it (tests/schedule.py)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tests.schedule import Schedule

ROOT = Path(__file__).resolve().parents[2]


def test_every_run_prints_its_slowest_tests() -> None:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"][
        "ini_options"]["addopts"]
    assert re.search(r"(^| )--durations=([1-9]\d*)( |$)", options), options


def test_each_worker_s_tests_end_and_idle_time_and_the_makespan_are_counted() -> None:
    schedule = Schedule(began=100.0)
    schedule.add("gw1", "tests/integration/test_b.py::test_x", 30.0, at=140.0)
    schedule.add("gw0", "tests/integration/test_a.py::test_x", 50.0, at=155.0)
    schedule.add("gw0", "tests/integration/test_a.py::test_x", 0.5, at=155.5)  # teardown
    schedule.add("gw0", "tests/unit/test_c.py::test_y", 1.0, at=160.0)
    assert schedule.lines() == [
        "gw0: 2 files, tests 52 s, ended at 60 s (idle 8 s before, 0 s after)",
        "gw1: 1 files, tests 30 s, ended at 40 s (idle 10 s before, 20 s after)",
        "makespan 60 s"]


def test_a_run_without_workers_says_nothing() -> None:
    assert Schedule(began=0.0).lines() == []
