"""Effort on every wire (issue 32 item 4): each request's record holds every effort field
its API's dialect carries (`effort`, dotted name -> value as sent), streamed or not; a
field of another API's dialect is not effort on this wire (its upstream ignores it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.facts import request_facts
from gateway.usage import Api
from tests.unit.gateway.harness import TOKEN_A, Reply, Upstream, call, records, running_gateway
from tests.unit.gateway.harness import write_config as configure
from tests.unit.gateway.streams import (
    ANTHROPIC_JSON,
    ANTHROPIC_STREAM,
    CHAT_JSON,
    CHAT_STREAM,
    GEMINI_ARRAY,
    GEMINI_JSON,
    GEMINI_SSE,
    RESPONSES_JSON,
    RESPONSES_STREAM,
)

MESSAGES, RESPONSES, CHAT = ("/anthropic/v1/messages", "/openai/v1/responses",
                             "/openai/v1/chat/completions")
GEMINI = "/gemini/v1beta/models/gemini-x:"
ASK = [{"role": "user", "content": "hi"}]
GEMINI_ASK = [{"role": "user", "parts": [{"text": "hi"}]}]

CASES: list[tuple[str, dict[str, Any], Reply, dict[str, Any], str | None]] = [
    (MESSAGES, {"model": "claude-x", "stream": True, "messages": ASK,
                "thinking": {"type": "enabled", "budget_tokens": 8000}},
     Reply(chunks=ANTHROPIC_STREAM), {"thinking.budget_tokens": 8000}, "claude-x-20260101"),
    (MESSAGES, {"model": "claude-x", "messages": ASK, "thinking": {"type": "adaptive"},
                "output_config": {"effort": "max"}, "reasoning_effort": "low"},
     Reply(json_body=ANTHROPIC_JSON), {"output_config.effort": "max"}, "claude-x-20260101"),
    (RESPONSES, {"model": "gpt-x", "stream": True, "input": ASK,
                 "reasoning": {"effort": "xhigh", "summary": "auto"}},
     Reply(chunks=RESPONSES_STREAM), {"reasoning.effort": "xhigh"}, "gpt-x-2026-01-01"),
    (RESPONSES, {"model": "gpt-x", "input": ASK, "reasoning_effort": "high"},
     Reply(json_body=RESPONSES_JSON), {}, "gpt-x-2026-01-01"),
    (CHAT, {"model": "gpt-y", "messages": ASK, "reasoning_effort": "low"},
     Reply(json_body=CHAT_JSON), {"reasoning_effort": "low"}, "gpt-y"),
    (CHAT, {"model": "qwen-x", "stream": True, "messages": ASK, "enable_thinking": True,
            "thinking_budget": 4096}, Reply(chunks=CHAT_STREAM),
     {"enable_thinking": True, "thinking_budget": 4096}, "gpt-y"),
    (CHAT, {"model": "glm-x", "stream": True, "messages": ASK,
            "reasoning": {"effort": "high", "max_tokens": 2000}}, Reply(chunks=CHAT_STREAM),
     {"reasoning.effort": "high", "reasoning.max_tokens": 2000}, "gpt-y"),
    (CHAT, {"model": "qwen-x", "messages": ASK, "output_config": {"effort": "high"},
            "chat_template_kwargs": {"enable_thinking": False}}, Reply(json_body=CHAT_JSON),
     {"chat_template_kwargs.enable_thinking": False}, "gpt-y"),
    (GEMINI + "streamGenerateContent?alt=sse", {"contents": GEMINI_ASK, "generationConfig": {
        "thinkingConfig": {"thinkingLevel": "low", "includeThoughts": False}}},
     Reply(chunks=GEMINI_SSE), {"generationConfig.thinkingConfig.thinkingLevel": "low",
                                "generationConfig.thinkingConfig.includeThoughts": False},
     "gemini-x-001"),
    (GEMINI + "streamGenerateContent", {"contents": GEMINI_ASK, "generationConfig": {
        "thinkingConfig": {"thinkingBudget": -1}}, "reasoning_effort": "high"},
     Reply(chunks=GEMINI_ARRAY, content_type="application/json"),
     {"generationConfig.thinkingConfig.thinkingBudget": -1}, "gemini-x-001"),
    (GEMINI + "generateContent", {"contents": GEMINI_ASK, "generation_config": {
        "thinking_config": {"thinking_level": "high"}}}, Reply(json_body=GEMINI_JSON),
     {"generation_config.thinking_config.thinking_level": "high"}, "gemini-x-001"),
]
IDS = ["messages-budget-stream", "messages-effort-json", "responses-stream",
       "responses-chat-field-ignored", "chat-openai-json", "chat-qwen-stream",
       "chat-openrouter-stream", "chat-vllm-json", "gemini-sse", "gemini-array",
       "gemini-snake-json"]


@pytest.mark.parametrize(("path", "body", "reply", "effort", "served"), CASES, ids=IDS)
def test_every_effort_field_of_the_wire_and_the_served_model_are_recorded(
        tmp_path: Path, path: str, body: dict[str, Any], reply: Reply,
        effort: dict[str, Any], served: str | None) -> None:
    with Upstream() as upstream:
        upstream.replies["/" + path.split("/", 2)[2].split("?")[0]] = reply
        configure(tmp_path, upstream.url)
        with running_gateway(tmp_path) as port:
            answer = call(port, path, body, headers={"x-api-key": TOKEN_A})
    assert answer.status == 200
    [line] = records(tmp_path)
    assert (line["effort"], line["model_response"], line["stream"]) == (
        effort, served, "stream" in path or body.get("stream") is True)


def test_a_gemini_request_s_model_is_the_path_s_never_the_body_s() -> None:
    """The upstream serves the model the URL names: a `model` in the body (which Gemini
    ignores) can neither pass nor fail the allow list."""
    facts = request_facts(Api.STREAM_GENERATE, {"model": "gemini-allowed", "contents": []},
                          "gemini-other")
    assert (facts.model, facts.stream, facts.effort, facts.thinking) == (
        "gemini-other", True, {}, None)
    assert request_facts(Api.GENERATE, {}, "gemini-x").stream is False
