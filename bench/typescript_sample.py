"""A real TypeScript project's vitest sample vs a bare `docker run` of the same command,
and its prepared image's size vs the Node image plus the dependencies (issue 21).

    .venv/bin/python bench/typescript_sample.py [--repeat N]

The project is tests/fixtures/ts-router (TypeScript 5.9, vitest 3.2, `npm ci` from its
lockfile), at the fixer's commit. Each sample is what its success criterion is in the
fixture's manifest: `npm run build` (the arm's dist/), then `npx vitest run
test/decode.test.ts`, in the prepared image of Node 22. The bare run is `docker run --rm
--network none --user 1000:1000` of the prepared image with the same tree (a git archive of
the commit) bind-mounted at /work, the same dependencies linked in, the same two commands.
Alternating, N times each (default 5); medians and their ratio. Then the sizes.
"""

from __future__ import annotations

import argparse
import shutil
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
from runner.containers.backend import Labels
from runner.containers.engine import Engine
from runner.containers.images import prepared
from runner.containers.samples.executor import DockerSampleExecutor
from tests.integration.helpers import PlainReporter, git

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "ts-router"
COMMAND = "npx vitest run test/decode.test.ts"
BUILD = "npm run build"


def project(tmp: Path) -> tuple[Path, str]:
    repo = tmp / "repo"
    shutil.copytree(FIXTURE / "repo", repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "base")
    git(repo, "apply", str(FIXTURE / "agents" / "decode-params.patch"))
    git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qam", "fix")
    return repo, git(repo, "rev-parse", "HEAD")


def bare(image: str, tree: Path) -> float:
    script = (f"cp -a /opt/bakeoff/prepared/skel/. /work/ && {BUILD} >/dev/null && {COMMAND}")
    started = time.perf_counter()
    done = subprocess.run(["docker", "run", "--rm", "--network", "none", "--user", "1000:1000",
                           "-v", f"{tree}:/work", "-w", "/work", image, "sh", "-c", script],
                          capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if "5 passed" not in done.stdout:
        raise SystemExit(f"the bare run did not pass: {done.stdout[-800:]}{done.stderr[-800:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    engine = Engine()
    node = images.resolve(engine, "node", PlainReporter(), variant="22")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        repo, head = project(tmp)
        image = prepared.prepare(engine, repo, head, node, prepared.Setup(("npm ci",)), print)
        oracle_s, bare_s = [], []
        limits = sandbox.SandboxLimits(cpus=1.0, memory_mb=1024, pids=256)
        with DockerSampleExecutor(engine, repo, "bench-ts", image, limits) as executor:
            for n in range(1, args.repeat + 1):
                spec = SampleSpec(change="bench", arm="fixer", check="success", n=n,
                                  commit=head, base_commit=head, command=COMMAND,
                                  parser="vitest", timeout_s=120, build=(BUILD,))
                started = time.perf_counter()
                record = run_sample(executor, spec, tmp / "stage")
                oracle_s.append(time.perf_counter() - started)
                if str(record.verdict) != "PASS":
                    raise SystemExit(f"the sample did not pass: {record.detail}")
                tree = tmp / f"tree-{n}"
                tree.mkdir()
                subprocess.run(f"git -C {repo} archive {head} | tar -x -C {tree}", shell=True,
                               check=True)
                tree.chmod(0o777)
                subprocess.run(["chown", "-R", "1000:1000", str(tree)], check=True)
                bare_s.append(bare(image.image_id, tree))
        deps = sandbox.check_image(engine, image.image_id, [
            "du", "-sb", "/opt/bakeoff/prepared/deps"], Labels("bench-ts", "size"))
    sample, plain = statistics.median(oracle_s), statistics.median(bare_s)
    print(f"samples: {args.repeat} each, alternating (build + vitest, Node 22)")
    print(f"oracle sample      median {sample:.3f}s  (min {min(oracle_s):.3f}s)")
    print(f"docker run --rm    median {plain:.3f}s  (min {min(bare_s):.3f}s)")
    print(f"ratio              {sample / plain:.2f}x")
    size = int(engine.client.api.inspect_image(image.image_id)["Size"])
    base = int(engine.client.api.inspect_image(node.image_id)["Size"])
    dependencies = int(deps.split()[0])
    print(f"prepared image     {size / 1e6:.0f} MB; {node.tag} {base / 1e6:.0f} MB + "
          f"dependencies {dependencies / 1e6:.0f} MB = {(base + dependencies) / 1e6:.0f} MB")
    print(f"size ratio         {size / (base + dependencies):.2f}x")


if __name__ == "__main__":
    main()
