"""CPU of one `python -m runner.cli --help` with the package compiled, and without, side by
side (interleaved, one run) under PYTHONDONTWRITEBYTECODE=1, as on these machines.

    .venv/bin/python bench/cli_start.py [--repeat N]

"Without" moves the package's `__pycache__` directories aside for that launch, so every
module of runner, rig and gateway is compiled from source (the standard library and the
venv's packages keep theirs), as each CLI process a test started did before `make test`
compiled them once (`compileall`). Prints the median CPU seconds (user + system of the
child) of each and their difference.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cpu_of(env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "runner.cli", "--help"], cwd=ROOT, env=env,
                   check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", "runner", "rig", "gateway"],
                   cwd=ROOT, check=True)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    caches = [p for name in ("runner", "rig", "gateway")
              for p in (ROOT / name).rglob("__pycache__")]
    compiled: list[float] = []
    source: list[float] = []
    for _ in range(args.repeat):
        compiled.append(cpu_of(env))
        for cache in caches:
            cache.rename(cache.with_name("__pycache__.aside"))
        try:
            source.append(cpu_of(env))
        finally:
            for cache in caches:
                cache.with_name("__pycache__.aside").rename(cache)
    print(f"runs: {args.repeat} each, interleaved")
    print(f"compiled:    {statistics.median(compiled):.3f} s CPU per launch (median)")
    print(f"from source: {statistics.median(source):.3f} s CPU per launch (median)")
    print(f"saved:       {statistics.median(source) - statistics.median(compiled):.3f} s")


if __name__ == "__main__":
    main()
