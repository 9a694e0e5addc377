"""The gateway's unit-test bench, all on loopback: a scripted upstream that streams SSE
in chunks it can hold back, the gateway in a thread on port 0, and a plain client."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gateway.server import Gateway, GatewayServer

TOKEN_A = "tok-arm-a-3f9c1d"
TOKEN_B = "tok-arm-b-77e0aa"
ANTHROPIC_KEY = "sk-ant-REAL-0123456789"
OPENAI_KEY = "sk-openai-REAL-9876543210"
GEMINI_KEY = "AIza-REAL-gemini-5550123"
ENVIRON = {"BAKEOFF_KEY_0": ANTHROPIC_KEY, "BAKEOFF_KEY_1": OPENAI_KEY,
           "BAKEOFF_KEY_2": GEMINI_KEY}


def sse(*events: tuple[str | None, dict[str, Any] | str]) -> list[bytes]:
    """One bytes chunk per SSE event (`event:` line only when a name is given)."""
    chunks = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        chunks.append((f"event: {name}\n" if name else "").encode() + f"data: {text}\n\n".encode())
    return chunks


@dataclass
class Reply:
    """What the upstream answers: `chunks` sent one by one (chunked), or one JSON body.
    `hold` (an Event) is waited for before chunk number `hold_before`."""

    status: int = 200
    chunks: list[bytes] = field(default_factory=list)
    json_body: dict[str, Any] | None = None
    hold: threading.Event | None = None
    hold_before: int = 1
    sent: list[int] = field(default_factory=list)   # indices of chunks written (or being)
    content_type: str = "text/event-stream"         # of `chunks`


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class Upstream:
    """A loopback provider: every request is kept in `seen`; `replies[path]` answers."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.replies: dict[str, Reply] = {}
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                upstream.seen.append(Seen(self.command, self.path,
                                          {k.lower(): v for k, v in self.headers.items()},
                                          body))
                upstream.answer(self, upstream.replies[self.path.split("?")[0]])

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        handler.send_response(reply.status)
        if reply.json_body is not None:
            body = json.dumps(reply.json_body).encode()
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
            return
        handler.send_header("Content-Type", reply.content_type)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for index, chunk in enumerate(reply.chunks):
            if reply.hold is not None and index == reply.hold_before:
                reply.hold.wait(timeout=10)
            reply.sent.append(index)  # before the write: a client that has it sees it here
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            handler.wfile.flush()
        handler.wfile.write(b"0\r\n\r\n")

    def __enter__(self) -> Upstream:
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def grant(arm: str, models: list[str] | None, allow_server_tools: bool = False,
          **budget: Any) -> dict[str, Any]:
    return {"stage": "s1", "arm": arm, "role": "arm", "models": models,
            "keys": {"anthropic": "BAKEOFF_KEY_0", "openai": "BAKEOFF_KEY_1",
                     "gemini": "BAKEOFF_KEY_2"},
            "allow_server_tools": allow_server_tools,
            "budget": {"max_requests": None, "max_tokens": None, "max_usd": None, **budget}}


def write_config(state: Path, upstream_url: str, *, models: list[str] | None = None,
                 prices: dict[str, Any] | None = None, allow_server_tools: bool = False,
                 **budget: Any) -> None:
    """Arm a (token A: `models`, `budget`, `allow_server_tools`) and arm b (token B: any
    model, no budget), every provider's upstream at `upstream_url`."""
    config = {"upstreams": {"anthropic": upstream_url, "openai": upstream_url,
                            "gemini": upstream_url},
              "tokens": {TOKEN_A: grant("a", models, allow_server_tools, **budget),
                         TOKEN_B: grant("b", None)},
              "prices": prices or {}}
    state.mkdir(parents=True, exist_ok=True)
    temporary = state / "config.json.tmp"
    temporary.write_text(json.dumps(config), encoding="utf-8")
    temporary.replace(state / "config.json")


@contextmanager
def running_gateway(state: Path) -> Iterator[int]:
    """The gateway on 127.0.0.1:<port>, serving in a daemon thread; yields the port."""
    server = GatewayServer(("127.0.0.1", 0), Gateway(state, ENVIRON))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def call(port: int, path: str, body: bytes | dict[str, Any] | None = None, *,
         method: str = "POST", headers: dict[str, str] | None = None) -> Answer:
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body=data, headers=headers or {})
        response = connection.getresponse()
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()},
                      response.read())
    finally:
        connection.close()


def records(state: Path, stage: str = "s1") -> list[dict[str, Any]]:
    path = state / "records" / stage / "requests.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
