"""An exec's exit, read once its output ended (runner.containers.backend.exit_after_output).

The engine records an exec's exit a moment after its output closes; under load, on the
tests' second engine, `exec_inspect` once still said `Running: true, ExitCode: null` right
after the output of a process listing ended, the listing read as failed with nothing to
say, and the round stopped on an outage that was none. The exit is asked again for a
bounded time; what is still running after it stays running (the callers decide)."""

from __future__ import annotations

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
from runner.errors import SandboxUnavailableError


class LaggingApi:
    """docker's low-level exec API whose inspect says `running` `lag` times after the
    output ended, then the exit code."""

    def __init__(self, lag: int, code: int | None = 0, out: bytes = b"") -> None:
        self.lag, self.code, self.out, self.inspected = lag, code, out, 0

    def exec_create(self, *_: Any, **__: Any) -> dict[str, str]:
        return {"Id": "e1"}

    def exec_start(self, *_: Any, **__: Any) -> tuple[bytes, bytes]:
        return self.out, b""

    def exec_inspect(self, exec_id: str) -> dict[str, Any]:
        assert exec_id == "e1"
        self.inspected += 1
        if self.inspected <= self.lag:
            return {"Running": True, "ExitCode": None}
        return {"Running": False, "ExitCode": self.code}


def engine_with(api: LaggingApi) -> Engine:
    return Engine(SimpleNamespace(api=api))  # type: ignore[arg-type]


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
    held = HeldExec(engine_with(api), "e1", SimpleNamespace(), "psql")
    held.ended = True
    assert held.exit_code() == 2


def test_a_held_exec_still_running_has_no_exit_code_and_is_asked_once() -> None:
    api = LaggingApi(lag=5)
    held = HeldExec(engine_with(api), "e1", SimpleNamespace(), "psql")
    assert held.exit_code() is None
    assert api.inspected == 1


class Listing:
    """A process listing's answer, as `sandbox.exec_in` returns it."""

    def __init__(self, exit_code: int, stdout: str, stderr: str) -> None:
        self.exit_code, self.stdout, self.stderr = exit_code, stdout, stderr


# What of a listing is ours: the probe (30, under its `timeout`, 29), init and the
# sandbox's main process (7).
OURS = "30\n1 (docker-init) S 0 1\n7 (sh) S 1 7\n29 (timeout) S 0 29\n30 (sh) R 29 30\n"


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
    (Listing(0, "1 (docker-init) S 0 1\nbakeoff-listed\n", ""),
     r"\(exit 0, 3 tries\): 1 \(docker-init\) S 0 1\nbakeoff-listed"),
])
def test_a_process_listing_that_fails_says_what_the_sandbox_answered(
        monkeypatch: pytest.MonkeyPatch, answer: Listing, said: str) -> None:
    answering(monkeypatch, answer, answer, answer)
    with pytest.raises(SandboxUnavailableError,
                       match=r"cannot list the sandbox's processes " + said):
        process.leftovers(engine_with(LaggingApi(0)), "c1")


def test_a_process_that_ends_during_the_listing_is_skipped_and_the_listing_succeeds(
        tmp_path: Path) -> None:
    """The listing's own script, run by this machine's sh on a stand-in /proc whose last
    entry has gone (its process ended between the glob and the read): before, the loop's
    status was that read's and the sweep read "cannot list the sandbox's processes"."""
    proc = tmp_path / "proc"
    (proc / "1").mkdir(parents=True)
    (proc / "1" / "stat").write_text("1 (init) S 0 1\n")
    (proc / "9").mkdir()  # ended: its stat is gone
    script = process.PROCESS_LIST[2].replace("/proc/", f"{proc}/")
    assert script != process.PROCESS_LIST[2]
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout.splitlines()[1:], done.stderr) == (
        0, ["1 (init) S 0 1", "bakeoff-listed"], "")


def test_a_process_named_with_a_newline_is_a_leftover_never_a_crash_or_hidden(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A process may write its own /proc/self/comm, newline and all; its stat line is cut
    at the newline. Before, the listing raised ValueError and the arm's dispatch failed."""
    answering(monkeypatch, whole("12 (a"))
    assert process.leftovers(engine_with(LaggingApi(0)), "c1") == ["12 (a"]


def test_a_name_that_fakes_a_parent_of_one_is_still_a_leftover(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Another route to hiding: a name `x) S 1 2` followed by a newline makes the cut line
    read as a stat line whose parent is init. The pid is the kernel's, though, and the
    sandbox's main process (the lowest pid under init) came first: still a leftover."""
    answering(monkeypatch, whole("40 (x) S 1 2"))
    assert process.leftovers(engine_with(LaggingApi(0)), "c1") == ["x"]


def test_a_listing_the_engine_cut_is_read_again_until_it_is_whole(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Measured under three test workers: a listing that exited 0 with no output, and one
    whose first line (the probe's pid) never came, each stopped a round as an outage. A
    listing is whole from its pid to its end line; a cut one is read again."""
    last = whole("41 (sleep) S 7 41")
    answers = answering(monkeypatch, Listing(0, "", ""),
                        Listing(0, "30 (sh) R 29 30\nbakeoff-listed\n", ""),
                        Listing(0, "30\n1 (docker-init) S 0 1\n", ""), last)
    with pytest.raises(SandboxUnavailableError, match=r"\(exit 0, 3 tries\): 30\n1 "):
        process.leftovers(engine_with(LaggingApi(0)), "c1")  # three cut: unavailable
    assert answers == [last]
    answers[:0] = [Listing(0, "", "")]
    assert process.leftovers(engine_with(LaggingApi(0)), "c1") == ["sleep"]
    assert answers == []
