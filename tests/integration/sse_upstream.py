"""A tiny stdlib provider for tests and benches that run the gateway as a container:
run it as `python3 sse_upstream.py PORT EVENTS DELAY_S` in `bakeoff/python`.

POST /v1/messages answers an Anthropic Messages stream: message_start (usage: input 120,
cache write 30, cache read 400), EVENTS text deltas DELAY_S apart, message_delta
(output 57), message_stop; chunked, one chunk per event. With `"stream": false` it answers
one small JSON message (input 11, cache read 5, output 7). A body may set its own
`"events"` and `"delay_s"` (the benches do). Each request prints one JSON
line on stdout: its path, whether x-api-key equals $EXPECTED_KEY, whether an
Authorization header came along.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

START = {"type": "message_start", "message": {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x-20260101",
    "content": [], "usage": {"input_tokens": 120, "cache_creation_input_tokens": 30,
                             "cache_read_input_tokens": 400, "output_tokens": 1}}}
DELTA = {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "tick"}}
END = [{"type": "message_delta", "delta": {"stop_reason": "end_turn"},
        "usage": {"output_tokens": 57}}, {"type": "message_stop"}]
SMALL = {"id": "msg_2", "type": "message", "role": "assistant", "model": "claude-x-20260101",
         "content": [{"type": "text", "text": "ok"}],
         "usage": {"input_tokens": 11, "cache_read_input_tokens": 5, "output_tokens": 7}}


def event(payload: dict[str, object]) -> bytes:
    return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    events, delay_s = 3, 0.0

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        print(json.dumps({"path": self.path, "authorization": "Authorization" in self.headers,
                          "key_ok": self.headers.get("x-api-key") == os.environ.get(
                              "EXPECTED_KEY")}), flush=True)
        if not body.get("stream"):
            data = json.dumps(SMALL).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        events = int(body.get("events", self.events))
        delay_s = float(body.get("delay_s", self.delay_s))
        chunks = [event(START)] + [event(DELTA)] * events + [event(e) for e in END]
        for index, chunk in enumerate(chunks):
            if 0 < index <= events:
                time.sleep(delay_s)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")


def main() -> None:
    port, Handler.events, Handler.delay_s = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    ThreadingHTTPServer.request_queue_size = 128
    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
