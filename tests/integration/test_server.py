"""A fresh server per sample: started on the sample's own port, health-checked before
the criterion, stopped after; its output is never parsed as the criterion's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rig.sample.oracle import run_sample
from rig.sample.spec import SampleSpec, ServerSpec
from runner.containers import sandbox
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


@pytest.mark.parametrize(("server_code", "expect"), [
    (SERVER, ("PASS", None)),
    (SERVER.replace('VALUE = b"42"', 'VALUE = b"41"'), ("FAIL", "tests_failed")),
    (SERVER.replace("import http.server", "import http.server ("), ("FAIL", "server_unhealthy")),
], ids=["healthy-server-passes", "fake-summary-from-server-is-not-parsed",
        "broken-server-is-fail-not-rig-error"])
def test_fresh_server_per_sample(engine: Engine, built_images: dict[str, BuiltImage],
                                 tmp_path: Path, server_code: str,
                                 expect: tuple[str, str | None]) -> None:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "server.py").write_text(server_code)
    (repo / "tests" / "test_value.py").write_text(TEST)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "server")
    head = git(repo, "rev-parse", "HEAD")
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
