"""Browser criteria by hand (issue 22, phase 1): the browser image, the rig's plugin and
the real path, with the real engine. An app (a stdlib server and pages) runs on an
internal network as the sandbox user; the browser's container joins its network
namespace (uid 1000, no capability, read-only root, tmpfs, a pids limit of 512) and runs
a pytest-playwright criterion against http://localhost:PORT. What the plugin hands back
(requests, console errors, events, screenshots, trace.zip) is read as the rig will read
it, and `expect_requests` is decided with `rig.guards.real_path`."""

from __future__ import annotations

import json
import re
import zipfile
from io import BytesIO
from pathlib import Path

import pytest

from rig.guards import real_path
from rig.guards.real_path import AnsweredBy
from rig.parsers import get_parser
from runner.containers import browser, images, sandbox
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.manifest.expectation import parse_expectation
from tests.integration.browser_lab import BASE_URL, SPOOF, BrowserLab, BrowserRun, module_lab

ROOT = Path(__file__).resolve().parents[2]
POST = parse_expectation("POST /api/horizon")

CAP = '''import os

import pytest
from playwright.sync_api import Page, expect


@pytest.mark.parametrize("days", [1, 45])
def test_summary(page: Page, days):
    page.goto("/index.html")
    page.locator("#days").fill(str(days))
    page.locator("#go").click()
    expect(page.locator("#result")).to_have_text(f"{days} days")


def listening():
    """TCP ports listening in this network namespace but Docker's DNS (127.0.0.11)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port = local.rsplit(":", 1)
            if state == "0A" and address != "0B00007F":
                found.add(int(port, 16))
    return sorted(found)


def chromium_command_lines():
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if open(f"/proc/{entry}/comm").read().startswith("chrom"):
                    found.append(open(f"/proc/{entry}/cmdline").read())
            except OSError:
                continue
    return found


def test_the_browsers_container(page: Page, base_url):
    page.goto("/index.html")
    status = dict(line.split(":\\t", 1) for line in open("/proc/self/status") if ":\\t" in line)
    assert (os.getuid(), os.getgid()) == (1000, 1000)
    assert (status["CapEff"].strip(), status["NoNewPrivs"].strip()) == ("0000000000000000", "1")
    with pytest.raises(OSError, match="Read-only file system"):
        open("/opt/browser/planted", "w")
    assert listening() == [int(base_url.rsplit(":", 1)[1])]
    lines = chromium_command_lines()
    assert any("--remote-debugging-pipe" in line for line in lines)
    assert not any("--remote-debugging-port" in line for line in lines)
'''

PATHS = '''import pytest
from playwright.sync_api import Page, expect


@pytest.mark.parametrize(("name", "days"), [("index", 45), ("client", 90), ("fake500", 90),
                                            ("sw", 90)])
def test_summary(page: Page, name, days):
    page.goto(f"/{name}.html")
    page.locator("#days").fill(str(days))
    page.locator("#go").click()
    expect(page.locator("#result")).to_have_text(f"{days} days")
'''

# Service workers allowed, outside the rig's plugin: what the block in `new_context` stops.
CONTROL = '''import json, sys, time
from playwright.sync_api import sync_playwright
import bakeoff_browser as plugin
from bakeoff_browser import records

seen = []
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=plugin.CHROMIUM, headless=True,
                                args=list(plugin.LAUNCH_ARGS))
    context = browser.new_context(base_url=sys.argv[1], service_workers="allow")

    def finished(request):
        r = request.response()
        sw = bool(r and r.from_service_worker)
        seen.append(records.request_record("control", request.method, request.url,
                                           request.resource_type, r.status if r else None,
                                           sw, bool(r and not sw and r.server_addr())))

    context.on("requestfinished", finished)
    page = context.new_page()
    for _ in range(100):
        try:
            page.goto("/sw.html")
            break
        except Exception:
            time.sleep(0.2)
    page.locator("#sw").filter(has_text="active").wait_for()
    page.locator("#days").fill("90")
    page.locator("#go").click()
    page.locator("#result").filter(has_text="90 days").wait_for()
    browser.close()
print(json.dumps(seen))
'''

ATTACKS = '''import pytest
from playwright.sync_api import Page, expect


def submit(page, name, days=45):
    page.goto(f"/{name}.html")
    page.locator("#days").fill(str(days))
    page.locator("#go").click()


@pytest.mark.parametrize("name", ["dialogs", "popups", "download"])
def test_the_flow_survives(page: Page, name):
    submit(page, name)
    expect(page.locator("#result")).to_have_text("45 days")
    for _ in range(50):
        if len(page.context.pages) == 1:
            break
        page.wait_for_timeout(100)
    assert page.context.pages == [page]


@pytest.mark.parametrize("name", ["dialog-loop", "away", "reload", "loop", "oom", "spoof"])
def test_the_flow_fails(page: Page, name):
    page.set_default_timeout(3000)
    page.set_default_navigation_timeout(3000)
    submit(page, name)
    expect(page.locator("#result")).to_have_text("45 days", timeout=3000)


def test_a_locator_reads_the_real_text(page: Page):
    submit(page, "dom", 90)
    expect(page.locator("#result")).to_have_text("error")


def test_evaluate_reads_what_the_page_says(page: Page):
    submit(page, "dom", 90)
    expect(page.locator("#result")).to_have_text("error")
    assert page.evaluate("document.getElementById('result').textContent") == "90 days"
'''

DEADLINE = '''from playwright.sync_api import Page


def test_a_page_that_hangs_the_browser(page: Page):
    page.goto("/loop.html")
    page.locator("#go").click(no_wait_after=True, timeout=2000)


def test_the_next_one(page: Page):
    page.goto("/index.html")
'''


lab = pytest.fixture(scope="module", name="lab")(module_lab)


def node(test: str, name: str, *params: object) -> str:
    return f"{name}.py::{test}[chromium{''.join(f'-{p}' for p in params)}]"


def summary(run: BrowserRun) -> str:
    result = get_parser("pytest").parse(run.log)
    assert result.summaries == 1, run.log
    return run.log.strip().splitlines()[-1].strip("= ")  # -v: the line is decorated


def pins() -> dict[str, str]:
    text = (ROOT / "images" / "browser" / "requirements.txt").read_text()
    return dict(re.findall(r"^([a-z0-9-]+)==(\S+)", text, flags=re.MULTILINE))


def test_the_image_says_which_chromium_and_playwright_it_holds(
        engine: Engine, browser_image: BuiltImage, lab: BrowserLab) -> None:
    found = browser.installed(engine, browser_image, lab.labels("tool-check"))
    pinned = pins()
    assert (found.playwright, found.pytest_playwright, found.pytest_base_url, found.pytest) == (
        pinned["playwright"], pinned["pytest-playwright"], pinned["pytest-base-url"],
        pinned["pytest"])
    assert re.fullmatch(r"Chromium 156\.\d+\.\d+\.\d+ built on Debian GNU/Linux 12 \(bookworm\)",
                        found.chromium), found.chromium
    assert found.chromium_package.startswith(found.chromium.split()[1])


def test_the_image_keeps_no_ca_file_and_no_ca_variable(
        engine: Engine, browser_image: BuiltImage, lab: BrowserLab) -> None:
    env = (images.inspect(engine, browser_image.tag) or {})["Config"]["Env"]
    assert not [v for v in env if re.search(r"CERT|_CA|CA_|PROXY", v.split("=")[0], re.I)]
    found = sandbox.check_image(engine, browser_image.image_id, [
        "sh", "-c", "find / -xdev -name 'bakeoff-host-ca.crt' 2>/dev/null; ls -A /tmp"],
        lab.labels("tool-check"))
    assert found == ""


def test_a_page_that_posts_passes_with_the_post_answered_by_the_server(lab: BrowserLab) -> None:
    """The whole path by hand: the test passes, the POST is the server's 200, a
    screenshot per test and one trace.zip with a context per test come out; the browser
    runs as the sandbox user with no capability, a read-only root, and no port of its own
    in the app's namespace (the criterion's last test checks from inside)."""
    run = lab.run({"test_cap.py": CAP}, "test_cap.py")
    assert (run.exit_code, re.sub(r" in [\d.]+s.*", "", summary(run))) == (0, "3 passed"), run.log
    for days in (1, 45):
        test = node("test_summary", "test_cap", days)
        (found,) = real_path.check([POST], run.requests(test), BASE_URL)
        assert found.met and [r.status for r in found.matched] == [200], found.detail
    assert {r.answered_by for r in run.requests()} == {AnsweredBy.server}
    assert run.app_log.count("POST /api/horizon") == 2
    shots = run.artifacts()["screenshots"]
    assert [(s["test"], s["when"]) for s in shots] == [
        (node("test_summary", "test_cap", 1), "end"), (node("test_summary", "test_cap", 45), "end"),
        ("test_cap.py::test_the_browsers_container[chromium]", "end")]
    assert all(run.outputs.files[s["file"]].startswith(b"\x89PNG") for s in shots)
    trace = run.artifacts()["trace"]
    assert (trace["file"], len(trace["tests"]), trace["left_out"]) == ("trace.zip", 3, [])
    with zipfile.ZipFile(BytesIO(run.outputs.files["trace.zip"])) as merged:
        assert sorted(n for n in merged.namelist() if n.endswith(".trace")) == [
            "001-trace.trace", "002-trace.trace", "003-trace.trace"]
    assert run.text("server") == "healthy\n"


def test_the_three_ways_past_a_plain_browser_test_are_told_apart_by_the_records(
        lab: BrowserLab) -> None:
    """A page that computes the answer client-side and one that shows a made-up result
    over the server's 500 both PASS a plain browser test; the records say neither got a
    2xx from the server. The service worker that would answer the POST with a fake 200
    never registers (service workers are blocked): its POST reaches the server."""
    run = lab.run({"test_paths.py": PATHS}, "test_paths.py")
    assert run.exit_code == 1
    assert re.sub(r" in [\d.]+s.*", "", summary(run)) == "1 failed, 3 passed"
    assert f"FAILED {node('test_summary', 'test_paths', 'sw', 90)}" in run.log
    found = {name: real_path.check([POST], run.requests(node(
        "test_summary", "test_paths", name, days)), BASE_URL)[0]
        for name, days in (("index", 45), ("client", 90), ("fake500", 90), ("sw", 90))}
    assert {name: (f.met, f.detail.split(": ", 1)[1]) for name, f in found.items()} == {
        "index": (True, "1 answer(s) from the app's server (200)"),
        "client": (False, "never requested by the page"),
        "fake500": (False, f"no matching answer from the app's server: POST {BASE_URL}"
                           "/api/horizon: 500 by server"),
        "sw": (False, f"no matching answer from the app's server: POST {BASE_URL}"
                      "/api/horizon: 500 by server")}
    assert AnsweredBy.service_worker not in {r.answered_by for r in run.requests()}
    assert run.app_log.count("POST /api/horizon") == 3


def test_with_service_workers_allowed_the_fake_200_is_the_service_workers(
        lab: BrowserLab) -> None:
    """The control of the test above, outside the rig's plugin: the trick is real, and
    the record names who answered."""
    run = lab.run({"control.py": CONTROL}, "control.py", argv=(
        "python", f"{browser.CRITERION_DIR}/control.py", BASE_URL))
    assert run.exit_code == 0, run.text("stdout")
    records = real_path.read_requests("\n".join(
        json.dumps(r) for r in json.loads(run.text("stdout").strip().splitlines()[-1]))).records
    posts = [(r.status, r.answered_by) for r in records if r.method == "POST"]
    assert posts == [(200, AnsweredBy.service_worker)]
    assert not real_path.check([POST], records, BASE_URL)[0].met
    assert "POST /api/horizon" not in run.app_log


def test_the_page_cannot_hang_escape_or_speak_for_the_browser(lab: BrowserLab) -> None:
    """Dialogs are dismissed, popups blocked or closed, downloads refused, another origin
    blocked;
    a page that loops, reloads forever, loops on dialogs or allocates until its renderer
    dies FAILs its test without hanging the run; the page's console and text never make a
    second pytest summary; a locator reads the real DOM where `page.evaluate` reads what
    the page's own world was told to say."""
    run = lab.run({"test_attacks.py": ATTACKS}, "test_attacks.py")
    assert run.exit_code == 1
    assert re.sub(r" in [\d.]+s.*", "", summary(run)) == "6 failed, 5 passed", run.log
    for name in ("dialog-loop", "away", "reload", "loop", "oom", "spoof"):
        assert f"FAILED {node('test_the_flow_fails', 'test_attacks', name)}" in run.log

    def of(name: str, kind: str) -> list[dict[str, object]]:
        return [e for e in run.events(kind)
                if e["test"] == node("test_the_flow_survives", "test_attacks", name)
                or e["test"] == node("test_the_flow_fails", "test_attacks", name)]
    assert [(e["type"], e["message"]) for e in of("dialogs", "dialog")] == [
        ("alert", "a"), ("confirm", "b"), ("prompt", "c")]
    # Chromium's popup blocker (on: Playwright's --disable-popup-blocking is dropped) lets
    # one popup through per click; that one is closed.
    assert [e["url"] for e in of("popups", "popup")] == [f"{BASE_URL}/index.html"]
    assert [(e["url"], e["name"]) for e in of("download", "download")] == [
        (f"{BASE_URL}/download", "big.bin")]
    assert [(e["url"], e["navigation"]) for e in of("away", "blocked")] == [
        ("http://elsewhere.invalid:8080/beacon", False), ("http://elsewhere.invalid:8080/", True)]
    away = run.requests(node("test_the_flow_fails", "test_attacks", "away"))
    assert [(r.path, r.answered_by, r.failure) for r in away if r.blocked] == [
        ("/beacon", AnsweredBy.none, "net::ERR_BLOCKED_BY_CLIENT.Inspector"),
        ("/", AnsweredBy.none, "net::ERR_BLOCKED_BY_CLIENT")]  # a fetch's, a navigation's
    assert len(of("dialog-loop", "dialog")) > 10
    assert [e["kind"] for e in of("oom", "crash")] == ["crash"]
    assert not [line for line in run.log.splitlines() if SPOOF in line
                and not line.startswith("E ")]
    assert [c["text"] for c in run.lines("console.jsonl") if SPOOF in c["text"]] == [SPOOF]
    assert run.duration_s < 150


def test_a_test_past_its_deadline_kills_the_browser_and_fails(lab: BrowserLab) -> None:
    """A page that hangs its renderer holds up the click and the screenshot; past the
    test's deadline the plugin kills the browser: the test fails, the next errors, the
    run ends."""
    run = lab.run({"test_deadline.py": DEADLINE}, "test_deadline.py", test_timeout_s=8)
    assert run.exit_code == 1
    assert re.sub(r" in [\d.]+s.*", "", summary(run)) == "1 failed, 1 error", run.log
    (deadline,) = run.events("deadline")
    assert deadline["test"] == node("test_a_page_that_hangs_the_browser", "test_deadline")
    assert deadline["limit_s"] == 8.0 and int(str(deadline["killed"])) > 0
    assert run.duration_s < 60


REDEFINED = '''import pytest


@pytest.fixture(scope="session")
def browser_type_launch_args():
    return {"args": ["--remote-debugging-port=9222"]}


def test_opens(page):
    page.goto("/index.html")
'''

STRAY = '''def test_opens(browser, base_url):
    context = browser.new_context(service_workers="allow")
    context.new_page().goto(f"{base_url}/index.html")
'''


@pytest.mark.parametrize(("criterion", "message"), [
    (REDEFINED, "test_opens.py::test_opens[chromium]: the fixture 'browser_type_launch_args' "
                "is redefined"),
    (STRAY, "test_opens.py::test_opens[chromium]: made a browser context outside the rig's "
            "new_context")])
def test_a_criterion_that_goes_around_the_rigs_browser_is_a_usage_error(
        lab: BrowserLab, criterion: str, message: str) -> None:
    """The rig's guarantees (no debugging port, the fixed context, every request recorded)
    rest on its fixtures: a criterion that redefines one, or makes a context of its own,
    is refused with pytest's usage-error status (4: the rig's bad_invocation, never an
    arm's FAIL)."""
    run = lab.run({"test_opens.py": criterion}, "test_opens.py")
    assert run.exit_code == 4, run.log
    assert message in run.log
