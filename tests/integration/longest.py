"""The integration modules that take longest, longest first, with their seconds measured
alone (one process, on this 2-core machine while other suites ran: docs/benchmarks.md,
"The suite's slowest tests").

`make test` runs two workers a module each (`--dist loadfile`). xdist's default queue
puts the modules with the fewest tests last, and these hold one to five tests each (the
browser example was the 121st of 159 files), so how evenly the two workers end depended
on how long the last few ran. `--no-loadscope-reorder` keeps the collection's order and
`conftest.py` puts these first, longest first: the many short modules (the unit tests
last) fill the other worker and the end. It shortens no test: the order is only a guard
against a long module starting late (modelled: 0 to 90 s of the suite's wall time).
"""

from __future__ import annotations

LONGEST_FIRST: dict[str, int] = {
    "test_example_browser.py": 546,
    "test_typescript_project.py": 214,
    "test_cross_agents.py": 160,
    "test_demo.py": 150,
    "test_engine_outage.py": 141,
    "test_stacks.py": 126,
    "test_kill_points.py": 106,
    "test_ratchets.py": 81,
    "test_resume_services.py": 78,
    "test_real_agents.py": 69,
    "test_kube_browser.py": 66,
    "test_lifecycle.py": 65,
    "test_verdict_suite.py": 61,
}


def rank(path: str) -> int:
    """Where a test file's module starts: a listed integration module at its place in
    `LONGEST_FIRST`, every other file after them, in the collection's order."""
    folder, _, name = path.rpartition("/")
    order = list(LONGEST_FIRST)
    listed = folder.endswith("tests/integration") and name in LONGEST_FIRST
    return order.index(name) if listed else len(order)
