"""usage.py alone: the SSE parser across chunk boundaries and line endings, and cost."""

from __future__ import annotations

import gzip
import zlib

import pytest

from gateway import usage as usage_mod
from gateway.config import Price
from gateway.facts import RequestFacts, request_facts
from gateway.usage import Api, ResponseObserver, Usage, cost_usd
from tests.unit.gateway.streams import (
    ANTHROPIC_STREAM,
    GEMINI_ARRAY,
    GEMINI_SSE,
    RESPONSES_STREAM,
)


def observe(api: Api, data: bytes, size: int, encoding: str | None = None) -> ResponseObserver:
    observer = ResponseObserver(api, streaming=True, encoding=encoding)
    for start in range(0, len(data), size):
        observer.feed(data[start:start + size])
    observer.finish()
    return observer


def test_a_stream_split_anywhere_and_with_crlf_gives_the_same_usage() -> None:
    data = b"".join(ANTHROPIC_STREAM)
    crlf = data.replace(b"\n", b"\r\n")
    found = {(o.model, o.usage) for stream in (data, crlf) for size in (1, 7, 4096)
             if (o := observe(Api.MESSAGES, stream, size))}
    assert found == {("claude-x-20260101", Usage(input=120, output=57, cache_read=400,
                                                 cache_write=30))}


def test_a_compressed_stream_is_metered_like_a_plain_one() -> None:
    """The gateway asks for identity; an upstream (a proxy) that gzips anyway must not make
    the arm's requests free: the observer reads through a decoder, the client gets the
    bytes as sent."""
    data = b"".join(ANTHROPIC_STREAM)
    packed = {"gzip": gzip.compress(data), "deflate": zlib.compress(data)}
    found = {(o.model, o.usage) for coding, body in packed.items() for size in (1, 9, 4096)
             if (o := observe(Api.MESSAGES, body, size, coding))}
    assert found == {("claude-x-20260101", Usage(input=120, output=57, cache_read=400,
                                                 cache_write=30))}


def test_a_compression_bomb_stops_being_read_and_garbage_is_no_usage(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_DECODED_BYTES (256 MiB; 1 MiB here) nothing more is decoded: the usage at
    the end of a bomb is never reached."""
    monkeypatch.setattr(usage_mod, "MAX_DECODED_BYTES", 1 << 20)
    tail = b"".join(ANTHROPIC_STREAM)
    bomb = gzip.compress(b" " * (4 << 20) + tail)  # 4 MiB of spaces, then a real stream
    assert observe(Api.MESSAGES, bomb, 1 << 16, "gzip").usage is None
    assert observe(Api.MESSAGES, gzip.compress(tail), 1 << 16, "gzip").usage is not None
    assert observe(Api.MESSAGES, b"not gzip at all", 4, "gzip").usage is None


def test_responses_stream_without_completed_event_has_no_usage() -> None:
    observer = observe(Api.RESPONSES, b"".join(RESPONSES_STREAM[:2]), 4096)
    assert (observer.model, observer.usage) == ("gpt-x-2026-01-01", None)


def test_cost_is_exact_and_null_when_a_used_kind_has_no_price() -> None:
    price = Price(input=3.0, output=15.0, cache_read=0.3)
    assert cost_usd(Usage(input=1, output=1, cache_read=1), price) == 18.3 / 1e6
    assert cost_usd(Usage(input=1_000_000, output=2_000_000), price) == 33.0
    assert cost_usd(Usage(input=1, cache_write=1), price) is None
    assert cost_usd(Usage(input=1), None) is None


def test_request_facts_for_the_three_apis() -> None:
    assert request_facts(Api.MESSAGES, {
        "model": "claude-x", "stream": True, "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"}}) == RequestFacts(
        model="claude-x", stream=True, thinking={"type": "adaptive"},
        output_config_effort="high", reasoning_effort=None,
        effort={"output_config.effort": "high"})
    facts = request_facts(Api.RESPONSES, {"model": "gpt-x", "reasoning": {"effort": "xhigh"}})
    assert (facts.model, facts.stream, facts.thinking, facts.output_config_effort,
            facts.reasoning_effort, facts.effort) == (
        "gpt-x", False, None, None, "xhigh", {"reasoning.effort": "xhigh"})
    chat = request_facts(Api.CHAT, {"model": "gpt-y", "stream": "yes", "reasoning_effort": "low"})
    assert (chat.stream, chat.reasoning_effort, chat.effort) == (
        False, "low", {"reasoning_effort": "low"})


def test_gemini_usage_split_anywhere_is_the_last_chunk_s_streamed_or_as_an_array() -> None:
    """Each chunk's usageMetadata counts everything so far: the last one is the usage,
    whether the stream is SSE (CRLF-separated) or one JSON array, split at any byte."""
    expected = ("gemini-x-001", Usage(input=500, output=240, cache_read=1000, reasoning=200))
    sse = b"".join(GEMINI_SSE)
    found = {(o.model, o.usage) for size in (1, 7, 4096)
             if (o := observe(Api.STREAM_GENERATE, sse, size))}
    array = b"".join(GEMINI_ARRAY)
    for size in (1, 7, 4096):
        observer = ResponseObserver(Api.STREAM_GENERATE, streaming=False)
        for start in range(0, len(array), size):
            observer.feed(array[start:start + size])
        observer.finish()
        found.add((observer.model, observer.usage))
    assert found == {expected}
    assert expected[1].total == 1740  # the last chunk's totalTokenCount


def test_a_gemini_stream_cut_before_any_usage_has_none() -> None:
    cut = GEMINI_SSE[0].replace(b'"usageMetadata"', b'"other"')
    assert (observe(Api.STREAM_GENERATE, cut, 5).usage, observe(
        Api.STREAM_GENERATE, cut, 5).model) == (None, "gemini-x-001")
