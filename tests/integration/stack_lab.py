"""The bench of the stack tests: examples/cachey's repo (a service + Redis) committed in a
fresh git repository, its compose file and variants beside it, one executor."""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rig.sample.oracle import run_sample
from rig.sample.record import SampleRecord
from rig.sample.spec import SampleSpec, StackSpec
from runner.commands.sample_runs import BaseRuns
from runner.containers import sandbox
from runner.containers.backend import LABEL_EXPERIMENT
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.containers.samples.executor import DockerSampleExecutor
from tests.integration.helpers import git

CACHEY = Path(__file__).resolve().parents[2] / "examples" / "cachey"
STACK = (CACHEY / "compose" / "cachey.yml").read_text()

# What the code in a tree service sees of itself, served to the criterion on :8001.
PROBE = '''import json, os
from http.server import BaseHTTPRequestHandler, HTTPServer


def facts():
    status = dict(line.split(":\\t", 1) for line in open("/proc/self/status") if ":\\t" in line)
    return {"uid": os.getuid(), "gid": os.getgid(), "caps": status["CapEff"].strip(),
            "work_writable": os.access("/work", os.W_OK),
            "file_owner": os.stat("/work/cachey/server.py").st_uid,
            "file_writable": os.access("/work/cachey/server.py", os.W_OK)}


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps(facts()).encode()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)


print("==================== 7 passed in 0.01s ====================", flush=True)
HTTPServer(("0.0.0.0", 8001), Handler).serve_forever()
'''
PROBE_SERVICE = '''  probe:
    image: bakeoff/python
    command: ["python3", "probe.py"]
    healthcheck:
      test: ["CMD", "python3", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8001/')"]
      interval: 250ms
      retries: 40
'''
LAB_STACK = (STACK.replace("\nx-bakeoff:", "\nvolumes:\n  scratch: {}\n\nx-bakeoff:")
             .replace("    app: /work\n", "    app: /work\n    probe: /work\n")
             .replace("  redis:\n    image: bakeoff/redis\n",
                      "  redis:\n    image: bakeoff/redis\n    volumes:\n"
                      "      - scratch:/data\n")
             .replace("\n  redis:\n    image", "\n" + PROBE_SERVICE + "  redis:\n    image"))
# The rig's own mistake: a health check that can never pass, whatever the code.
BROKEN_STACK = STACK.replace('["CMD", "redis-cli", "ping"]',
                             '["CMD", "redis-cli", "-p", "6390", "ping"]').replace(
    "retries: 40", "retries: 8")

TESTS = {
    # Passes only when no earlier sample's value is in this sample's Redis.
    "tests/test_fresh.py": '''import os

from cachey.store import Redis


def test_the_stack_is_fresh():
    redis = Redis("redis")
    assert redis.get("marker") is None, f"left by {redis.get('marker')}"
    redis.set("marker", os.environ["BAKEOFF_SAMPLE"])
''',
    # Passes only when no other sample reaches this sample's Redis meanwhile.
    "tests/test_apart.py": '''import os
import time

from cachey.store import Redis


def test_only_this_samples_services_answer():
    redis, me = Redis("redis"), os.environ["BAKEOFF_SAMPLE"]
    assert redis.get("owner") is None, f"owned by {redis.get('owner')}"
    redis.set("owner", me)
    time.sleep(4)
    assert redis.get("owner") == me
''',
    # The sample's fresh database and its stack, both reached from the criterion.
    "tests/test_both.py": '''import os

import psycopg

from cachey.store import Redis


def test_the_database_and_the_stack_at_once():
    with psycopg.connect(os.environ["DATABASE_URL"], connect_timeout=5) as conn:
        assert conn.execute("select 1").fetchone() == (1,)
    assert Redis("redis").ping()
''',
    "tests/test_probe.py": '''import json
import urllib.request


def test_the_tree_service_runs_the_code_unprivileged_on_a_read_only_tree():
    facts = json.load(urllib.request.urlopen("http://probe:8001/", timeout=5))
    assert facts == {"uid": 1000, "gid": 1000, "caps": "0000000000000000",
                     "work_writable": False, "file_owner": 0, "file_writable": False}
''',
}


@dataclass
class StackLab:
    """A committed cachey repo and an executor whose samples run its stacks."""

    root: Path
    repo: Path
    base: str
    experiment: str
    executor: DockerSampleExecutor

    def stack(self, text: str = LAB_STACK, name: str = "lab.yml",
              timeout_s: float = 40) -> StackSpec:
        path = self.root / "compose" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        return StackSpec(str(path), hashlib.sha256(text.encode()).hexdigest(), timeout_s)

    def commit(self, path: str, old: str, new: str) -> str:
        """A commit on the base changing one line of `path` (an arm's work)."""
        file = self.repo / path
        file.write_text(file.read_text().replace(old, new, 1))
        git(self.repo, "commit", "-qam", f"change {path}")
        commit = git(self.repo, "rev-parse", "HEAD")
        git(self.repo, "reset", "-q", "--hard", self.base)
        return commit

    def spec(self, stack: StackSpec, test: str, *, commit: str | None = None,
             arm: str = "A", n: int = 1, timeout_s: float = 60) -> SampleSpec:
        return SampleSpec(change="c", arm=arm, check="success", n=n,
                          commit=commit or self.base, base_commit=self.base,
                          command=f"pytest -q -p no:cacheprovider {test}", parser="pytest",
                          timeout_s=timeout_s, stack=stack, harness="base")

    def run(self, spec: SampleSpec, diagnose: bool = False) -> SampleRecord:
        stage = self.root / "stage"
        base = BaseRuns(self.executor, stage) if diagnose else None
        return run_sample(self.executor, spec, stage, base)

    def log(self, spec: SampleSpec, suffix: str = ".log") -> str:
        return (self.root / "stage" / "samples" / spec.arm / spec.check /
                f"{spec.n}{suffix}").read_text()


@contextlib.contextmanager
def stack_lab(engine: Engine, python: BuiltImage, tmp: Path,
              postgres: BuiltImage | None = None) -> Iterator[StackLab]:
    """The lab; with `postgres`, the executor's samples get a fresh database too."""
    repo = tmp / "repo"
    shutil.copytree(CACHEY / "repo", repo)
    for path, text in {**TESTS, "probe.py": PROBE}.items():
        (repo / path).write_text(text)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "test@bakeoff.invalid")
    git(repo, "config", "user.name", "test")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    experiment = f"it-{secrets.token_hex(3)}"
    limits = sandbox.SandboxLimits(memory_mb=512, pids=256, disk_mb=256)
    try:
        with DockerSampleExecutor(engine, repo, experiment, python, limits,
                                  url_env="DATABASE_URL" if postgres else None,
                                  db_image=postgres) as executor:
            yield StackLab(tmp, repo, git(repo, "rev-parse", "HEAD"), experiment, executor)
    finally:
        engine.remove_labelled({LABEL_EXPERIMENT: experiment})
