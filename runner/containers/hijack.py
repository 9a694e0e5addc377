"""An exec's output on docker's hijacked connection, read from where its headers were read.

docker answers an exec start with `101 UPGRADED`, then sends the process's output on the
same connection, in frames (an 8-byte header: the stream, then the length; no TTY). The
SDK reads those frames from the raw socket *under* the buffered file http.client read the
headers from: whatever arrived in the same read as the headers (an exec that printed at
once, read by a thread that ran late on a loaded machine) stays in that buffer, and the
SDK never sees it: all the output of a short exec, or its first lines (docker-py #2042 is
this; here, a listing that printed nothing, an agent's log without its first line). Every
exec of ours is read here from that buffered file, so nothing that came is skipped.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from docker.types import CancellableStream

FRAME_HEADER = 8
STDERR = 2  # a frame's stream: 1 is stdout
UPGRADE = {"Connection": "Upgrade", "Upgrade": "tcp"}


@dataclass(frozen=True)
class Hijacked:
    """A started exec's connection: `file` to read its output from (the buffered file the
    headers came from, what came with them first), `sock` to write its stdin to and to
    end it, `response` to keep it open."""

    response: Any
    file: io.BufferedIOBase
    sock: Any


def start(api: Any, exec_id: str, *, timeout: bool = False) -> Hijacked:
    """Start exec `exec_id` attached (as the SDK's `exec_start(socket=True)` does). Without
    `timeout`, a read waits as long as the process is silent (the caller has a deadline of
    its own), as the SDK's own streams do."""
    response = api._post_json(api._url("/exec/{0}/start", exec_id), headers=UPGRADE,
                              data={"Tty": False, "Detach": False}, stream=True)
    sock = api._get_raw_response_socket(response)  # raises the engine's refusal
    if not timeout:
        api._disable_socket_timeout(sock)
    return Hijacked(response, response.raw._fp.fp, sock)


def header(raw: bytes) -> tuple[int, int]:
    """A frame's header (FRAME_HEADER bytes) as its stream and its data's length."""
    return raw[0], int.from_bytes(raw[4:8], "big")


def frames(file: io.BufferedIOBase) -> Iterator[tuple[int, bytes]]:
    """(stream, data) of each frame to the end of the output (a frame cut short: what came)."""
    while len(raw := file.read(FRAME_HEADER)) == FRAME_HEADER:
        stream, size = header(raw)
        data = file.read(size) if size else b""
        if data:
            yield stream, data
        if len(data) < size:
            return


def output(hijacked: Hijacked) -> tuple[bytes, bytes]:
    """The whole stdout and stderr, to the end of the exec."""
    out, err = bytearray(), bytearray()
    try:
        for stream, data in frames(hijacked.file):
            (err if stream == STDERR else out).extend(data)
    finally:
        hijacked.response.close()
    return bytes(out), bytes(err)


def stream(hijacked: Hijacked) -> CancellableStream[bytes]:
    """The output of both streams as it comes; `close` (from any thread) ends it, as the
    SDK's own streams end (a broken connection is the end, not an error)."""
    return CancellableStream((data for _, data in frames(hijacked.file)), hijacked.response)
