"""Provider-side tools that reach the internet (issue 32 item 5): a request that declares
one lets an arm look outside its sandbox through the model. Refused by default in the
provider's shape (400, never forwarded, not counted against the budget) and recorded with
the tools it named; an arm granted `allow_server_tools` is forwarded and its record says
so. Its honest twin: a client-side tool that merely bears the name passes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.gateway.harness import (
    TOKEN_A,
    Reply,
    Upstream,
    call,
    records,
    running_gateway,
    write_config,
)
from tests.unit.gateway.streams import (
    ANTHROPIC_JSON,
    ANTHROPIC_STREAM,
    CHAT_JSON,
    CHAT_STREAM,
    GEMINI_JSON,
    GEMINI_SSE,
    RESPONSES_STREAM,
)

MESSAGES = "/anthropic/v1/messages"
RESPONSES = "/openai/v1/responses"
CHAT = "/openai/v1/chat/completions"
GEMINI = "/gemini/v1beta/models/gemini-x:generateContent"
GEMINI_STREAM = "/gemini/v1beta/models/gemini-x:streamGenerateContent?alt=sse"
HEADERS = {"x-api-key": TOKEN_A}
ASK = [{"role": "user", "content": "what is new upstream?"}]
GEMINI_ASK = [{"role": "user", "parts": [{"text": "what is new upstream?"}]}]
REFUSED = ("bakeoff gateway: provider-side tool(s) {} reach the internet from outside the "
           "sandbox and are refused (an arm is granted them with allow_server_tools = true, "
           "which flags its round)")

# (path, body, the tools on record, the reply the upstream would stream or send)
CASES: list[tuple[str, dict[str, Any], list[str], Reply]] = [
    (MESSAGES, {"model": "claude-x", "stream": True, "messages": ASK, "tools": [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
        {"type": "web_fetch_20250910", "name": "web_fetch"}]},
     ["web_search_20250305", "web_fetch_20250910"], Reply(chunks=ANTHROPIC_STREAM)),
    (MESSAGES, {"model": "claude-x", "messages": ASK, "mcp_servers": [
        {"type": "url", "url": "https://mcp.example.invalid/sse", "name": "x"}]},
     ["mcp_servers"], Reply(json_body=ANTHROPIC_JSON)),
    (RESPONSES, {"model": "gpt-x", "stream": True, "input": ASK,
                 "tools": [{"type": "web_search_preview"}, {"type": "web_search"}]},
     ["web_search_preview", "web_search"], Reply(chunks=RESPONSES_STREAM)),
    (RESPONSES, {"model": "gpt-x", "stream": True, "input": ASK, "tools": [
        {"type": "mcp", "server_label": "x", "server_url": "https://mcp.example.invalid"}]},
     ["mcp"], Reply(chunks=RESPONSES_STREAM)),
    (CHAT, {"model": "gpt-y", "messages": ASK, "web_search_options": {}},
     ["web_search_options"], Reply(json_body=CHAT_JSON)),
    (CHAT, {"model": "qwen-x", "messages": ASK, "enable_search": True},
     ["enable_search"], Reply(json_body=CHAT_JSON)),
    (CHAT, {"model": "kimi-x", "messages": ASK, "tools": [
        {"type": "builtin_function", "function": {"name": "$web_search"}}]},
     ["builtin_function:$web_search"], Reply(json_body=CHAT_JSON)),
    (CHAT, {"model": "qwen/qwen3-coder", "stream": True, "messages": ASK,
            "plugins": [{"id": "web", "max_results": 3}]},
     ["plugins:web"], Reply(chunks=CHAT_STREAM)),
    (GEMINI, {"contents": GEMINI_ASK, "tools": [{"googleSearch": {}}, {"urlContext": {}}]},
     ["googleSearch", "urlContext"], Reply(json_body=GEMINI_JSON)),
    (GEMINI_STREAM, {"contents": GEMINI_ASK, "tools": [
        {"google_search_retrieval": {"dynamic_retrieval_config": {"mode": "MODE_DYNAMIC"}}}]},
     ["google_search_retrieval"], Reply(chunks=GEMINI_SSE)),
]
IDS = ["messages-web-search-fetch", "messages-mcp", "responses-web-search", "responses-mcp",
       "chat-openai-search", "chat-qwen-search", "chat-kimi-search", "chat-openrouter-stream",
       "gemini-search-url",
       "gemini-stream-snake-case"]


def refusal(path: str, tools: list[str]) -> dict[str, Any]:
    message = REFUSED.format(", ".join(tools))
    if path.startswith("/anthropic"):
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    if path.startswith("/gemini"):
        return {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
    return {"error": {"message": message, "type": "invalid_request_error", "param": None,
                      "code": None}}


def upstream_path(path: str) -> str:
    return "/" + path.split("/", 2)[2].split("?")[0]


@pytest.mark.parametrize(("path", "body", "tools", "reply"), CASES, ids=IDS)
def test_a_server_side_tool_is_refused_in_the_provider_s_shape_and_recorded(
        tmp_path: Path, path: str, body: dict[str, Any], tools: list[str], reply: Reply
        ) -> None:
    with Upstream() as upstream:
        upstream.replies[upstream_path(path)] = reply
        write_config(tmp_path, upstream.url, max_requests=1)
        with running_gateway(tmp_path) as port:
            refused = call(port, path, body, headers=HEADERS)
            plain = {k: v for k, v in body.items() if k not in (
                "tools", "mcp_servers", "web_search_options", "enable_search", "plugins")}
            served = call(port, path, plain, headers=HEADERS)
    assert (refused.status, refused.json()) == (400, refusal(path, tools))
    assert served.status == 200  # the refusal did not spend the budget of one request
    assert [json.loads(seen.body) for seen in upstream.seen] == [plain]
    first, second = records(tmp_path)
    assert (first["status"], first["refused"], first["server_tools"],
            first["server_tools_allowed"], first["usage"]) == (
        400, "server_tool", tools, False, None)
    assert (second["refused"], second["server_tools"], second["server_tools_allowed"]) == (
        None, [], False)
    kept = tmp_path / "records" / "s1" / first["response_body"]
    assert json.loads(kept.read_bytes()) == refusal(path, tools)


@pytest.mark.parametrize(("path", "body", "tools", "reply"), CASES, ids=IDS)
def test_an_arm_granted_server_tools_is_forwarded_and_its_record_says_so(
        tmp_path: Path, path: str, body: dict[str, Any], tools: list[str], reply: Reply
        ) -> None:
    with Upstream() as upstream:
        upstream.replies[upstream_path(path)] = reply
        write_config(tmp_path, upstream.url, allow_server_tools=True)
        with running_gateway(tmp_path) as port:
            answer = call(port, path, body, headers=HEADERS)
    assert answer.status == 200
    assert [json.loads(seen.body) for seen in upstream.seen] == [body]
    [line] = records(tmp_path)
    assert (line["refused"], line["server_tools"], line["server_tools_allowed"]) == (
        None, tools, True)
    assert line["usage"] is not None


@pytest.mark.parametrize(("path", "body"), [
    (MESSAGES, {"model": "claude-x", "messages": ASK, "tools": [
        {"name": "web_search", "description": "search the repo's docs",
         "input_schema": {"type": "object"}}]}),
    (RESPONSES, {"model": "gpt-x", "input": ASK, "tools": [
        {"type": "function", "name": "web_search", "parameters": {"type": "object"}}]}),
    (CHAT, {"model": "gpt-y", "messages": ASK, "enable_search": False, "tools": [
        {"type": "function", "function": {"name": "web_fetch", "parameters": {}}}]}),
    (GEMINI, {"contents": GEMINI_ASK, "tools": [
        {"functionDeclarations": [{"name": "google_web_search"}]}, {"codeExecution": {}}]}),
], ids=["messages", "responses", "chat", "gemini"])
def test_a_client_side_tool_named_like_one_is_forwarded(
        tmp_path: Path, path: str, body: dict[str, Any]) -> None:
    """The honest twin: a function the agent runs itself (in its sandbox) is no server
    tool, whatever its name; nor is Gemini's code execution (no internet there)."""
    replies = {MESSAGES: ANTHROPIC_JSON, RESPONSES: CHAT_JSON, CHAT: CHAT_JSON,
               GEMINI: GEMINI_JSON}
    with Upstream() as upstream:
        upstream.replies[upstream_path(path)] = Reply(json_body=replies[path])
        write_config(tmp_path, upstream.url)
        with running_gateway(tmp_path) as port:
            answer = call(port, path, body, headers=HEADERS)
    assert answer.status == 200 and len(upstream.seen) == 1
    [line] = records(tmp_path)
    assert (line["refused"], line["server_tools"], line["server_tools_allowed"]) == (
        None, [], False)
