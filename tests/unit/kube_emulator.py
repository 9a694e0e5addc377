"""An emulator of the Kubernetes API's few calls the backend makes (issue 36), on
loopback: create, read, list and delete by label selector, a Pod's log. Every object
created is validated strictly against the 1.37 schemas (what the backend sends must be
what a cluster accepts); a Pod's status follows a script the test writes, one entry per
read, or (`autorun`) every Pod runs once made and the test's `programs` play its
containers' processes: what an attach gives a container, what an exec runs; every request
is recorded for exact assertions."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import kubernetes_validate

from runner.containers.kube import channel
from tests.unit import kube_schema

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
    autorun: bool = False  # a Pod made is a Pod running (no script needed)
    split_streams: bool = True  # a log's `stream` honoured (KEP-3288), else both given
    streams: dict[tuple[str, str, str], bytes] = field(default_factory=dict)  # pod, c, Stdout
    # What a container's process does with what an attach gave it: (emulator, pod,
    # container, stdin); and an exec by its program's name: (emulator, pod, container,
    # argv, stdin) -> (stdout, stderr, exit code).
    on_attach: Callable[[Emulator, str, str, bytes], None] | None = None
    on_create: Callable[[Emulator, str], None] | None = None  # a Pod just made: (pod)
    on_delete: Callable[[Emulator, str], None] | None = None  # a Pod just deleted: (pod)
    on_object: Callable[[Emulator, Obj], None] | None = None  # any other object just made
    # A running container's log as its node has it so far: (emulator, pod, container,
    # stream: "Stdout" | "Stderr" | "" for both) -> the log, None once it ended (then
    # what `end` stored is read).
    on_log: Callable[[Emulator, str, str, str], bytes | None] | None = None
    # Every exec as it streams, when set (a node that runs the Pods; a held session):
    # (emulator, pod, container, command, read: the next stdin bytes, the variables'
    # preamble first, None at its end, send: (stream 1|2, data)) -> exit code; else
    # `programs`.
    on_stream: Callable[[Emulator, str, str, list[str], Callable[[], bytes | None],
                         Callable[[int, bytes], None]], int] | None = None
    programs: dict[str, Callable[[Emulator, str, str, list[str], bytes],
                                 tuple[bytes, bytes, int]]] = field(default_factory=dict)
    execs: list[tuple[str, str, list[str]]] = field(default_factory=list)  # pod, c, command
    # Each exec's variables as its command's stdin gave them (`channel.in_dir`), in order.
    exec_env: list[dict[str, str]] = field(default_factory=list)
    made: dict[tuple[str, str], Obj] = field(default_factory=dict)  # all ever created, in order
    addresses: dict[str, str] = field(default_factory=dict)  # a Pod's IP (else 10.0.0.7)
    # A Pod's node when its affinity names none (else node-a); a claim's bound size (else
    # the size it asked).
    nodes: dict[str, str] = field(default_factory=dict)
    capacity: dict[str, str] = field(default_factory=dict)
    version: Obj = field(default_factory=lambda: {"major": "1", "minor": "37",
                                                  "gitVersion": "v1.37.0"})

    def pods(self) -> list[str]:
        return sorted(name for (collection, name) in self.objects if collection.endswith("/pods"))

    def pod(self, name: str) -> Obj:
        return next(o for (c, n), o in self.objects.items() if c.endswith("/pods") and n == name)

    def end(self, pod: str, container: str, code: int, *, stdout: bytes = b"",
            stderr: bytes = b"", reason: str = "") -> None:
        """`container` of `pod` ended with `code`, having written `stdout` and `stderr`."""
        with self.lock:
            self.streams[(pod, container, "Stdout")] = stdout
            self.streams[(pod, container, "Stderr")] = stderr
            self.logs[(pod, container)] = stdout + stderr
            for found in self.pod(pod)["status"]["containerStatuses"]:
                if found["name"] == container:
                    found["state"] = {"terminated": {"exitCode": code,
                                                     **({"reason": reason} if reason else {})}}


def running_status(obj: Obj, address: str = "10.0.0.7") -> Obj:
    return {"phase": "Running", "podIP": address, "containerStatuses": [
        {"name": c["name"], "image": c["image"], "imageID": c["image"],
         "state": {"running": {}}} for c in obj["spec"]["containers"]]}


def pinned(pod: Obj) -> str | None:
    """The node a Pod's required node affinity names (by `metadata.name`), if any."""
    terms = (((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    for term in terms:
        for field_ in term.get("matchFields") or []:
            if field_["key"] == "metadata.name" and field_["operator"] == "In":
                return str(field_["values"][0])
    return None


def status(code: int, message: str) -> bytes:
    return json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                       "message": message, "code": code}).encode()


def selected(obj: Obj, selector: str) -> bool:
    """`key=value` terms, and `key` (it exists), as the API reads a label selector."""
    labels = obj["metadata"].get("labels") or {}
    terms = [term.partition("=") for term in selector.split(",") if term]
    return all(labels.get(key) == value if equal else key in labels
               for key, equal, value in terms)


def unwrapped(command: list[str]) -> list[str]:
    """The program an exec runs, past `env -C DIR --`, the script that reads its variables
    from stdin (`channel.ENV_SCRIPT`) and `setpriv OPTIONS --`."""
    argv = list(command)
    if argv[:2] == ["env", "-C"] and argv[3:4] == ["--"]:
        argv = argv[4:]
    if argv[:4] == ["sh", "-c", channel.ENV_SCRIPT, channel.ENV_NAME]:
        argv = argv[5:]
    if argv[:1] == ["setpriv"]:
        argv = argv[argv.index("--") + 1:]
        return unwrapped(argv)
    return argv


def reads_env(command: list[str]) -> bool:
    """The command reads its variables from its stdin first (`channel.in_dir`)."""
    if command[:1] == ["setpriv"]:
        command = command[command.index("--") + 1:]
    return command[:3] == ["sh", "-c", channel.ENV_SCRIPT]


def env_of(preamble: bytes) -> dict[str, str]:
    """The variables of an exec's preamble (`NAME=BASE64` lines)."""
    return {key: base64.b64decode(value).decode() for key, _, value in
            (line.partition("=") for line in preamble.decode().splitlines() if line)}


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
            if segments[-1] in ("pods", "services", "secrets", "networkpolicies",
                                "persistentvolumeclaims"):
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
                kube_schema.validate(obj)
            except kubernetes_validate.ValidationError as error:
                return self.answer(422, status(422, f"invalid: {error.message}"))
            name = obj["metadata"]["name"]
            with emulator.lock:
                if (collection, name) in emulator.objects:
                    return self.answer(409, status(409, f'"{name}" already exists'))
                if obj["kind"] == "Pod":
                    obj["status"] = (running_status(obj, emulator.addresses.get(
                        name, "10.0.0.7")) if emulator.autorun
                                     else {"phase": "Pending"})
                    if emulator.autorun:
                        obj["spec"]["nodeName"] = pinned(obj) or emulator.nodes.get(
                            name, "node-a")
                if obj["kind"] == "PersistentVolumeClaim":
                    asked = obj["spec"]["resources"]["requests"]["storage"]
                    obj["status"] = {"phase": "Bound", "capacity": {
                        "storage": emulator.capacity.get(name, asked)}}
                emulator.objects[(collection, name)] = obj
                emulator.made[(collection, name)] = obj
            if obj["kind"] == "Pod" and emulator.on_create is not None:
                emulator.on_create(emulator, name)
            elif obj["kind"] != "Pod" and emulator.on_object is not None:
                emulator.on_object(emulator, obj)
            self.answer(201, json.dumps(obj).encode())

        def do_GET(self) -> None:
            if self.headers.get("Upgrade", "").lower() == "websocket":
                return self.streamed()
            collection, name, sub, query = self.route()
            if self.failed():
                return
            if self.path == "/version":
                return self.answer(200, json.dumps(emulator.version).encode())
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
                    stream = (query.get("stream") or [""])[0]
                    live = None if emulator.on_log is None else emulator.on_log(
                        emulator, name, container, stream if emulator.split_streams else "")
                    log = live if live is not None else (
                        emulator.streams.get((name, container, stream), b"")
                        if stream and emulator.split_streams
                        else emulator.logs.get((name, container), b""))
                    tail = (query.get("tailLines") or [""])[0]
                    if tail:
                        log = b"".join(log.splitlines(keepends=True)[-int(tail):])
                    return self.answer(200, log, "text/plain")
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
            container = (query.get("container") or [""])[0]
            command = query.get("command") or ["cat"]
            if what == "exec" and emulator.on_stream is not None:
                with emulator.lock:
                    emulator.execs.append((pod, container, command))
                return self.relayed(pod, container, command,
                                    (query.get("stdin") or [""])[0] == "true")
            stdin = bytearray()
            wants = {key: (query.get(key) or [""])[0] == "true"
                     for key in ("stdin", "stdout")}
            hangs = unwrapped(command)[0] == "hang"
            preamble = bytearray() if reads_env(command) else None
            if wants["stdin"] and not hangs:
                while True:
                    message = self.frame()
                    if message is None or message[:2] == bytes([255, 0]):
                        break
                    if message[:1] != b"\x00":
                        continue
                    data = message[1:]
                    if preamble is not None and not preamble.endswith(b"\n\n"):
                        preamble += data  # the variables come first, whole
                        head, found, data = bytes(preamble).partition(b"\n\n")
                        preamble[:] = head + found
                    stdin += data
                    if unwrapped(command)[0] == "cat" and wants["stdout"] and data:
                        self.send_frame(b"\x01" + data)
            if preamble is not None:
                with emulator.lock:
                    emulator.exec_env.append(env_of(bytes(preamble)))
            with emulator.lock:
                emulator.received[(pod, what)] = bytes(stdin)
                if what == "exec":
                    emulator.execs.append((pod, container, command))
            if hangs:
                while self.frame() is not None:  # until the client goes
                    pass
                return
            if what == "attach" and emulator.on_attach is not None:
                emulator.on_attach(emulator, pod, container, bytes(stdin))
            if not wants["stdout"]:
                return  # an attach that only gives stdin: its client is gone
            out, err, code = self.run(pod, container, what, command, bytes(stdin))
            for start in range(0, len(out), 65536):
                self.send_frame(b"\x01" + out[start:start + 65536])
            self.send_frame(b"\x02" + err)
            self.ended(code)

        def ended(self, code: int) -> None:
            status = ({"status": "Success"} if code == 0 else {
                "status": "Failure", "reason": "NonZeroExitCode", "message": "exit",
                "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}})
            try:
                self.send_frame(b"\x03" + json.dumps(status).encode())
                self.wfile.write(b"\x88\x00")  # close
                self.wfile.flush()
            except OSError:  # the client went once it had what it asked for
                pass

        def relayed(self, pod: str, container: str, command: list[str], stdin: bool) -> None:
            """An exec as it streams (`on_stream`): stdin as its messages come (none when
            the exec asked for none), output frames as the process writes them, then its
            exit code."""
            sending = threading.Lock()

            def read() -> bytes | None:
                while stdin:
                    message = self.frame()
                    if message is None or message[:2] == bytes([255, 0]):
                        return None
                    if message[:1] == b"\x00" and len(message) > 1:
                        return message[1:]
                return None

            def send(stream: int, data: bytes) -> None:
                with sending:
                    for start in range(0, len(data), 65536):
                        self.send_frame(bytes([stream]) + data[start:start + 65536])
            assert emulator.on_stream is not None
            code = emulator.on_stream(emulator, pod, container, command, read, send)
            with sending:
                self.ended(code)

        def run(self, pod: str, container: str, what: str, command: list[str],
                stdin: bytes) -> tuple[bytes, bytes, int]:
            """A command's output: a test's program (by its name, past `env`'s and
            `setpriv`'s options), else the emulator's own (`cat` echoed already, `exit N`,
            `emit N` writes N bytes)."""
            argv = unwrapped(command)
            program = emulator.programs.get(argv[0])
            if program is not None:
                return program(emulator, pod, container, argv, stdin)
            out = b"x" * int(argv[1]) if argv[0] == "emit" else b""
            code = int(argv[-1]) if argv[0] == "exit" else 0
            return out, f"{what} {' '.join(command)}\n".encode(), code

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
            collection, name, _, query = self.route()
            if self.failed():
                return
            if name:
                with emulator.lock:
                    if emulator.objects.pop((collection, name), None) is None:
                        return self.answer(404, status(404, f'"{name}" not found'))
                self.deleted(collection, [name])
                return self.answer(200, json.dumps({"kind": "Status",
                                                    "status": "Success"}).encode())
            selector = (query.get("labelSelector") or [""])[0]
            with emulator.lock:
                gone = [key for key, o in emulator.objects.items()
                        if key[0] == collection and selected(o, selector)]
                for key in gone:
                    del emulator.objects[key]
            self.deleted(collection, [name for _, name in gone])
            self.answer(200, json.dumps({"kind": "Status", "status": "Success"}).encode())

        def deleted(self, collection: str, names: list[str]) -> None:
            if collection.endswith("/pods") and emulator.on_delete is not None:
                for name in names:
                    emulator.on_delete(emulator, name)

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
