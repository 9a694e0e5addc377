"""CPU of checking one object against the Kubernetes 1.37 schemas, as the emulator of the
API checks every object it is sent: the library's call (`kubernetes_validate.validate`,
which parses the schema files and builds a validator each time) against the tests' own
(`tests/unit/kube_schema.py`, a validator made once per kind), side by side, alternating,
in one process.

    .venv/bin/python bench/kube_schema.py [--repeat N]

The objects are the golden ones of tests/unit/test_kube_objects.py (a sample's Pod, an
arm's sandbox Pod, a claim, the policies, ...). Prints the median CPU milliseconds per
object of each and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import kubernetes_validate

from tests.unit import kube_schema
from tests.unit.test_kube_objects import flat, made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    repeat = parser.parse_args().repeat
    objects = [one for found in made().values() for one in flat(found)]
    ways = {"library": lambda one: kubernetes_validate.validate(one, "1.37.0", strict=True),
            "once per kind": kube_schema.validate}
    for check in ways.values():  # the first call of each, imports and caches, not counted
        check(objects[0])
    took: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(repeat):
        for name, check in ways.items():
            started = time.process_time()
            for one in objects:
                check(one)
            took[name].append((time.process_time() - started) / len(objects) * 1000)
    medians = {name: statistics.median(values) for name, values in took.items()}
    print(f"{len(objects)} objects, {repeat} rounds each, alternating")
    for name, value in medians.items():
        print(f"{name:14} {value:6.2f} ms CPU per object (median)")
    print(f"ratio          {medians['once per kind'] / medians['library']:.2f}")


if __name__ == "__main__":
    main()
