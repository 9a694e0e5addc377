"""How the workers of a `pytest -n N` run spent it (issue 35: `make test` in 20 minutes):
per worker, the seconds its tests took (setup, call and teardown), when its last test
ended, counted from the session's start, and what it had no test to run. Printed at the
end of every distributed run (tests/conftest.py), beside the slowest tests: the balance
of the two workers is measured on each run, never modelled. The run's makespan is the
last worker's end; a worker that ended long before it is the schedule's loss."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Worker:
    busy: float = 0.0   # the seconds its tests' phases took
    ended: float = 0.0  # its last report, seconds after the session began
    files: set[str] = field(default_factory=set)


@dataclass
class Schedule:
    began: float
    workers: dict[str, Worker] = field(default_factory=dict)

    def add(self, worker: str, nodeid: str, seconds: float, at: float) -> None:
        """One phase of one test (setup, call or teardown) a worker reported at `at`."""
        found = self.workers.setdefault(worker, Worker())
        found.busy += seconds
        found.ended = max(found.ended, at - self.began)
        found.files.add(nodeid.split("::")[0])

    def lines(self) -> list[str]:
        """A line per worker, then the makespan and what the first to end waited."""
        if not self.workers:
            return []
        makespan = max(w.ended for w in self.workers.values())
        said = [f"{name}: {len(w.files)} files, tests {w.busy:.0f} s, ended at {w.ended:.0f} s"
                f" (idle {w.ended - w.busy:.0f} s before, {makespan - w.ended:.0f} s after)"
                for name, w in sorted(self.workers.items())]
        return [*said, f"makespan {makespan:.0f} s"]
