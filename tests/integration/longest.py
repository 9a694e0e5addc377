"""The integration modules that take longest, longest first, with their seconds measured
alone (one process, this 2-core machine; docs/benchmarks.md, "The suite's slowest tests").

`make test` runs two workers a module each (`--dist loadfile`); xdist's default queue
puts the modules with the fewest tests last, and these hold one to five tests each, so a
worker started the browser example's ten minutes while the other had little left.
`--no-loadscope-reorder` keeps the collection's order, and `conftest.py` puts these
first in the order below: the longest start at once, the many short modules fill the
other worker and the end (longest processing time first).
"""

from __future__ import annotations

LONGEST_FIRST: dict[str, int] = {
    "test_example_browser.py": 600,
    "test_demo.py": 360,
    "test_typescript_project.py": 240,
    "test_real_agents.py": 105,
    "test_agent_judges.py": 97,
    "test_kill_points.py": 93,
    "test_engine_outage.py": 90,
    "test_ratchets.py": 90,
    "test_cross_agents.py": 80,
    "test_stacks.py": 80,
    "test_lifecycle.py": 78,
    "test_verdict_suite.py": 73,
    "test_resume_services.py": 60,
}


def rank(path: str) -> int:
    """Where a test file's module starts: a listed integration module at its place in
    `LONGEST_FIRST`, every other file after them, in the collection's order."""
    folder, _, name = path.rpartition("/")
    order = list(LONGEST_FIRST)
    listed = folder.endswith("tests/integration") and name in LONGEST_FIRST
    return order.index(name) if listed else len(order)
