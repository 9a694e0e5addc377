"""Issue 20, class 5: a sample that never ends is the contestant's failure, never a void
round. The deadline is root's (`timeout` runs as root around the sandbox user's command,
with the one capability it needs to end it: KILL), so nothing the command does can stop
it; the driver reads back only regular files, non-blocking, never through a link; and a
sample the host still had to stop is FAIL timeout unless the base's outlives it too
(`rig.sample.verdict` rule 7). Each attack is one commit on a base whose protected test fails.
"""

from __future__ import annotations

import pytest

from rig.sample.metric import Ratchet
from rig.sample.record import SampleRecord
from tests.integration.attack_lab import BASE, FIX, HONEST, Lab, attacking, verdict

DEADLINE = 6  # seconds: the samples' own time limit
GRACE = 5 + 8  # timeout's -k, plus room for a loaded machine

STOP_EVERYTHING = ("import os, signal\n\n\ndef clamp(x):\n    os.kill(-1, signal.SIGSTOP)\n"
                   "    os.kill(os.getpid(), signal.SIGSTOP)\n")
# kill(-1) on Linux spares the caller: pytest itself goes on and may report its session's
# end before the driver reaps it (exit_mismatch, a race); killing itself too is the attack
# the test pins (the session never ends: aborted).
KILL_EVERYTHING = ("import os, signal\n\n\ndef clamp(x):\n    os.kill(-1, signal.SIGKILL)\n"
                   "    os.kill(os.getpid(), signal.SIGKILL)\n")
SPIN = "def clamp(x):\n    while True:\n        pass\n"
IGNORE_AND_SPIN = ("import signal\n\n\ndef clamp(x):\n    signal.signal(signal.SIGTERM, "
                   "signal.SIG_IGN)\n    while True:\n        pass\n")
FORK_BOMB = '''import os, time


def clamp(x):
    for _ in range(100000):
        try:
            if os.fork() == 0:
                time.sleep(3600)
                os._exit(0)
        except OSError:
            time.sleep(0.01)
'''
ANCESTORS = '''import os, signal


def _uid(pid):
    with open(f"/proc/{pid}/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("Uid:"))


def clamp(x):
    pid = os.getppid()
    while pid > 1:
        if _uid(pid) != os.getuid():
            for sig in (signal.SIGSTOP, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                    print(f"signalled {pid}", flush=True)
                except OSError as error:
                    print(f"cannot signal {pid}: {type(error).__name__}", flush=True)
        with open(f"/proc/{pid}/stat") as handle:
            pid = int(handle.read().rsplit(")", 1)[1].split()[1])
    return x
'''
DAEMON = attacking('''import os, signal, time

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(3600)
    os._exit(0)
''', FIX)


def graded(lab: Lab, code: str, **how: object) -> SampleRecord:
    return lab.grade(lab.variant({"src/horizon.py": code}), timeout_s=DEADLINE, **how)


@pytest.mark.parametrize("code", [STOP_EVERYTHING, SPIN, IGNORE_AND_SPIN, FORK_BOMB],
                         ids=["SIGSTOP to every process the sandbox user may signal, itself last",
                              "a busy loop", "SIGTERM ignored, then a busy loop",
                              "a fork bomb up to the pids limit"])
def test_a_run_that_never_ends_is_fail_timeout_at_the_deadline(shared_lab: Lab, code: str) -> None:
    """The protected test's call never returns: root's `timeout` ends it at the deadline
    (and SIGKILLs what ignores SIGTERM or is stopped): FAIL timeout, never a rig error."""
    record = graded(shared_lab, code)
    assert verdict(record) == ("FAIL", "timeout"), record.detail
    assert record.timed_out is True and record.outlived is False
    assert DEADLINE <= record.duration_s < DEADLINE + GRACE, record.duration_s


def test_killing_every_process_of_the_sandbox_user_is_no_rig_error(shared_lab: Lab) -> None:
    """SIGKILL to -1 from inside the protected test: pytest dies with it, the exit status
    looks like a timeout's (137) but the deadline was not reached, and the observer saw
    the session start and never end."""
    record = graded(shared_lab, KILL_EVERYTHING)
    assert verdict(record) == ("FAIL", "aborted"), record.detail
    assert (record.exit_code, record.timed_out) == (137, False)


def test_the_deadline_and_the_driver_cannot_be_signalled(shared_lab: Lab) -> None:
    """SIGSTOP and SIGKILL to every ancestor of pytest that is not the sandbox user's:
    the root `timeout` and the driver refuse (EPERM), and the honest failure stands."""
    record = graded(shared_lab, ANCESTORS)
    assert verdict(record) == HONEST, record.detail
    log = shared_lab.log(record)
    assert log.count(": PermissionError") == 4, log
    assert "signalled" not in log


def test_a_daemon_left_behind_does_not_keep_the_sample_alive(shared_lab: Lab) -> None:
    """The honest fix, plus a double-forked daemon in a session of its own that ignores
    SIGTERM: every process of the sandbox user is SIGKILLed once the command is over."""
    record = graded(shared_lab, DAEMON)
    assert verdict(record) == ("PASS", None), record.detail
    assert record.duration_s < DEADLINE, record.duration_s


WRITE_COV = ('import json\n\nwith open("cov.json", "w") as handle:\n'
             '    json.dump({"totals": {"percent_covered": 80.0}}, handle)\n')
SPECIAL_FILES = {
    "a FIFO": 'import os\n\nos.mkfifo("cov.json")\n',
    "a symlink to an endless device": 'import os\n\nos.symlink("/dev/zero", "cov.json")\n',
    "a directory": 'import os\n\nos.mkdir("cov.json")\n',
}


RATCHET = Ratchet("coverage-json:cov.json", "higher", base=80.0)


REPORT = "python3 -c 'import sys; sys.path.insert(0, \"src\"); import reporter'"


def coverage(lab: Lab, reporter: str) -> SampleRecord:
    """A ratchet graded on `cov.json`, which the code's `src/reporter.py` writes when the
    check's command imports it (the arm's code, not a script the command names: that
    one would be the base's)."""
    head = lab.attack({"src/reporter.py": reporter}, {**BASE, "src/reporter.py": WRITE_COV})
    return lab.grade(head, command=REPORT, parser="metric", check="coverage",
                     protected=(), ratchet=RATCHET, timeout_s=DEADLINE, requires=("python3",))


@pytest.mark.parametrize("name", list(SPECIAL_FILES))
def test_a_special_file_where_the_driver_expects_a_report(lab: Lab, name: str) -> None:
    """A ratchet reads `cov.json` back from the sample; the arm's code leaves a FIFO (an
    open would block for ever), a link to /dev/zero (a read would never end) or a
    directory there. The driver reads only a regular file, non-blocking, never through a
    link: no value, which the base's run does not reproduce."""
    record = coverage(lab, SPECIAL_FILES[name])
    assert verdict(record) == ("FAIL", "broke_harness"), record.detail
    assert record.detail.startswith("FAIL broke_harness (was unparsed_output): the command "
                                    "wrote no regular file cov.json"), record.detail
    assert record.duration_s < DEADLINE, record.duration_s


def test_control_the_honest_report_is_read(lab: Lab) -> None:
    record = coverage(lab, WRITE_COV.replace("80.0", "85.0"))
    assert verdict(record) == ("PASS", None), record.detail
    assert record.metric_value == 85.0
