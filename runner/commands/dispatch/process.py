"""The agent's process inside its sandbox: started, streamed, stopped, swept.

The command runs under `timeout -k` INSIDE the container (TERM at dispatch_timeout_s,
KILL a few seconds later, to the whole process group), and the host keeps its own
deadline as well (FIELD-NOTES: exec has no timeout). Output is streamed to the log as it
comes (redacted by the sink), so a live view can show the last line.

Stopping never goes by name: `kill -KILL -1` as the sandbox user ends every process the
agent has, including ones that left its process group. The container's main process
runs as root (with no capabilities) and survives it, so the container keeps running and
its tmpfs checkout is never lost (`runner.containers.sandbox`).

The log keeps the first `HEAD_BYTES` and the last `TAIL_BYTES` of the output with a
marker line between them: an agent that prints forever costs bounded disk and memory.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from runner.commands.dispatch.redact import Redactor, StreamRedactor
from runner.containers import sandbox
from runner.containers.backend import EXIT_LAG_S, ContainerEngine, ExecStream, exit_after_output
from runner.errors import EngineError, SandboxUnavailableError

KILL_GRACE_S = sandbox.KILL_GRACE_S
HOST_GRACE_S = 15   # after timeout's own KILL, the host waits this much more
STOP_WAIT_S = 10    # after a forced stop, how long the output may take to end
POLL_S = 0.25
SIGNALLED = 128     # an exit code from here on: killed by a signal (128 + its number)
# Shell builtins only (no `ps`: any image has sh and /proc): this shell's pid, then per
# process `PID PPID UID STATE NAME`, read from /proc/<pid>/status, where the kernel gives
# the real uid (a process cannot change it without a capability) and escapes the name (a
# process may write its own /proc/self/comm, newlines and all: it stays one line here;
# printf, never echo, which would turn the kernel's `\n` back into a newline).
# A process that ends between the glob and its read is no leftover: skipped, silently,
# and the listing still succeeds (`exit 0`: the loop's status was its last read's, so a
# sandbox that spawned short-lived processes failed ~1 listing in 12, a round stopped).
PROCESS_LIST = ["sh", "-c", 'echo $$; for d in /proc/[0-9]*; do n= s= p= q= u=; '
                '{ while read -r k v; do case $k in Name:) n=$v ;; State:) s=${v%% *} ;; '
                'Pid:) p=$v ;; PPid:) q=$v ;; Uid:) set -- $v; u=$1; break ;; esac; '
                'done < "$d/status"; } 2>/dev/null; '
                '[ -n "$u" ] && printf "%s %s %s %s %s\\n" "$p" "$q" "$u" "$s" "$n"; '
                'done; echo bakeoff-listed; exit 0']
# An exec's output was lost under load (a listing that exited 0 and printed nothing, one
# whose first line never came: the SDK's read skipped what came with the headers, mended
# in `hijack`); a listing is still whole only from its pid to its end line, and read
# again if it is not.
LISTED = "bakeoff-listed"
LIST_TRIES = 3


@dataclass(frozen=True)
class AgentRun:
    exit_code: int | None
    duration_s: float
    timed_out: bool
    stopped_by_host: bool = False
    interrupted: bool = False


HEAD_BYTES = 8 * 1024 * 1024
TAIL_BYTES = 2 * 1024 * 1024
TRUNCATED = "[bakeoff: output truncated: {omitted} bytes omitted]"
LAST_LINE_SCAN = 4096   # the live view's last line is looked for in this much of a chunk


class LogSink:
    """Writes the agent's output, redacted, to its log as it comes; keeps the last line.

    The first `head_bytes` go to the file as they come; past them, only a rolling tail of
    `tail_bytes` is kept in memory and written at `close`, after the truncation marker.
    """

    def __init__(self, path: Path, redactor: Redactor, on_line: Callable[[str], None],
                 head_bytes: int = HEAD_BYTES, tail_bytes: int = TAIL_BYTES) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.handle: BinaryIO = path.open("wb")
        self.redacting = StreamRedactor(redactor)
        self.on_line = on_line
        self.last_line = ""
        self.head_left = head_bytes
        self.tail_bytes = tail_bytes
        self.tail = bytearray()
        self.omitted = 0

    def feed(self, data: bytes) -> None:
        self._write(self.redacting.feed(data))

    def close(self) -> None:
        self._write(self.redacting.flush())
        if self.omitted:
            marker = TRUNCATED.format(omitted=self.omitted)
            self.handle.write(f"\n{marker}\n".encode())
        self.handle.write(bytes(self.tail))
        self.handle.close()

    def _write(self, text: str) -> None:
        if not text:
            return
        data = text.encode("utf-8")
        head, rest = data[:self.head_left], data[self.head_left:]
        if head:
            self.head_left -= len(head)
            self.handle.write(head)
            self.handle.flush()
        if rest:
            self.tail += rest
            excess = len(self.tail) - self.tail_bytes
            if excess > 0:
                del self.tail[:excess]
                self.omitted += excess
        lines = [line.strip() for line in text[-LAST_LINE_SCAN:].splitlines() if line.strip()]
        if lines:
            self.last_line = lines[-1]
            self.on_line(self.last_line)


class _Reader(threading.Thread):
    def __init__(self, stream: Iterator[bytes], sink: LogSink) -> None:
        super().__init__(daemon=True)
        self.stream, self.sink = stream, sink
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            for chunk in self.stream:
                self.sink.feed(chunk)
        except Exception as error:  # reported by the caller's thread
            self.error = error


def run_agent(engine: ContainerEngine, container_id: str, command: str, env: dict[str, str],
              timeout_s: float, sink: LogSink, cancel: threading.Event) -> AgentRun:
    """Run `command` (sh -c, cwd /work) until it exits, times out or `cancel` is set."""
    argv = ["timeout", "-k", str(KILL_GRACE_S), str(max(1, math.ceil(timeout_s))),
            "sh", "-c", command]
    started = time.monotonic()
    running = sandbox.start_exec(engine, container_id, argv, env)
    reader = _Reader(running.output, sink)
    reader.start()
    deadline = started + sandbox.host_deadline(timeout_s, HOST_GRACE_S)
    stopped, interrupted = _await(engine, container_id, reader, running, deadline, cancel)
    duration = time.monotonic() - started
    running.close()  # frees the connection (a no-op when the stream ended by itself)
    info = exit_after_output(engine, running.exec_id)
    if (reader.error is not None or info.running) and not (stopped or interrupted):
        # The output ended but the agent did not: we lost it, the agent did not fail.
        sweep(engine, container_id, force=True)
        raise SandboxUnavailableError(f"the agent's output stream ended while it was still "
                                      f"running ({reader.error or 'connection lost'})")
    code = None if info.running else info.exit_code
    if not (stopped or interrupted):
        _require_running(engine, container_id, signalled=code is None or code >= SIGNALLED)
    timed_out = stopped or (code in sandbox.TIMEOUT_EXIT_CODES and duration >= timeout_s - 0.5)
    return AgentRun(code, round(duration, 3), timed_out, stopped, interrupted)


def _require_running(engine: ContainerEngine, container_id: str, *, signalled: bool) -> None:
    """The sandbox outlived its agent (its main process is root's: no agent ends it); a
    sandbox that stopped under it was stopped by the engine (a restart, a `docker stop`),
    and the agent's exit is the outage's, never the model's failure. An agent killed by
    a signal may have died with its container a moment before the engine says so: the
    state is asked again for up to EXIT_LAG_S."""
    tries = int(EXIT_LAG_S / POLL_S) if signalled else 1
    for attempt in range(tries):
        state = sandbox.describe(engine, container_id)["state"]
        if state != "running" or attempt + 1 == tries:
            break
        time.sleep(POLL_S)
    if state != "running":
        raise SandboxUnavailableError(
            f"the sandbox stopped under the agent (it is {state}): the engine at "
            f"{engine.address} ended it, not the agent", hint="run the command again: the "
            "experiment's services are restored and the arm is dispatched again from the base")


def _await(engine: ContainerEngine, container_id: str, reader: _Reader, running: ExecStream,
           deadline: float, cancel: threading.Event) -> tuple[bool, bool]:
    """Wait for the output to end; (stopped at the host deadline, interrupted)."""
    while reader.is_alive():
        reader.join(POLL_S)
        if not reader.is_alive():
            break
        if cancel.is_set() or time.monotonic() > deadline:
            sweep(engine, container_id, force=True)
            reader.join(STOP_WAIT_S)
            if reader.is_alive():
                running.close()
                reader.join(STOP_WAIT_S)
            return not cancel.is_set(), cancel.is_set()
    return False, False


def leftovers(engine: ContainerEngine, container_id: str) -> list[str]:
    """The sandbox user's processes, by name, other than this probe: every process of a
    uid other than root's (the keeper, and docker's init, are root's; no agent's process
    can become root: no capability, no-new-privileges), a zombie too (one whose leader
    ended may still run threads; the keeper and docker's init reap the rest at once).
    Nothing rests on which pid or parent a process has: in a Pod the keeper is PID 1 and
    no init runs, under docker an init is PID 1, and a name may say anything."""
    probe, lines = _listing(engine, container_id)
    read = [(line, parse_status(line)) for line in lines if line.strip()]
    procs = [found for _, found in read if found is not None]
    # The probe is the sh under exec_in's `timeout`: that `timeout` is ours too.
    ours = {probe, *(p.ppid for p in procs if p.pid == probe)}
    # A line that does not read is a leftover (the sweep kills it), never a crash.
    odd = [line[:40] for line, found in read if found is None]
    return [p.name for p in procs if p.uid != 0 and p.pid not in ours] + odd


def _listing(engine: ContainerEngine, container_id: str) -> tuple[int, list[str]]:
    """The probe's pid and the stat lines of a whole listing (`LISTED`), up to
    `LIST_TRIES` reads; a sandbox that never gives one is unavailable, with its answer."""
    for _ in range(LIST_TRIES):
        listed = sandbox.exec_in(engine, container_id, PROCESS_LIST, timeout_s=30)
        lines = listed.stdout.splitlines()
        if (listed.exit_code == 0 and len(lines) >= 2 and lines[0].strip().isdigit()
                and lines[-1] == LISTED):
            return int(lines[0]), lines[1:-1]
    said = (listed.stderr or listed.stdout).strip()[:300] or "it printed nothing"
    raise SandboxUnavailableError(f"cannot list the sandbox's processes (exit "
                                  f"{listed.exit_code}, {LIST_TRIES} tries): {said}")


@dataclass(frozen=True)
class Listed:
    pid: int
    ppid: int
    uid: int
    state: str
    name: str


def parse_status(line: str) -> Listed | None:
    """`12 1 1000 S my name` -> Listed(12, 1, 1000, "S", "my name"); None for what is not
    such a line."""
    fields = line.split(" ", 4)
    if len(fields) < 4 or not all(field.isdigit() for field in fields[:3]):
        return None
    return Listed(int(fields[0]), int(fields[1]), int(fields[2]), fields[3],
                  fields[4] if len(fields) == 5 else "")


EMPTY_TRIES = 5  # listings (a kill after each) before a sandbox keeping a process is unavailable
EMPTY_WAIT_S = 0.2  # times the try: a process killed may take a moment to be gone


@contextlib.contextmanager
def still(engine: ContainerEngine, container_id: str) -> Iterator[None]:
    """Nothing of the agent runs in the block (its work is taken). Frozen where the engine
    freezes (docker's pause, thawed after); elsewhere (a Pod cannot be frozen) every
    process of the sandbox user is killed until a listing finds none: `kill -1` is whole
    (a fork either came first and is killed, or fails), and nothing but an exec of ours
    could start another, so an empty sandbox stays empty."""
    if engine.capabilities.freeze:
        sandbox.pause(engine, container_id)
        try:
            yield
        finally:
            sandbox.unpause(engine, container_id)
        return
    for attempt in range(EMPTY_TRIES):
        found = leftovers(engine, container_id)
        if not found:
            break
        sweep(engine, container_id, force=True)
        time.sleep(EMPTY_WAIT_S * (attempt + 1))
    else:
        raise SandboxUnavailableError(
            f"the sandbox user's processes outlived {EMPTY_TRIES} kills: "
            f"{', '.join(found[:5])}",
            hint="once the engine answers, run the same command again")
    yield


def sweep(engine: ContainerEngine, container_id: str, *, force: bool = False) -> list[str]:
    """Kill every process of the sandbox user (the agent's and anything it left behind);
    return the ones found besides ours. The container keeps running (its main process
    is root's), and so does its checkout. The kill never depends on the listing (a
    process it would take for ours dies all the same); `force`: no listing at all."""
    found = [] if force else leftovers(engine, container_id)
    with contextlib.suppress(EngineError):  # a broken or vanished sandbox too
        sandbox.kill_all(engine, container_id)
    return found
