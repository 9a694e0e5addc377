"""What a response says it used, for the four APIs (what a request asked for: `facts`).

Responses (Anthropic Messages, OpenAI Responses and Chat Completions, Gemini
generateContent) name the model that answered and the tokens it used, either in one JSON
body (Gemini's streamGenerateContent without `alt=sse`: a JSON array of them) or spread
over an SSE stream. `ResponseObserver` is fed the response
chunk by chunk as they go to the client, keeps only the event it is in the middle of, and
parses only events that can carry a model or usage, so a long stream costs little.

One meaning of the token counts across providers: `input` is the input NOT read from a
cache (OpenAI's `input_tokens` includes its cached tokens, so those are subtracted),
`cache_read` / `cache_write` the cached parts, `output` every output token (OpenAI's
includes its reasoning tokens), `reasoning` that subset when the API reports it. Gemini's
`promptTokenCount` includes its `cachedContentTokenCount`, and its `candidatesTokenCount`
excludes its `thoughtsTokenCount` (added to `output`) and its `toolUsePromptTokenCount`
(added to `input`): the total is its `totalTokenCount`.
"""

from __future__ import annotations

import contextlib
import json
import zlib
from dataclasses import asdict, dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any

from gateway.config import Price

MAX_EVENT_BYTES = 8 << 20
MAX_JSON_BYTES = 8 << 20
MAX_DECODED_BYTES = 256 << 20  # of one compressed response: a bomb stops being read here
DECODED = frozenset({"gzip", "x-gzip", "deflate"})
AUTO_HEADER = 47  # zlib's wbits: a gzip or a zlib header, whichever the body has
WATCHED = (b'"usage"', b'"model"', b'"usageMetadata"', b'"modelVersion"')


class Api(StrEnum):
    MESSAGES = "v1/messages"
    COUNT_TOKENS = "v1/messages/count_tokens"
    RESPONSES = "v1/responses"
    CHAT = "v1/chat/completions"
    # Gemini's methods, `models/{model}:{method}`
    GENERATE = "generateContent"
    STREAM_GENERATE = "streamGenerateContent"
    COUNT_GEMINI = "countTokens"


@dataclass(frozen=True)
class Usage:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0

    @property
    def total(self) -> int:
        """What a token budget counts: every input and output token, cached or not."""
        return self.input + self.output + self.cache_read + self.cache_write

    def as_json(self) -> dict[str, int]:
        return asdict(self)


def get(value: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def anthropic_usage(fields: dict[str, Any]) -> Usage:
    return Usage(input=_int(fields.get("input_tokens")),
                 output=_int(fields.get("output_tokens")),
                 cache_read=_int(fields.get("cache_read_input_tokens")),
                 cache_write=_int(fields.get("cache_creation_input_tokens")))


def responses_usage(raw: dict[str, Any]) -> Usage:
    cached = _int(get(raw, "input_tokens_details", "cached_tokens"))
    return Usage(input=_int(raw.get("input_tokens")) - cached,
                 output=_int(raw.get("output_tokens")), cache_read=cached,
                 reasoning=_int(get(raw, "output_tokens_details", "reasoning_tokens")))


def chat_usage(raw: dict[str, Any]) -> Usage:
    cached = _int(get(raw, "prompt_tokens_details", "cached_tokens"))
    return Usage(input=_int(raw.get("prompt_tokens")) - cached,
                 output=_int(raw.get("completion_tokens")), cache_read=cached,
                 reasoning=_int(get(raw, "completion_tokens_details", "reasoning_tokens")))


def gemini_usage(raw: dict[str, Any]) -> Usage:
    cached = _int(raw.get("cachedContentTokenCount"))
    thoughts = _int(raw.get("thoughtsTokenCount"))
    return Usage(input=_int(raw.get("promptTokenCount")) - cached
                 + _int(raw.get("toolUsePromptTokenCount")),
                 output=_int(raw.get("candidatesTokenCount")) + thoughts,
                 cache_read=cached, reasoning=thoughts)


def cost_usd(usage: Usage | None, price: Price | None) -> float | None:
    """USD for `usage` at `price` (per million tokens), exact in decimal and rounded once
    to the nearest float; None without a price, or when tokens of a kind have none."""
    if usage is None or price is None:
        return None
    terms = [(usage.input, price.input), (usage.output, price.output),
             (usage.cache_read, price.cache_read), (usage.cache_write, price.cache_write)]
    if any(count and rate is None for count, rate in terms):
        return None
    total = sum((Decimal(count) * Decimal(str(rate)) for count, rate in terms if count),
                Decimal(0))
    return float(total / Decimal(1_000_000))


class ResponseObserver:
    """Fed the response body as it streams; `model` and `usage` once it is done."""

    def __init__(self, api: Api, streaming: bool, encoding: str | None = None) -> None:
        """`encoding`: the response's Content-Encoding (the gateway asks for identity; an
        upstream that compresses anyway is read through a decoder, never unmetered)."""
        self.api, self.streaming = api, streaming
        coding = (encoding or "identity").strip().lower()
        self._decoder = zlib.decompressobj(AUTO_HEADER) if coding in DECODED else None
        self._decoded = 0
        self.model: str | None = None
        self.usage: Usage | None = None
        self._pending = b""
        self._document_parts: list[bytes] = []
        self._document_size = 0
        self._anthropic: dict[str, Any] = {}

    def feed(self, chunk: bytes) -> None:
        if self._decoder is not None:
            chunk = self._decode(chunk)
        if not self.streaming:
            self._document_size += len(chunk)
            if self._document_size <= MAX_JSON_BYTES:
                self._document_parts.append(chunk)
            return
        self._pending = (self._pending + chunk).replace(b"\r\n", b"\n")
        *events, self._pending = self._pending.split(b"\n\n")
        for event in events:
            self._event(event)
        if len(self._pending) > MAX_EVENT_BYTES:
            self._pending = b""  # one event that large carries no usage we could trust

    def _decode(self, chunk: bytes) -> bytes:
        assert self._decoder is not None
        if self._decoded > MAX_DECODED_BYTES:
            return b""
        try:
            out = self._decoder.decompress(chunk, MAX_DECODED_BYTES - self._decoded + 1)
        except zlib.error:
            self._decoded = MAX_DECODED_BYTES + 1  # not what it says it is: stop reading
            return b""
        self._decoded += len(out)
        return out

    def finish(self) -> None:
        if self.streaming:
            if self._pending.strip():
                self._event(self._pending)
        elif self._document_size <= MAX_JSON_BYTES:
            with contextlib.suppress(json.JSONDecodeError, UnicodeDecodeError):
                self._document(json.loads(b"".join(self._document_parts)))
        self._pending, self._document_parts = b"", []
        if self._anthropic:
            self.usage = anthropic_usage(self._anthropic)

    def _event(self, event: bytes) -> None:
        data = b"\n".join(line[5:].removeprefix(b" ") for line in event.split(b"\n")
                          if line.startswith(b"data:"))
        if not any(marker in data for marker in WATCHED):
            return
        try:
            payload = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return
        if isinstance(payload, dict):
            self._stream_payload(payload)

    def _stream_payload(self, payload: dict[str, Any]) -> None:
        if self.api in (Api.MESSAGES, Api.COUNT_TOKENS):
            kind = payload.get("type")
            if kind == "message_start":
                self.model = _str(get(payload, "message", "model")) or self.model
                self._merge_anthropic(get(payload, "message", "usage"))
            elif kind == "message_delta":
                self._merge_anthropic(payload.get("usage"))
        elif self.api is Api.RESPONSES:
            response = payload.get("response")
            if isinstance(response, dict):
                self._responses_document(response)
        elif self.api is Api.CHAT:
            self._chat_document(payload)
        else:
            self._gemini_document(payload)

    def _merge_anthropic(self, usage: Any) -> None:
        """message_start's usage, then every message_delta's (cumulative counts: the
        last value of each field wins)."""
        if isinstance(usage, dict):
            self._anthropic.update({k: v for k, v in usage.items() if v is not None})

    def _document(self, body: Any) -> None:
        if isinstance(body, list):  # Gemini's stream without alt=sse: a JSON array
            for item in body:
                self._document(item)
        if not isinstance(body, dict):
            return
        if self.api in (Api.MESSAGES, Api.COUNT_TOKENS):
            self.model = _str(body.get("model"))
            self._merge_anthropic(body.get("usage"))
        elif self.api is Api.RESPONSES:
            self._responses_document(body)
        elif self.api is Api.CHAT:
            self._chat_document(body)
        else:
            self._gemini_document(body)

    def _responses_document(self, response: dict[str, Any]) -> None:
        self.model = _str(response.get("model")) or self.model
        if isinstance(response.get("usage"), dict):
            self.usage = responses_usage(response["usage"])

    def _chat_document(self, chunk: dict[str, Any]) -> None:
        self.model = _str(chunk.get("model")) or self.model
        if isinstance(chunk.get("usage"), dict):
            self.usage = chat_usage(chunk["usage"])

    def _gemini_document(self, chunk: dict[str, Any]) -> None:
        """One GenerateContentResponse (a whole one, or one chunk of a stream: each
        chunk's usageMetadata counts everything so far, the last one wins)."""
        self.model = _str(chunk.get("modelVersion")) or self.model
        if isinstance(chunk.get("usageMetadata"), dict):
            self.usage = gemini_usage(chunk["usageMetadata"])
