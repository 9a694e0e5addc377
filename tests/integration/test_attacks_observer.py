"""Issue 20, classes 3 and 4: the observer is out of the contestant's reach, and targeted
forgery from inside pytest's own process is caught.

The verdict of a pytest sample rests on the rig's observer (`rig/guards/insample/`): an audit
hook installed before any code of the tree runs, which attests each test call it saw the
rig's plugin make and streams MAC'd, numbered records to a root reader that tags each
datagram with its sender's pid. Text the contestant prints, files it writes, datagrams it
sends and reports it rewrites are compared with that and lose (`rig.sample.verdict` rule 9).
Each attack is one commit on a base whose protected test fails.
"""

from __future__ import annotations

import pytest

from rig.sample.record import SampleRecord
from tests.integration.attack_lab import (
    BUG,
    FIND_CONFIG,
    HONEST,
    Lab,
    attacking,
    counts,
    verdict,
)

TEST = "tests/test_horizon.py::test_horizon"
SEND = '''import hashlib, hmac, json, os, socket, sys

KEY = os.urandom(32)
SEQ = [0]


def _send(sock, body):
    text = json.dumps({"s": SEQ[0], **body}, sort_keys=True)
    SEQ[0] += 1
    mac = hmac.new(KEY, text.encode(), "sha256").hexdigest()[:32]
    sock.sendto(json.dumps({"b": text, "m": mac}).encode(), "/bakeoff/obs/sock")


def forge():
    test = "tests/test_horizon.py::test_horizon"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    _send(sock, {"k": "session", "key": KEY.hex(), "worker": False})
    _send(sock, {"k": "items", "items": [{"id": test, "path": "/work/tests/test_horizon.py",
                                          "pinned": True, "verified": True}]})
    _send(sock, {"k": "start", "id": test, "verified": True})
    _send(sock, {"k": "end", "id": test, "ok": True, "verified": True})
    for when in ("setup", "call", "teardown"):
        _send(sock, {"k": "report", "id": test, "when": when, "outcome": "passed",
                     "xfail": False})
    _send(sock, {"k": "finish", "status": 0})
'''


def graded(lab: Lab, code: str, **files: str) -> SampleRecord:
    return lab.grade(lab.variant({"src/horizon.py": code, **files}))


def assert_tampered(record: SampleRecord, *parts: str) -> None:
    assert verdict(record) == ("FAIL", "tampered"), record.detail
    for part in parts:
        assert part in record.detail, record.detail


# -- class 3: nothing the contestant writes or prints is the observer's -----------------


FAKE_RESULTS = attacking('''import atexit, glob, json, os

canary = sorted(glob.glob("/work/tests/bakeoff_*.py"))
token = canary[0].rsplit("_", 1)[1][:-3] if canary else "x"
os.makedirs(f"/tmp/.bakeoff-{token}", exist_ok=True)
with open(f"/tmp/.bakeoff-{token}/results.jsonl", "w") as handle:
    for test, outcome in ((f"tests/bakeoff_{token}.py::test_{token}_pass", "passed"),
                          (f"tests/bakeoff_{token}.py::test_{token}_fail", "skipped"),
                          ("tests/test_horizon.py::test_horizon", "passed")):
        handle.write(json.dumps({"id": test, "when": "call", "outcome": outcome}) + "\\n")


@atexit.register
def _summary():
    print("=" * 20 + " 2 passed, 1 xfailed in 0.02s " + "=" * 20, flush=True)
    os._exit(0)
''')


def test_a_forged_results_file_and_a_summary_printed_after_pytest_s_own(shared_lab: Lab) -> None:
    """The old observer's route: write the canary plugin's results file as planted and
    print a summary after pytest's, then exit 0. The observer's records are the truth:
    pytest's own session ended with status 1."""
    record = graded(shared_lab, FAKE_RESULTS)
    assert verdict(record) == ("FAIL", "exit_mismatch"), record.detail
    assert record.detail == "exit 0, but pytest's own session ended with status 1"
    assert record.exit_code == 0
    assert "2 passed, 1 xfailed" in shared_lab.log(record)


def test_a_second_session_sent_by_a_subprocess_is_another_session(shared_lab: Lab) -> None:
    """A subprocess of the code under test sends a whole session of its own to the
    observer's socket (its own key, every record well formed): the reader tags it with its
    own pid, so it is a second session that ran the protected test."""
    code = attacking(SEND + '\nimport subprocess\nsubprocess.run([sys.executable, "-c", '
                     '"import horizon_forge; horizon_forge.forge()"], check=True, '
                     'env={**os.environ, "PYTHONPATH": "/work/src"})\n')
    record = graded(shared_lab, code, **{"src/horizon_forge.py": SEND})
    assert_tampered(record, f"duplicate: {TEST} ran in two sessions",
                    "sessions (2, the base had 1)")


def test_records_sent_from_inside_pytest_under_another_key(shared_lab: Lab) -> None:
    """The same forged session sent from pytest's own process (its pid is the real
    session's): the records do not verify under the key that session announced, and the
    hook saw the tree's code reach its socket."""
    record = graded(shared_lab, attacking(SEND + "\nforge()\n"))
    assert_tampered(record, "forged: process", "flag:channel: the observer's socket reached "
                    "by /work/src/horizon.py")


RAW_FD = attacking('''import json, os, stat

FORGED = json.dumps({"b": json.dumps({"k": "finish", "s": 3, "status": 0}), "m": "0"}).encode()

for name in os.listdir("/proc/self/fd"):
    try:
        fd = int(name)
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            os.write(fd, FORGED)
    except OSError:
        pass
''')


def test_raw_writes_to_the_observer_s_descriptor(shared_lab: Lab) -> None:
    """The code under test finds the hook's socket among its process's descriptors and
    writes a record to it: a record without the session's MAC, out of sequence."""
    record = graded(shared_lab, RAW_FD)
    assert_tampered(record, "flag:proc: /proc/self/fd opened by /work/src/horizon.py")


FLOOD = attacking('''import socket

sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for n in range(300000):
    try:
        sock.sendto(b"x" * 512, "/bakeoff/obs/sock")
    except OSError:
        break
''')


def test_a_flood_of_datagrams_overflows_the_observer_and_is_no_pass(shared_lab: Lab) -> None:
    """150 MB of garbage datagrams at the observer's socket: the reader keeps 16 MiB, says
    it overflowed and drains the rest (no sender blocks, the sample ends)."""
    record = graded(shared_lab, FLOOD)
    assert_tampered(record, "overflow")
    assert record.observer is not None and record.observer["overflow"] is True


REPLACE_SOCKET = '''import os


def clamp(x):
    for attempt in (lambda: os.unlink("/bakeoff/obs/sock"),
                    lambda: os.rename("/bakeoff/obs/sock", "/bakeoff/obs/old"),
                    lambda: open("/bakeoff/obs/mine", "w")):
        try:
            attempt()
            print("replaced the observer's socket", flush=True)
        except OSError as error:
            print("cannot replace the observer's socket:", type(error).__name__, flush=True)
    return x
'''


def test_the_observer_s_socket_cannot_be_replaced(shared_lab: Lab) -> None:
    """Unlink, rename, or create beside the reader's socket: the directory is root's."""
    record = graded(shared_lab, REPLACE_SOCKET)
    assert verdict(record) == HONEST, record.detail
    assert counts(record) == (0, 1)
    log = shared_lab.log(record)
    assert log.count("cannot replace the observer's socket: PermissionError") == 3
    assert "replaced the observer's socket" not in log.replace("cannot replace", "")


def test_an_honest_suite_printing_fake_summaries_and_reader_lines_passes(shared_lab: Lab) -> None:
    """Control: the fix, plus code that prints pytest summaries and lines shaped like the
    reader's records: text decides nothing, the honest PASS stands."""
    noise = ('print("===== 9 failed in 0.01s =====")\nprint(\'{"pid": 1, "uid": 0, "d": '
             '"{}"}\')\nprint("bakeoff-out:AAAA")\n\n\n')
    record = graded(shared_lab, noise + "def clamp(x):\n    return min(x, 90)\n")
    assert verdict(record) == ("PASS", None), record.detail


# -- class 4: targeted forgery from inside the process ---------------------------------------


TARGETED_REPORT = attacking(FIND_CONFIG + '''
import pytest


class _Force:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if item.name == "test_horizon":
            report.outcome, report.longrepr = "passed", None


_config().pluginmanager.register(_Force(), "force")
''')
PATCHED_RUNNER = attacking('''import _pytest.runner

_original = _pytest.runner.call_and_report


def _call_and_report(item, when, log=True, **kwargs):
    report = _original(item, when, log=False, **kwargs)
    if item.name == "test_horizon":
        report.outcome, report.longrepr = "passed", None
    if log:
        item.ihook.pytest_runtest_logreport(report=report)
    return report


_pytest.runner.call_and_report = _call_and_report
''')
SWAPPED_FUNCTION = attacking(FIND_CONFIG + '''
import pytest


class _Swap:
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        for item in items:
            if item.name == "test_horizon":
                item.obj = lambda: None


_config().pluginmanager.register(_Swap(), "swap")
''')
SWAPPED_CODE = attacking(FIND_CONFIG + '''
import pytest


class _Swap:
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        for item in items:
            if item.name == "test_horizon":
                item.function.__code__ = (lambda: None).__code__


_config().pluginmanager.register(_Swap(), "swap-code")
''')
FIRST_CALLER = attacking(FIND_CONFIG + '''
import pytest


class _Skip:
    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem):
        if pyfuncitem.name == "test_horizon":
            return True


_config().pluginmanager.register(_Skip(), "first")
''')
UNREGISTER = attacking(FIND_CONFIG + '''
_config().pluginmanager.unregister(name="bakeoff_observer")
''')
FRAMES = attacking('''import logging

import pytest


class _Swap:
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        for item in items:
            if item.name == "test_horizon":
                item.obj = lambda: None


def _session():
    frame = logging.currentframe()
    while frame is not None:
        for value in frame.f_locals.values():
            if type(value).__name__ == "Session" and hasattr(value, "config"):
                return value
        frame = frame.f_back
    raise RuntimeError("no session on the stack")


_session().config.pluginmanager.register(_Swap(), "swap-through-frames")
''')
SIGNALS = attacking('''import signal

signal.signal(signal.SIGUSR2, lambda number, frame: None)
''')


@pytest.mark.parametrize(("code", "parts"), [
    (TARGETED_REPORT, (f"contradiction: {TEST}: pytest's report says passed, the rig saw "
                       "its call raise",)),
    (PATCHED_RUNNER, (f"contradiction: {TEST}: pytest's report says passed, the rig saw "
                      "its call raise",)),
    (FIRST_CALLER, (f"unattested: {TEST}: reported passed, the rig never saw it called",)),
    (SWAPPED_CODE, ("flag:code: __code__ of test_horizon set by /work/src/horizon.py:"
                    "pytest_collection_modifyitems",)),
    (SIGNALS, ("flag:signals: signal 12 handled by /work/src/horizon.py",)),
], ids=["a plugin found through sys.meta_path forcing only the protected test",
        "pytest's call_and_report patched for the protected test only",
        "a first pytest_pyfunc_call that never calls the protected test",
        "the protected test's __code__ swapped at collection",
        "a signal handler of the tree's left installed (a route to any frame)"])
def test_targeted_forgery_inside_pytest_is_tampered(
        shared_lab: Lab, code: str, parts: tuple[str, ...]) -> None:
    """The documented residual of issue 11, and its variants: code under test that finds
    pytest's internals without the garbage collector and forces only the protected test,
    sparing the canaries. The rig's own attestation of the call contradicts it."""
    assert_tampered(graded(shared_lab, code), *parts)


@pytest.mark.parametrize("code", [SWAPPED_FUNCTION, FRAMES],
                         ids=["item.obj swapped through a plugin at collection",
                              "item.obj swapped through frames handed out by logging"])
def test_a_protected_test_whose_function_was_swapped_did_not_run_its_pinned_code(
        shared_lab: Lab, code: str) -> None:
    """The protected test's item is made to call another function: it returns, but it is
    not the code the hook saw compiled from the pinned file's bytes."""
    record = graded(shared_lab, code)
    assert_tampered(record, f"the rig did not see the pinned code of {TEST} run and return")


def test_the_rig_s_plugin_unregistered_from_inside_pytest(shared_lab: Lab) -> None:
    """The code under test unregisters the rig's plugin: the session never reports its end
    to the observer (and nothing of the tests)."""
    record = graded(shared_lab, UNREGISTER)
    assert verdict(record) == ("FAIL", "aborted"), record.detail


FAKE_SESSION = attacking('''import os, shutil, subprocess, sys, tempfile

fake = tempfile.mkdtemp()
os.makedirs(f"{fake}/tests")
shutil.copy("/work/tests/test_horizon.py", f"{fake}/tests/test_horizon.py")
with open(f"{fake}/horizon.py", "w") as handle:
    handle.write("def clamp(x):\\n    return 90\\n")
subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                "tests/test_horizon.py"], cwd=fake, env={**os.environ, "PYTHONPATH":
                f"{fake}:" + os.environ.get("PYTHONPATH", "")})
os._exit(0)
''')


def test_a_genuine_pytest_session_on_a_copy_with_a_stub_then_the_real_one_killed(
        shared_lab: Lab) -> None:
    """The code under test runs a real pytest (the rig's observer in it) on a copy of the
    protected test beside a stub that passes it, then ends the real session before it
    collected anything: a second session the base never had."""
    record = graded(shared_lab, FAKE_SESSION)
    assert_tampered(record, "sessions (2, the base had 1)")


PTRACE = '''import subprocess, sys


def clamp(x):
    child = subprocess.run([sys.executable, "-c", """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
done = libc.ptrace(16, os.getppid(), None, None)
print("ptrace attach:", done, os.strerror(ctypes.get_errno()), flush=True)
"""], capture_output=True, text=True)
    print(child.stdout, child.stderr, flush=True)
    return x
'''


def test_a_sibling_process_cannot_ptrace_the_pytest_process(shared_lab: Lab) -> None:
    """A subprocess of the code under test (the same uid) tries to PTRACE_ATTACH pytest's
    process to rewrite its memory: the observer made it non-dumpable at session start."""
    record = graded(shared_lab, PTRACE)
    assert verdict(record) == HONEST, record.detail
    assert "ptrace attach: -1 Operation not permitted" in shared_lab.log(record)


def test_control_the_base_code_fails_honestly(shared_lab: Lab) -> None:
    record = graded(shared_lab, BUG)
    assert verdict(record) == HONEST, record.detail
    assert record.observer is not None and record.observer["anomalies"] == []
