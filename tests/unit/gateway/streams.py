"""Provider responses as the real APIs shape them, with usage numbers the tests check."""

from __future__ import annotations

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
