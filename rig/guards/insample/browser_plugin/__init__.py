"""bakeoff-sandbox's browser plugin for pytest-playwright (written by the rig; it runs in
the browser's container, never on the host; standard library, pytest and Playwright only).

Loaded as `-p bakeoff_browser` after `-p pytest_base_url.plugin -p
pytest_playwright.pytest_playwright`, with plugin autoload off, so its fixtures are the
ones pytest uses (a criterion that redefines one the rig owns is a usage error). It:

- launches Debian's chromium (`browser_type_launch_args`): headless, over Playwright's
  pipe (never a debugging port), background networking, component updates and sync off,
  Chromium's popup blocker on, a JS heap cap, and no name resolved but `localhost`
  (`RESOLVER_RULES`);
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

import os
import threading
from pathlib import Path

import pytest

from .records import MARKER, clip, marked_expectations, origin_of, test_record
from .session import Session, guarded, kill_browser, quietly

OUT_ENV = "BAKEOFF_BROWSER_OUT"
DEADLINE_ENV = "BAKEOFF_BROWSER_TEST_TIMEOUT_S"
DEFAULT_TEST_TIMEOUT_S = 60.0
CHROMIUM = "/usr/bin/chromium"
QUIET = ("DEBUG", "DEBUG_FILE", "PWDEBUG")  # Playwright's logs would reach pytest's stderr
PLAYWRIGHT_PLUGIN = "pytest_playwright.pytest_playwright"
# The page reaches only the app's origin, http://localhost:PORT (`_guard` blocks every
# other), so the browser needs no name but localhost; every other one fails in Chromium at
# once, never asked of the engine's DNS. Chromium 156 asks for accounts.google.com and
# update.googleapis.com at start whatever the switches above say, and the engine's DNS
# forwards such a name from a network with no way out, where it waits 4 s for an answer:
# the server's container, whose network namespace the browser joined, could not be
# stopped until then (3.5 s of every browser sample's 6 to 9, measured).
RESOLVER_RULES = "MAP * ~NOTFOUND, EXCLUDE localhost"
LAUNCH_ARGS = (
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-domain-reliability", "--disable-breakpad",
    "--disable-client-side-phishing-detection", "--no-pings", "--no-first-run",
    "--no-default-browser-check", "--metrics-recording-only", "--password-store=basic",
    "--disable-dev-shm-usage", "--js-flags=--max-old-space-size=512",
    f"--host-resolver-rules={RESOLVER_RULES}",
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
_SESSION = pytest.StashKey()
_CONTEXTS = pytest.StashKey()
# The fixtures whose definition the rig's guarantees rest on, and the plugin that owns each.
OWNED = {"connect_options": __name__, "browser_type_launch_args": __name__,
         "launch_browser": __name__, "new_context": __name__, "browser": PLAYWRIGHT_PLUGIN,
         "browser_type": PLAYWRIGHT_PLUGIN, "playwright": PLAYWRIGHT_PLUGIN}


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
             quietly(lambda c=context: c.pages) or ()]
    for index, page in enumerate(pages):
        data = quietly(lambda p=page: p.screenshot(
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
        quietly(lambda c=context, p=path: c.tracing.stop(path=str(p)))
        if path.is_file():
            session.traces.append((session.test, path))
        quietly(context.close)


def _watch(context, session, app_origin):
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    context.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
    if app_origin is not None:
        context.route("**/*", _guard(session, app_origin))
    context.on("requestfinished", guarded(session, "request", session.request))
    context.on("requestfailed", guarded(
        session, "request", lambda request: session.request(request, request.failure or "")))
    context.on("console", guarded(session, "console", session.console))
    context.on("weberror", guarded(session, "weberror", session.page_error))
    creating = []
    context.on("page", guarded(session, "page", lambda page: _page(session, page, creating)))
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
    return guarded(session, "route", handle)


def _page(session, page, creating):
    """A page the test did not make (a popup, with or without an opener) is closed."""
    if not creating:
        session.event("popup", url=clip(page.url))
        page.close()
        return
    page.on("dialog", guarded(session, "dialog", lambda dialog: (
        session.event("dialog", type=dialog.type, message=clip(dialog.message)),
        dialog.dismiss())))
    page.on("download", guarded(session, "download", lambda download: (
        session.event("download", url=clip(download.url),
                      name=clip(download.suggested_filename)), download.cancel())))
    page.on("crash", guarded(session, "crash", lambda crashed: session.event(
        "crash", url=clip(crashed.url))))


@pytest.fixture(autouse=True)
def _bakeoff_test(request):
    """The test (its fixtures included) ends by BAKEOFF_BROWSER_TEST_TIMEOUT_S: past it,
    the browser is killed, so whatever waits on it fails instead of hanging. A context
    the rig did not make (`browser.new_context` called by the criterion) is a usage
    error: its requests would go unrecorded, its settings unfixed."""
    session = request.config.stash[_SESSION]
    limit = float(os.environ.get(DEADLINE_ENV) or DEFAULT_TEST_TIMEOUT_S)
    timer = threading.Timer(limit, kill_browser, args=(session, limit))
    timer.daemon = True
    timer.start()
    browser = request.getfixturevalue("browser") if "browser" in request.fixturenames else None
    yield
    timer.cancel()
    stray = [c for c in (quietly(lambda: browser.contexts) or ()) if id(c) not in
             session.contexts] if browser is not None else []
    if stray:
        session.event("stray_context", count=len(stray))
        pytest.exit(f"{request.node.nodeid}: made a browser context outside the rig's "
                    "new_context (use the page, context or new_context fixtures)",
                    returncode=pytest.ExitCode.USAGE_ERROR)


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
    quietly(cdp.send, "WebAuthn.removeVirtualAuthenticator",
             {"authenticatorId": found["authenticatorId"]})
