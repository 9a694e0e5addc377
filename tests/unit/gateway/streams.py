"""Provider responses as the real APIs shape them, with usage numbers the tests check."""

from __future__ import annotations

import json
from typing import Any

from tests.unit.gateway.harness import sse

ANTHROPIC_STREAM = sse(
    ("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x-20260101",
        "content": [], "stop_reason": None, "usage": {
            "input_tokens": 120, "cache_creation_input_tokens": 30,
            "cache_read_input_tokens": 400, "output_tokens": 1}}}),
    ("content_block_start", {"type": "content_block_start", "index": 0,
                             "content_block": {"type": "text", "text": ""}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0,
                             "delta": {"type": "text_delta", "text": "the usage is fine"}}),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                       "usage": {"output_tokens": 57}}),
    ("message_stop", {"type": "message_stop"}))

RESPONSES_STREAM = sse(
    ("response.created", {"type": "response.created", "response": {
        "id": "resp_1", "model": "gpt-x-2026-01-01", "status": "in_progress", "usage": None}}),
    ("response.output_text.delta", {"type": "response.output_text.delta", "delta": "hi"}),
    ("response.completed", {"type": "response.completed", "response": {
        "id": "resp_1", "model": "gpt-x-2026-01-01", "status": "completed", "usage": {
            "input_tokens": 500, "input_tokens_details": {"cached_tokens": 200},
            "output_tokens": 80, "output_tokens_details": {"reasoning_tokens": 64},
            "total_tokens": 580}}}))

CHAT_STREAM = sse(
    (None, {"id": "c1", "object": "chat.completion.chunk", "model": "gpt-y",
            "choices": [{"index": 0, "delta": {"content": "hi"}}], "usage": None}),
    (None, {"id": "c1", "object": "chat.completion.chunk", "model": "gpt-y", "choices": [],
            "usage": {"prompt_tokens": 90, "completion_tokens": 12,
                      "prompt_tokens_details": {"cached_tokens": 10},
                      "completion_tokens_details": {"reasoning_tokens": 0}}}),
    (None, "[DONE]"))

ANTHROPIC_JSON: dict[str, Any] = {
    "id": "msg_2", "type": "message", "role": "assistant", "model": "claude-x-20260101",
    "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
    "usage": {"input_tokens": 11, "cache_creation_input_tokens": 0,
              "cache_read_input_tokens": 5, "output_tokens": 7}}
RESPONSES_JSON: dict[str, Any] = {
    "id": "resp_2", "object": "response", "model": "gpt-x-2026-01-01", "status": "completed",
    "usage": {"input_tokens": 40, "input_tokens_details": {"cached_tokens": 0},
              "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 3}}}
CHAT_JSON: dict[str, Any] = {
    "id": "c2", "object": "chat.completion", "model": "gpt-y",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
    "usage": {"prompt_tokens": 21, "completion_tokens": 4}}

PRICES = {"claude-x": {"input": 15.0, "output": 75.0, "cache_read": 1.5, "cache_write": 18.75},
          "gpt-x-2026-01-01": {"input": 1.25, "output": 10.0, "cache_read": 0.125}}


def gemini_chunk(parts: list[dict[str, Any]], usage: dict[str, int],
                 finish: str | None = None) -> dict[str, Any]:
    """One GenerateContentResponse as streamGenerateContent sends it."""
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "usageMetadata": usage,
            "modelVersion": "gemini-x-001", "responseId": "gr_1"}


GEMINI_CHUNKS = [
    gemini_chunk([{"text": "Looking at the failing test", "thought": True}],
                 {"promptTokenCount": 1500, "totalTokenCount": 1500,
                  "cachedContentTokenCount": 1000}),
    gemini_chunk([{"functionCall": {"name": "run_shell_command",
                                    "args": {"command": "pytest -x"}}}],
                 {"promptTokenCount": 1500, "totalTokenCount": 1700,
                  "cachedContentTokenCount": 1000, "thoughtsTokenCount": 200}),
    gemini_chunk([{"text": ""}],
                 {"promptTokenCount": 1500, "candidatesTokenCount": 40,
                  "cachedContentTokenCount": 1000, "thoughtsTokenCount": 200,
                  "totalTokenCount": 1740}, finish="STOP"),
]
# alt=sse: `data: <chunk>` events separated by CRLF CRLF, as the real API sends them
GEMINI_SSE = [f"data: {json.dumps(chunk)}\r\n\r\n".encode() for chunk in GEMINI_CHUNKS]
# no alt=sse: one JSON array, streamed element by element
GEMINI_ARRAY = [(b"[" if i == 0 else b"\n,\r\n") + json.dumps(chunk).encode()
                + (b"]" if i == len(GEMINI_CHUNKS) - 1 else b"")
                for i, chunk in enumerate(GEMINI_CHUNKS)]
GEMINI_USAGE = {"input": 500, "output": 240, "cache_read": 1000, "cache_write": 0,
                "reasoning": 200}
GEMINI_JSON: dict[str, Any] = {
    "candidates": [{"content": {"parts": [{"text": "ok"}], "role": "model"},
                    "finishReason": "STOP", "index": 0}],
    "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 5,
                      "thoughtsTokenCount": 12, "toolUsePromptTokenCount": 3,
                      "totalTokenCount": 50},
    "modelVersion": "gemini-x-001", "responseId": "gr_2"}
