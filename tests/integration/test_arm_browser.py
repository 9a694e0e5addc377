"""`[toolchain] browser = true` (issue 22): the browser criteria's Chromium, Playwright and
the rig's plugin in every arm's sandbox during dispatch, so an agent verifies its web app
the way the success criterion will."""

from __future__ import annotations

from pathlib import Path

from runner.commands import up as up_mod
from runner.containers import sandbox
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.manifest import load_manifest
from runner.store import state as state_mod
from tests.integration.helpers import CORE, cleanup, git, make_target

PAGE = ('<label>Days ahead <input id="days" type="number" max="90"></label>'
        '<button onclick="document.getElementById(\'out\').textContent = '
        'document.getElementById(\'days\').value + \' days\'">Forecast</button>'
        '<p role="status" id="out"></p>')
TEST = '''from playwright.sync_api import Page, expect


def test_the_page_answers(page: Page):
    page.goto("/index.html")
    page.get_by_label("Days ahead").fill("90")
    page.get_by_role("button", name="Forecast").click()
    expect(page.get_by_role("status")).to_have_text("90 days")
'''
VERIFY = ("mkdir -p /tmp/app && cp web/index.html /tmp/app/ && cd /tmp/app && "
          "(nohup python3 -m http.server 8123 --bind 127.0.0.1 >/tmp/app.log 2>&1 &) && "
          "sleep 1 && cd /work && bakeoff-browser-test http://localhost:8123 "
          "web/check_page.py && ls $BAKEOFF_BROWSER_OUT && chromium --version")


def test_an_arm_drives_its_own_page_with_the_criterions_browser(
        engine: Engine, tmp_path: Path, built_images: dict[str, BuiltImage]) -> None:
    manifest = make_target(tmp_path / "repo", ["A"], database=False, memory_mb=1536, pids=512)
    repo = manifest.parent
    manifest.write_text(manifest.read_text().replace(
        'requires = ["python3", "pytest", "git"]',
        'requires = ["python3", "pytest", "git"]\nbrowser = true'))
    (repo / "web").mkdir()
    (repo / "web" / "index.html").write_text(PAGE)
    (repo / "web" / "check_page.py").write_text(TEST)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a page and the agent's own browser check")
    loaded = load_manifest(manifest)
    try:
        up_mod.up(engine, loaded, options=CORE)
        _, current = state_mod.require_up(loaded)
        found = current.arm("A")
        assert found is not None
        done = sandbox.exec_in(engine, found.container_id, VERIFY, timeout_s=240)
        assert done.exit_code == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert "1 passed" in done.stdout
        lines = done.stdout.strip().splitlines()
        assert lines[-1].startswith("Chromium 156.")
        assert {"requests.jsonl", "screenshots", "trace.zip"} <= set(lines)
    finally:
        cleanup(engine, loaded)
