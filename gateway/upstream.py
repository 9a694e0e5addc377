"""The connection to an upstream provider API (http or https).

One connection per request: a connect timeout short enough that a dead upstream answers
502 quickly, a read timeout long enough for a model that thinks before its first token.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from gateway import GatewayError

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 600.0


class UpstreamError(GatewayError):
    """The upstream could not be reached or broke off; the message says which and where."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    base_path: str     # e.g. "" or "/proxy", never ending in "/"

    @property
    def origin(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"


def target_of(base_url: str) -> Target:
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UpstreamError(f"upstream {base_url!r} is not an http(s) URL")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return Target(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))


def _connection(target: Target) -> http.client.HTTPConnection:
    if target.scheme == "https":
        return http.client.HTTPSConnection(target.host, target.port, timeout=CONNECT_TIMEOUT_S,
                                           context=ssl.create_default_context())
    return http.client.HTTPConnection(target.host, target.port, timeout=CONNECT_TIMEOUT_S)


def send(target: Target, method: str, rest: str, query: str,
         headers: Sequence[tuple[str, str]], body: bytes
         ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """The upstream's response to one request (its headers read, its body not yet)."""
    url = f"{target.base_path}/{rest}" + (f"?{query}" if query else "")
    connection = _connection(target)
    try:
        connection.connect()
        if connection.sock is not None:
            connection.sock.settimeout(READ_TIMEOUT_S)
            connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection.putrequest(method, url, skip_accept_encoding=True)
        for name, value in [*headers, ("Accept-Encoding", "identity"),
                            ("Content-Length", str(len(body)))]:
            connection.putheader(name, value)
        connection.endheaders(body)
        return connection, connection.getresponse()
    except (OSError, http.client.HTTPException) as error:
        connection.close()
        raise UpstreamError(f"upstream {target.origin} did not answer {method} /{rest}: "
                            f"{type(error).__name__}: {error}") from error
