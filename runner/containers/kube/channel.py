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

import contextlib
import json
import ssl
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import urlencode

import websocket

from runner.containers.kube.api import api_path
from runner.containers.kube.config import KubeTarget
from runner.errors import EngineFailedError, EngineRefusedError

PROTOCOL = "v5.channel.k8s.io"
OFFERED = [PROTOCOL, "v4.channel.k8s.io"]  # v4 offered only to refuse it by name
STDIN, STDOUT, STDERR, STATUS, CLOSE = 0, 1, 2, 3, 255
CHUNK = 64 * 1024


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
    query = [("container", container), ("stdout", "true"), ("stderr", "true")]
    if stdin is not None:
        query.append(("stdin", "true"))
    query += [("command", part) for part in command or ()]
    what = "attach" if command is None else "exec"
    ends = time.monotonic() + deadline_s
    connection = _connect(target, url(target, pod, what, query), deadline_s)
    try:
        if stdin is not None:
            while chunk := stdin.read(CHUNK):
                connection.send_binary(bytes([STDIN]) + chunk)
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
    query = [("container", container), ("stdin", "true")]
    connection = _connect(target, url(target, pod, "attach", query), deadline_s)
    try:
        with contextlib.suppress(OSError, websocket.WebSocketException):
            while chunk := stdin.read(CHUNK):
                connection.send_binary(bytes([STDIN]) + chunk)
            connection.send_binary(bytes([CLOSE, STDIN]))
    finally:
        connection.close()


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


def opened(target: KubeTarget, pod: str, container: str, command: Sequence[str], *,
           deadline_s: float) -> websocket.WebSocket:
    """An exec of `command` whose output is read as it comes (`output`)."""
    query = [("container", container), ("stdout", "true"), ("stderr", "true"),
             *(("command", part) for part in command)]
    return _connect(target, url(target, pod, "exec", query), deadline_s)


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
    while True:
        connection.settimeout(None if ends is None else max(0.01, ends - time.monotonic()))
        try:
            opcode, data = connection.recv_data()
        except (TimeoutError, websocket.WebSocketTimeoutException) as error:
            raise EngineFailedError(f"the stream of {what} outlived its deadline") from error
        except websocket.WebSocketConnectionClosedException:
            return
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            return
        if data:
            yield data[0], data[1:]
