"""The scripted provider of bench/gateway_routes.py: one process on loopback.

    python bench/route_upstream.py

Prints its port on stdout, then answers each route with the stream the real API sends
(the unit tests' payloads, tests/unit/gateway/streams.py): Messages, Responses and Chat
Completions as SSE, Gemini's streamGenerateContent?alt=sse as `data:` events; chunked, one
chunk per event, no delay (the bench measures the gateway, not a model). A request whose
credential is not $EXPECTED_KEY is a 401.
"""

from __future__ import annotations

import os
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.unit.gateway.streams import (
    ANTHROPIC_STREAM,
    CHAT_STREAM,
    GEMINI_SSE,
    RESPONSES_STREAM,
)

STREAMS = {"/v1/messages": ANTHROPIC_STREAM, "/v1/responses": RESPONSES_STREAM,
           "/v1/chat/completions": CHAT_STREAM,
           "/v1beta/models/gemini-x:streamGenerateContent": GEMINI_SSE}
CREDENTIALS = ("x-api-key", "x-goog-api-key", "authorization")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        chunks = STREAMS.get(self.path.split("?")[0])
        sent = {(self.headers.get(name) or "").removeprefix("Bearer ") for name in CREDENTIALS}
        if chunks is None or os.environ["EXPECTED_KEY"] not in sent:
            self.send_response(404 if chunks is None else 401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
