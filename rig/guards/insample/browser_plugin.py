"""bakeoff-sandbox's browser plugin for pytest-playwright (written by the rig; it runs in
the browser's container, never on the host; standard library, pytest and Playwright only).

Loaded as `-p bakeoff_browser` after `-p pytest_base_url.plugin -p
pytest_playwright.pytest_playwright`, with plugin autoload off, so its fixtures are the
ones pytest uses (a criterion that redefines one the rig owns is a usage error). It:

- launches Debian's chromium (`browser_type_launch_args`): headless, over Playwright's
  pipe (never a debugging port), background networking, component updates and sync off,
  Chromium's popup blocker on, a JS heap cap;
- makes every context (`new_context`, under pytest-playwright's `context` and `page`)
  with the same settings (`browser_context_args`: viewport, locale, UTC, reduced motion,
  device scale), and always with service workers blocked and downloads refused
  (`FORCED`: a criterion's own arguments cannot change these);
- records every request the page made (`requests.jsonl`: method, URL, origin, path,
  status, who answered: the app's `server`, a `service_worker`, the `page` itself (a
  route, a cache, data:) or `none`, the failure; requests to another origin are blocked
  and recorded as such), the console's errors and the page's uncaught errors
  (`console.jsonl`) and what the page tried (`events.jsonl`: dialogs dismissed, popups
  closed, downloads refused, crashes, a test past its deadline), as JSON lines, capped,
  into the directory the rig names in BAKEOFF_BROWSER_OUT; recorded, not graded;
- records each test that ran, its outcome and the endpoints its own flow must reach
  (`tests.jsonl`): the criterion's `expect_requests` hold for every test that passed
  (each request is recorded under the test that was running), unless the test says
  otherwise with `@pytest.mark.expect_requests("POST /api/x", "POST /api/y 400")`
  (nothing: this test need reach none); an entry that does not read as
  `METHOD /path [STATUS]` is a usage error;
- takes a screenshot of every page at the end of each test (`-end`, or `-failed`), and
  traces each context; the traces become one `trace.zip` per run (each test a context of
  its own in the viewer); `artifacts.json` lists what was kept and what a cap left out;
- gives a `virtual_authenticator` (CTAP2, internal transport, resident keys, user
  verification) over a CDP session, for a WebAuthn register-then-sign-in flow;
- ends a test that outlives BAKEOFF_BROWSER_TEST_TIMEOUT_S (a page that reloads forever,
  loops, or hangs the browser) by killing the browser: a failure, never a hang.

**Writing a browser criterion.** Drive the page as a user would, with values the UI can
send; decide with Playwright locators and `expect` (they run in Playwright's own world,
which the page's scripts cannot redefine). Never decide a verdict from `page.evaluate`,
`evaluate_handle` or `wait_for_function` of code whose answer the page controls: the page
can redefine every DOM method and getter of its own world. Make contexts only through
the `page`, `context` and `new_context` fixtures. The page's console output never reaches
pytest's output: it goes to `console.jsonl` only, and nothing here prints.
"""

import json
import os
import re
import signal
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest

FORMAT = 1  # of every line written (rig/real_path.py reads the same)
OUT_ENV = "BAKEOFF_BROWSER_OUT"
DEADLINE_ENV = "BAKEOFF_BROWSER_TEST_TIMEOUT_S"
DEFAULT_TEST_TIMEOUT_S = 60.0
CHROMIUM = "/usr/bin/chromium"
QUIET = ("DEBUG", "DEBUG_FILE", "PWDEBUG")  # Playwright's logs would reach pytest's stderr
PLAYWRIGHT_PLUGIN = "pytest_playwright.pytest_playwright"
LAUNCH_ARGS = (
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-domain-reliability", "--disable-breakpad",
    "--disable-client-side-phishing-detection", "--no-pings", "--no-first-run",
    "--no-default-browser-check", "--metrics-recording-only", "--password-store=basic",
    "--disable-dev-shm-usage", "--js-flags=--max-old-space-size=512",
)  # no --disable-features: Chromium reads only the last one, and Playwright passes its own
VIEWPORT = {"width": 1280, "height": 720}
CONTEXT = {"viewport": VIEWPORT, "screen": VIEWPORT, "device_scale_factor": 1,
           "locale": "en-US", "timezone_id": "UTC", "reduced_motion": "reduce",
           "color_scheme": "light", "is_mobile": False, "has_touch": False}
FORCED = {"service_workers": "block", "accept_downloads": False}
AUTHENTICATOR = {"protocol": "ctap2", "transport": "internal", "hasResidentKey": True,
                 "hasUserVerification": True, "isUserVerified": True,
                 "automaticPresenceSimulation": True}
ACTION_TIMEOUT_MS = 10_000
NAVIGATION_TIMEOUT_MS = 15_000
SCREENSHOT_TIMEOUT_MS = 5_000
TEXT_CHARS = 2_000  # of a URL, a path, a message kept in a record
CAPS = {"requests": 4 * 1024 * 1024, "console": 1024 * 1024, "events": 1024 * 1024,
        "tests": 4 * 1024 * 1024}
MARKER = "expect_requests"
# As rig.real_path reads an expectation: METHOD /path [STATUS].
EXPECTATION = re.compile(r"[A-Z]{1,16} /[!-~]*?(?: [1-5](?:\d\d|xx))?")
SCREENSHOT_BYTES = 2 * 1024 * 1024       # one screenshot; larger ones are left out
SCREENSHOTS_BYTES = 16 * 1024 * 1024     # every screenshot, together
TRACE_BYTES = 32 * 1024 * 1024           # trace.zip
TRACE_UNPACKED_BYTES = 256 * 1024 * 1024  # what the parts may unpack to, together
_SESSION = pytest.StashKey()
_CONTEXTS = pytest.StashKey()
# The fixtures whose definition the rig's guarantees rest on, and the plugin that owns each.
OWNED = {"connect_options": __name__, "browser_type_launch_args": __name__,
         "launch_browser": __name__, "new_context": __name__, "browser": PLAYWRIGHT_PLUGIN,
         "browser_type": PLAYWRIGHT_PLUGIN, "playwright": PLAYWRIGHT_PLUGIN}


# -- the records (pure: unit-tested on the host) ------------------------------------------

def clip(text, limit=TEXT_CHARS):
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[:limit] + "..."


def origin_of(url):
    """`scheme://host[:port]`, lower-cased, without the default port (as rig.real_path)."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "https": 443}.get(scheme)
    return f"{scheme}://{host}" + ("" if port is None or port == default else f":{port}")


def answered_by(has_response, from_service_worker, from_network):
    if not has_response:
        return "none"
    if from_service_worker:
        return "service_worker"
    return "server" if from_network else "page"


def request_record(test, method, url, resource_type, status, from_service_worker,
                   from_network, failure=None, blocked=False):
    """One line of requests.jsonl (rig.real_path.read_requests reads it)."""
    return {"format": FORMAT, "kind": "request", "test": test, "method": str(method),
            "url": clip(url), "origin": origin_of(url), "path": clip(urlsplit(url).path or "/"),
            "status": status, "answered_by": answered_by(
                status is not None, from_service_worker, from_network),
            "resource_type": str(resource_type or ""),
            "failure": None if failure is None else clip(failure), "blocked": bool(blocked)}


def test_record(test, outcome, expected):
    """One line of tests.jsonl: a test that ran, how it came out, and the expectations
    its own flow must meet (None: the criterion's)."""
    return {"format": FORMAT, "kind": "test", "test": test, "outcome": str(outcome),
            "expect_requests": None if expected is None else [str(e) for e in expected]}


def marked_expectations(item):
    """A test's own `expect_requests` marker (the closest one), or None without one; a
    usage error when an entry is not `METHOD /path [STATUS]`."""
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return None
    if marker.kwargs or not all(isinstance(e, str) and EXPECTATION.fullmatch(e.strip())
                                for e in marker.args):
        raise pytest.UsageError(
            f"{item.nodeid}: @pytest.mark.{MARKER} takes entries such as "
            f'"POST /api/horizon" or "POST /api/horizon 400", not {marker.args!r}'
            + (f" {marker.kwargs!r}" if marker.kwargs else ""))
    return [e.strip() for e in marker.args]


def console_record(test, kind, level, text, url):
    """One line of console.jsonl: a console error (`console`) or an uncaught error."""
    return {"format": FORMAT, "kind": kind, "test": test, "type": str(level),
            "text": clip(text), "url": clip(url)}


class Sink:
    """One JSON-lines file, capped: past `limit` bytes a line is counted, not written;
    the count is the file's last line (`truncated`)."""

    def __init__(self, path, limit):
        self.path, self.limit = path, limit
        self.written = self.lines = self.dropped = 0
        self._lock = threading.Lock()
        self._file = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()

    def write(self, record):
        line = json.dumps(record, ensure_ascii=True, sort_keys=True) + "\n"
        with self._lock:
            if self._file.closed or self.written + len(line) > self.limit:
                self.dropped += 1
                return
            self._file.write(line)
            self._file.flush()
            self.written += len(line)
            self.lines += 1

    def close(self):
        with self._lock:
            if self._file.closed:
                return
            if self.dropped:
                self._file.write(json.dumps({"format": FORMAT, "kind": "truncated",
                                             "dropped": self.dropped}) + "\n")
            self._file.close()

    def summary(self):
        return {"file": self.path.name, "lines": self.lines, "dropped": self.dropped}


def merge_traces(parts, target, limit=TRACE_BYTES, unpacked=TRACE_UNPACKED_BYTES):
    """Each test's trace (`parts`: (test, path)) as one context of one zip: its files
    renamed `NNN-trace.trace`, `NNN-trace.network`, ... (the viewer opens every `*.trace`
    of a zip as a context of its own) and the resources shared. A part that would pass
    `limit` bytes (or `unpacked`, together) is left out. (included, left_out) tests."""
    included, left_out, seen, size, total = [], [], set(), 0, 0
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as merged:
        for index, (test, path) in enumerate(parts, 1):
            entries = _trace_entries(path)
            part_size = path.stat().st_size if entries is not None else 0
            need = sum(info.file_size for info, _ in entries or ())
            if entries is None or size + part_size > limit or total + need > unpacked:
                left_out.append(test)
                continue
            with zipfile.ZipFile(path) as part:
                for info, resource in entries:
                    if resource and info.filename in seen:
                        continue
                    seen.add(info.filename)
                    name = info.filename if resource else f"{index:03d}-{info.filename}"
                    merged.writestr(name, part.read(info))
            size, total = size + part_size, total + need
            included.append(test)
    if not included:
        Path(target).unlink()
    return included, left_out


def _trace_entries(path):
    """A trace zip's files as (info, is_a_resource); None when it cannot be read."""
    try:
        with zipfile.ZipFile(path) as part:
            found = []
            for info in part.infolist():
                resource = info.filename.startswith("resources/")
                if info.is_dir() or (not resource and "/" in info.filename):
                    continue
                found.append((info, resource))
            return found
    except (OSError, zipfile.BadZipFile):
        return None


def slug(nodeid, limit=60):
    name = nodeid.split("::", 1)[-1] if "::" in nodeid else nodeid
    return re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")[:limit] or "test"


# -- the session ---------------------------------------------------------------------------

class Session:
    """What one pytest run in the browser's container records."""

    def __init__(self, out):
        self.out, self.test, self.started = out, "", time.monotonic()
        (out / "screenshots").mkdir(parents=True, exist_ok=True)
        self.sinks = {name: Sink(out / f"{name}.jsonl", limit) for name, limit in CAPS.items()}
        self.traces_dir = Path(tempfile.mkdtemp(prefix="bakeoff-traces-"))
        self.traces, self.screenshots = [], []
        self.screenshot_bytes = self.screenshots_dropped = self.serial = 0
        self.blocked, self.contexts = set(), set()
        self.expected = {}  # test id -> its marker's expectations (None: the criterion's)

    def event(self, kind, **facts):
        self.sinks["events"].write({"format": FORMAT, "kind": kind, "test": self.test,
                                    "t": round(time.monotonic() - self.started, 3), **facts})

    def request(self, request, failure=None):
        response = _quietly(request.response)
        status = None if response is None else response.status
        from_sw = bool(response is not None and response.from_service_worker)
        network = response is not None and not from_sw and _quietly(
            response.server_addr) is not None
        self.sinks["requests"].write(request_record(
            self.test, request.method, request.url, request.resource_type, status, from_sw,
            network, failure, blocked=id(request) in self.blocked))

    def console(self, message):
        if message.type in ("error", "assert"):
            self.sinks["console"].write(console_record(
                self.test, "console", message.type, message.text,
                (message.location or {}).get("url")))

    def page_error(self, web_error):
        error = web_error.error
        self.sinks["console"].write(console_record(
            self.test, "pageerror", "error", getattr(error, "message", error),
            _quietly(lambda: web_error.page.url)))

    def keep_screenshot(self, data, when, page_index):
        if len(data) > SCREENSHOT_BYTES or self.screenshot_bytes + len(data) > SCREENSHOTS_BYTES:
            self.screenshots_dropped += 1
            return
        self.serial += 1
        suffix = "" if page_index == 0 else f"-page{page_index + 1}"
        name = f"screenshots/{self.serial:03d}-{slug(self.test)}-{when}{suffix}.png"
        (self.out / name).write_bytes(data)
        self.screenshot_bytes += len(data)
        self.screenshots.append({"test": self.test, "when": when, "file": name,
                                 "bytes": len(data)})

    def finish(self):
        trace = None
        if self.traces:
            included, left_out = merge_traces(self.traces, self.out / "trace.zip")
            trace = {"file": "trace.zip" if included else None, "tests": included,
                     "left_out": left_out,
                     "bytes": (self.out / "trace.zip").stat().st_size if included else 0}
        for sink in self.sinks.values():
            sink.close()
        artifacts = {"format": FORMAT, "screenshots": self.screenshots,
                     "screenshots_dropped": self.screenshots_dropped, "trace": trace,
                     "records": {name: sink.summary() for name, sink in self.sinks.items()}}
        (self.out / "artifacts.json").write_text(json.dumps(artifacts, indent=1,
                                                            sort_keys=True))


def _quietly(call, *args):
    """A Playwright call whose failure (a page closed, a browser gone) is no answer."""
    try:
        return call(*args)
    except Exception:
        return None


def _guarded(session, what, handler):
    """An event handler that never raises into Playwright's dispatcher."""
    def run(*args):
        try:
            handler(*args)
        except Exception as error:
            session.event("handler_error", handler=what, error=type(error).__name__)
    return run


# -- hooks ---------------------------------------------------------------------------------

def pytest_configure(config):
    for name in QUIET:  # before Playwright's driver starts: it inherits the environment
        os.environ.pop(name, None)
    out = os.environ.get(OUT_ENV, "")
    if not out:
        raise pytest.UsageError(f"{OUT_ENV} is not set: the rig names the directory the "
                                "browser's records, screenshots and trace go to")
    config.addinivalue_line(
        "markers", f"{MARKER}(*expectations): the endpoints this test's own flow must "
        "reach on the app's server, in place of the criterion's expect_requests")
    config.stash[_SESSION] = Session(Path(out))
    config.pluginmanager.register(TestRecorder(config.stash[_SESSION]), "bakeoff_tests")


def pytest_collection_modifyitems(session, config, items):
    """A criterion that redefines a fixture the rig's guarantees rest on is refused; so
    is an `expect_requests` marker that does not read as expectations."""
    found = config.stash[_SESSION]
    for item in items:
        found.expected[item.nodeid] = marked_expectations(item)
        info = getattr(item, "_fixtureinfo", None)
        for name, owner in OWNED.items():
            defs = info.name2fixturedefs.get(name) if info is not None else None
            if defs and getattr(defs[-1].func, "__module__", None) != owner:
                raise pytest.UsageError(
                    f"{item.nodeid}: the fixture {name!r} is redefined; the rig fixes how "
                    "the browser is launched and contexts are made (use page, context or "
                    "new_context, and browser_context_args for the rest)")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.config.stash[_SESSION].test = item.nodeid


class TestRecorder:
    """tests.jsonl's writer, registered with the session it writes for (a report
    carries no config): each test's outcome once its call ran (a test skipped or erred
    in its setup never passed: it has no line), with the expectations its flow must
    meet."""

    __test__ = False  # not a test class, whatever pytest collects

    def __init__(self, session):
        self.session = session

    def pytest_runtest_logreport(self, report):
        if report.when == "call":
            self.session.sinks["tests"].write(test_record(
                report.nodeid, report.outcome, self.session.expected.get(report.nodeid)))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    failed = True
    try:
        result = yield
        failed = False
        return result
    finally:
        _screenshots(item, "failed" if failed else "end")


def _screenshots(item, when):
    session = item.config.stash.get(_SESSION, None)
    if session is None:
        return
    pages = [page for context in item.stash.get(_CONTEXTS, ()) for page in
             _quietly(lambda c=context: c.pages) or ()]
    for index, page in enumerate(pages):
        data = _quietly(lambda p=page: p.screenshot(
            timeout=SCREENSHOT_TIMEOUT_MS, animations="disabled", caret="hide"))
        if data is None:
            session.event("screenshot_failed", page=index, when=when, pages=len(pages))
        else:
            session.keep_screenshot(data, when, index)


def pytest_sessionfinish(session, exitstatus):
    found = session.config.stash.get(_SESSION, None)
    if found is not None:
        found.finish()


# -- fixtures ------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def connect_options():
    return None  # the browser is launched here, never reached over a socket


@pytest.fixture(scope="session")
def browser_type_launch_args():
    args = list(LAUNCH_ARGS)
    if any("remote-debugging-port" in arg for arg in args):
        raise pytest.UsageError("the browser is never given a debugging port")
    return {"executable_path": CHROMIUM, "headless": True, "args": args,
            "ignore_default_args": ["--disable-popup-blocking"], "chromium_sandbox": False,
            "timeout": 30_000}


@pytest.fixture(scope="session")
def launch_browser(browser_type_launch_args, browser_type):
    def launch(**kwargs):
        if kwargs:
            raise pytest.UsageError("the rig launches the browser with fixed arguments; "
                                    f"launch_browser takes none (got {sorted(kwargs)})")
        return browser_type.launch(**browser_type_launch_args)
    return launch


@pytest.fixture(scope="session")
def browser_context_args(base_url):
    return {**CONTEXT, **({"base_url": base_url} if base_url else {})}


@pytest.fixture
def new_context(browser, browser_context_args, base_url, request):
    """pytest-playwright's `new_context`, made by the rig: the criterion's arguments over
    the defaults, FORCED over both; each context recorded and traced, closed after."""
    session = request.config.stash[_SESSION]
    marker = next(request.node.iter_markers("browser_context_args"), None)
    defaults = {**browser_context_args, **(marker.kwargs if marker else {})}
    made = []
    request.node.stash[_CONTEXTS] = made

    def _new_context(**kwargs):
        context = browser.new_context(**{**defaults, **kwargs, **FORCED})
        made.append(context)
        session.contexts.add(id(context))
        _watch(context, session, origin_of(base_url) if base_url else None)
        return context

    yield _new_context
    for context in made:
        path = session.traces_dir / f"{len(session.traces) + 1:03d}.zip"
        _quietly(lambda c=context, p=path: c.tracing.stop(path=str(p)))
        if path.is_file():
            session.traces.append((session.test, path))
        _quietly(context.close)


def _watch(context, session, app_origin):
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    context.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
    if app_origin is not None:
        context.route("**/*", _guard(session, app_origin))
    context.on("requestfinished", _guarded(session, "request", session.request))
    context.on("requestfailed", _guarded(
        session, "request", lambda request: session.request(request, request.failure or "")))
    context.on("console", _guarded(session, "console", session.console))
    context.on("weberror", _guarded(session, "weberror", session.page_error))
    creating = []
    context.on("page", _guarded(session, "page", lambda page: _page(session, page, creating)))
    original = context.new_page

    def new_page(*args, **kwargs):
        creating.append(True)
        try:
            return original(*args, **kwargs)
        finally:
            creating.pop()

    context.new_page = new_page
    context.tracing.start(title=session.test, screenshots=True, snapshots=True,
                          sources=False)


def _guard(session, app_origin):
    """Requests to the app's origin go on; any other is blocked (and recorded so)."""
    def handle(route, request):
        if origin_of(request.url) == app_origin:
            route.fallback()
            return
        session.blocked.add(id(request))
        session.event("blocked", method=request.method, url=clip(request.url),
                      navigation=request.is_navigation_request())
        route.abort("blockedbyclient")
    return _guarded(session, "route", handle)


def _page(session, page, creating):
    """A page the test did not make (a popup, with or without an opener) is closed."""
    if not creating:
        session.event("popup", url=clip(page.url))
        page.close()
        return
    page.on("dialog", _guarded(session, "dialog", lambda dialog: (
        session.event("dialog", type=dialog.type, message=clip(dialog.message)),
        dialog.dismiss())))
    page.on("download", _guarded(session, "download", lambda download: (
        session.event("download", url=clip(download.url),
                      name=clip(download.suggested_filename)), download.cancel())))
    page.on("crash", _guarded(session, "crash", lambda crashed: session.event(
        "crash", url=clip(crashed.url))))


@pytest.fixture(autouse=True)
def _bakeoff_test(request):
    """The test (its fixtures included) ends by BAKEOFF_BROWSER_TEST_TIMEOUT_S: past it,
    the browser is killed, so whatever waits on it fails instead of hanging. A context
    the rig did not make (`browser.new_context` called by the criterion) is a usage
    error: its requests would go unrecorded, its settings unfixed."""
    session = request.config.stash[_SESSION]
    limit = float(os.environ.get(DEADLINE_ENV) or DEFAULT_TEST_TIMEOUT_S)
    timer = threading.Timer(limit, _kill_browser, args=(session, limit))
    timer.daemon = True
    timer.start()
    browser = request.getfixturevalue("browser") if "browser" in request.fixturenames else None
    yield
    timer.cancel()
    stray = [c for c in (_quietly(lambda: browser.contexts) or ()) if id(c) not in
             session.contexts] if browser is not None else []
    if stray:
        session.event("stray_context", count=len(stray))
        pytest.exit(f"{request.node.nodeid}: made a browser context outside the rig's "
                    "new_context (use the page, context or new_context fixtures)",
                    returncode=pytest.ExitCode.USAGE_ERROR)


def _kill_browser(session, limit):
    killed = []
    for pid in _descendants(os.getpid()):
        if _comm(pid).startswith("chrom"):
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except OSError:
                continue
    session.event("deadline", limit_s=limit, killed=len(killed))


def _descendants(root):
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _comm(pid):
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


class VirtualAuthenticator:
    """A CTAP2 platform authenticator in the page's browser (CDP WebAuthn domain)."""

    def __init__(self, cdp, authenticator_id):
        self.cdp, self.id = cdp, authenticator_id

    def credentials(self):
        return self.cdp.send("WebAuthn.getCredentials",
                             {"authenticatorId": self.id}).get("credentials", [])

    def set_user_verified(self, verified):
        self.cdp.send("WebAuthn.setUserVerified",
                      {"authenticatorId": self.id, "isUserVerified": bool(verified)})

    def add_credential(self, credential):
        """A credential of the caller's (CDP `WebAuthn.Credential`: base64 fields)."""
        self.cdp.send("WebAuthn.addCredential",
                      {"authenticatorId": self.id, "credential": credential})

    def remove_credential(self, credential_id):
        self.cdp.send("WebAuthn.removeCredential",
                      {"authenticatorId": self.id, "credentialId": credential_id})


@pytest.fixture
def virtual_authenticator(page):
    """A passkey authenticator for `page`: resident keys, user verification, presence
    simulated; over Playwright's own CDP session (its pipe), never a port."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("WebAuthn.enable", {"enableUI": False})
    found = cdp.send("WebAuthn.addVirtualAuthenticator", {"options": AUTHENTICATOR})
    yield VirtualAuthenticator(cdp, found["authenticatorId"])
    _quietly(cdp.send, "WebAuthn.removeVirtualAuthenticator",
             {"authenticatorId": found["authenticatorId"]})
