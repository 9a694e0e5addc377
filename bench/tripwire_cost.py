"""What an exit-code check's tripwire costs (`rig.guards.tripwire`): `sample_runs.run_all` of one
compile check (`python3 -m compileall -q src`, 3 samples per arm) for N arms, with the
tripwires (one extra container per arm) and without (`diagnose=False`), alternating.

    .venv/bin/python bench/tripwire_cost.py [--arms N] [--repeat R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rig.sample.spec import SampleSpec
from runner.commands import sample_runs
from runner.containers import images, sandbox
from runner.containers.engine import Engine
from runner.containers.samples.executor import DockerSampleExecutor
from tests.integration.helpers import PlainReporter, git

SAMPLES = 3


def commit(repo: Path, text: str) -> str:
    (repo / "src").mkdir(exist_ok=True)
    (repo / "src" / "app.py").write_text(text)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "c")
    return git(repo, "rev-parse", "HEAD")


def specs(base: str, arms: dict[str, str], round_: int) -> list[SampleSpec]:
    return [SampleSpec(change=f"r{round_}", arm=arm, check="compile", n=n, commit=head,
                       base_commit=base, command="python3 -m compileall -q src",
                       parser="exit-code", timeout_s=60, requires=("python3",))
            for arm, head in arms.items() for n in range(1, SAMPLES + 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--arms", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    engine = Engine()
    image = images.build(engine, ["python"], PlainReporter())[-1]
    walls: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        base = commit(repo, "VALUE = 0\n")
        arms = {f"a{n}": commit(repo, f"VALUE = {n}\n") for n in range(1, args.arms + 1)}
        with DockerSampleExecutor(engine, repo, "bench", image,
                                  sandbox.SandboxLimits()) as executor:
            for round_ in range(args.repeat):
                for wired in (True, False):
                    stage = Path(tmp) / f"stage-{round_}-{wired}"
                    started = time.perf_counter()
                    sample_runs.run_all(executor, specs(base, arms, round_), stage,
                                        lambda _: None, diagnose=wired)
                    walls[wired].append(time.perf_counter() - started)
                    print(f"round {round_ + 1}, tripwires {'on' if wired else 'off'}: "
                          f"{walls[wired][-1]:.2f}s", flush=True)
    on, off = statistics.median(walls[True]), statistics.median(walls[False])
    print(f"{args.arms} arms x {SAMPLES} samples: with tripwires {on:.2f}s, without "
          f"{off:.2f}s: +{on - off:.2f}s ({on / off - 1:+.0%}), "
          f"{(on - off) / args.arms:.2f}s per (arm, check)")


if __name__ == "__main__":
    main()
