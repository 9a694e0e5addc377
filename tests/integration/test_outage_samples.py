"""An outage under a sample is no result; an outage after it is (issue 31), on this
machine's engine with a Postgres the test's own executor started and the test stops.

- A sample whose command ran to its end, and whose database server was stopped under it
  (so the rig's drop of its database fails), keeps its result: PASS with its counts. An
  arm cannot void its own sample by breaking the teardown.
- The next sample cannot get a database (the server is down): it is cut, no record is
  written, its attempt is kept under retried/, `SampleInterruptedError` names the server;
  a fresh executor (what the next `score` makes) runs it again: PASS.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from rig.errors import SampleInterruptedError
from rig.sample.oracle import run_sample, sample_paths
from rig.sample.record import SampleRecord
from rig.sample.spec import SampleSpec
from runner.containers import sandbox
from runner.containers.backend import LABEL_EXPERIMENT, LABEL_ROLE
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.containers.samples.executor import DockerSampleExecutor
from runner.store import layout
from tests.integration.helpers import git
from tests.trees import write_files

SLOW = ("import os, pathlib, time\n\n\ndef test_slow():\n"
        "    pathlib.Path('/tmp/started').write_text('x')\n    time.sleep(6)\n"
        "    assert os.environ['DATABASE_URL'].startswith('postgresql://')\n")


def commit(repo: Path) -> str:
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write_files(repo, {"tests/test_app.py": SLOW})
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return git(repo, "rev-parse", "HEAD")


def running_sample(engine: Engine, experiment: str, within_s: float = 60) -> bool:
    """Until a sample container of the experiment runs (bounded)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        found = [c for c in engine.labelled("container", {LABEL_EXPERIMENT: experiment})
                 if c.labels.get(LABEL_ROLE) == "sample" and c.status == "running"]
        if found:
            return True
        time.sleep(0.2)
    return False


def test_an_outage_after_a_sample_keeps_it_and_one_under_the_next_cuts_it(
        engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path) -> None:
    experiment = f"cut-{os.getpid()}"
    head = commit(tmp_path / "repo")
    stage = tmp_path / "stage"
    spec = SampleSpec(change="cut", arm="A", check="success", n=1, commit=head,
                      base_commit=head, command="pytest -q -p no:cacheprovider tests",
                      parser="pytest", timeout_s=60, requires=("python3", "pytest"))
    second = SampleSpec(**{**spec.__dict__, "n": 2})

    def executor() -> DockerSampleExecutor:
        return DockerSampleExecutor(engine, tmp_path / "repo", experiment,
                                    built_images["python"], sandbox.SandboxLimits(),
                                    "DATABASE_URL", built_images["postgres"])

    try:
        with executor() as first:
            server = first.networks.server
            assert server is not None
            done: list[SampleRecord] = []
            ran = threading.Thread(target=lambda: done.append(run_sample(first, spec, stage)))
            ran.start()
            assert running_sample(engine, experiment)
            time.sleep(2)  # the command is under way (it sleeps 6 s)
            engine.client.containers.get(server.container_id).stop(timeout=1)
            ran.join(120)
            assert [(r.verdict, r.reason, r.counts and (r.counts.passed, r.counts.failed))
                    for r in done] == [("PASS", None, (1, 0))]

            with pytest.raises(SampleInterruptedError) as raised:
                run_sample(first, second, stage)
            assert raised.value.sample == "cut/A/success/2"
            assert "the experiment's Postgres" in raised.value.why
            assert "exited" in raised.value.why
            assert not sample_paths(stage, second)[0].exists()
            assert [p.name for p in layout.retried_attempts(stage, "A")] == ["2-1.json"]

        with executor() as fresh:  # the next `score`: it runs the cut sample again
            again = run_sample(fresh, second, stage)
        assert (again.verdict, again.reason) == ("PASS", None)
        assert [p.name for p in layout.sample_records(stage, "A", "success")] == [
            "1.json", "2.json"]
    finally:
        engine.remove_labelled({LABEL_EXPERIMENT: experiment})
