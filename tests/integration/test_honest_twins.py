"""Issue 30: honest twins of the observer's and the sandbox's defences (classes 3 to 6 of
docs/threat-model.md), each the same mechanism an attack uses, used as honest code does:
a test that starts a Python subprocess, and one that runs pytest in a subprocess
(pytester's way: the twins of a second session sent by a subprocess; a session opened
while a test runs is nested in it, its tests are not the run's and it gets no canary),
threads, a signal handler installed for a timeout and restored (the twin of one left
installed), `/proc/self` read for the process's own status (the twin of `/proc`'s `mem`
and `fd`), a worker process stopped at the end of its test (the twin of a daemon left
behind), and a long but bounded output (the twin of the floods). Each is the fix plus a
new test file, run by `pytest tests`: PASS, with the counts of the arm's own tests and
no anomaly. One lab for the module."""

from __future__ import annotations

import pytest

from tests.integration.attack_lab import FIX, Lab, counts, verdict

COMMAND = "pytest -q -p no:cacheprovider tests"

SUBPROCESS = '''import subprocess
import sys


def test_a_child_python():
    done = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True,
                          text=True, check=True)
    assert done.stdout == "42\\n"


def test_a_child_importing_pytest():
    done = subprocess.run([sys.executable, "-c", "import pytest; print(pytest.__name__)"],
                          capture_output=True, text=True, check=True)
    assert done.stdout == "pytest\\n"
'''
THREADS = '''import threading

from horizon import clamp


def test_clamp_from_threads():
    found = []
    workers = [threading.Thread(target=lambda x=x: found.append(clamp(x))) for x in (5, 95)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sorted(found) == [5, 90]
'''
SIGNAL_TIMEOUT = '''import signal

from horizon import clamp


def _timeout(number, frame):
    raise TimeoutError("too slow")


def test_clamp_within_a_second():
    previous = signal.signal(signal.SIGALRM, _timeout)
    signal.alarm(1)
    try:
        assert clamp(95) == 90
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
'''
PROC_SELF = '''import os


def test_own_status_and_limits():
    with open("/proc/self/status") as status:
        assert any(line.startswith("Pid:") for line in status)
    assert os.path.exists("/proc/self/limits")
'''
WORKER = '''import subprocess
import sys


def test_a_worker_stopped_at_the_end():
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert worker.poll() is None
    finally:
        worker.terminate()
        worker.wait(timeout=10)
'''
OUTPUT = '''def test_prints_a_long_report():
    for n in range(20000):
        print(f"row {n}: " + "x" * 60)
'''

CHILD_PYTEST = '''import subprocess
import sys


def test_a_pytest_run_in_a_child(tmp_path):
    (tmp_path / "test_inner.py").write_text("def test_inner():\\n    assert True\\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(tmp_path)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
'''

TWINS: dict[str, tuple[str, int]] = {
    "a test that runs pytest in a subprocess (pytester's way)": (CHILD_PYTEST, 2),
    "a test that starts Python subprocesses": (SUBPROCESS, 3),
    "threads calling the code under test": (THREADS, 2),
    "a signal handler for a timeout, restored": (SIGNAL_TIMEOUT, 2),
    "the process reading its own /proc/self": (PROC_SELF, 2),
    "a worker process stopped at the end of its test": (WORKER, 2),
    "a long but bounded output (1.4 MB)": (OUTPUT, 2),
}


@pytest.mark.parametrize("name", list(TWINS))
def test_an_honest_twin_of_an_observer_or_sandbox_defence_passes(
        shared_lab: Lab, name: str) -> None:
    code, passed = TWINS[name]
    head = shared_lab.variant({"src/horizon.py": FIX, "tests/test_twin.py": code})
    record = shared_lab.grade(head, command=COMMAND, timeout_s=120)
    assert (verdict(record), counts(record)) == (("PASS", None), (passed, 0)), record.detail
    assert (record.observer or {}).get("anomalies") == [], record.observer
