"""The per-sample cost of a stack (two services), side by side with the same work by hand.

    .venv/bin/python bench/stack_cost.py [--repeat N]

Three ways to run the cachey example's success criterion (examples/cachey: its service
and a Redis), alternating, N times each (default 5):

- **sample**: the oracle's sample on the stack (`[changes.success] stack`): the compose
  file rendered with the rig's policy, a fresh project on the sample's own internal
  network, `up --wait`, the criterion in its fresh container, the services' logs, `down
  -v`, the record written;
- **by hand**: the same two containers with the docker CLI on an internal network (Redis,
  waited healthy; the app with the checkout bind-mounted, waited healthy, as compose's
  `depends_on: service_healthy` does), the same check in a `docker run --rm`, then both
  removed with the network;
- **bare**: `docker run --rm` of the check alone, no services (the floor: it fails fast).

Prints the medians and the ratios; the aim is sample / by hand <= 2. By hand uses the
compose file's own health-check interval and retries.
"""

from __future__ import annotations

import argparse
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runner.containers import images
from runner.containers.backend import LABEL_EXPERIMENT
from runner.containers.engine import Engine
from tests.integration.helpers import PlainReporter
from tests.integration.stack_lab import STACK, StackLab, stack_lab

CHECK = ["pytest", "-q", "-p", "no:cacheprovider", "tests/test_cache.py"]
# By hand, the same health checks as the compose file (its one interval and retries).
INTERVAL = re.findall(r"interval: (\S+)", STACK)[0]
RETRIES = re.findall(r"retries: (\d+)", STACK)[0]
APP_HEALTH = ("python3 -c \"import urllib.request as u; "
              "u.urlopen('http://127.0.0.1:8000/healthz', timeout=2)\"")


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def wait_healthy(name: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while docker("inspect", "-f", "{{.State.Health.Status}}", name) != "healthy":
        if time.monotonic() > deadline:
            raise SystemExit(f"{name} never got healthy")
        time.sleep(0.1)


def by_hand(lab: StackLab, python: str, redis: str) -> float:
    tag = secrets.token_hex(3)
    label = f"{LABEL_EXPERIMENT}={lab.experiment}"
    net, app, cache = f"bench-{tag}-net", f"bench-{tag}-app", f"bench-{tag}-redis"
    started = time.perf_counter()
    docker("network", "create", "--internal", "--label", label, net)
    try:
        docker("run", "-d", "--name", cache, "--network", net, "--network-alias", "redis",
               "--label", label, "--health-cmd", "redis-cli ping", "--health-interval", INTERVAL,
               "--health-retries", RETRIES, redis)
        wait_healthy(cache)
        docker("run", "-d", "--name", app, "--network", net, "--network-alias", "app",
               "--label", label, "-v", f"{lab.repo}:/work:ro", "-w", "/work",
               "-e", "PORT=8000", "-e", "REDIS_HOST=redis", "-e", "HOME=/tmp",
               "--health-cmd", APP_HEALTH, "--health-interval", INTERVAL,
               "--health-retries", RETRIES, python, "python3", "-m", "cachey.server")
        wait_healthy(app)
        subprocess.run(["docker", "run", "--rm", "--network", net, "--label", label,
                        "-v", f"{lab.repo}:/work:ro", "-w", "/work", "-e", "HOME=/tmp",
                        python, *CHECK], check=False, capture_output=True)
    finally:
        docker("rm", "-f", app, cache)
        docker("network", "rm", net)
    return time.perf_counter() - started


def bare(lab: StackLab, python: str) -> float:
    started = time.perf_counter()
    subprocess.run(["docker", "run", "--rm", "--network", "none", "-v",
                    f"{lab.repo}:/work:ro", "-w", "/work", "-e", "HOME=/tmp", python, *CHECK],
                   check=False, capture_output=True)
    return time.perf_counter() - started


def sample(lab: StackLab, n: int) -> float:
    spec = lab.spec(lab.stack(STACK, "cachey.yml", timeout_s=60), "tests/test_cache.py", n=n)
    started = time.perf_counter()
    record = lab.run(spec)
    if record.stack is None or record.stack.health != "healthy":
        raise SystemExit(f"the stack did not come up: {record.detail}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    engine = Engine()
    python = images.build(engine, ["python"], PlainReporter())[-1]
    redis = images.build(engine, ["redis"], PlainReporter())[-1]
    times: dict[str, list[float]] = {"sample": [], "by hand": [], "bare": []}
    with tempfile.TemporaryDirectory() as tmp, stack_lab(engine, python, Path(tmp)) as lab:
        for n in range(1, args.repeat + 1):
            times["sample"].append(sample(lab, n))
            times["by hand"].append(by_hand(lab, python.image_id, redis.image_id))
            times["bare"].append(bare(lab, python.image_id))
    medians = {name: statistics.median(found) for name, found in times.items()}
    print(f"runs: {args.repeat} each, alternating")
    for name, found in times.items():
        print(f"{name:8s} median {medians[name]:6.2f} s  "
              f"(min {min(found):.2f}, max {max(found):.2f})")
    print(f"sample / by hand: {medians['sample'] / medians['by hand']:.2f}x  (aim <= 2)")
    print(f"sample / bare:    {medians['sample'] / medians['bare']:.2f}x")


if __name__ == "__main__":
    main()
