"""The sandbox's process listing: /proc/PID/status (now) against /proc/PID/stat (before),
side by side, in one container by `docker exec`, as the sweep runs it.

    .venv/bin/python bench/process_listing.py [--processes N] [--repeat R]

A container of the python image holds N sleeping processes of the sandbox user (default
300, near the sandbox's pids limit of 512); each listing runs R times (default 20),
alternating; prints each one's median wall time per listing and the ratio. The listing
now reads up to nine lines of each process's status file where it read one stat line.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runner.commands.dispatch import process

BEFORE = ('echo $$; for d in /proc/[0-9]*; do read -r s < "$d/stat" && echo "$s"; done '
          '2>/dev/null; echo bakeoff-listed; exit 0')
NOW = process.PROCESS_LIST[2]
LABEL = "io.bakeoff.bench=process-listing"


def listed(container: str, script: str) -> tuple[float, int]:
    started = time.perf_counter()
    done = subprocess.run(["docker", "exec", "-u", "1000:1000", container, "sh", "-c", script],
                          capture_output=True, text=True, check=True, timeout=60)
    return time.perf_counter() - started, len(done.stdout.splitlines()) - 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    hold = (f"setpriv --reuid 1000 --regid 1000 --clear-groups sh -c 'for i in $(seq "
            f"{args.processes}); do sleep 3600 & done; wait' & while :; do sleep 3600 & wait; "
            "done")
    container = subprocess.run(
        ["docker", "run", "-d", "--rm", "--init", "--label", LABEL, "--user", "0:0",
         "--network", "none", "bakeoff/python:latest", "sh", "-c", hold],
        capture_output=True, text=True, check=True, timeout=120).stdout.strip()
    try:
        time.sleep(2)
        times: dict[str, list[float]] = {"stat (before)": [], "status (now)": []}
        counts: dict[str, int] = {}
        for _ in range(args.repeat):
            for name, script in (("stat (before)", BEFORE), ("status (now)", NOW)):
                took, count = listed(container, script)
                times[name].append(took)
                counts[name] = count
        medians = {name: statistics.median(found) for name, found in times.items()}
        for name, median in medians.items():
            print(f"{name}: median {median * 1000:.1f} ms per listing of {counts[name]} "
                  "processes")
        print(f"ratio now/before: {medians['status (now)'] / medians['stat (before)']:.2f}")
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=False,
                       timeout=120)


if __name__ == "__main__":
    main()
