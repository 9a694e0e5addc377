"""Exec and attach over the Kubernetes API's channel protocol (issue 36, step 4): a
WebSocket whose binary messages start with their channel (0 stdin, 1 stdout, 2 stderr,
3 the API's status of the command, 255 close). `v5.channel.k8s.io` only: it is the one
that can close stdin and keep reading (a container whose inputs come on stdin must see
their end), so an API that offers only v4 is refused, never half-served.

Stdin goes in messages of `CHUNK` bytes, every byte of it (large writes over exec were
silently truncated for an anchor: the tests send megabytes and compare digests); the
exit code is the status channel's (`NonZeroExitCode` names it), never guessed; past its
deadline a stream is cut and the engine is declared stuck.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import posixpath
import re
import ssl
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import urlencode

import websocket

from runner.containers.backend import ExecOutput, HeldOutput
from runner.containers.kube.api import api_path
from runner.containers.kube.config import KubeTarget
from runner.errors import EngineFailedError, EngineRefusedError, SandboxUnavailableError

PROTOCOL = "v5.channel.k8s.io"
OFFERED = [PROTOCOL, "v4.channel.k8s.io"]  # v4 offered only to refuse it by name
STDIN, STDOUT, STDERR, STATUS, CLOSE = 0, 1, 2, 3, 255
CHUNK = 64 * 1024
VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Streamed:
    """What a command (or an attached container) wrote, and its exit code."""

    exit_code: int
    stdout: bytes
    stderr: bytes


def exit_code(status: dict[str, Any]) -> int:
    """The command's exit code from the API's status message."""
    if status.get("status") == "Success":
        return 0
    if status.get("reason") == "NonZeroExitCode":
        for cause in (status.get("details") or {}).get("causes") or []:
            if cause.get("reason") == "ExitCode":
                return int(cause.get("message", "-1"))
    raise EngineFailedError(f"the command did not run: {status.get('message') or status}")


def url(target: KubeTarget, pod: str, what: str, query: Sequence[tuple[str, str]]) -> str:
    base = target.server.replace("https://", "wss://", 1).replace("http://", "ws://", 1)
    return f"{base}{api_path(target.namespace, 'Pod', pod)}/{what}?{urlencode(list(query))}"


def stream(target: KubeTarget, pod: str, container: str, *, command: Sequence[str] | None,
           stdin: IO[bytes] | None, deadline_s: float) -> Streamed:
    """Run `command` in `container` of `pod` (exec), or attach to the container's own
    process (`command` None); `stdin` sent whole, then closed; until the stream ends."""
    query = _query(container, command or (), stdin=stdin is not None)
    what = "attach" if command is None else "exec"
    ends = time.monotonic() + deadline_s
    connection = _connect(target, url(target, pod, what, query), deadline_s)
    try:
        if stdin is not None:
            _give(connection, stdin)
            connection.send_binary(bytes([CLOSE, STDIN]))
        return _read(connection, ends, f"{what} in {pod}/{container}")
    finally:
        connection.close()


def send_stdin(target: KubeTarget, pod: str, container: str, stdin: IO[bytes], *,
               deadline_s: float) -> None:
    """Attach to the container's own process and give it `stdin` whole, then its end
    (the container's `stdinOnce`: the first attach's end is its stdin's end); its output
    is the container's log, not read here. A container that stops reading (it ended)
    ends the sending, as the docker backend's `start` does: its exit says the rest."""
    query = _query(container, (), stdin=True, output=False)
    connection = _connect(target, url(target, pod, "attach", query), deadline_s)
    try:
        with contextlib.suppress(OSError, websocket.WebSocketException):
            _give(connection, stdin)
            connection.send_binary(bytes([CLOSE, STDIN]))
    finally:
        connection.close()


def _query(container: str, command: Sequence[str], *, stdin: bool,
           output: bool = True) -> list[tuple[str, str]]:
    """An exec's or attach's query: the container, the streams it opens, the command."""
    return [("container", container),
            *((("stdout", "true"), ("stderr", "true")) if output else ()),
            *((("stdin", "true"),) if stdin else ()),
            *(("command", part) for part in command)]


def _give(connection: websocket.WebSocket, source: IO[bytes]) -> None:
    """Every byte of `source` on the stdin channel, in messages of CHUNK bytes."""
    while chunk := source.read(CHUNK):
        connection.send_binary(bytes([STDIN]) + chunk)


def _connect(target: KubeTarget, address: str, deadline_s: float) -> websocket.WebSocket:
    header = [f"Authorization: Bearer {target.token}"] if target.token else []
    sslopt: dict[str, Any] = {"cert_reqs": ssl.CERT_REQUIRED if target.verify else ssl.CERT_NONE}
    if target.ca_file:
        sslopt["ca_certs"] = target.ca_file
    if target.client_cert and target.client_key:
        sslopt.update(certfile=target.client_cert, keyfile=target.client_key)
    try:
        connection = websocket.create_connection(
            address, timeout=deadline_s, header=header, subprotocols=OFFERED, sslopt=sslopt)
    except websocket.WebSocketBadStatusException as error:
        raise EngineRefusedError(target.server, "open a stream", str(error),
                                 status=error.status_code) from error
    except (OSError, websocket.WebSocketException) as error:
        raise EngineFailedError(f"the Kubernetes API at {target.server} did not open a "
                                f"stream: {error}") from error
    if connection.getsubprotocol() != PROTOCOL:
        connection.close()
        raise EngineRefusedError(target.server, "open a stream", f"the API offers "
                                 f"{connection.getsubprotocol() or 'no channel protocol'}, not "
                                 f"{PROTOCOL}", status=None,
                                 hint="use a cluster whose API speaks v5 (Kubernetes 1.30+)")
    return connection


def _read(connection: websocket.WebSocket, ends: float, what: str) -> Streamed:
    out, err = bytearray(), bytearray()
    code: int | None = None
    for channel, payload in _messages(connection, ends, what):
        if channel == STDOUT:
            out += payload
        elif channel == STDERR:
            err += payload
        elif channel == STATUS:
            code = exit_code(json.loads(payload))
    if code is None:
        raise EngineFailedError(f"the stream of {what} ended with no status: the command's "
                                "end is unknown")
    return Streamed(code, bytes(out), bytes(err))


def opened(target: KubeTarget, pod: str, container: str, command: ExecCommand, *,
           deadline_s: float, stdin: bool = False) -> websocket.WebSocket:
    """An exec of `command` whose output is read as it comes (`output`, `Held`): its
    preamble sent, then its stdin kept open (`stdin`) or closed."""
    query = _query(container, command.argv, stdin=stdin or bool(command.preamble))
    connection = _connect(target, url(target, pod, "exec", query), deadline_s)
    if command.preamble:
        try:
            _give(connection, io.BytesIO(command.preamble))
            if not stdin:
                connection.send_binary(bytes([CLOSE, STDIN]))
        except (OSError, websocket.WebSocketException) as error:
            connection.close()
            raise EngineFailedError(f"the Kubernetes API at {target.server} broke the "
                                    f"stream of an exec: {error}") from error
    return connection


def output(connection: websocket.WebSocket, what: str,
           ended: Callable[[int | None], None]) -> Iterator[bytes]:
    """Both streams of an `opened` exec as they come (no deadline: the caller's);
    `ended(code)` once they ended (None: no status came, the end is unknown)."""
    code: int | None = None
    try:
        for channel, payload in _messages(connection, None, what):
            if channel in (STDOUT, STDERR):
                yield payload
            elif channel == STATUS:
                code = exit_code(json.loads(payload))
        ended(code)
    finally:
        connection.close()


def _messages(connection: websocket.WebSocket, ends: float | None,
              what: str) -> Iterator[tuple[int, bytes]]:
    """(channel, payload) of each message until the stream ends; past `ends` (None: no
    deadline) the stream is cut and the engine declared stuck."""
    while (message := _message(connection, ends, what)) is not None:
        yield message


def _message(connection: websocket.WebSocket, ends: float | None,
             what: str) -> tuple[int, bytes] | None:
    """The next message with data (channel, payload); None when the stream ended."""
    while True:
        connection.settimeout(None if ends is None else max(0.01, ends - time.monotonic()))
        try:
            opcode, data = connection.recv_data()
        except (TimeoutError, websocket.WebSocketTimeoutException) as error:
            raise EngineFailedError(f"the stream of {what} outlived its deadline") from error
        except websocket.WebSocketConnectionClosedException:
            return None
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            return None
        if data:
            return data[0], data[1:]


class Held:
    """A process started by exec whose stdin stays open (the engine interface's
    `HeldProcess`): scripts go in one after the other, each answer read up to a marker
    line it prints; a broken stream or a deadline passed is `SandboxUnavailableError`,
    the process ending is a value (its exit code from the status channel)."""

    def __init__(self, connection: websocket.WebSocket, what: str) -> None:
        self._connection, self.what = connection, what
        self._output = HeldOutput()
        self._code: int | None = None
        self._ended = False

    @property
    def ended(self) -> bool:
        return self._ended

    def send(self, data: bytes) -> None:
        try:
            _give(self._connection, io.BytesIO(data))
        except (OSError, websocket.WebSocketException) as error:
            raise SandboxUnavailableError(f"{self.what}: its stdin broke ({error})") from error

    def close_input(self) -> None:
        with contextlib.suppress(OSError, websocket.WebSocketException):
            self._connection.send_binary(bytes([CLOSE, STDIN]))

    def until(self, marker: bytes | None, timeout_s: float) -> ExecOutput:
        """What came before a stdout line equal to `marker` (None: to the process's end)."""
        ends = time.monotonic() + timeout_s
        while not self._ended:
            found = self._output.before(marker)
            if found is not None:
                return found
            try:
                message = _message(self._connection, ends, self.what)
            except EngineFailedError as error:
                raise SandboxUnavailableError(f"{self.what}: no answer in time") from error
            if message is None:
                self._ended = True
            elif message[0] == STATUS:
                self._code = exit_code(json.loads(message[1]))
            else:
                output = self._output
                (output.err if message[0] == STDERR else output.out).extend(message[1])
        return self._output.rest(self._code)

    def close(self) -> None:
        with contextlib.suppress(OSError, websocket.WebSocketException):
            self._connection.close()


# Reads `NAME=BASE64` lines from stdin up to an empty one, exports each (a value keeps a
# trailing newline: the `x` guards it from `$(...)`), then runs the command in the
# directory, its stdin what follows. Every image of ours has sh and coreutils' base64.
ENV_SCRIPT = ('d=$1; shift; while IFS= read -r l && [ -n "$l" ]; do '
              'v=$(printf %s "${l#*=}" | base64 -d; printf x); export "${l%%=*}=${v%x}"; '
              'done; exec env -C "$d" -- "$@"')
ENV_NAME = "bakeoff-env"  # the script's $0


@dataclass(frozen=True)
class ExecCommand:
    """An exec's command line and what goes on its stdin before anything else."""

    argv: list[str]
    preamble: bytes = b""


def in_dir(argv: Sequence[str], workdir: str, env: Mapping[str, str] | None) -> ExecCommand:
    """`argv` run in `workdir` with `env` (a Pod's exec has neither: `env -C`; `--` ends
    env's options, so a program named `-i` is a program). The variables go on stdin,
    never in the command: an exec's command is its request's URL, which the API server's
    audit log keeps, and an arm's keys and the database's password are among them."""
    if not env:
        return ExecCommand(["env", "-C", workdir, "--", *argv])
    bad = sorted(key for key in env if not VARIABLE.fullmatch(key))
    if bad:
        raise ValueError(f"not a variable's name: {', '.join(map(repr, bad))}")
    lines = "".join(f"{key}={base64.b64encode(value.encode()).decode()}\n"
                    for key, value in env.items())
    return ExecCommand(["sh", "-c", ENV_SCRIPT, ENV_NAME, workdir, *argv], f"{lines}\n".encode())


def untar(target: KubeTarget, pod: str, container: str, path: str, source: IO[bytes], *,
          deadline_s: float) -> None:
    """An archive unpacked at `path` by tar in the container, its stdin the archive."""
    done = stream(target, pod, container, command=["tar", "-x", "-C", path], stdin=source,
                  deadline_s=deadline_s)
    if done.exit_code != 0:
        raise SandboxUnavailableError(f"the archive at {path} in {pod}/{container} was not "
                                      f"unpacked (tar exit {done.exit_code}): "
                                      f"{done.stderr.decode(errors='replace')[:500]}")


# What GNU tar says of a path that is not there (and only of that: a file it may not read
# is "Cannot open: Permission denied", which is no absence).
MISSING = ": Cannot stat: No such file or directory"


def tar(target: KubeTarget, pod: str, container: str, path: str, *,
        deadline_s: float) -> Streamed:
    """tar of `path` in the container (its members under the path's last part) on the
    exec's stdout, with its exit code and its words (`MISSING`)."""
    parent, name = posixpath.split(path.rstrip("/") or "/")
    return stream(target, pod, container, command=["tar", "-c", "-C", parent or "/",
                                                   name or "."],
                  stdin=None, deadline_s=deadline_s)
