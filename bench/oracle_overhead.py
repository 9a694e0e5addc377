"""The oracle's time per sample vs a bare `docker run --rm IMAGE CMD`, side by side.

    .venv/bin/python bench/oracle_overhead.py [--repeat N]

Both run the same trivial command (`true`) in the python image with the network off,
alternating, N times each (default 10); prints medians and their ratio. The oracle's
sample includes what makes it a sample: a git archive of the commit copied in, limits,
the tool check, the log and the JSON record written. No database (that is a separate
cost: one schema per sample).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rig.sample.oracle import run_sample
from rig.sample.spec import SampleSpec
from runner.containers import images, sandbox
from runner.containers.engine import Engine
from runner.containers.samples.executor import DockerSampleExecutor
from tests.integration.helpers import PlainReporter, git


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    engine = Engine()
    image = images.build(engine, ["python"], PlainReporter())[-1]
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        (repo / "app.py").write_text("VALUE = 1\n")
        git(repo, "add", "-A")
        git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "base")
        head = git(repo, "rev-parse", "HEAD")
        oracle_s, bare_s = [], []
        with DockerSampleExecutor(engine, repo, "bench", image,
                                  sandbox.SandboxLimits()) as executor:
            for n in range(1, args.repeat + 1):
                spec = SampleSpec(change="bench", arm="a", check="trivial", n=n, commit=head,
                                  base_commit=head, command="true", parser="exit-code",
                                  timeout_s=60)
                started = time.perf_counter()
                run_sample(executor, spec, Path(tmp) / "stage")
                oracle_s.append(time.perf_counter() - started)
                started = time.perf_counter()
                subprocess.run(["docker", "run", "--rm", "--network", "none", image.image_id,
                                "true"], check=True, capture_output=True)
                bare_s.append(time.perf_counter() - started)
    oracle, bare = statistics.median(oracle_s), statistics.median(bare_s)
    print(f"samples: {args.repeat} each, alternating")
    print(f"oracle sample      median {oracle:.3f}s  (min {min(oracle_s):.3f}s)")
    print(f"docker run --rm    median {bare:.3f}s  (min {min(bare_s):.3f}s)")
    print(f"ratio              {oracle / bare:.2f}x")


if __name__ == "__main__":
    main()
