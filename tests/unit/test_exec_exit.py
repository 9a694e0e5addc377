"""An exec's exit, read once its output ended (runner.containers.backend.exit_after_output).

The engine records an exec's exit a moment after its output closes; under load, on the
tests' second engine, `exec_inspect` once still said `Running: true, ExitCode: null` right
after the output of a process listing ended, the listing read as failed with nothing to
say, and the round stopped on an outage that was none. The exit is asked again for a
bounded time; what is still running after it stays running (the callers decide)."""

from __future__ import annotations

import io
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from runner.commands.dispatch import process
from runner.containers import backend, sandbox
from runner.containers.backend import ExecState, exit_after_output
from runner.containers.engine import Engine
from runner.containers.held_exec import HeldExec
from runner.containers.hijack import Hijacked
from runner.errors import SandboxUnavailableError


class LaggingApi:
    """docker's low-level exec API whose inspect says `running` `lag` times after the
    output ended, then the exit code."""

    def __init__(self, lag: int, code: int | None = 0, out: bytes = b"") -> None:
        self.lag, self.code, self.out, self.inspected = lag, code, out, 0

    def exec_create(self, *_: Any, **__: Any) -> dict[str, str]:
        return {"Id": "e1"}

    # The exec's start as `hijack.start` asks it: the output in frames on the response.
    def _url(self, path: str, *args: str) -> str:
        return path.format(*args)

    def _post_json(self, *_: Any, **__: Any) -> SimpleNamespace:
        framed = bytes([1, 0, 0, 0]) + len(self.out).to_bytes(4, "big") + self.out
        return SimpleNamespace(raw=SimpleNamespace(_fp=SimpleNamespace(fp=io.BytesIO(framed))),
                               close=lambda: None)

    def _get_raw_response_socket(self, _: Any) -> None:
        return None

    def _disable_socket_timeout(self, _: Any) -> None:
        return None

    def exec_inspect(self, exec_id: str) -> dict[str, Any]:
        assert exec_id == "e1"
        self.inspected += 1
        if self.inspected <= self.lag:
            return {"Running": True, "ExitCode": None}
        return {"Running": False, "ExitCode": self.code}


def engine_with(api: LaggingApi) -> Engine:
    return Engine(SimpleNamespace(api=api))  # type: ignore[arg-type]


def held_exec(api: LaggingApi) -> HeldExec:
    """psql's held exec on `api`, its connection never read."""
    unread: Any = SimpleNamespace()
    return HeldExec(engine_with(api), "e1", Hijacked(None, unread, unread), "psql")


def test_an_exit_the_engine_records_late_is_read_not_taken_for_no_exit() -> None:
    api = LaggingApi(lag=4, code=0, out=b"17\n")
    done = engine_with(api).exec("c1", ["true"], user="sandbox", workdir="/work",
                                 deadline_s=10)
    assert (done.exit_code, done.stdout, api.inspected) == (0, "17\n", 5)


def test_an_exec_the_engine_calls_running_past_the_lag_has_no_exit_code(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backend, "EXIT_LAG_S", 0.2)
    api = LaggingApi(lag=10**6)
    started = time.monotonic()
    done = engine_with(api).exec("c1", ["true"], user="sandbox", workdir="/work",
                                 deadline_s=10)
    assert done.exit_code == -1
    assert 0.2 <= time.monotonic() - started < 2
    assert api.inspected >= 2


def test_a_failed_exit_read_late_keeps_its_own_code() -> None:
    api = LaggingApi(lag=2, code=3)
    assert exit_after_output(engine_with(api), "e1") == ExecState(False, 3)
    assert api.inspected == 3


def test_a_held_exec_that_ended_reads_its_late_exit() -> None:
    api = LaggingApi(lag=3, code=2)
    held = held_exec(api)
    held.ended = True
    assert held.exit_code() == 2


def test_a_held_exec_still_running_has_no_exit_code_and_is_asked_once() -> None:
    api = LaggingApi(lag=5)
    held = held_exec(api)
    assert held.exit_code() is None
    assert api.inspected == 1


class Listing:
    """A process listing's answer, as `sandbox.exec_in` returns it."""

    def __init__(self, exit_code: int, stdout: str, stderr: str) -> None:
        self.exit_code, self.stdout, self.stderr = exit_code, stdout, stderr


# What of a listing is ours: the probe (30, under its `timeout`, 29, both the sandbox
# user's), init and the sandbox's keeper (7, 8: root's).
OURS = ("30\n1 0 0 S docker-init\n7 1 0 S sh\n8 7 0 S sleep\n29 0 1000 S timeout\n"
        "30 29 1000 R sh\n")


def whole(*lines: str) -> Listing:
    """A whole listing: ours, then `lines`, then its end line."""
    return Listing(0, OURS + "".join(f"{line}\n" for line in lines) + "bakeoff-listed\n", "")


def answering(monkeypatch: pytest.MonkeyPatch, *answers: Listing) -> list[Listing]:
    """`sandbox.exec_in` gives `answers`, one per listing; the ones not yet given."""
    queue = list(answers)
    monkeypatch.setattr(sandbox, "exec_in", lambda *_, **__: queue.pop(0))
    return queue


@pytest.mark.parametrize(("answer", "said"), [
    (Listing(-1, "", ""), r"\(exit -1, 3 tries\): it printed nothing"),
    (Listing(1, "", "sh: 1: cannot fork\n"), r"\(exit 1, 3 tries\): sh: 1: cannot fork"),
    (Listing(0, "", ""), r"\(exit 0, 3 tries\): it printed nothing"),
    (Listing(0, "1 0 0 S docker-init\nbakeoff-listed\n", ""),
     r"\(exit 0, 3 tries\): 1 0 0 S docker-init\nbakeoff-listed"),
])
def test_a_process_listing_that_fails_says_what_the_sandbox_answered(
        monkeypatch: pytest.MonkeyPatch, answer: Listing, said: str) -> None:
    answering(monkeypatch, answer, answer, answer)
    with pytest.raises(SandboxUnavailableError,
                       match=r"cannot list the sandbox's processes " + said):
        process.leftovers(engine_with(LaggingApi(0)), "c1")


def status(name: str, pid: int, ppid: int, uid: int, state: str = "S (sleeping)") -> str:
    """A /proc/<pid>/status as the kernel writes it (its first nine lines)."""
    return (f"Name:\t{name}\nUmask:\t0022\nState:\t{state}\nTgid:\t{pid}\nNgid:\t0\n"
            f"Pid:\t{pid}\nPPid:\t{ppid}\nTracerPid:\t0\n"
            f"Uid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t{uid}\t{uid}\t{uid}\t{uid}\n")


def listed(tmp_path: Path, processes: dict[int, str | None]) -> subprocess.CompletedProcess[str]:
    """The listing's own script, run by this machine's sh on a stand-in /proc (None: a
    process that ended between the glob and the read, its status gone)."""
    proc = tmp_path / "proc"
    for pid, text in processes.items():
        (proc / str(pid)).mkdir(parents=True)
        if text is not None:
            (proc / str(pid) / "status").write_text(text)
    script = process.PROCESS_LIST[2].replace("/proc/", f"{proc}/")
    assert script != process.PROCESS_LIST[2]
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False,
                          timeout=60)


def test_a_process_that_ends_during_the_listing_is_skipped_and_the_listing_succeeds(
        tmp_path: Path) -> None:
    """Before, the loop's status was that read's and the sweep read "cannot list the
    sandbox's processes"."""
    done = listed(tmp_path, {1: status("docker-init", 1, 0, 0), 9: None})
    assert (done.returncode, done.stdout.splitlines()[1:], done.stderr) == (
        0, ["1 0 0 S docker-init", "bakeoff-listed"], "")


def test_the_listing_reads_each_process_s_real_uid_and_its_escaped_name(
        tmp_path: Path) -> None:
    """A name with spaces stays whole; one with a newline is one line (the kernel escapes
    it in status: `a\\n9 (b`), never a second, forged process; a zombie says Z."""
    done = listed(tmp_path, {
        1: status("sleep", 1, 0, 0), 23: status("my daemon", 23, 1, 1000),
        24: status("a\\n9 (b) S 1", 24, 1, 1000), 25: status("node", 25, 1, 1000,
                                                             "Z (zombie)")})
    assert done.stdout.splitlines()[1:] == [
        "1 0 0 S sleep", "23 1 1000 S my daemon", "24 1 1000 S a\\n9 (b) S 1",
        "25 1 1000 Z node", "bakeoff-listed"]


def test_the_sandbox_user_s_processes_are_the_leftovers_whatever_their_pids_and_names(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither a pid nor a parent nor a name makes a process ours: root's are (docker's
    init, the keeper), the probe and its `timeout` are; every other one is a leftover,
    a zombie too (a leader that ended may leave threads running). Before, the lowest pid
    under PID 1 was taken for the keeper, and where the keeper is PID 1 (a Pod) an
    orphan the agent left passed for it."""
    answering(monkeypatch, whole("2 1 1000 S sleep", "23 1 1000 S my daemon",
                                 "24 0 1000 S a\\n9 (b) S 1", "25 1 1000 Z node"))
    assert process.leftovers(engine_with(LaggingApi(0)), "c1") == [
        "sleep", "my daemon", "a\\n9 (b) S 1", "node"]


def test_a_line_that_does_not_read_is_a_leftover_never_a_crash(
        monkeypatch: pytest.MonkeyPatch) -> None:
    answering(monkeypatch, whole("12 (a", "x 1 1000 S b"))
    assert process.leftovers(engine_with(LaggingApi(0)), "c1") == ["12 (a", "x 1 1000 S b"]


def test_a_listing_the_engine_cut_is_read_again_until_it_is_whole(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Measured under three test workers: a listing that exited 0 with no output, and one
    whose first line (the probe's pid) never came, each stopped a round as an outage. A
    listing is whole from its pid to its end line; a cut one is read again."""
    last = whole("41 7 1000 S sleep")
    answers = answering(monkeypatch, Listing(0, "", ""),
                        Listing(0, "30 29 1000 R sh\nbakeoff-listed\n", ""),
                        Listing(0, "30\n1 0 0 S docker-init\n", ""), last)
    with pytest.raises(SandboxUnavailableError, match=r"\(exit 0, 3 tries\): 30\n1 "):
        process.leftovers(engine_with(LaggingApi(0)), "c1")  # three cut: unavailable
    assert answers == [last]
    answers[:0] = [Listing(0, "", "")]
    assert process.leftovers(engine_with(LaggingApi(0)), "c1") == ["sleep"]
    assert answers == []
