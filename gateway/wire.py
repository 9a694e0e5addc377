"""HTTP on the client side: request bodies read and decoded, headers filtered.

A request body arrives with Content-Length or chunked, perhaps gzip/deflate encoded; it
is read whole (capped), decoded (capped again: no decompression bomb), and forwarded as
plain bytes. Hop-by-hop headers never cross the gateway in either direction, and neither
do the client's credentials.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from email.message import Message
from io import BufferedIOBase

from gateway import GatewayError

MAX_REQUEST_BYTES = 64 << 20
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate",
                        "proxy-authorization", "proxy-connection", "te", "trailer",
                        "trailers", "transfer-encoding", "upgrade"})
# Never forwarded upstream: the gateway sets them itself.
REQUEST_DROPPED = HOP_BY_HOP | {"host", "content-length", "content-encoding",
                                "accept-encoding", "x-api-key", "authorization",
                                "x-goog-api-key"}
RESPONSE_DROPPED = HOP_BY_HOP | {"content-length"}


class BodyError(GatewayError):
    """A request body the gateway cannot take: `shape` is the errors._SHAPES key."""

    def __init__(self, shape: str, message: str) -> None:
        super().__init__(message)
        self.shape = shape


def _read_chunked(rfile: BufferedIOBase) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        line = rfile.readline(1024)
        try:
            length = int(line.split(b";")[0].strip(), 16)
        except ValueError:
            raise BodyError("bad_body", "bakeoff gateway: malformed chunked body") from None
        if length == 0:
            while rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(parts)
        size += length
        if size > MAX_REQUEST_BYTES:
            raise BodyError("too_large", "bakeoff gateway: request body over 64 MiB")
        parts.append(rfile.read(length))
        rfile.readline(1024)


def read_body(rfile: BufferedIOBase, headers: Message) -> bytes:
    """The raw request body (still encoded); BodyError when too large or malformed."""
    if "chunked" in (headers.get("Transfer-Encoding") or "").lower():
        return _read_chunked(rfile)
    try:
        length = int(headers.get("Content-Length") or 0)
    except ValueError:
        raise BodyError("bad_body", "bakeoff gateway: Content-Length is not a number") from None
    if length > MAX_REQUEST_BYTES:
        raise BodyError("too_large", "bakeoff gateway: request body over 64 MiB")
    return rfile.read(length) if length > 0 else b""


def _inflate(data: bytes, wbits: int) -> bytes:
    inflater = zlib.decompressobj(wbits)
    out = inflater.decompress(data, MAX_REQUEST_BYTES + 1)
    if len(out) > MAX_REQUEST_BYTES or inflater.unconsumed_tail:
        raise BodyError("too_large", "bakeoff gateway: decoded request body over 64 MiB")
    return out


def decode_body(data: bytes, encoding: str | None) -> bytes:
    """`data` decoded from its Content-Encoding; 415 for an encoding stdlib cannot read."""
    codings = [c.strip().lower() for c in (encoding or "").split(",") if c.strip()]
    for coding in reversed(codings):
        try:
            if coding in ("gzip", "x-gzip"):
                data = _inflate(data, 16 + zlib.MAX_WBITS)
            elif coding == "deflate":
                data = _inflate(data, zlib.MAX_WBITS)
            elif coding != "identity":
                raise BodyError("bad_encoding", f"bakeoff gateway: Content-Encoding {coding} "
                                "is not supported (send gzip, deflate or none)")
        except zlib.error as error:
            raise BodyError("bad_body", f"bakeoff gateway: the body is not valid {coding}: "
                            f"{error}") from None
    return data


def connection_listed(headers: Message) -> set[str]:
    """The header names a Connection header declares hop-by-hop."""
    return {name.strip().lower() for value in headers.get_all("Connection") or []
            for name in value.split(",")}


def forwarded(items: Iterable[tuple[str, str]], dropped: frozenset[str],
              listed: set[str]) -> list[tuple[str, str]]:
    return [(name, value) for name, value in items
            if name.lower() not in dropped and name.lower() not in listed]


def presented_tokens(headers: Message, query_keys: Iterable[str] = ()) -> list[str]:
    """The tokens a request presents: `x-api-key: T`, `x-goog-api-key: T`,
    `Authorization: Bearer T` and (Gemini's routes) `?key=T`."""
    found = [headers.get("x-api-key") or "", headers.get("x-goog-api-key") or "",
             *query_keys]
    scheme, _, value = (headers.get("Authorization") or "").partition(" ")
    if scheme.lower() == "bearer":
        found.append(value)
    return [token.strip() for token in found if token.strip()]
