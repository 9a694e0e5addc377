"""Wall time of a full demo with warm images (`bakeoff-sandbox demo`), N runs.

    .venv/bin/python bench/demo_wall.py [--repeat N] [--code DIR] [--example NAME]

`--code DIR`: also run DIR's code (a checkout of another commit, e.g. a `git worktree`
of main), alternating with this checkout's, so both see the same load.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def wall(code: Path, example: str = "horizon") -> float:
    """One `demo --keep` run of `code`'s runner (`-m` puts the working directory first on
    sys.path, before the editable install)."""
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "runner.cli", "demo", "--example", example,
                        "--keep", str(Path(tmp) / "demo")], check=True, capture_output=True,
                       cwd=code)
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--code", type=Path, help="another checkout, run alternately")
    parser.add_argument("--example", default="horizon", help="which bundled example")
    args = parser.parse_args()
    codes = {"this": HERE, **({"other": args.code.resolve()} if args.code else {})}
    walls: dict[str, list[float]] = {name: [] for name in codes}
    for _ in range(args.repeat):
        for name, code in codes.items():
            walls[name].append(wall(code, args.example))
            print(f"demo {args.example} ({name}, {code}): {walls[name][-1]:.1f}s", flush=True)
    for name, found in walls.items():
        print(f"{name}: median {statistics.median(found):.1f}s over {len(found)} run(s)")
    if args.code:
        ratio = statistics.median(walls["this"]) / statistics.median(walls["other"])
        print(f"this / other: {ratio:.2f}x")


if __name__ == "__main__":
    main()
