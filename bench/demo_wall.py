"""Wall time of the full demo with warm images (`bakeoff-sandbox demo`), N runs.

    .venv/bin/python bench/demo_wall.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    walls = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "runner.cli", "demo", "--keep",
                            str(Path(tmp) / "demo")], check=True, capture_output=True,
                           cwd=Path(__file__).resolve().parent.parent)
            walls.append(time.perf_counter() - started)
            print(f"demo: {walls[-1]:.1f}s", flush=True)
    print(f"median {statistics.median(walls):.1f}s over {len(walls)} run(s)")


if __name__ == "__main__":
    main()
