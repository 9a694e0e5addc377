"""The HTTP side: routes, refusals, and the proxying of one request, stream or not.

`Handler._serve` is the path of one request: health check; token (unknown: 401, Gemini's
400, a line in _refused.jsonl); body read and decoded; route; JSON; the upstream (one the
token does not reach: 403 wrong_upstream); model allow list;
provider-side tools that reach the internet (refused unless the grant allows them);
budget; then
`_forward`, which writes each upstream chunk to the client the moment it arrives (read1,
write, flush: nothing is buffered) while a `ResponseObserver` reads usage from the same
chunks and a capped copy is kept for the record. Every request with a known token ends as
one line of its stage's requests.jsonl, whatever happened.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from gateway import errors, upstream, wire
from gateway.config import Config, ConfigSource, Grant, Price, Upstream
from gateway.errors import ErrorReply, Provider, Refusal
from gateway.facts import request_facts
from gateway.records import Exchange, Recorder, Redactor
from gateway.usage import Api, ResponseObserver, cost_usd

CHUNK_BYTES = 64 << 10
# Requests one arm may have in flight at once: past it a 429 in the provider's shape (the
# CLIs back off and retry), so one arm cannot take the gateway's threads from the others.
MAX_IN_FLIGHT = 16
ROUTES: dict[Provider, tuple[Api, ...]] = {
    Provider.ANTHROPIC: (Api.MESSAGES, Api.COUNT_TOKENS),
    Provider.OPENAI: (Api.RESPONSES, Api.CHAT)}
# Gemini's routes name the model: /gemini/v1beta/models/{model}:{method}
GEMINI_PATH = re.compile(r"(?:v1|v1beta|v1alpha)/models/([A-Za-z0-9._-]+):([A-Za-z]+)")
GEMINI_METHODS = {api.value: api for api in (Api.GENERATE, Api.STREAM_GENERATE,
                                             Api.COUNT_GEMINI)}
CREDENTIAL = {Provider.ANTHROPIC: "x-api-key", Provider.GEMINI: "x-goog-api-key"}
SERVED = ("POST /anthropic/v1/messages[/count_tokens], /openai/v1/responses, "
          "/openai/v1/chat/completions, /gemini/v1beta/models/MODEL:generateContent "
          "(or :streamGenerateContent, :countTokens)")


@dataclass(frozen=True)
class Route:
    provider: Provider | None     # from the first path segment, if it names one
    api: Api | None               # None: not a route the gateway serves
    path: str                     # without the query
    query: str                    # as forwarded: never a `key` of Gemini's routes
    rest: str = ""                # the upstream's path: the path after the provider
    model: str | None = None      # the model a Gemini path names
    query_keys: tuple[str, ...] = ()  # tokens a Gemini client sent as ?key=
    upstream: str | None = None   # the upstream the path names (/<name>/v1/...), if any

    @property
    def shown(self) -> str:
        """The path and query as recorded (a token in the query never is)."""
        return self.path + (f"?{self.query}" if self.query else "")


def route_of(raw: str, named: Mapping[str, Upstream] | None = None) -> Route:
    """The route of a path: `/<protocol>/...`, or `/<upstream>/...` for an upstream of
    `named` (its protocol's routes, that upstream addressed)."""
    parts = urlsplit(raw)
    prefix, _, rest = parts.path.lstrip("/").partition("/")
    provider = next((p for p in Provider if p.value == prefix), None)
    chosen = None
    if provider is None and named and prefix in named:
        chosen, provider = prefix, named[prefix].protocol
    if provider is Provider.GEMINI:
        return gemini_route(parts.path, rest, parts.query, chosen)
    api = next((a for a in ROUTES.get(provider, ()) if a.value == rest), None) \
        if provider is not None else None
    return Route(provider, api, parts.path, parts.query, rest, upstream=chosen)


def gemini_route(path: str, rest: str, query: str, chosen: str | None = None) -> Route:
    """A Gemini route: the model and method from the path, `key`s out of the query."""
    pairs = parse_qsl(query, keep_blank_values=True)
    keys = tuple(value for name, value in pairs if name == "key")
    if keys:
        query = urlencode([(name, value) for name, value in pairs if name != "key"])
    found = GEMINI_PATH.fullmatch(rest)
    api = GEMINI_METHODS.get(found.group(2)) if found else None
    return Route(Provider.GEMINI, api, path, query, rest,
                 found.group(1) if found else None, keys, chosen)


def addressed(config: Config, grant: Grant, route: Route, provider: Provider) -> str:
    """The upstream a request is meant for: the one its path names, else the grant's own
    when it speaks the route's protocol, else the protocol's implicit upstream."""
    if route.upstream is not None:
        return route.upstream
    if grant.upstream is not None:
        own = config.upstreams.get(grant.upstream)
        if own is None or own.protocol is provider:
            return grant.upstream  # (missing: refused as such by `reachable`)
    return provider.value


def reachable(config: Config, grant: Grant, provider: Provider, name: str
              ) -> tuple[Upstream, str] | ErrorReply:
    """The upstream `name` and the variable holding its key, when `grant` may reach it
    on the route of `provider`: a grant that names an upstream reaches that one only, any
    other grant the implicit upstream of each provider it holds a key for."""
    found = config.upstreams.get(name)
    if name != (grant.upstream or provider.value):
        own = grant.upstream or "the implicit upstream of each provider it holds a key for"
        return errors.wrong_upstream(provider, grant.arm, name, own)
    if found is None or found.protocol is not provider:
        return errors.reply(provider, "bad_path", Refusal.BAD_PATH,
                            f"bakeoff gateway: the gateway has no {provider} upstream "
                            f"{name!r} (arm {grant.arm})")
    key = found.key if found.key is not None else grant.keys.get(provider.value)
    if key is None:
        return errors.reply(provider, "bad_path", Refusal.BAD_PATH,
                            f"bakeoff gateway: arm {grant.arm} has no {provider} key "
                            "or the gateway no upstream for it")
    return found, key


def elapsed_ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0


def price_of(config: Config, exchange: Exchange) -> Price | None:
    """The price of the model that answered, else of the model asked for (a provider may
    answer `claude-x` with a dated `claude-x-20260101`)."""
    requested = exchange.facts.model if exchange.facts else None
    own = config.upstreams.get(exchange.upstream) if exchange.upstream else None
    for prices in ((own.prices,) if own else ()) + (config.prices,):
        for model in (exchange.model_response, requested):
            if model is not None and model in prices:
                return prices[model]
    return None


class Gateway:
    """What every request shares: the configuration, the records, the real keys."""

    def __init__(self, state: Path, environ: Mapping[str, str]) -> None:
        self.config = ConfigSource(state / "config.json")
        self.recorder = Recorder(state)
        self.environ = environ
        self._redactors: tuple[Config, Redactor] | None = None
        self._lock = threading.Lock()
        self._in_flight: dict[tuple[str, str, str, str], int] = {}

    @contextlib.contextmanager
    def slot(self, grant: Grant) -> Iterator[bool]:
        """Whether the grant's arm may have one more request in flight (MAX_IN_FLIGHT)."""
        with self._lock:
            taken = self._in_flight.get(grant.owner, 0)
            admitted = taken < MAX_IN_FLIGHT
            if admitted:
                self._in_flight[grant.owner] = taken + 1
        try:
            yield admitted
        finally:
            if admitted:
                with self._lock:
                    self._in_flight[grant.owner] -= 1

    def redactor(self, config: Config) -> Redactor:
        """Every token and every real key value the configuration names."""
        with self._lock:
            if self._redactors is None or self._redactors[0] is not config:
                keys = {self.environ.get(name, "") for name in config.key_names()}
                self._redactors = (config, Redactor([*config.tokens, *keys]))
            return self._redactors[1]


class GatewayServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128   # 8 arms opening connections at once must not meet a full
                               # backlog (a dropped SYN costs a 1 s retransmit)

    def __init__(self, address: tuple[str, int], gateway: Gateway) -> None:
        self.gateway = gateway
        super().__init__(address, Handler)


@dataclass
class Pending:
    """One request with a known token, on its way; `finish` records it exactly once,
    BEFORE the last byte of its response goes out: a client that has read a whole response
    (and the runner after it) finds its line on disk and its usage counted."""

    gateway: Gateway
    config: Config
    grant: Grant
    route: Route
    exchange: Exchange
    started: float
    done: bool = False
    target: tuple[Upstream, str] | None = None   # where it goes, the variable of its key

    def first_byte(self) -> None:
        if self.exchange.first_byte_ms is None:
            self.exchange.first_byte_ms = elapsed_ms(self.started)

    def finish(self) -> None:
        if self.done:
            return
        self.done = True
        exchange = self.exchange
        exchange.latency_ms = elapsed_ms(self.started)
        exchange.cost_usd = cost_usd(exchange.usage, price_of(self.config, exchange))
        self.gateway.recorder.write(exchange, self.gateway.redactor(self.config))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: GatewayServer

    def setup(self) -> None:
        super().setup()
        # Every SSE event goes out when written: with Nagle on, an event written while the
        # previous one is unacknowledged waits for the client's delayed ACK (up to 40 ms).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        self._serve()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request is printed by _serve, without the query string

    def _serve(self) -> None:
        started = time.perf_counter()
        if self.command == "GET" and self.path == "/healthz":
            self._send(200, [("Content-Type", "text/plain")], b"ok")
            return
        gateway = self.server.gateway
        config = gateway.config.current()
        route = route_of(self.path, config.upstreams)
        grant = next((g for t in wire.presented_tokens(self.headers, route.query_keys)
                      if (g := config.grant(t)) is not None), None)
        provider = route.provider or self._provider_guessed()
        if grant is None:
            self.close_connection = True  # its body is never read
            refusal = errors.unknown_token(provider)
            gateway.recorder.refused(provider, self.command, route.path, refusal.status)
            self._send_error(refusal)
            self._log(route, refusal.status, "-", started)
            return
        pending = Pending(gateway, config, grant, route, Exchange(
            grant, gateway.recorder.next_seq(grant), provider, self.command, route.shown),
            started)
        with gateway.slot(grant) as admitted:
            try:
                if not admitted:
                    self.close_connection = True  # its body is never read
                    self._refuse(pending, errors.too_busy(provider, MAX_IN_FLIGHT))
                elif (denied := self._admission(pending)) is None:
                    self._forward(pending)
                else:
                    self._refuse(pending, denied)
            finally:
                pending.finish()
                self._log(route, pending.exchange.status, grant.arm, started)

    def _provider_guessed(self) -> Provider:
        """Whose error shape a path that names no provider is answered in."""
        if self.headers.get("x-goog-api-key"):
            return Provider.GEMINI
        return Provider.ANTHROPIC if self.headers.get("x-api-key") else Provider.OPENAI

    def _log(self, route: Route, status: int, arm: str, started: float) -> None:
        print(f"gateway: {self.command} {route.path} {status} arm={arm} "
              f"{elapsed_ms(started):.1f}ms", file=sys.stderr, flush=True)

    def _refuse(self, pending: Pending, refusal: ErrorReply) -> None:
        exchange = pending.exchange
        exchange.refused, exchange.status = refusal.refused, refusal.status
        exchange.keep(refusal.body)
        pending.first_byte()
        pending.finish()
        self._send_error(refusal)

    def _admission(self, pending: Pending) -> ErrorReply | None:
        """Why this request must not be forwarded, or None (and one request counted)."""
        exchange, grant, route = pending.exchange, pending.grant, pending.route
        provider = exchange.provider
        try:
            raw = wire.read_body(self.rfile, self.headers)
            exchange.request_body = raw
            exchange.request_body = wire.decode_body(raw, self.headers.get("Content-Encoding"))
        except wire.BodyError as error:
            self.close_connection = True
            return errors.reply(provider, error.shape, Refusal.BAD_BODY, str(error))
        if route.api is None or self.command != "POST":
            return errors.reply(provider, "bad_path", Refusal.BAD_PATH,
                                f"bakeoff gateway: no route for {self.command} {route.path} "
                                f"(served: {SERVED})")
        try:
            body = json.loads(exchange.request_body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        if not isinstance(body, dict):
            return errors.reply(provider, "bad_body", Refusal.BAD_BODY,
                                "bakeoff gateway: the request body is not a JSON object")
        exchange.facts = facts = request_facts(route.api, body, route.model)
        exchange.upstream = addressed(pending.config, grant, route, provider)
        found = reachable(pending.config, grant, provider, exchange.upstream)
        if isinstance(found, ErrorReply):
            return found
        pending.target = found
        if grant.models is not None and facts.model not in grant.models:
            return errors.model_not_allowed(provider, facts.model, grant.models)
        if facts.server_tools and not grant.allow_server_tools:
            return errors.server_tool(provider, facts.server_tools)
        limit = self.server.gateway.recorder.admit(grant)
        return None if limit is None else errors.budget_exhausted(provider, limit)

    def _upstream_headers(self, grant: Grant, provider: Provider, name: str
                          ) -> list[tuple[str, str]]:
        """The client's headers minus hop-by-hop and credentials, plus the real key (of
        the variable `name`)."""
        key = self.server.gateway.environ.get(name)
        if not key:
            raise upstream.UpstreamError(f"the gateway's environment has no {name} (the "
                                         f"{provider} key of arm {grant.arm})")
        headers = wire.forwarded(self.headers.items(), wire.REQUEST_DROPPED,
                                 wire.connection_listed(self.headers))
        credential = (CREDENTIAL[provider], key) if provider in CREDENTIAL else (
            "Authorization", f"Bearer {key}")
        return [*headers, credential]

    def _forward(self, pending: Pending) -> None:
        exchange, api = pending.exchange, pending.route.api
        assert api is not None and exchange.request_body is not None
        assert pending.target is not None
        chosen, key_name = pending.target
        try:
            target = upstream.target_of(chosen.base_url)
            connection, response = upstream.send(
                target, self.command, pending.route.rest, pending.route.query,
                self._upstream_headers(pending.grant, exchange.provider, key_name),
                exchange.request_body)
        except upstream.UpstreamError as error:
            self._refuse(pending, errors.reply(
                exchange.provider, "upstream_error", Refusal.UPSTREAM_ERROR,
                f"bakeoff gateway: {error}"))
            return
        try:
            self._relay(response, pending)
        finally:
            connection.close()

    def _relay(self, response: http.client.HTTPResponse, pending: Pending) -> None:
        """The upstream's status and headers to the client, then its body."""
        assert pending.route.api is not None
        pending.exchange.status = response.status
        streaming = (response.getheader("Content-Type") or "").startswith("text/event-stream")
        observer = ResponseObserver(pending.route.api, streaming,
                                    response.getheader("Content-Encoding"))
        chunked = response.length is None and self.request_version == "HTTP/1.1"
        self.send_response_only(response.status, response.reason)
        for name, value in wire.forwarded(response.getheaders(), wire.RESPONSE_DROPPED,
                                          wire.connection_listed(response.msg)):
            self.send_header(name, value)
        if response.length is not None:
            self.send_header("Content-Length", str(response.length))
        elif chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.close_connection = True
        self.end_headers()

        def observed() -> None:
            observer.finish()
            pending.exchange.model_response = observer.model
            pending.exchange.usage = observer.usage
            pending.finish()

        try:
            self._copy(response, observer, pending, chunked, observed)
        finally:
            observed()

    def _copy(self, response: http.client.HTTPResponse, observer: ResponseObserver,
              pending: Pending, chunked: bool, observed: Callable[[], None]) -> None:
        """Each chunk to the client as it arrives. The last one (the chunked terminator,
        or the chunk that completes a Content-Length) waits for `observed`."""
        remaining = response.length
        while True:
            try:
                chunk = response.read1(CHUNK_BYTES)
            except (OSError, http.client.HTTPException):
                pending.exchange.refused = Refusal.UPSTREAM_ERROR
                self.close_connection = True  # no final chunk: the client sees the break
                return
            if not chunk:
                break
            pending.first_byte()
            observer.feed(chunk)
            pending.exchange.keep(chunk)
            if remaining is not None:
                remaining -= len(chunk)
                if remaining <= 0:
                    observed()
            if not self._write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk):
                return
        observed()
        if chunked:
            self._write(b"0\r\n\r\n")

    def _write(self, data: bytes) -> bool:
        """False when the client is gone (the stream is then abandoned)."""
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            self.close_connection = True
            return False
        return True

    def _send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response_only(status)
        for name, value in [*headers, ("Content-Length", str(len(body)))]:
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self._write(body)

    def _send_error(self, refusal: ErrorReply) -> None:
        self._send(refusal.status, [("Content-Type", "application/json")], refusal.body)
