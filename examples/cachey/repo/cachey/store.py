"""A Redis client of the few commands cachey needs (RESP over a socket; stdlib only)."""

from __future__ import annotations

import os
import socket


class RedisError(Exception):
    """Redis answered with an error, or not at all."""


class Redis:
    def __init__(self, host: str | None = None, port: int | None = None,
                 timeout: float = 2.0) -> None:
        self.host = host or os.environ.get("REDIS_HOST", "redis")
        self.port = port or int(os.environ.get("REDIS_PORT", "6379"))
        self.timeout = timeout

    def command(self, *args: str) -> object:
        payload = f"*{len(args)}\r\n" + "".join(
            f"${len(a.encode())}\r\n{a}\r\n" for a in args)
        with socket.create_connection((self.host, self.port), timeout=self.timeout) as conn:
            conn.sendall(payload.encode())
            return _reply(conn.makefile("rb"))

    def ping(self) -> bool:
        return self.command("PING") == "PONG"

    def get(self, key: str) -> str | None:
        value = self.command("GET", key)
        return None if value is None else str(value)

    def set(self, key: str, value: str, ttl_s: int = 300) -> None:
        self.command("SET", key, value, "EX", str(ttl_s))


def _reply(stream: object) -> object:
    line = stream.readline()  # type: ignore[attr-defined]
    if not line:
        raise RedisError("connection closed")
    kind, rest = line[:1], line[1:].rstrip(b"\r\n").decode()
    if kind == b"+":
        return rest
    if kind == b"-":
        raise RedisError(rest)
    if kind == b":":
        return int(rest)
    if kind == b"$":
        size = int(rest)
        if size < 0:
            return None
        data = stream.read(size + 2)  # type: ignore[attr-defined]
        return data[:-2].decode()
    raise RedisError(f"unexpected reply {line!r}")
