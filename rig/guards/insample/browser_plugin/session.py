"""What one pytest run in the browser's container records (`Session`: the sinks, the
screenshots, the traces), the guards around Playwright's calls and handlers, and the end
of a test past its deadline (the browser killed). Runs in the browser's container as part
of the `bakeoff_browser` package."""

import json
import os
import signal
import tempfile
import time
from pathlib import Path

from .records import FORMAT, Sink, console_record, merge_traces, request_record, slug

CAPS = {"requests": 4 * 1024 * 1024, "console": 1024 * 1024, "events": 1024 * 1024,
        "tests": 4 * 1024 * 1024}
SCREENSHOT_BYTES = 2 * 1024 * 1024       # one screenshot; larger ones are left out
SCREENSHOTS_BYTES = 16 * 1024 * 1024     # every screenshot, together


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
        response = quietly(request.response)
        status = None if response is None else response.status
        from_sw = bool(response is not None and response.from_service_worker)
        network = response is not None and not from_sw and quietly(
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
            quietly(lambda: web_error.page.url)))

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


def quietly(call, *args):
    """A Playwright call whose failure (a page closed, a browser gone) is no answer."""
    try:
        return call(*args)
    except Exception:
        return None


def guarded(session, what, handler):
    """An event handler that never raises into Playwright's dispatcher."""
    def run(*args):
        try:
            handler(*args)
        except Exception as error:
            session.event("handler_error", handler=what, error=type(error).__name__)
    return run


def kill_browser(session, limit):
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
