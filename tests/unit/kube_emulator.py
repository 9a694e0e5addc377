"""An emulator of the Kubernetes API's few calls the backend makes (issue 36), on
loopback: create, read, list and delete by label selector, a Pod's log. Every object
created is validated strictly against the 1.37 schemas (what the backend sends must be
what a cluster accepts); a Pod's status follows a script the test writes, one entry per
read; every request is recorded for exact assertions."""

from __future__ import annotations

import json
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
