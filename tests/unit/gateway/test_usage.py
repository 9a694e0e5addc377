"""usage.py alone: the SSE parser across chunk boundaries and line endings, and cost."""

from __future__ import annotations

from gateway.config import Price
from gateway.usage import Api, RequestFacts, ResponseObserver, Usage, cost_usd, request_facts
from tests.unit.gateway.streams import ANTHROPIC_STREAM, RESPONSES_STREAM


def observe(api: Api, data: bytes, size: int) -> ResponseObserver:
    observer = ResponseObserver(api, streaming=True)
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
    assert request_facts({"model": "claude-x", "stream": True, "thinking": {"type": "adaptive"},
                          "output_config": {"effort": "high"}}) == RequestFacts(
        model="claude-x", stream=True, thinking={"type": "adaptive"},
        output_config_effort="high", reasoning_effort=None)
    facts = request_facts({"model": "gpt-x", "reasoning": {"effort": "xhigh"}})
    assert (facts.model, facts.stream, facts.thinking, facts.output_config_effort,
            facts.reasoning_effort) == ("gpt-x", False, None, None, "xhigh")
    chat = request_facts({"model": "gpt-y", "stream": "yes", "reasoning_effort": "low"})
    assert (chat.stream, chat.reasoning_effort) == (False, "low")
