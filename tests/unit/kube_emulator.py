"""An emulator of the Kubernetes API's few calls the backend makes (issue 36), on
loopback: create, read, list and delete by label selector, a Pod's log. Every object
created is validated strictly against the 1.37 schemas (what the backend sends must be
what a cluster accepts); a Pod's status follows a script the test writes, one entry per
read; every request is recorded for exact assertions."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import kubernetes_validate

Obj = dict[str, Any]


@dataclass
class Emulator:
    url: str = ""
    objects: dict[tuple[str, str], Obj] = field(default_factory=dict)  # (collection, name)
    scripts: dict[str, list[Obj]] = field(default_factory=dict)  # pod -> statuses to come
    logs: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (pod, container)
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # method, path, query
    fail: list[tuple[int, str]] = field(default_factory=list)  # the next answers' (status, msg)
    protocols: tuple[str, ...] = ("v5.channel.k8s.io", "v4.channel.k8s.io")  # it speaks
    received: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (pod, exec|attach)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def pods(self) -> list[str]:
        return sorted(name for (collection, name) in self.objects if collection.endswith("/pods"))


def status(code: int, message: str) -> bytes:
    return json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                       "message": message, "code": code}).encode()


def selected(obj: Obj, selector: str) -> bool:
    labels = obj["metadata"].get("labels") or {}
    wanted = dict(term.split("=", 1) for term in selector.split(",") if term)
    return all(labels.get(key) == value for key, value in wanted.items())


def handler(emulator: Emulator) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def answer(self, code: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def route(self) -> tuple[str, str, str, dict[str, list[str]]]:
            parts = urlsplit(self.path)
            with emulator.lock:
                emulator.requests.append((self.command, parts.path, parts.query))
            query = parse_qs(parts.query)
            segments = parts.path.split("/")
            if segments[-1] == "log":
                return "/".join(segments[:-2]), segments[-2], "log", query
            if segments[-1] in ("pods", "services", "secrets", "networkpolicies"):
                return parts.path, "", "", query
            return "/".join(segments[:-1]), segments[-1], "", query

        def failed(self) -> bool:
            with emulator.lock:
                if not emulator.fail:
                    return False
                code, message = emulator.fail.pop(0)
            self.answer(code, status(code, message))
            return True

        def do_POST(self) -> None:
            collection, _, _, _ = self.route()
            if self.failed():
                return
            obj = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            try:
                kubernetes_validate.validate(obj, "1.37.0", strict=True)
            except kubernetes_validate.ValidationError as error:
                return self.answer(422, status(422, f"invalid: {error.message}"))
            name = obj["metadata"]["name"]
            with emulator.lock:
                if (collection, name) in emulator.objects:
                    return self.answer(409, status(409, f'"{name}" already exists'))
                if obj["kind"] == "Pod":
                    obj["status"] = {"phase": "Pending"}
                emulator.objects[(collection, name)] = obj
            self.answer(201, json.dumps(obj).encode())

        def do_GET(self) -> None:
            if self.headers.get("Upgrade", "").lower() == "websocket":
                return self.streamed()
            collection, name, sub, query = self.route()
            if self.failed():
                return
            with emulator.lock:
                if not name:
                    selector = (query.get("labelSelector") or [""])[0]
                    items = [o for (c, _), o in sorted(emulator.objects.items())
                             if c == collection and selected(o, selector)]
                    return self.answer(200, json.dumps({"items": items}).encode())
                found = emulator.objects.get((collection, name))
                if found is None:
                    return self.answer(404, status(404, f'pods "{name}" not found'))
                if sub == "log":
                    container = (query.get("container") or [""])[0]
                    return self.answer(200, emulator.logs.get((name, container), b""),
                                       "text/plain")
                script = emulator.scripts.get(name)
                if script:
                    found["status"] = script.pop(0) if len(script) > 1 else script[0]
            self.answer(200, json.dumps(found).encode())

        def streamed(self) -> None:
            """An exec or attach over the channel protocol; the program is the command's
            (`cat` echoes, `exit N` ends with N, `emit N` writes N bytes, `hang` never ends;
            an attach runs `cat`)."""
            parts = urlsplit(self.path)
            with emulator.lock:
                emulator.requests.append(("GET", parts.path, parts.query))
            pod, what = parts.path.split("/")[-2:]
            query = parse_qs(parts.query)
            offered = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "").split(",")]
            chosen = next((p for p in emulator.protocols if p in offered), "")
            accept = base64.b64encode(hashlib.sha1(
                (self.headers["Sec-WebSocket-Key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")
                .encode()).digest()).decode()
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", accept)
            if chosen:
                self.send_header("Sec-WebSocket-Protocol", chosen)
            self.end_headers()
            self.close_connection = True
            command = query.get("command") or ["cat"]
            stdin = bytearray()
            if (query.get("stdin") or [""])[0] == "true" and command[0] != "hang":
                while True:
                    message = self.frame()
                    if message is None or message[:2] == bytes([255, 0]):
                        break
                    if message[:1] == b"\x00":
                        stdin += message[1:]
                        if command[0] == "cat":
                            self.send_frame(b"\x01" + message[1:])
            with emulator.lock:
                emulator.received[(pod, what)] = bytes(stdin)
            if command[0] == "hang":
                while self.frame() is not None:  # until the client goes
                    pass
                return
            if command[0] == "emit":
                for start in range(0, int(command[1]), 65536):
                    self.send_frame(b"\x01" + b"x" * min(65536, int(command[1]) - start))
            self.send_frame(b"\x02" + f"{what} {' '.join(command)}\n".encode())
            code = int(command[-1]) if command[0] == "exit" else 0
            status = ({"status": "Success"} if code == 0 else {
                "status": "Failure", "reason": "NonZeroExitCode", "message": "exit",
                "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}})
            self.send_frame(b"\x03" + json.dumps(status).encode())
            self.wfile.write(b"\x88\x00")  # close
            self.wfile.flush()

        def frame(self) -> bytes | None:
            """One client message (masked, as a client's are); None when it closed."""
            head = self.rfile.read(2)
            if len(head) < 2 or head[0] & 0x0F == 8:
                return None
            size = head[1] & 0x7F
            if size == 126:
                size = struct.unpack(">H", self.rfile.read(2))[0]
            elif size == 127:
                size = struct.unpack(">Q", self.rfile.read(8))[0]
            mask = self.rfile.read(4)
            data = self.rfile.read(size)
            key = (mask * (size // 4 + 1))[:size]
            return (int.from_bytes(data, "big") ^ int.from_bytes(key, "big")).to_bytes(size, "big")

        def send_frame(self, payload: bytes) -> None:
            size = len(payload)
            head = (bytes([0x82, size]) if size < 126 else
                    bytes([0x82, 126]) + struct.pack(">H", size) if size < 65536 else
                    bytes([0x82, 127]) + struct.pack(">Q", size))
            self.wfile.write(head + payload)
            self.wfile.flush()

        def do_DELETE(self) -> None:
            collection, _, _, query = self.route()
            if self.failed():
                return
            selector = (query.get("labelSelector") or [""])[0]
            with emulator.lock:
                gone = [key for key, o in emulator.objects.items()
                        if key[0] == collection and selected(o, selector)]
                for key in gone:
                    del emulator.objects[key]
            self.answer(200, json.dumps({"kind": "Status", "status": "Success"}).encode())

    return Handler


@contextmanager
def emulated() -> Iterator[Emulator]:
    emulator = Emulator()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(emulator))
    emulator.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield emulator
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
