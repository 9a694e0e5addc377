"""What the rig's observer saw in one pytest sample: sessions, tests by id, anomalies.

The sample's root reader (`rig/guards/insample/observer_reader.py`) writes one line per datagram
with the sender's pid and uid as the kernel gave them; each datagram is a record of the
rig's audit hook (`rig/guards/insample/observer_hook.py`) with a sequence number and an HMAC
under the key its process announced first. `read` checks all of that and folds the
records into an `ObserverReport`; nothing here trusts text the code under test printed.

What is anomalous (a record no hook of the rig wrote, a gap, a contradiction between
pytest's report and the rig's own attestation of a call, a flag the hook raised) is
kept as an `Anomaly` with its kind: the verdict rules compare the kinds with the base's
(`rig.sample.verdict`). Pure: text in, typed values out.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from rig.parsers.base import Counts

LIMIT = 16 * 1024 * 1024  # bytes of observation the reader keeps (then: overflow)
MAX_ANOMALIES = 50


class Status(enum.StrEnum):
    """How one test came out, as the observer saw it."""

    PASSED = "passed"
    XPASSED = "xpassed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"
    XFAILED = "xfailed"
    ABORTED = "aborted"  # its call started and the process never reported its end
    ABSENT = "absent"  # collected, never run (deselected, interrupted)


RAN = frozenset({Status.PASSED, Status.XPASSED, Status.FAILED, Status.ERROR,
                 Status.XFAILED, Status.ABORTED})


@dataclass(frozen=True)
class Test:
    """One test id in one sample."""

    id: str
    status: Status
    pinned: bool = False  # collected from a pinned file (a protected test, a canary)
    attested: bool = False  # the rig saw its call start and end
    verified: bool = False  # its code is the pinned file's, as compiled from its bytes


@dataclass(frozen=True)
class Anomaly:
    kind: str  # forged | sequence | session | contradiction | duplicate | flag:<k> | ...
    detail: str


@dataclass(frozen=True)
class ObserverReport:
    """Everything a pytest sample's observer saw. `present` False: no session at all."""

    present: bool
    sessions: int = 0  # the run's own sessions (not one nested in a test: `nested`)
    tests: tuple[Test, ...] = ()
    anomalies: tuple[Anomaly, ...] = ()
    finished: bool = False  # every session reported the end of its run
    status: int | None = None  # pytest's own exit status (the controller's, with xdist)
    collect_errors: tuple[str, ...] = ()
    overflow: bool = False
    plugins: tuple[str, ...] = ()
    inipath: str | None = None
    nested: int = 0  # sessions a test started (pytest run in a child process by a test)

    def test(self, test_id: str) -> Test | None:
        return next((t for t in self.tests if t.id == test_id), None)

    def kinds(self) -> frozenset[str]:
        return frozenset(a.kind for a in self.anomalies)

    def counts(self, excluding: str | None = None) -> Counts:
        """The tests' counts (pytest's words: xfailed is skipped, xpassed passed), the
        ids holding `excluding` (the canaries' token) left out."""
        tests = [t for t in self.tests if excluding is None or excluding not in t.id]
        def count(*statuses: Status) -> int:
            return sum(1 for t in tests if t.status in statuses)
        return Counts(passed=count(Status.PASSED, Status.XPASSED),
                      failed=count(Status.FAILED, Status.ABORTED),
                      skipped=count(Status.SKIPPED, Status.XFAILED),
                      errors=count(Status.ERROR))


NOTHING = ObserverReport(present=False)


@dataclass
class _Session:
    pid: int
    key: bytes
    seq: int = 1
    worker: bool = False
    items: dict[str, dict[str, object]] = field(default_factory=dict)
    started: dict[str, bool] = field(default_factory=dict)  # id -> verified
    ended: dict[str, tuple[bool, bool]] = field(default_factory=dict)  # id -> (ok, verified)
    reports: dict[str, dict[str, tuple[str, bool]]] = field(default_factory=dict)
    unattested: set[str] = field(default_factory=set)
    finish: int | None = None
    config: dict[str, object] = field(default_factory=dict)
    nested: bool = False  # opened while a test of another session was running

    def running(self) -> bool:
        return len(self.started) > len(self.ended)


class _Reader:
    def __init__(self) -> None:
        self.sessions: dict[int, _Session] = {}
        self.anomalies: list[Anomaly] = []
        self.collect_errors: list[str] = []
        self.overflow = False

    def anomaly(self, kind: str, detail: str) -> None:
        if len(self.anomalies) < MAX_ANOMALIES and all(
                (a.kind, a.detail) != (kind, detail) for a in self.anomalies):
            self.anomalies.append(Anomaly(kind, detail))

    def line(self, raw: str) -> None:
        try:
            item = json.loads(raw)
        except ValueError:
            self.anomaly("malformed", "a line the reader did not write")
            return
        if not isinstance(item, dict):
            return
        if "overflow" in item:
            self.overflow = True
            return
        if "ready" in item:
            return
        pid, data = item.get("pid"), item.get("d")
        if not isinstance(pid, int) or not isinstance(data, str):
            self.anomaly("malformed", "a reader line without sender or data")
            return
        self.datagram(pid, data)

    def datagram(self, pid: int, data: str) -> None:
        try:
            outer = json.loads(data)
            text, mac = outer["b"], outer["m"]
            body = json.loads(text)
        except (ValueError, KeyError, TypeError):
            self.anomaly("forged", f"process {pid} sent a record that is not the rig's")
            return
        if not isinstance(body, dict) or not isinstance(text, str) or not isinstance(mac, str):
            self.anomaly("forged", f"process {pid} sent a record that is not the rig's")
            return
        session = self.sessions.get(pid)
        if session is None:
            self.begin(pid, body, text, mac)
            return
        if not _mac_ok(session.key, text, mac):
            self.anomaly("forged", f"process {pid} sent a record under another key")
            return
        if body.get("s") != session.seq:
            self.anomaly("sequence", f"process {pid}'s records have a gap or repeat "
                                     f"(record {body.get('s')}, expected {session.seq})")
            session.seq = body.get("s", session.seq) if isinstance(body.get("s"), int) \
                else session.seq
        session.seq += 1
        self.record(session, body)

    def begin(self, pid: int, body: dict[str, object], text: str, mac: str) -> None:
        key_hex = body.get("key")
        if body.get("k") != "session" or body.get("s") != 0 or not isinstance(key_hex, str):
            self.anomaly("forged", f"process {pid} sent records without starting a session")
            return
        try:
            key = bytes.fromhex(key_hex)
        except ValueError:
            self.anomaly("forged", f"process {pid} announced a malformed key")
            return
        if not _mac_ok(key, text, mac):
            self.anomaly("forged", f"process {pid}'s first record does not verify")
            return
        # A session opened while a test runs is that test's own pytest run (pytester's
        # child process, a tool's self-test): its tests are not the run's, it never stands
        # for one of them (an id it shares with them is a duplicate), and it is not one
        # of the run's sessions. One opened at any other time (at import, at collection,
        # xdist's workers) is.
        nested = any(other.running() for other in self.sessions.values())
        self.sessions[pid] = _Session(pid, key, worker=bool(body.get("worker")),
                                      nested=nested)

    def record(self, session: _Session, body: dict[str, object]) -> None:
        kind, test_id = body.get("k"), str(body.get("id", ""))
        if kind == "items":
            found = body.get("items")
            for item in found if isinstance(found, list) else ():
                if not isinstance(item, dict):
                    continue
                item_id = str(item.get("id", ""))
                if item_id in session.items:
                    self.anomaly("duplicate", f"{item_id} collected twice in one session")
                session.items[item_id] = item
        elif kind == "start":
            if test_id in session.started:
                self.anomaly("duplicate", f"{test_id} called twice")
            session.started[test_id] = bool(body.get("verified"))
        elif kind == "end":
            if test_id not in session.started or test_id in session.ended:
                self.anomaly("contradiction", f"{test_id} ended without one start")
            session.ended[test_id] = (body.get("ok") is True, bool(body.get("verified")))
        elif kind == "report":
            when = str(body.get("when"))
            phases = session.reports.setdefault(test_id, {})
            if when in phases:
                self.anomaly("duplicate", f"{test_id} reported twice for its {when}")
            phases[when] = (str(body.get("outcome")), bool(body.get("xfail")))
        elif kind == "collectreport":
            if not session.nested:
                self.collect_errors.append(f"{test_id}: {body.get('outcome')}")
        elif kind == "unattested":
            session.unattested.add(test_id)
        elif kind == "flag":
            self.anomaly(f"flag:{body.get('flag')}", str(body.get("detail", ""))[:400])
        elif kind == "config":
            session.config = body
        elif kind == "finish":
            status = body.get("status")
            session.finish = status if isinstance(status, int) else -1
        elif kind not in ("note", "session"):
            self.anomaly("forged", f"a record of an unknown kind {kind!r}")


def _mac_ok(key: bytes, text: str, mac: str) -> bool:
    digest = hmac.new(key, text.encode("utf-8", "replace"), hashlib.sha256).hexdigest()
    return hmac.compare_digest(digest[:32], mac)


def read(text: str | None) -> ObserverReport:
    """The observation in the reader's output (None or empty: no observer ran)."""
    if not text:
        return NOTHING
    reader = _Reader()
    for raw in text.splitlines():
        if raw.strip():
            reader.line(raw)
    if not reader.sessions:
        return ObserverReport(present=False, anomalies=tuple(reader.anomalies),
                           overflow=reader.overflow)
    tests = _tests(reader)
    everyone = list(reader.sessions.values())
    sessions = [s for s in everyone if not s.nested]
    _shared_ids(reader, sessions, [s for s in everyone if s.nested])
    controller = [s for s in sessions if not s.worker] or sessions
    config = next((s.config for s in controller if s.config), {})
    plugins = config.get("plugins")
    inipath = config.get("inipath")
    return ObserverReport(
        present=True, sessions=len(sessions), tests=tests, nested=len(everyone) - len(sessions),
        anomalies=tuple(reader.anomalies), finished=all(s.finish is not None for s in everyone),
        status=controller[0].finish, collect_errors=tuple(reader.collect_errors),
        overflow=reader.overflow,
        plugins=tuple(str(p) for p in plugins) if isinstance(plugins, list) else (),
        inipath=inipath if isinstance(inipath, str) else None)


def _tests(reader: _Reader) -> tuple[Test, ...]:
    """Each test id's outcome. A test runs in one session (a worker, with xdist); the
    sessions that only relay reports (xdist's controller) add no outcome of their own."""
    found: dict[str, Test] = {}
    own = [s for s in reader.sessions.values() if not s.nested]
    runners = [s for s in own if s.items] or own
    for session in runners:
        for test_id, facts in session.items.items():
            test = _outcome(reader, session, test_id, facts)
            if test_id in found and found[test_id].status is not Status.ABSENT:
                if test.status is not Status.ABSENT:
                    reader.anomaly("duplicate", f"{test_id} ran in two sessions")
                continue
            found[test_id] = test
    return tuple(found.values())


def _shared_ids(reader: _Reader, own: list[_Session], nested: list[_Session]) -> None:
    """A session nested in a test that collects an id of the run's own sessions stands
    for one of the run's tests (a copy of a protected test run on a stub): a duplicate."""
    ids = {test_id for session in own for test_id in session.items}
    for session in nested:
        for test_id in sorted(ids & session.items.keys())[:5]:
            reader.anomaly("duplicate", f"{test_id} ran in two sessions (one started by a test)")


def _outcome(reader: _Reader, session: _Session, test_id: str,
             facts: Mapping[str, object]) -> Test:
    phases = session.reports.get(test_id, {})
    started = test_id in session.started
    ended = session.ended.get(test_id)
    attested = started and ended is not None
    verified = attested and bool(session.started[test_id]) and bool(ended and ended[1])
    status = _status(phases, started, ended)
    call = phases.get("call")
    if ended is not None and call is not None:
        ok, (outcome, xfail) = ended[0], call
        if not ok and outcome == "passed":
            reader.anomaly("contradiction", f"{test_id}: pytest's report says passed, the "
                                            "rig saw its call raise")
        if ok and outcome == "skipped" and not xfail:
            reader.anomaly("contradiction", f"{test_id}: reported skipped, the rig saw its "
                                            "call return")
    if (not attested and call is not None and call[0] == "passed"
            and test_id not in session.unattested):
        reader.anomaly("unattested", f"{test_id}: reported passed, the rig never saw it called")
    return Test(test_id, status, pinned=bool(facts.get("pinned")), attested=attested,
                verified=verified)


def _status(phases: Mapping[str, tuple[str, bool]], started: bool,
            ended: tuple[bool, bool] | None) -> Status:
    setup, call, teardown = phases.get("setup"), phases.get("call"), phases.get("teardown")
    if (setup is not None and setup[0] == "failed") or (teardown is not None and \
            teardown[0] == "failed"):
        return Status.ERROR
    if call is not None:
        outcome, xfail = call
        if outcome == "passed":
            return Status.XPASSED if xfail else Status.PASSED
        if outcome == "skipped":
            return Status.XFAILED if xfail else Status.SKIPPED
        return Status.FAILED
    if started and ended is None:
        return Status.ABORTED
    if setup is not None and setup[0] == "skipped":
        return Status.XFAILED if setup[1] else Status.SKIPPED
    if started:
        return Status.ABORTED  # its call ended and pytest never reported it
    return Status.ABSENT


def summary(observation: ObserverReport, limit: int = 20000) -> list[dict[str, object]]:
    """The tests as a sample record keeps them (bounded)."""
    return [{"id": t.id, "status": str(t.status), "pinned": t.pinned, "attested": t.attested,
             "verified": t.verified} for t in observation.tests[:limit]]


def tests_of(rows: Iterable[Mapping[str, object]]) -> tuple[Test, ...]:
    """`summary`'s rows back as tests (a stored base record)."""
    found = []
    for row in rows:
        try:
            status = Status(str(row.get("status")))
        except ValueError:
            continue
        found.append(Test(str(row.get("id")), status, bool(row.get("pinned")),
                          bool(row.get("attested")), bool(row.get("verified"))))
    return tuple(found)
