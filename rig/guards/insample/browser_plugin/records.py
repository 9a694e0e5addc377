"""The browser plugin's records (pure: unit-tested on the host): the lines it writes
(requests.jsonl, tests.jsonl, console.jsonl; `rig.guards.real_path` reads them), the capped
JSON-lines file that writes them, and the traces merged into one zip. Standard library and
pytest only: it runs in the browser's container as part of the `bakeoff_browser` package."""

import json
import re
import threading
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest

FORMAT = 1  # of every line written (rig/guards/real_path.py reads the same)
TEXT_CHARS = 2_000  # of a URL, a path, a message kept in a record
MARKER = "expect_requests"
# As rig.guards.real_path reads an expectation: METHOD /path [STATUS].
EXPECTATION = re.compile(r"[A-Z]{1,16} /[!-~]*?(?: [1-5](?:\d\d|xx))?")
TRACE_BYTES = 32 * 1024 * 1024           # trace.zip
TRACE_UNPACKED_BYTES = 256 * 1024 * 1024  # what the parts may unpack to, together


def clip(text, limit=TEXT_CHARS):
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[:limit] + "..."


def origin_of(url):
    """`scheme://host[:port]`, lower-cased, without the default port (as rig.guards.real_path)."""
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
    """One line of requests.jsonl (rig.guards.real_path.read_requests reads it)."""
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
