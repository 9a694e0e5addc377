"""The project's own commands on this machine's engine and on a second engine, side by
side (issue 24): one oracle sample, `up` of three arms, the whole demo.

    .venv/bin/python bench/remote_loop.py [--repeat N] [--no-demo]

The second engine is images/engine in a container on an internal network of its own,
reached over tcp (tests/integration/remote_engine.py); bakeoff/base, python and postgres
are copied into it once (`docker save | load` through both APIs), everything else is built
there on first use (a warm-up round of each command, not timed). Every command runs
through the real command line (`python -m runner.cli`), with `DOCKER_HOST` set for the
second engine and unset for this machine's; per round the engines alternate. Prints the
median and range of N rounds (default 3) and the remote/local ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runner.containers import images
from runner.containers.engine import Engine
from tests.integration.helpers import PlainReporter, make_target
from tests.integration.remote_engine import copy_image, started

HERE = Path(__file__).resolve().parent.parent
STEPS = ("oracle, 1 sample", "up, 3 arms", "down, 3 arms", "demo")


def bakeoff(where: Path, environ: dict[str, str], *args: str) -> float:
    """One command through the real command line; its wall time (it must succeed)."""
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "runner.cli", *args], cwd=where, env=environ,
                          capture_output=True, text=True, timeout=1800, check=False)
    took = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"`bakeoff-sandbox {' '.join(args)}` failed:\n{done.stderr[-3000:]}")
    return took


def one_round(environ: dict[str, str], seconds: dict[str, list[float]], demo: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        make_target(repo, ["A0", "A1", "A2"])
        seconds[STEPS[1]].append(bakeoff(repo, environ, "up"))
        seconds[STEPS[0]].append(bakeoff(repo, environ, "oracle", "--commit", "HEAD",
                                         "--check", "success", "--samples", "1"))
        seconds[STEPS[2]].append(bakeoff(repo, environ, "down"))
        if demo:
            seconds[STEPS[3]].append(bakeoff(HERE, environ, "demo", "--keep",
                                             str(Path(tmp) / "demo")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-demo", action="store_true", help="leave the demo out")
    args = parser.parse_args()
    host = Engine()
    built = {b.name: b for b in images.build(host, ["base", "python", "postgres", "engine"],
                                             PlainReporter())}
    local = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    with started(host, built["engine"], f"bench-remote-loop-{os.getpid()}") as remote:
        for name in ("base", "python", "postgres"):
            copy_image(host, remote.engine, built[name].tag)
        environs = {"local": local, "remote": {**local, "DOCKER_HOST": remote.url}}
        for environ in environs.values():  # warm: images built on first use, not timed
            one_round(environ, {s: [] for s in STEPS}, demo=False)
        seconds = {where: {s: [] for s in STEPS} for where in environs}
        for n in range(args.repeat):
            order = list(environs) if n % 2 == 0 else list(reversed(environs))
            for where in order:
                one_round(environs[where], seconds[where], demo=not args.no_demo)
            print(f"round {n + 1}/{args.repeat} done", file=sys.stderr, flush=True)
    print(f"{'step':<18} {'local median':>12} {'local range':>15} {'remote median':>13} "
          f"{'remote range':>15} {'ratio':>6}")
    for step in STEPS:
        here, there = seconds["local"][step], seconds["remote"][step]
        if not here:
            continue
        ratio = statistics.median(there) / statistics.median(here)
        print(f"{step:<18} {statistics.median(here):>11.2f}s {min(here):>6.2f}-"
              f"{max(here):>6.2f}s {statistics.median(there):>12.2f}s {min(there):>6.2f}-"
              f"{max(there):>6.2f}s {ratio:>5.2f}x")


if __name__ == "__main__":
    main()
