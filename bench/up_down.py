"""Time `up` and `down` for 1, 3 and 6 arms with warm images; print a table.

    .venv/bin/python bench/up_down.py [--repeat N]

Each size is measured N times (default 3) on a fresh throwaway repo with Postgres; the
table shows the median and the spread. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runner.commands import down as down_mod
from runner.commands import up as up_mod
from runner.containers import images
from runner.containers.engine import Engine
from runner.manifest import load_manifest
from tests.integration.helpers import CORE, PlainReporter, cleanup, make_target


def measure(engine: Engine, arms: int, work: Path) -> tuple[float, float]:
    loaded = load_manifest(make_target(work, [f"A{i}" for i in range(arms)]))
    try:
        started = time.perf_counter()
        up_mod.up(engine, loaded, options=CORE)
        up_s = time.perf_counter() - started
        started = time.perf_counter()
        down_mod.down(engine, loaded)
        return up_s, time.perf_counter() - started
    finally:
        cleanup(engine, loaded)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    engine = Engine()
    images.build(engine, ["base", "python", "postgres"], PlainReporter())  # warm
    print(f"{'arms':>4}  {'up median':>9}  {'up range':>13}  {'down median':>11}  "
          f"{'down range':>13}")
    for arms in (1, 3, 6):
        ups, downs = [], []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                up_s, down_s = measure(engine, arms, Path(tmp) / "repo")
            ups.append(up_s)
            downs.append(down_s)
        print(f"{arms:>4}  {statistics.median(ups):>8.2f}s  "
              f"{min(ups):>5.2f}-{max(ups):>5.2f}s  {statistics.median(downs):>10.2f}s  "
              f"{min(downs):>5.2f}-{max(downs):>5.2f}s", flush=True)


if __name__ == "__main__":
    main()
