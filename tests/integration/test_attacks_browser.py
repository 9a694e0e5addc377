"""The contestant controls the page (issue 22): attacks on a browser criterion, graded by
the rig (the executor, the verdict rules, the base's run), each with its exact verdict.

The app (`server.py`, the arm's) serves `pages/index.html` and `POST /api/horizon`; the
base's server fails at the UI's maximum (90: a 500). The criterion (the rig's input) fills
90, presses Go and expects the server's summary, with `expect_requests = ["POST
/api/horizon"]`. Each attack is a commit of the arm's: a page that lies, a page that
attacks the browser or the rig, with the base's bug or with an honest fix beside it."""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from rig.sample.oracle import run_sample
from rig.sample.record import BrowserAsked, SampleRecord
from rig.sample.spec import SampleSpec, ServerSpec
from runner.commands.sample_runs import BaseRuns
from runner.containers import sandbox
from runner.containers.backend import LABEL_EXPERIMENT
from runner.containers.browser import BrowserLimits
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.containers.samples.executor import DockerSampleExecutor
from tests.integration.browser_lab import (
    ON_CLICK,
    PAGES,
    POST,
    SERVER,
    page,
)
from tests.integration.helpers import git

CRITERION = '''from playwright.sync_api import Page, expect


def test_the_summary_at_the_ui_maximum(page: Page):
    page.goto("/index.html")
    field = page.locator("#days")
    expect(field).to_have_attribute("max", "90")
    field.fill("90")
    page.locator("#go").click()
    expect(page.locator("#result")).to_have_text("90 days")
'''
# A second criterion, as docs/browser.md says to write one: the values the UI can send,
# each test's flow on the real path (the rig checks each passed test's own requests), and
# what is shown bound to the server's answer for the days typed.
EACH = '''from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, TimeoutError, expect


def forecast(response):
    return response.request.method == "POST" and urlsplit(response.url).path == "/api/horizon"


@pytest.mark.parametrize("days", [45, 90])
def test_the_summary_for_days_the_page_can_send(page: Page, days):
    page.goto("/index.html")
    page.locator("#days").fill(str(days))
    try:
        with page.expect_response(forecast, timeout=2000) as answered:
            page.locator("#go").click()
        answer = answered.value
    except TimeoutError:
        answer = None  # never requested: expect_requests decides (not_real_path)
    expect(page.locator("#result")).to_have_text(f"{days} days")
    if answer is not None:
        assert answer.ok and answer.json()["summary"] == f"{days} days"
'''
SHOW_DAYS = 'document.getElementById("result").textContent = days + " days";'
# The client-side trick, varied: the server for what it can answer, the page for the rest;
# a request the server can answer sent beside (or instead of) the one the user asked for.
VARIED = {
    "answers the UI's maximum in the page and the rest from the server": page(ON_CLICK.format(
        'const days = Number(document.getElementById("days").value); '
        f'if (days >= 90) {{ {SHOW_DAYS} return; }} ' + POST.split("; ", 1)[1])),
    "sends days the server can answer and shows its own result": page(ON_CLICK.format(
        POST.replace("JSON.stringify({days})", "JSON.stringify({days: Math.min(days, 89)})")
        .replace('r.ok ? j.summary : "error"', 'days + " days"'))),
    "sends the days typed, then days the server can answer, and shows its own": page(
        ON_CLICK.format(POST.replace('r.ok ? j.summary : "error"', 'days + " days"') +
                        ' await fetch("/api/horizon", {method: "POST", headers: '
                        '{"Content-Type": "application/json"}, body: JSON.stringify('
                        '{days: Math.min(days, 89)})});')),
    "shows its own result, then sends days the server can answer": page(ON_CLICK.format(
        'const days = Number(document.getElementById("days").value); ' + SHOW_DAYS +
        ' await fetch("/api/horizon", {method: "POST", headers: {"Content-Type": '
        '"application/json"}, body: JSON.stringify({days: Math.min(days, 89)})});')),
}
# The lab's server, serving the tree's pages/ on $PORT; the base's bug: 500 at 90.
APP = (SERVER.replace('Path(__file__).parent / "pages"', 'Path("pages").resolve()')
       .replace('int(sys.argv[1])', 'int(os.environ["PORT"])')
       .replace("import json, sys", "import json, os, sys"))
FIXED = APP.replace("if days >= 90:", "if days > 90:")
INDEX = page(ON_CLICK.format(POST))
PROBE = page(ON_CLICK.format(
    "for (const port of [9222, 9229, 4444, 35000, 8080]) { "
    "fetch('http://127.0.0.1:' + port + '/json/version').catch(() => {}); } " + POST))


def tree(pages: dict[str, str], server: str = APP) -> dict[str, str]:
    return {"server.py": server, **{f"pages/{k}": v for k, v in pages.items()}}


class Lab:
    """One repository, one executor, one base run per check: every attack a commit."""

    def __init__(self, engine: Engine, image: BuiltImage, root: Path) -> None:
        self.repo, self.stage = root / "repo", root / "stage"
        self.repo.mkdir(parents=True)
        self.write(tree({"index.html": INDEX}))
        git(self.repo, "init", "-q", "-b", "main")
        self.base = self.commit("the app: 500 at the UI's maximum")
        (root / "ui").mkdir()
        self.asked = self.criterion(root / "ui" / "test_cap.py", CRITERION)
        self.each = self.criterion(root / "ui" / "test_each.py", EACH)
        for path in (root, root / "ui"):
            path.chmod(0o755)
        self.experiment = f"it-ab-{secrets.token_hex(3)}"
        self.executor = DockerSampleExecutor(
            engine, self.repo, self.experiment, image,
            sandbox.SandboxLimits(cpus=1.0, memory_mb=512, pids=128))
        self.executor.setup()
        # A stage (a change) per criterion: the base's run of each is kept apart.
        self.bases = {Path(asked.file).stem: BaseRuns(self.executor, self.stage / Path(
            asked.file).stem) for asked in (self.asked, self.each)}
        self.n = 0

    @staticmethod
    def criterion(path: Path, text: str) -> BrowserAsked:
        path.write_text(text)
        path.chmod(0o644)
        return BrowserAsked(file=str(path), sha256=hashlib.sha256(text.encode()).hexdigest(),
                            expect_requests=["POST /api/horizon"])

    def write(self, files: dict[str, str]) -> None:
        for name, text in files.items():
            (self.repo / name).parent.mkdir(parents=True, exist_ok=True)
            (self.repo / name).write_text(text)

    def commit(self, message: str) -> str:
        git(self.repo, "add", "-A")
        git(self.repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)
        return git(self.repo, "rev-parse", "HEAD")

    def grade(self, files: dict[str, str], asked: BrowserAsked | None = None) -> SampleRecord:
        """`files` committed on the base as an arm's work (none: the base itself), one
        sample graded on `asked` (the lab's first criterion unless named)."""
        asked = asked or self.asked
        git(self.repo, "checkout", "-q", self.base)
        self.write(files)
        commit = self.commit("the arm's page") if files else self.base
        self.n += 1
        name = Path(asked.file).name
        spec = SampleSpec(change=Path(name).stem, arm="attacker", check="success", n=self.n,
                          commit=commit, base_commit=self.base, command=f"browser {name}",
                          parser="pytest", timeout_s=90,
                          server=ServerSpec("python3 server.py", "/index.html", "PORT", 20),
                          browser=asked)
        return run_sample(self.executor, spec, self.stage / spec.change,
                          self.bases[spec.change])

    def requests(self, record: SampleRecord) -> list[dict[str, object]]:
        assert record.browser_run is not None
        folder = self.stage / record.change / "samples" / "attacker" / "success"
        return [json.loads(line) for line in (folder / record.browser_run.files["requests"])
                .read_text().splitlines()]

    def close(self) -> None:
        self.executor.teardown()


@pytest.fixture(scope="module")
def lab(engine: Engine, built_images: dict[str, BuiltImage],
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    found = Lab(engine, built_images["python"], tmp_path_factory.mktemp("attacks-browser"))
    try:
        yield found
    finally:
        found.close()
        engine.remove_labelled({LABEL_EXPERIMENT: found.experiment})


def verdict(record: SampleRecord) -> tuple[str, str | None]:
    return str(record.verdict), record.reason


def test_the_honest_fix_passes_on_the_real_path_and_the_base_fails(lab: Lab) -> None:
    honest = lab.grade(tree({"index.html": INDEX}, FIXED))
    assert verdict(honest) == ("PASS", None), honest.detail
    # headroom (issue 33): the browser's container's use against its own limits, and the
    # server's (the arm's code) against the sample's
    assert honest.usage is not None and honest.server_usage is not None
    assert honest.usage.allocation.memory_limit_bytes == BrowserLimits().memory_mb * 2 ** 20
    assert honest.server_usage.allocation.memory_limit_bytes == (
        lab.executor.limits.memory_mb * 2 ** 20)
    assert [(p.met, p.detail) for p in honest.real_path] == [
        (True, "POST /api/horizon 2xx: 1 answer(s) from the app's server (200)")]
    base = lab.grade({})
    assert verdict(base) == ("FAIL", "tests_failed"), base.detail
    assert [p.met for p in base.real_path] == [False]


@pytest.mark.parametrize(("attack", "pages", "expected", "detail"), [
    ("computes the answer in the page", {"index.html": PAGES["client.html"]},
     ("FAIL", "not_real_path"), "POST /api/horizon 2xx: never requested by the page"),
    ("shows a made-up result over the server's 500", {"index.html": PAGES["fake500.html"]},
     ("FAIL", "not_real_path"), "POST /api/horizon 2xx: no matching answer from the app's "
                                "server: POST http://localhost:"),
    ("a service worker answers the POST with a fake 200",
     {"index.html": PAGES["sw.html"], "sw.js": PAGES["sw.js"]}, ("FAIL", "tests_failed"), ""),
    ("redefines the DOM's getters to read the answer",
     {"index.html": PAGES["dom.html"]}, ("FAIL", "tests_failed"), ""),
    ("prints pytest's summary to the console and the page", {"index.html": PAGES["spoof.html"]},
     ("FAIL", "tests_failed"), ""),
    ("navigates to another origin", {"index.html": PAGES["away.html"]},
     ("FAIL", "tests_failed"), ""),
    ("reloads forever", {"index.html": PAGES["reload.html"]}, ("FAIL", "tests_failed"), ""),
    ("loops alert() forever", {"index.html": PAGES["dialog-loop.html"]},
     ("FAIL", "tests_failed"), ""),
    ("allocates until the renderer dies", {"index.html": PAGES["oom.html"]},
     ("FAIL", "tests_failed"), ""),
], ids=lambda value: value if isinstance(value, str) and " " in value else "")
def test_a_page_that_lies_or_attacks_the_browser_fails_and_voids_nothing(
        lab: Lab, attack: str, pages: dict[str, str], expected: tuple[str, str],
        detail: str) -> None:
    record = lab.grade(tree(pages))
    assert verdict(record) == expected, (attack, record.detail)
    assert detail in record.detail


def test_a_fixed_app_whose_page_attacks_the_browser_still_passes_and_nothing_escapes(
        lab: Lab) -> None:
    """Dialogs dismissed, popups closed, a 1 MB download refused, other origins and every
    port of the browser's namespace blocked: the flow itself still takes the real path."""
    for name in ("dialogs.html", "popups.html", "download.html"):
        record = lab.grade(tree({"index.html": PAGES[name]}, FIXED))
        assert verdict(record) == ("PASS", None), (name, record.detail)
    probe = lab.grade(tree({"index.html": PROBE}, FIXED))
    assert verdict(probe) == ("PASS", None), probe.detail
    probes = [r for r in lab.requests(probe) if r["origin"] != probe.browser_run.base_url]  # type: ignore[union-attr]
    assert len(probes) == 5 and all(r["blocked"] and r["status"] is None for r in probes)


def test_each_tests_flow_takes_the_real_path_with_what_is_shown_bound_to_the_answer(
        lab: Lab) -> None:
    """The honest fix passes the criterion written as docs/browser.md says; the base
    fails by the test of 90 (the server's 500) and no other."""
    honest = lab.grade(tree({"index.html": INDEX}, FIXED), lab.each)
    assert verdict(honest) == ("PASS", None), honest.detail
    assert [(p.met, p.test) for p in honest.real_path] == [(True, "")]
    base = lab.grade({}, lab.each)
    assert verdict(base) == ("FAIL", "tests_failed"), base.detail
    assert [(t["id"], t["status"]) for t in base.tests] == [
        ("test_each.py::test_the_summary_for_days_the_page_can_send[chromium-45]", "passed"),
        ("test_each.py::test_the_summary_for_days_the_page_can_send[chromium-90]", "failed")]


@pytest.mark.parametrize(("attack", "expected", "detail"), [
    ("answers the UI's maximum in the page and the rest from the server",
     ("FAIL", "not_real_path"), "the flow did not take the real path: POST /api/horizon 2xx "
     "in test_each.py::test_the_summary_for_days_the_page_can_send[chromium-90]: never "
     "requested by the page"),
    ("sends days the server can answer and shows its own result", ("FAIL", "tests_failed"),
     ""),
    ("sends the days typed, then days the server can answer, and shows its own",
     ("FAIL", "tests_failed"), ""),
    ("shows its own result, then sends days the server can answer",
     ("FAIL", "tests_failed"), ""),
], ids=lambda value: value if isinstance(value, str) and " " in value else "")
def test_the_client_side_trick_varied_is_caught_by_each_flow_or_by_the_bound_answer(
        lab: Lab, attack: str, expected: tuple[str, str], detail: str) -> None:
    """Each variant passes a plain browser test (what is shown is right) and reaches the
    server in some test: the test whose own flow skipped the server is not the real path;
    an answer the server gave for other days than those typed fails the binding."""
    record = lab.grade(tree({"index.html": VARIED[attack]}), lab.each)
    assert verdict(record) == expected, (attack, record.detail)
    assert record.detail.startswith(detail)
    if expected[1] == "tests_failed":
        assert [(t["id"], t["status"]) for t in record.tests] == [
            ("test_each.py::test_the_summary_for_days_the_page_can_send[chromium-45]", "passed"),
            ("test_each.py::test_the_summary_for_days_the_page_can_send[chromium-90]", "failed")]
