"""`make test`'s two-worker schedule replayed through xdist's own schedulers (issue 35).

    .venv/bin/python bench/suite_schedule.py --worker-seconds 3230 [--browser 300]

The suite's files and test counts come from `pytest --collect-only`, in `make test`'s
order (tests/integration/longest.py first); the modules of `LONGEST_FIRST` take their
measured seconds (the first test holds the module's shared run, 1 s each after it), the
unit tests 120 s, every other integration module an equal share of what is left of
`--worker-seconds` (CI's 3,722 tests in 26:55 on two workers: 3,230). Each order is
replayed through xdist's `LoadFileScheduling` or `LoadGroupScheduling` (the classes
`-n 2` uses, driven by a simulated clock): the makespan against its bound, half the
worker-seconds. A model of the times, not of the scheduler: the real balance of a run is
the schedule line every `pytest -n N` prints (tests/schedule.py).
"""

from __future__ import annotations

import argparse
import heapq
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from xdist.remote import Producer
from xdist.scheduler.loadfile import LoadFileScheduling
from xdist.scheduler.loadgroup import LoadGroupScheduling

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.longest import LONGEST_FIRST, rank  # noqa: E402

UNIT_S = 120.0
SPLIT = ("tests/integration/test_stacks.py", "tests/integration/test_lifecycle.py")


class Node:
    """A worker as the scheduler sees it: the indices it was sent, in order."""

    def __init__(self, number: int) -> None:
        self.gateway = SimpleNamespace(id=f"gw{number}")
        self.shutting_down = False
        self.queue: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.queue += indices

    def shutdown(self) -> None:
        self.shutting_down = True


def replay(tests: list[tuple[str, float]], scheduler: Any, reorder: bool) -> dict[str, float]:
    """Each worker's end: it runs what it was sent in order; each test that ends asks the
    scheduler for more, as xdist's controller does."""
    option = SimpleNamespace(loadscopereorder=reorder, maxfail=0)
    config = SimpleNamespace(option=option, getvalue=lambda key: ["2*popen"])
    schedule = scheduler(config, Producer("replay", enabled=False))
    nodes = [Node(0), Node(1)]
    ids = [nodeid for nodeid, _ in tests]
    for node in nodes:
        schedule.add_node(node)
        schedule.add_node_collection(node, ids)
    schedule.schedule()
    events: list[tuple[float, int, int]] = []
    ends = {node.gateway.id: 0.0 for node in nodes}
    for number, node in enumerate(nodes):
        _next(events, node, number, 0.0, tests)
    while events:
        at, number, index = heapq.heappop(events)
        node = nodes[number]
        ends[node.gateway.id] = at
        schedule.mark_test_complete(node, index, tests[index][1])
        _next(events, node, number, at, tests)
    return ends


def _next(events: list[tuple[float, int, int]], node: Node, number: int, at: float,
          tests: list[tuple[str, float]]) -> None:
    if node.queue:
        index = node.queue.pop(0)
        heapq.heappush(events, (at + tests[index][1], number, index))


def collected() -> Counter[str]:
    """Tests per file, in the collection's order."""
    listed = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                             "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True,
                            text=True, check=False).stdout
    return Counter(line.split("::")[0] for line in listed.splitlines() if "::" in line)


def timed(counts: Counter[str], worker_seconds: float, browser: float
          ) -> list[tuple[str, float]]:
    """Every test with its modelled seconds, in `make test`'s order."""
    measured = {f"tests/integration/{name}": float(seconds)
                for name, seconds in LONGEST_FIRST.items()}
    measured["tests/integration/test_example_browser.py"] = browser
    others = [f for f in counts if f.startswith("tests/integration/") and f not in measured]
    unit = sum(n for f, n in counts.items() if f.startswith("tests/unit/"))
    share = (worker_seconds - sum(measured.values()) - UNIT_S) / len(others)
    tests = []
    for path in sorted(counts, key=rank):
        n = counts[path]
        total = measured.get(path, share if path in others else UNIT_S * n / unit)
        first = total - (n - 1) if path in measured else total / n
        rest = (total - first) / (n - 1) if n > 1 else 0.0
        tests += [(f"{path}::{i}", first if i == 0 else rest) for i in range(n)]
    return tests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker-seconds", type=float, default=3230.0)
    parser.add_argument("--browser", type=float, default=LONGEST_FIRST[
        "test_example_browser.py"], help="the browser example's module, seconds")
    args = parser.parse_args()
    tests = timed(collected(), args.worker_seconds, args.browser)
    grouped = [(n if n.startswith(SPLIT) else f"{n}@{n.split('::')[0]}", s) for n, s in tests]
    bound = sum(s for _, s in tests) / 2
    for label, order, scheduler, reorder in (
            ("loadfile, longest first (make test)", tests, LoadFileScheduling, False),
            ("loadfile, xdist's reorder by test count", tests, LoadFileScheduling, True),
            ("loadgroup, stacks and lifecycle split per test", grouped, LoadGroupScheduling,
             False)):
        ends = replay(order, scheduler, reorder)
        print(f"{label}: workers end at {sorted(round(e) for e in ends.values())} s, "
              f"makespan {max(ends.values()):.0f} s, bound {bound:.0f} s")


if __name__ == "__main__":
    main()
