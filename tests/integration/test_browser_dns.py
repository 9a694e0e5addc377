"""The rig's browser asks the engine's DNS for nothing (the plugin's `RESOLVER_RULES`).

A page reaches only the app's origin, http://localhost:PORT; Chromium's own background
services (sign-in, component updates) still look names up at start, and the engine's DNS
forwards each from a network with no way out, where it waits for an answer that never
comes and holds the app's container's stop until then. Here the app's DNS upstream is a
logger of the test's own on the same internal network (it answers NXDOMAIN): the control
(Chromium launched with the plugin's switches but the resolver rules) shows the lookups
are real and reach it; the rig's browser, on the same page and a page that names another
host, passes and makes none."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import pytest

from runner.containers import browser
from runner.containers.backend import ContainerSpec, Resources
from runner.containers.images import BuiltImage
from tests.integration.browser_lab import BASE_URL, BrowserLab, module_lab
from tests.integration.helpers import created

# A DNS server of one socket: logs each query's name, answers NXDOMAIN.
LOGGER = '''import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 53))
print("listening", flush=True)
while True:
    data, peer = s.recvfrom(4096)
    i, labels = 12, []
    while i < len(data) and data[i]:
        labels.append(data[i + 1:i + 1 + data[i]].decode(errors="replace"))
        i += 1 + data[i]
    print("query", ".".join(labels), flush=True)
    s.sendto(data[:2] + b"\\x81\\x83" + data[4:6] + bytes(6) + data[12:i + 5], peer)
'''

CRITERION = '''from playwright.sync_api import Page, expect


def test_the_page_and_one_that_names_another_host(page: Page):
    page.goto("/index.html")
    page.locator("#days").fill("45")
    page.locator("#go").click()
    expect(page.locator("#result")).to_have_text("45 days")
    page.goto("/away.html")
    page.wait_for_timeout(6000)
'''

# The plugin's switches but its resolver rules, the page open as long.
CONTROL = '''import sys
from playwright.sync_api import sync_playwright
import bakeoff_browser as plugin

args = [a for a in plugin.LAUNCH_ARGS if not a.startswith("--host-resolver-rules")]
assert len(args) == len(plugin.LAUNCH_ARGS) - 1
with sync_playwright() as p:
    b = p.chromium.launch(executable_path=plugin.CHROMIUM, headless=True, args=args)
    page = b.new_page()
    page.goto(sys.argv[1] + "/index.html")
    page.wait_for_timeout(6000)
    b.close()
print("control done")
'''


lab = pytest.fixture(scope="module", name="lab")(module_lab)


@pytest.fixture()
def logger(lab: BrowserLab, built_images: dict[str, BuiltImage]) -> Iterator[Any]:
    """The DNS logger on the lab's internal network (root in its own container: port 53)."""
    container = created(lab.engine, ContainerSpec(
        image=built_images["python"].image_id, command=("python3", "-u", "-c", LOGGER),
        labels=lab.labels("dns-logger"), resources=Resources(0.5, 128, 32), user="0:0",
        purpose="the test's DNS logger", network=lab.network))
    try:
        container.start()
        for _ in range(100):
            if b"listening" in container.logs():
                break
            time.sleep(0.1)
        container.reload()
        assert b"listening" in container.logs(), container.logs()
        yield container
    finally:
        container.remove(force=True)


def queried(logger: Any) -> list[str]:
    """The names the logger was asked for, in order (a name each time it was asked)."""
    return [line.split(" ", 1)[1] for line in logger.logs().decode().splitlines()
            if line.startswith("query ")]


def test_the_rigs_browser_asks_the_engines_dns_for_nothing(lab: BrowserLab,
                                                            logger: Any) -> None:
    address = logger.attrs["NetworkSettings"]["Networks"][lab.network]["IPAddress"]
    app = dataclasses.replace(lab.pages_app(), dns=(address,))
    control = lab.run({"control.py": CONTROL}, "control.py", app=app, argv=(
        "python", f"{browser.CRITERION_DIR}/control.py", BASE_URL))
    assert (control.exit_code, control.text("stdout").strip()) == (0, "control done")
    seen = queried(logger)
    assert "accounts.google.com" in seen, seen  # Chromium's own, at start
    assert not [name for name in seen if "localhost" in name or "invalid" in name], seen

    run = lab.run({"test_dns.py": CRITERION}, "test_dns.py", app=app)
    assert run.exit_code == 0, run.log
    assert "1 passed" in run.log.strip().splitlines()[-1], run.log
    assert queried(logger)[len(seen):] == []  # not one more
    assert [(r.origin, r.path, r.failure) for r in run.requests() if r.blocked] == [
        ("http://elsewhere.invalid:8080", "/beacon", "net::ERR_BLOCKED_BY_CLIENT.Inspector")]
