"""One browser sample (app start included) vs a bare `docker run` of the same
pytest-playwright file against the same app started by hand (issue 22).

    .venv/bin/python bench/browser_sample.py [--repeat N]

The app is a stdlib page and a POST endpoint (no database) in the python image; the
criterion fills the input, clicks, and expects the server's answer. The sample is the
rig's: the tree from git objects, the server's own container on an internal network,
the browser's container in its network namespace with the rig's plugin (requests,
screenshots, a trace), the record and the files written. The bare run: `docker run -d
--network none` of the app from a bind-mounted copy of the tree, then `docker run
--network container:APP` of bakeoff/browser with plain pytest-playwright and Debian's
chromium, then both removed. Alternating, N times each (default 5); medians and ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rig.sample.oracle import run_sample
from rig.sample.record import BrowserAsked
from rig.sample.spec import SampleSpec, ServerSpec
from runner.containers import browser, images, sandbox
from runner.containers.engine import Engine
from runner.containers.samples.executor import DockerSampleExecutor
from tests.integration.helpers import PlainReporter, git

SERVER = '''import json, os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PAGE = b"""<label>Days ahead <input id="days" type="number" min="1" max="90"></label>
<button id="go">Forecast</button><p role="status" id="out"></p>
<script>document.getElementById("go").onclick = async () => {
  const r = await fetch("/api/horizon", {method: "POST", body: JSON.stringify(
    {days: Number(document.getElementById("days").value)})});
  document.getElementById("out").textContent = (await r.json()).summary; };</script>"""


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        self.answer(200, PAGE, "text/html")

    def do_POST(self):
        days = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["days"]
        self.answer(200, json.dumps({"summary": f"{days} days"}).encode(), "application/json")

    def answer(self, status, body, kind):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
'''
CRITERION = '''from playwright.sync_api import Page, expect


def test_the_summary(page: Page):
    page.goto("/")
    page.get_by_label("Days ahead").fill("90")
    page.get_by_role("button", name="Forecast").click()
    expect(page.get_by_role("status")).to_have_text("90 days")
'''
PORT = 8080
BARE = ("python -m pytest -q -p no:cacheprovider -p pytest_base_url.plugin -p "
        "pytest_playwright.pytest_playwright -p bench_launch --base-url "
        "http://localhost:8080 --output /tmp/out /criterion/test_ui.py")


# Inside the browser's container: wait (at most 15 s) until the app answers.
WAIT = ("import time, urllib.request\nfor _ in range(150):\n    try:\n"
        f"        urllib.request.urlopen('http://localhost:{PORT}/'); break\n"
        "    except OSError: time.sleep(0.1)\n")


@contextlib.contextmanager
def app_by_hand(app_image: str, tree: Path) -> Iterator[str]:
    """The app started by hand from a bind-mounted `tree` (no network of its own: the
    browser joins its namespace); its container id, removed after."""
    app = subprocess.run(
        ["docker", "run", "-d", "--network", "none", "--user", "1000:1000", "-e",
         f"PORT={PORT}", "-v", f"{tree}:/app:ro", "-w", "/app", app_image,
         "python3", "server.py"], capture_output=True, text=True, check=True).stdout.strip()
    try:
        yield app
    finally:
        subprocess.run(["docker", "rm", "-f", app], capture_output=True, check=False)


def bare(app_image: str, browser_image: str, tree: Path, criterion: Path) -> float:
    """The same app and file by hand: two `docker run`s, then both removed."""
    started = time.perf_counter()
    with app_by_hand(app_image, tree) as app:
        done = subprocess.run(
            ["docker", "run", "--rm", f"--network=container:{app}", "--user", "1000:1000",
             "-e", "HOME=/tmp", "-e", "PYTHONPATH=/criterion", "-e",
             "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1", "-v", f"{criterion}:/criterion:ro",
             browser_image, "sh", "-c", f'python -c "{WAIT}" && {BARE}'],
            capture_output=True, text=True, check=False)
    if "1 passed" not in done.stdout:
        raise SystemExit(f"the bare run did not pass: {done.stdout[-800:]}{done.stderr[-800:]}")
    return time.perf_counter() - started


LAUNCH = '''import pytest


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": "/usr/bin/chromium"}
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    engine = Engine()
    app_image = images.build(engine, ["python"], PlainReporter())[-1]
    browser_image = images.resolve(engine, browser.IMAGE, PlainReporter())
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        repo = tmp / "repo"
        repo.mkdir()
        (repo / "server.py").write_text(SERVER)
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", "-A")
        git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "app")
        head = git(repo, "rev-parse", "HEAD")
        criterion = tmp / "criterion"
        criterion.mkdir()
        (criterion / "test_ui.py").write_text(CRITERION)
        (criterion / "bench_launch.py").write_text(LAUNCH)
        for path in [tmp, criterion, *criterion.iterdir()]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        asked = BrowserAsked(file=str(criterion / "test_ui.py"),
                             sha256=hashlib.sha256(CRITERION.encode()).hexdigest(),
                             expect_requests=["POST /api/horizon"])
        rig_s, bare_s = [], []
        limits = sandbox.SandboxLimits(cpus=1.0, memory_mb=1024, pids=256)
        with DockerSampleExecutor(engine, repo, "bench-browser", app_image, limits) as executor:
            executor.containers.browser()  # the image's identity, asked once per executor
            for n in range(1, args.repeat + 1):
                spec = SampleSpec(change="bench", arm="a", check="success", n=n, commit=head,
                                  base_commit=head, command="browser test_ui.py",
                                  parser="pytest", timeout_s=120,
                                  server=ServerSpec("python3 server.py", "/", "PORT", 30),
                                  browser=asked)
                started = time.perf_counter()
                record = run_sample(executor, spec, tmp / "stage")
                rig_s.append(time.perf_counter() - started)
                if str(record.verdict) != "PASS":
                    raise SystemExit(f"the sample did not pass: {record.detail}")
                tree = tmp / f"tree-{n}"
                shutil.copytree(repo, tree, ignore=shutil.ignore_patterns(".git"))
                tree.chmod(0o755)
                bare_s.append(bare(app_image.image_id, browser_image.image_id, tree, criterion))
    sample, plain = statistics.median(rig_s), statistics.median(bare_s)
    print(f"samples: {args.repeat} each, alternating (app + Chromium, one test)")
    print(f"browser sample     median {sample:.3f}s  (min {min(rig_s):.3f}s)")
    print(f"docker run by hand median {plain:.3f}s  (min {min(bare_s):.3f}s)")
    print(f"ratio              {sample / plain:.2f}x")


if __name__ == "__main__":
    main()
