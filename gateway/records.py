"""The gateway's records under `<state>/records/`, and the budget counters they imply.

Per stage, `records/<stage>/requests.jsonl` holds one JSON line per request (appended and
flushed under one lock, after its bodies are on disk) and `records/<stage>/bodies/` the
request and response bodies, `<arm>-<seq>.request.json` / `<arm>-<seq>.response`, with
every token and real key value replaced by `[REDACTED]`, each cut at 8 MiB; an arm's
bodies stop being kept (its lines go on) once they hold MAX_STORED_BYTES. A request with
an unknown token
has a line in `records/_refused.jsonl` and no body. The counters a budget is checked
against are rebuilt from the lines at start: a restarted gateway keeps them.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gateway.config import Budget, Grant
from gateway.errors import Provider, Refusal
from gateway.facts import RequestFacts
from gateway.usage import Usage

REDACTED = b"[REDACTED]"
MAX_BODY_BYTES = 8 << 20
TRUNCATED = b"\n[bakeoff gateway: body truncated at 8 MiB]\n"
# The bodies kept per arm (and stage, run, role) on the host's disk: an arm that sends
# large bodies in a loop fills this, never the disk; past it only the lines are written.
MAX_STORED_BYTES = 256 << 20
# Refused requests an arm gets lines for (and _refused.jsonl's unknown tokens): past it one
# `records_capped` line says so and the rest are not written (nor their bodies), so an arm
# looping refused requests cannot fill the host's disk through the stage directory.
MAX_REFUSED_LINES = 10_000
# A request that reached (or tried to reach) the upstream counts against max_requests.
ADMITTED = (None, Refusal.UPSTREAM_ERROR.value)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def safe_name(name: str) -> str:
    """A stage or arm id as one path component (ids are plain names; this is a guard)."""
    cleaned = _UNSAFE.sub("_", name).lstrip(".")
    return cleaned or "_"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Redactor:
    """Replaces every secret (tokens, real key values) in bytes; longest first."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = sorted({s.encode() for s in secrets if s}, key=len, reverse=True)

    def __call__(self, data: bytes) -> bytes:
        for secret in self._secrets:
            data = data.replace(secret, REDACTED)
        return data


@dataclass
class Exchange:
    """One request as the gateway saw it; becomes one line of requests.jsonl."""

    grant: Grant
    seq: int
    provider: Provider
    method: str
    path: str
    time: str = field(default_factory=now_iso)
    facts: RequestFacts | None = None
    upstream: str | None = None     # the upstream it was meant for (None: refused before)
    model_response: str | None = None
    status: int = 0
    latency_ms: float = 0.0
    first_byte_ms: float | None = None
    usage: Usage | None = None
    cost_usd: float | None = None
    refused: Refusal | None = None
    request_body: bytes | None = None
    response_body: bytearray = field(default_factory=bytearray)
    truncated: bool = False

    def keep(self, chunk: bytes) -> None:
        """Keep a copy of a response chunk, up to MAX_BODY_BYTES."""
        room = MAX_BODY_BYTES - len(self.response_body)
        if len(chunk) > room:
            self.truncated = True
        self.response_body += chunk[:max(room, 0)]

    def bodies(self) -> tuple[bytes | None, bytes]:
        """The request and response bodies as kept: each cut at MAX_BODY_BYTES."""
        request = self.request_body
        if request is not None and len(request) > MAX_BODY_BYTES:
            request = request[:MAX_BODY_BYTES] + TRUNCATED
        return request, bytes(self.response_body) + (TRUNCATED if self.truncated else b"")

    def line(self, request_name: str | None, response_name: str | None) -> dict[str, Any]:
        facts = self.facts
        return {
            "seq": self.seq, "time": self.time, "stage": self.grant.stage,
            "run": self.grant.run, "arm": self.grant.arm, "role": self.grant.role,
            "provider": self.provider.value, "upstream": self.upstream,
            "method": self.method, "path": self.path,
            "stream": facts.stream if facts else False,
            "model_requested": facts.model if facts else None,
            "thinking": facts.thinking if facts else None,
            "output_config_effort": facts.output_config_effort if facts else None,
            "reasoning_effort": facts.reasoning_effort if facts else None,
            "effort": facts.effort if facts else {},
            "server_tools": list(facts.server_tools) if facts else [],
            "server_tools_allowed": bool(facts and facts.server_tools
                                         and self.grant.allow_server_tools),
            "model_response": self.model_response, "status": self.status,
            "latency_ms": round(self.latency_ms, 3),
            "first_byte_ms": None if self.first_byte_ms is None else round(
                self.first_byte_ms, 3),
            "usage": None if self.usage is None else self.usage.as_json(),
            "cost_usd": self.cost_usd,
            "refused": None if self.refused is None else self.refused.value,
            "request_body": request_name, "response_body": response_name}


@dataclass
class Spent:
    requests: int = 0
    tokens: int = 0
    usd: float = 0.0
    stored: int = 0   # bytes of bodies kept
    refused: int = 0  # lines of refused requests


def exhausted(budget: Budget, spent: Spent) -> str | None:
    """The budget that is used up (`max_requests_per_arm=5`), or None."""
    if budget.max_requests is not None and spent.requests >= budget.max_requests:
        return f"max_requests_per_arm={budget.max_requests}"
    if budget.max_tokens is not None and spent.tokens >= budget.max_tokens:
        return f"max_tokens_per_arm={budget.max_tokens}"
    if budget.max_usd is not None and spent.usd >= budget.max_usd:
        return f"max_usd_per_arm={budget.max_usd:g}"
    return None


def stored_lines(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON lines of one requests.jsonl; a torn last line (a crash) is skipped."""
    with path.open(encoding="utf-8") as lines:
        for text in lines:
            try:
                line = json.loads(text)
            except json.JSONDecodeError:
                continue
            if isinstance(line, dict):
                yield line


class Recorder:
    """Writes the records and keeps, per (stage, arm, role), what was spent."""

    def __init__(self, state: Path) -> None:
        self.root = state / "records"
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._spent: dict[tuple[str, str, str, str], Spent] = {}
        self._seq: dict[str, int] = {}
        self._unknown = 0  # lines of _refused.jsonl
        self._rebuild()

    def _rebuild(self) -> None:
        unknown = self.root / "_refused.jsonl"
        if unknown.is_file():
            with unknown.open("rb") as lines:
                self._unknown = sum(1 for _ in lines)
        for path in sorted(self.root.glob("*/requests.jsonl")):
            for line in stored_lines(path):
                stage = str(line.get("stage"))
                self._seq[stage] = max(self._seq.get(stage, 0), int(line.get("seq") or 0))
                spent = self._spent.setdefault(
                    (stage, str(line.get("run", "")), str(line.get("arm")),
                     str(line.get("role"))), Spent())
                spent.requests += line.get("refused") in ADMITTED
                spent.refused += line.get("refused") is not None
                usage = line.get("usage") or {}
                spent.tokens += sum(int(usage.get(k) or 0) for k in
                                    ("input", "output", "cache_read", "cache_write"))
                spent.usd += float(line.get("cost_usd") or 0.0)
                spent.stored += sum(_size(path.parent / str(line[key]))
                                    for key in ("request_body", "response_body")
                                    if line.get(key))

    def spent(self, grant: Grant) -> Spent:
        with self._lock:
            found = self._spent.get(grant.owner, Spent())
            return Spent(found.requests, found.tokens, found.usd)

    def next_seq(self, grant: Grant) -> int:
        with self._lock:
            self._seq[grant.stage] = self._seq.get(grant.stage, 0) + 1
            return self._seq[grant.stage]

    def admit(self, grant: Grant) -> str | None:
        """Count one more request against the grant's budget, or name the exhausted
        budget (and count nothing). Requests are reserved here, so concurrent requests
        never pass max_requests; tokens and USD are known only once a response is done."""
        with self._lock:
            spent = self._spent.setdefault(grant.owner, Spent())
            limit = exhausted(grant.budget, spent)
            if limit is None:
                spent.requests += 1
            return limit

    def write(self, exchange: Exchange, redact: Redactor) -> None:
        """Bodies first (while the arm's MAX_STORED_BYTES allows), then the line and the
        spent tokens and USD, under the lock."""
        stage_dir = self.root / safe_name(exchange.grant.stage)
        bodies = stage_dir / "bodies"
        bodies.mkdir(parents=True, exist_ok=True)
        stem = f"{safe_name(exchange.grant.arm)}-{exchange.seq}"
        request, response = exchange.bodies()
        size = len(request or b"") + len(response)
        with self._lock:
            spent = self._spent.setdefault(exchange.grant.owner, Spent())
            if exchange.refused is not None:
                spent.refused += 1
                if spent.refused > MAX_REFUSED_LINES + 1:
                    return
                if spent.refused == MAX_REFUSED_LINES + 1:
                    exchange.refused, size = Refusal.RECORDS_CAPPED, MAX_STORED_BYTES + 1
            keep = spent.stored + size <= MAX_STORED_BYTES
            spent.stored += size if keep else 0
        request_name = response_name = None
        if keep:
            if request is not None:
                request_name = f"bodies/{stem}.request.json"
                (stage_dir / request_name).write_bytes(redact(request))
            response_name = f"bodies/{stem}.response"
            (stage_dir / response_name).write_bytes(redact(response))
        text = redact(json.dumps(exchange.line(request_name, response_name)).encode())
        with self._lock:
            with (stage_dir / "requests.jsonl").open("ab") as out:
                out.write(text + b"\n")
                out.flush()
            if exchange.usage is not None:
                spent.tokens += exchange.usage.total
            spent.usd += exchange.cost_usd or 0.0

    def refused(self, provider: Provider, method: str, path: str, status: int) -> None:
        """A request with an unknown token: a line in _refused.jsonl, no body (the
        credential it presented is never written)."""
        line = {"time": now_iso(), "provider": provider.value, "method": method,
                "path": path, "status": status, "refused": Refusal.UNKNOWN_TOKEN.value}
        with self._lock:
            self._unknown += 1
            if self._unknown > MAX_REFUSED_LINES + 1:
                return
            if self._unknown == MAX_REFUSED_LINES + 1:
                line["refused"] = Refusal.RECORDS_CAPPED.value
            with (self.root / "_refused.jsonl").open("a", encoding="utf-8") as out:
                out.write(json.dumps(line) + "\n")
                out.flush()
