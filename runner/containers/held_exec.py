"""A program's stdin and output through the engine's exec API: how the orchestrator talks
to a program in a container it cannot reach over the network (psql in the database's
container, on any engine, local or DOCKER_HOST=tcp://… / ssh://…).

docker's low-level exec with stdin attached (`exec_create(stdin=True)`, started as
`hijack.start`), the output read back demultiplexed (8-byte frame headers, no TTY) from
the buffered file the headers came from (`hijack`: never past it), with a deadline on
every read: `exec_with_input` sends a whole input and reads both streams to
the end; `hold_exec` keeps one process open so many scripts share one exec start (~50 ms
each), each answer read up to a marker line the script prints. Engine calls go through
`Engine.call` (the project's errors); a broken socket or a deadline passed is
`SandboxUnavailableError`, the process ending is a value (`HeldExec.ended`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence

from runner.containers import hijack
from runner.containers.backend import ContainerEngine, ExecOutput, HeldOutput, exit_after_output
from runner.containers.dockerclient import ENGINE_HINT, await_output, end_of_input
from runner.containers.engine import Engine
from runner.errors import SandboxUnavailableError


class HeldExec:
    """A process started by exec whose stdin stays open: scripts go in one after the other
    (`send`), each answer read up to a marker line it prints (`until`). A broken socket or
    a deadline passed is `SandboxUnavailableError`; the process ending is a value (`ended`)."""

    def __init__(self, engine: Engine, exec_id: str, started: hijack.Hijacked,
                 what: str) -> None:
        self.engine, self.exec_id, self.what = engine, exec_id, what
        self._file, self._sock = started.file, started.sock
        self._raw = getattr(self._sock, "_sock", self._sock)
        self._output = HeldOutput()
        self.ended = False

    def send(self, data: bytes) -> None:
        try:
            self._raw.sendall(data)
        except OSError as error:
            raise SandboxUnavailableError(f"{self.what}: its stdin broke ({error})",
                                          hint=ENGINE_HINT) from error

    def close_input(self) -> None:
        """The end of the program's input, as a container's stdin ends (`end_of_input`:
        a half-close, or over ssh:// the ssh process's stdin closed)."""
        with contextlib.suppress(OSError):
            end_of_input(self._raw)

    def until(self, marker: bytes | None, timeout_s: float) -> ExecOutput:
        """Read until a stdout line equal to `marker` (None: until the process ends); what
        came before it on stdout and stderr. `exit_code` is set once the process ended."""
        deadline = time.monotonic() + timeout_s
        while not self.ended:
            found = self._output.before(marker)
            if found is not None:
                return found
            self._read_frame(deadline)
        return self._output.rest(self.exit_code())

    def exit_code(self) -> int | None:
        state = (exit_after_output(self.engine, self.exec_id) if self.ended
                 else self.engine.exec_state(self.exec_id))
        return None if state.running else state.exit_code

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()
        with contextlib.suppress(OSError):
            self._raw.close()

    def _read_frame(self, deadline: float) -> None:
        raw = self._read(hijack.FRAME_HEADER, deadline, eof_ok=True)
        if raw is None:
            self.ended = True
            return
        stream, size = hijack.header(raw)
        data = self._read(size, deadline, eof_ok=False) or b""
        (self._output.err if stream == hijack.STDERR else self._output.out).extend(data)

    def _read(self, size: int, deadline: float, *, eof_ok: bool) -> bytes | None:
        data = bytearray()
        while len(data) < size:
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError
                self._raw.settimeout(left)
                await_output(self._raw, self._file, left)
                chunk = self._file.read1(size - len(data))
            except OSError as error:  # TimeoutError included
                raise SandboxUnavailableError(
                    f"{self.what}: no answer in time ({error or 'deadline passed'})",
                    hint=ENGINE_HINT) from error
            if not chunk:
                if eof_ok and not data:
                    return None
                raise SandboxUnavailableError(f"{self.what}: its output broke off",
                                              hint=ENGINE_HINT)
            data.extend(chunk)
        return bytes(data)


@contextlib.contextmanager
def hold_exec(engine: Engine, container_id: str, argv: Sequence[str], *, user: str,
              env: Mapping[str, str] | None = None, what: str = "exec") -> Iterator[HeldExec]:
    """Start `argv` in a running container with its stdin held open for the block: one
    process to send many scripts to (an exec costs ~50 ms to start). The docker engine's
    `Engine.hold_exec`."""
    api = engine.client.api
    exec_id = str(engine.call(f"create {what}", api.exec_create, container_id, list(argv),
                              stdin=True, user=user, environment=dict(env or {}))["Id"])
    started = engine.call(f"start {what}", hijack.start, api, exec_id, timeout=True)
    held = HeldExec(engine, exec_id, started, what)
    try:
        yield held
    finally:
        held.close()


def exec_with_input(engine: ContainerEngine, container_id: str, argv: list[str], stdin: bytes,
                    *,
                    user: str, timeout_s: float, env: Mapping[str, str] | None = None,
                    what: str = "exec") -> ExecOutput:
    """Run `argv` in a running container with `stdin` as its whole input; its exit code
    and output. A deadline passed is `SandboxUnavailableError` (the process is left to
    the container: its stdin is closed, so a reader of it ends)."""
    with engine.hold_exec(container_id, argv, user=user, env=env, what=what) as held:
        # A program that stops reading (psql at its first error) ends the input, not the
        # exec: what it said and its exit code are read all the same.
        with contextlib.suppress(SandboxUnavailableError):
            held.send(stdin)
        held.close_input()
        return held.until(None, timeout_s)
