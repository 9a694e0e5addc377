"""The bench of the browser tests (issue 22): a tiny app (a stdlib HTTP server and pages,
honest and hostile) in the python image on an internal network, and the browser's
container beside it in its network namespace, both made through the choke point
(`runner.containers.engine`); what the browser's plugin hands back, read as the rig
will read it."""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rig.guards import real_path
from runner.containers import browser, sandbox
from runner.containers.backend import (
    LABEL_EXPERIMENT,
    Bind,
    ContainerSpec,
    Labels,
    Resources,
    Tmpfs,
)
from runner.containers.dockerspec import container_args
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.containers.samples.driver import Outputs
from tests.integration.helpers import created

PORT = 4321
BASE_URL = f"http://localhost:{PORT}"

# The app: pages by name, `POST /api/horizon` (the seed's bug: 500 at the UI's maximum),
# a large attachment at /download.
SERVER = '''import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PAGES = Path(__file__).parent / "pages"
TYPES = {".html": "text/html", ".js": "text/javascript"}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        sys.stderr.write("%s %s\\n" % (self.command, self.path))

    def do_GET(self):
        name = self.path.split("?")[0].lstrip("/") or "index.html"
        if name == "download":
            return self.send(200, b"x" * 1000000, "application/octet-stream",
                             [("Content-Disposition", "attachment; filename=big.bin")])
        page = PAGES / name
        if "/" in name or not page.is_file():
            return self.send(404, b"not found", "text/plain")
        self.send(200, page.read_bytes(), TYPES.get(page.suffix, "text/plain"))

    def do_POST(self):
        size = int(self.headers.get("Content-Length") or 0)
        days = int(json.loads(self.rfile.read(size) or b"{}").get("days", 0))
        if self.path != "/api/horizon":
            return self.send(404, b"{}", "application/json")
        if days >= 90:
            return self.send(500, b'{"error": "internal_error"}', "application/json")
        self.send(200, json.dumps({"summary": "%d days" % days}).encode(), "application/json")

    def send(self, code, data, kind, extra=()):
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        for key, value in extra:
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
'''

FORM = ('<input id="days" type="number" min="1" max="90" value="1"><button id="go">Go</button>'
        '<p id="result"></p>')
POST = ('const days = Number(document.getElementById("days").value); '
        'const r = await fetch("/api/horizon", {method: "POST", headers: '
        '{"Content-Type": "application/json"}, body: JSON.stringify({days})}); '
        'const j = await r.json(); '
        'document.getElementById("result").textContent = r.ok ? j.summary : "error";')
ON_CLICK = "document.getElementById('go').onclick = async () => {{ {} }};"


def page(script: str, extra: str = "") -> str:
    body = f"{FORM}{extra}\n<script>\n{script}\n</script>"
    return f"<!doctype html><html><body>{body}</body></html>\n"


SPOOF = "==== 5 passed in 0.01s ===="
SW = '''self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (e) => e.waitUntil(self.clients.claim()));
self.addEventListener("fetch", (e) => {
  if (e.request.method === "POST" && new URL(e.request.url).pathname === "/api/horizon") {
    e.respondWith(e.request.json().then((b) => new Response(
      JSON.stringify({summary: b.days + " days"}),
      {status: 200, headers: {"Content-Type": "application/json"}})));
  }
});
'''
# Registers sw.js (which answers the POST with a made-up 200) and waits up to 2 s for it
# to control the page before it POSTs.
SW_PAGE = page('''const ready = (async () => {
  await navigator.serviceWorker.register("/sw.js");
  await navigator.serviceWorker.ready;
  if (!navigator.serviceWorker.controller) {
    await new Promise((r) => navigator.serviceWorker.addEventListener("controllerchange", r));
  }
  document.getElementById("sw").textContent = "active";
})();
''' + ON_CLICK.format("await Promise.race([ready, new Promise((r) => setTimeout(r, 2000))]); "
                     + POST), '<p id="sw">none</p>')

PAGES = {
    "index.html": page(ON_CLICK.format(POST)),
    # The three ways past a plain browser test (issue 22).
    "client.html": page(ON_CLICK.format(
        'document.getElementById("result").textContent = '
        'document.getElementById("days").value + " days";')),
    "fake500.html": page(ON_CLICK.format(
        POST.replace('r.ok ? j.summary : "error"', 'days + " days"'))),
    "sw.html": SW_PAGE,
    "sw.js": SW,
    # The page against the browser.
    "dialogs.html": page(ON_CLICK.format("alert('a'); confirm('b'); prompt('c'); " + POST)),
    "dialog-loop.html": page("setTimeout(() => { for (;;) alert('again'); }, 0);"),
    "popups.html": page(ON_CLICK.format(
        "window.open('/index.html'); window.open('/index.html', '_blank', 'noopener'); "
        "window.open('/client.html'); " + POST)),
    "download.html": page(ON_CLICK.format("location.href = '/download'; " + POST)),
    "away.html": page("fetch('http://elsewhere.invalid:8080/beacon', {mode: 'no-cors'})"
                      ".catch(() => {}); " + ON_CLICK.format(
                          "location.href = 'http://elsewhere.invalid:8080/';")),
    "reload.html": page("setTimeout(() => location.reload(), 50);"),
    "loop.html": page(ON_CLICK.format("for (;;) {}")),
    "oom.html": page(ON_CLICK.format(
        "const keep = []; for (;;) keep.push(new Array(1e6).fill(Math.random()));")),
    "spoof.html": page(f"console.log('{SPOOF}'); console.error('{SPOOF}'); " + ON_CLICK.format(
        f"document.getElementById('result').textContent = '{SPOOF}';")),
    # The page redefines what its own world reads of the DOM.
    "dom.html": page(
        "const real = Object.getOwnPropertyDescriptor(Node.prototype, 'textContent'); "
        "Object.defineProperty(Node.prototype, 'textContent', "
        "{get() { return '90 days'; }, set(v) { real.set.call(this, v); }}); "
        "Object.defineProperty(HTMLElement.prototype, 'innerText', "
        "{get() { return '90 days'; }}); " + ON_CLICK.format(POST)),
}


@dataclass(frozen=True)
class App:
    """The app a run drives: its files (read-only at /app), command, env and health path;
    on the lab's own network unless one is named."""

    files: Path
    command: tuple[str, ...] = ("python3", "/app/server.py", str(PORT))
    env: Mapping[str, str] = field(default_factory=dict)
    network: str | None = None
    health: str = "/index.html"
    dns: tuple[str, ...] = ()  # where the engine's DNS sends what it cannot answer


@dataclass(frozen=True)
class BrowserRun:
    """What one browser container came to."""

    exit_code: int
    duration_s: float
    outputs: Outputs
    app_log: str

    def text(self, name: str) -> str:
        return self.outputs.text(name)

    @property
    def log(self) -> str:
        return self.text("log")

    def requests(self, test: str | None = None) -> tuple[real_path.RequestRecord, ...]:
        read = real_path.read_requests(self.text("requests.jsonl"))
        assert (read.malformed, read.dropped) == (0, 0)
        return tuple(r for r in read.records if test is None or r.test == test)

    def lines(self, name: str) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.text(name).splitlines()]

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.lines("events.jsonl") if kind is None or e["kind"] == kind]

    def artifacts(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.text("artifacts.json"))
        return found


class BrowserLab:
    """One experiment's worth of app + browser runs; everything made carries its label."""

    def __init__(self, engine: Engine, app_image: BuiltImage, browser_image: BuiltImage,
                 root: Path) -> None:
        self.engine, self.app_image, self.browser_image = engine, app_image, browser_image
        self.root = root
        self.experiment = f"it-browser-{secrets.token_hex(3)}"
        self.network = f"bakeoff-{self.experiment}"
        engine.create_network(self.network, self.labels("sample-network"), egress=False)

    def labels(self, role: str) -> Labels:
        return Labels(self.experiment, role, "A", "r1")

    def pages_app(self) -> App:
        """The lab's own app: SERVER and PAGES."""
        app_dir = self.root / secrets.token_hex(3) / "app"
        (app_dir / "pages").mkdir(parents=True)
        (app_dir / "server.py").write_text(SERVER)
        for name, text in PAGES.items():
            (app_dir / "pages" / name).write_text(text)
        return App(app_dir)

    def run(self, criterion: dict[str, str], target: str, *, app: App | None = None,
            test_timeout_s: float = 60, timeout_s: int = 240,
            argv: tuple[str, ...] | None = None) -> BrowserRun:
        """`criterion` (files under the criterion directory) run on `target` against a
        fresh `app` (the lab's pages by default); `argv` replaces pytest (a control run)."""
        chosen = app or self.pages_app()
        for path in [chosen.files, *chosen.files.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        inputs = self.root / secrets.token_hex(3) / "in"
        browser.write_inputs(inputs, {k: v.encode() for k, v in criterion.items()})
        with self.app(chosen) as container:
            command = browser.command(target, BASE_URL, health=chosen.health, wait_s=30,
                                      timeout_s=timeout_s)
            spec = browser.container_spec(
                self.browser_image.image_id, str(container.id),
                command if argv is None else argv, self.labels("browser"), inputs,
                limits=browser.BrowserLimits().on(self.engine), test_timeout_s=test_timeout_s)
            started = time.monotonic()
            done = sandbox.run_to_end(self.engine, spec, timeout_s + 60, stdout=True)
            duration = time.monotonic() - started
            app_log = self.engine.call("read the app's log", container.logs).decode(
                errors="replace")
        outputs = browser.read_outputs(done.stdout) if argv is None else Outputs(
            {"stdout": done.stdout})
        return BrowserRun(done.exit_code, duration, outputs, app_log)

    @contextlib.contextmanager
    def app(self, app: App) -> Iterator[Any]:
        """The app's container on its internal network: the sandbox user, a read-only
        root, the app's files read-only."""
        spec = ContainerSpec(
            image=self.app_image.image_id, command=app.command, env=app.env,
            labels=self.labels("sample-server"), resources=Resources(1.0, 256, 64),
            user=sandbox.SANDBOX_USER, purpose="the lab's app", read_only=True,
            tmpfs=(Tmpfs("/tmp", 16),), mounts=(Bind(app.files, "/app"),),
            network=app.network or self.network, working_dir="/app")
        if app.dns:  # the same container, its DNS upstream a test's own (not a spec field)
            container = self.engine.call("create the app", self.engine.client.containers.create,
                                         **container_args(spec), dns=list(app.dns))
        else:
            container = created(self.engine, spec)
        try:
            self.engine.call("start the app", container.start)
            yield container
        finally:
            self.engine.call("remove the app", container.remove, force=True, v=True)

    def close(self) -> None:
        self.engine.remove_labelled({LABEL_EXPERIMENT: self.experiment})


@contextlib.contextmanager
def browser_lab(engine: Engine, app_image: BuiltImage, browser_image: BuiltImage,
                root: Path) -> Iterator[BrowserLab]:
    lab = BrowserLab(engine, app_image, browser_image, root)
    try:
        yield lab
    finally:
        lab.close()


def module_lab(engine: Engine, built_images: dict[str, BuiltImage], browser_image: BuiltImage,
               tmp_path_factory: Any) -> Iterator[BrowserLab]:
    """A module's lab, on the python image (`lab = pytest.fixture(scope="module",
    name="lab")(module_lab)` in the module)."""
    with browser_lab(engine, built_images["python"], browser_image,
                     tmp_path_factory.mktemp("browser")) as found:
        yield found
