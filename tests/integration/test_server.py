"""A fresh server per sample: started on the sample's own port, health-checked before
the criterion, stopped after; its output is never parsed as the criterion's."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

import pytest

from rig.sample.oracle import run_sample
from rig.sample.spec import SampleSpec, ServerSpec
from runner.containers import sandbox
from runner.containers.backend import ContainerSpec
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.containers.samples.executor import DockerSampleExecutor
from tests.integration.helpers import git

SERVER = '''import http.server, os, sys

print("==================== 5 passed in 0.01s ====================", flush=True)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"ok" if self.path == "/healthz" else VALUE
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)


VALUE = b"42"
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
'''
TEST = '''import os, urllib.request


def test_value():
    url = f"http://127.0.0.1:{os.environ['PORT']}/value"
    assert urllib.request.urlopen(url).read() == b"42"
'''


def served(tmp_path: Path, server_code: str) -> tuple[Path, str]:
    """A repository of a server and a test of it, committed; its path and commit."""
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "server.py").write_text(server_code)
    (repo / "tests" / "test_value.py").write_text(TEST)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "server")
    return repo, git(repo, "rev-parse", "HEAD")


@pytest.mark.parametrize(("server_code", "expect"), [
    (SERVER, ("PASS", None)),
    (SERVER.replace('VALUE = b"42"', 'VALUE = b"41"'), ("FAIL", "tests_failed")),
    (SERVER.replace("import http.server", "import http.server ("), ("FAIL", "server_unhealthy")),
], ids=["healthy-server-passes", "fake-summary-from-server-is-not-parsed",
        "broken-server-is-fail-not-rig-error"])
def test_fresh_server_per_sample(engine: Engine, built_images: dict[str, BuiltImage],
                                 tmp_path: Path, server_code: str,
                                 expect: tuple[str, str | None]) -> None:
    repo, head = served(tmp_path, server_code)
    server = ServerSpec("python3 server.py", "/healthz", "PORT", 10)
    with DockerSampleExecutor(engine, repo, f"srv-{os.getpid()}", built_images["python"],
                              sandbox.SandboxLimits()) as executor:
        spec = SampleSpec(change="c", arm="a", check="success", n=1, commit=head,
                          base_commit=head, command="pytest -q -p no:cacheprovider tests",
                          parser="pytest", timeout_s=60, server=server)
        record = run_sample(executor, spec, tmp_path / "stage")
    assert (str(record.verdict), record.reason) == expect, record.detail
    logs = tmp_path / "stage" / "samples" / "a" / "success"
    assert "5 passed in 0.01s" not in (logs / "1.log").read_text()
    if expect[1] != "server_unhealthy":
        assert record.server == "healthy"
        assert "5 passed in 0.01s" in (logs / "1.server.log").read_text()
    else:
        assert record.server == "unhealthy"


class Recording(Engine):
    """This machine's engine, every create and start written down in order."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine.client)
        self.calls: list[tuple[str, str, str | None]] = []
        self.ids: dict[str, str] = {}

    def create(self, spec: ContainerSpec) -> str:
        made = super().create(spec)
        self.ids[made] = spec.purpose
        self.calls.append(("create", spec.purpose, None if spec.joins is None
                           else self.ids.get(spec.joins, "?")))
        return made

    def start(self, container_id: str, stdin: IO[bytes] | None = None, *,
              what: str = "the container") -> None:
        self.calls.append(("start", self.ids.get(container_id, "?"), None))
        super().start(container_id, stdin, what=what)


def test_the_criterion_is_created_beside_its_server_before_the_server_starts(
        engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path) -> None:
    """On Kubernetes a server and its criterion are one Pod, made at its first start and
    taking no container after: the criterion must exist before the server starts. Docker
    takes a container joining one that is created, not yet running (the honest sample
    still passes)."""
    repo, head = served(tmp_path, SERVER)
    recording = Recording(engine)
    with DockerSampleExecutor(recording, repo, f"order-{os.getpid()}", built_images["python"],
                              sandbox.SandboxLimits()) as executor:
        spec = SampleSpec(change="c", arm="a", check="success", n=1, commit=head,
                          base_commit=head, command="pytest -q -p no:cacheprovider tests",
                          parser="pytest", timeout_s=60,
                          server=ServerSpec("python3 server.py", "/healthz", "PORT", 10))
        record = run_sample(executor, spec, tmp_path / "stage")
    assert (str(record.verdict), record.reason) == ("PASS", None), record.detail
    sample = [call for call in recording.calls if "c/a/success/1" in call[1]]
    assert sample == [
        ("create", "the server of c/a/success/1", None),
        ("create", "sample c/a/success/1", "the server of c/a/success/1"),
        ("start", "the server of c/a/success/1", None),
        ("start", "sample c/a/success/1", None)]
