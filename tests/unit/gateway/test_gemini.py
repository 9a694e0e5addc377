"""The Gemini API through the gateway (issue 32): generateContent and
streamGenerateContent (SSE with `alt=sse`, a streamed JSON array without), the model from
the URL path, the token where a Gemini client puts its key (never forwarded), effort from
thinkingConfig, usage from usageMetadata, and every refusal in Gemini's error shape."""

from __future__ import annotations

import http.client
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.unit.gateway.harness import (
    GEMINI_KEY,
    TOKEN_A,
    TOKEN_B,
    Reply,
    Upstream,
    call,
    records,
    running_gateway,
    write_config,
)
from tests.unit.gateway.streams import (
    GEMINI_ARRAY,
    GEMINI_JSON,
    GEMINI_SSE,
    GEMINI_USAGE,
)
from tests.unit.gateway.test_proxy import timing_fields

STREAM = "/v1beta/models/gemini-x:streamGenerateContent"
GENERATE = "/v1beta/models/gemini-x:generateContent"
REQUEST: dict[str, Any] = {
    "contents": [{"role": "user", "parts": [{"text": "fix the bug"}]}],
    "tools": [{"functionDeclarations": [{"name": "run_shell_command",
                                         "parameters": {"type": "OBJECT"}}]}],
    "generationConfig": {"temperature": 0, "thinkingConfig": {
        "thinkingLevel": "high", "includeThoughts": True}}}
PRICES = {"gemini-x": {"input": 2.0, "output": 12.0, "cache_read": 0.2}}


def gemini_error(code: int, status: str, message: str) -> dict[str, object]:
    return {"error": {"code": code, "message": message, "status": status}}


def files_hold(root: Path, secret: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_sse_stream_with_the_token_as_key_goes_out_with_the_real_key_and_is_recorded_exactly(
        tmp_path: Path) -> None:
    with Upstream() as upstream:
        upstream.replies[STREAM] = Reply(chunks=GEMINI_SSE)
        write_config(tmp_path, upstream.url, prices=PRICES)
        with running_gateway(tmp_path) as port:
            answer = call(port, f"/gemini{STREAM}?alt=sse&key={TOKEN_A}", REQUEST,
                          headers={"x-goog-api-client": "genai-js/1.30.0"})
    assert answer.status == 200 and answer.body == b"".join(GEMINI_SSE)
    assert answer.headers["content-type"] == "text/event-stream"
    [seen] = upstream.seen
    assert (seen.method, seen.path) == ("POST", f"{STREAM}?alt=sse")
    assert seen.headers["x-goog-api-key"] == GEMINI_KEY
    assert seen.headers["x-goog-api-client"] == "genai-js/1.30.0"
    assert "authorization" not in seen.headers and "x-api-key" not in seen.headers
    assert json.loads(seen.body) == REQUEST
    [line] = records(tmp_path)
    assert timing_fields(line) == {
        "seq": 1, "stage": "s1", "run": "", "arm": "a", "role": "arm", "provider": "gemini",
        "upstream": "gemini",
        "method": "POST", "path": f"/gemini{STREAM}?alt=sse", "stream": True,
        "model_requested": "gemini-x",
        "thinking": {"thinkingLevel": "high", "includeThoughts": True},
        "output_config_effort": None, "reasoning_effort": None,
        "effort": {"generationConfig.thinkingConfig.thinkingLevel": "high",
                   "generationConfig.thinkingConfig.includeThoughts": True},
        "server_tools": [], "server_tools_allowed": False,
        "model_response": "gemini-x-001", "status": 200, "usage": GEMINI_USAGE,
        "cost_usd": (500 * 2.0 + 240 * 12.0 + 1000 * 0.2) / 1e6, "refused": None,
        "request_body": "bodies/a-1.request.json", "response_body": "bodies/a-1.response"}
    assert files_hold(tmp_path / "records", TOKEN_A) == []
    assert files_hold(tmp_path / "records", GEMINI_KEY) == []


def test_stream_without_alt_sse_is_a_json_array_passed_through_and_metered(
        tmp_path: Path) -> None:
    """Without `alt=sse` streamGenerateContent answers one JSON array, element by element:
    the client gets each element as it comes, the record the last element's usage."""
    with Upstream() as upstream:
        upstream.replies[STREAM] = Reply(chunks=GEMINI_ARRAY, content_type="application/json")
        write_config(tmp_path, upstream.url)
        with running_gateway(tmp_path) as port:
            answer = call(port, f"/gemini{STREAM}", REQUEST, headers={"x-goog-api-key": TOKEN_B})
    assert answer.status == 200 and answer.body == b"".join(GEMINI_ARRAY)
    assert [seen.path for seen in upstream.seen] == [STREAM]
    assert upstream.seen[0].headers["x-goog-api-key"] == GEMINI_KEY
    [line] = records(tmp_path)
    assert (line["arm"], line["path"], line["stream"], line["model_response"], line["usage"],
            line["cost_usd"]) == ("b", f"/gemini{STREAM}", True, "gemini-x-001", GEMINI_USAGE,
                                  None)


def test_generate_content_usage_counts_thoughts_and_tool_prompts_to_the_total(
        tmp_path: Path) -> None:
    """promptTokenCount 30 + toolUsePromptTokenCount 3 is the input, candidates 5 +
    thoughts 12 the output: 50, the response's totalTokenCount."""
    request = {**REQUEST, "generation_config": {"thinking_config": {"thinking_budget": 8192}}}
    del request["generationConfig"]
    with Upstream() as upstream:
        upstream.replies[GENERATE] = Reply(json_body=GEMINI_JSON)
        write_config(tmp_path, upstream.url, prices=PRICES)
        with running_gateway(tmp_path) as port:
            answer = call(port, f"/gemini{GENERATE}", request, headers={"x-goog-api-key": TOKEN_A})
    assert answer.status == 200 and answer.json() == GEMINI_JSON
    [line] = records(tmp_path)
    usage = {"input": 33, "output": 17, "cache_read": 0, "cache_write": 0, "reasoning": 12}
    assert (line["stream"], line["model_requested"], line["model_response"], line["usage"],
            line["cost_usd"], line["thinking"], line["effort"]) == (
        False, "gemini-x", "gemini-x-001", usage, (33 * 2.0 + 17 * 12.0) / 1e6,
        {"thinking_budget": 8192},
        {"generation_config.thinking_config.thinking_budget": 8192})
    assert sum(usage.values()) - usage["reasoning"] == 50


def test_the_sse_stream_is_not_buffered(tmp_path: Path) -> None:
    """The first event reaches the client while the upstream holds the second back."""
    hold = threading.Event()
    reply = Reply(chunks=GEMINI_SSE, hold=hold, hold_before=1)
    with Upstream() as upstream:
        upstream.replies[STREAM] = reply
        write_config(tmp_path, upstream.url)
        with running_gateway(tmp_path) as port:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("POST", f"/gemini{STREAM}?alt=sse", json.dumps(REQUEST).encode(),
                               {"x-goog-api-key": TOKEN_A})
            response = connection.getresponse()
            first = b""
            while not first.endswith(b"\r\n\r\n"):
                first += response.read1(65536)
            assert first == GEMINI_SSE[0] and reply.sent == [0] and not hold.is_set()
            hold.set()
            rest = response.read()
            connection.close()
    assert first + rest == b"".join(GEMINI_SSE)
    assert records(tmp_path)[0]["usage"] == GEMINI_USAGE


UNKNOWN = ("bakeoff gateway: unknown token (send the token the sandbox was given as "
           "x-api-key, Authorization: Bearer, x-goog-api-key or ?key=)")


@pytest.mark.parametrize(("query", "headers"), [
    ("?alt=sse&key=tok-guess", {}), ("?alt=sse", {"x-goog-api-key": "tok-guess"}),
    ("?alt=sse", {})], ids=["query", "header", "none"])
def test_unknown_key_is_gemini_s_400_never_forwarded_and_never_written(
        tmp_path: Path, query: str, headers: dict[str, str]) -> None:
    with Upstream() as upstream:
        write_config(tmp_path, upstream.url)
        with running_gateway(tmp_path) as port:
            answer = call(port, f"/gemini{STREAM}{query}", REQUEST, headers=headers)
    assert (answer.status, answer.json()) == (400, gemini_error(400, "INVALID_ARGUMENT", UNKNOWN))
    assert upstream.seen == []
    [line] = [json.loads(t) for t in (tmp_path / "records" / "_refused.jsonl").read_text()
              .splitlines()]
    line.pop("time")
    assert line == {"provider": "gemini", "method": "POST", "path": f"/gemini{STREAM}",
                    "status": 400, "refused": "unknown_token"}
    assert files_hold(tmp_path / "records", "tok-guess") == []


def test_a_token_in_a_query_key_is_never_forwarded_nor_recorded_on_a_refusal(
        tmp_path: Path) -> None:
    """Refused or not, the path on record is the one without `key`."""
    with Upstream() as upstream:
        write_config(tmp_path, upstream.url, models=["gemini-y"])
        with running_gateway(tmp_path) as port:
            answer = call(port, f"/gemini{STREAM}?key={TOKEN_A}&alt=sse", REQUEST)
    message = ("bakeoff gateway: model 'gemini-x' is not allowed for this arm (allowed: "
               "gemini-y; widen it with allow_models)")
    assert (answer.status, answer.json()) == (404, gemini_error(404, "NOT_FOUND", message))
    assert upstream.seen == []
    [line] = records(tmp_path)
    assert (line["path"], line["refused"], line["model_requested"]) == (
        f"/gemini{STREAM}?alt=sse", "model_not_allowed", "gemini-x")
    assert files_hold(tmp_path / "records", TOKEN_A) == []


def test_a_spent_budget_is_a_400_so_gemini_cli_does_not_retry_it(tmp_path: Path) -> None:
    with Upstream() as upstream:
        upstream.replies[GENERATE] = Reply(json_body=GEMINI_JSON)
        write_config(tmp_path, upstream.url, max_requests=1)
        with running_gateway(tmp_path) as port:
            answers = [call(port, f"/gemini{GENERATE}", REQUEST,
                            headers={"x-goog-api-key": TOKEN_A}) for _ in range(2)]
    assert answers[0].status == 200
    assert (answers[1].status, answers[1].json()) == (400, gemini_error(
        400, "INVALID_ARGUMENT", "bakeoff gateway: budget exhausted (max_requests_per_arm=1)"))
    assert len(upstream.seen) == 1
    assert [line["refused"] for line in records(tmp_path)] == [None, "budget_exhausted"]


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/gemini/v1beta/models"),
    ("POST", "/gemini/v1beta/models/gemini-x:embedContent"),
    ("POST", "/gemini/v1beta/models/gemini%2Dx:generateContent"),
    ("POST", "/gemini/v1beta/models/a/../gemini-x:generateContent"),
    ("GET", f"/gemini{GENERATE}"),
])
def test_anything_but_the_served_methods_is_gemini_s_404(
        tmp_path: Path, method: str, path: str) -> None:
    with Upstream() as upstream:
        write_config(tmp_path, upstream.url)
        with running_gateway(tmp_path) as port:
            answer = call(port, path, REQUEST if method == "POST" else None, method=method,
                          headers={"x-goog-api-key": TOKEN_A})
    assert answer.status == 404
    assert answer.json()["error"]["status"] == "NOT_FOUND"
    assert answer.json()["error"]["message"].startswith(
        f"bakeoff gateway: no route for {method} {path.split('?')[0]} (served: ")
    assert upstream.seen == []
    assert [line["refused"] for line in records(tmp_path)] == ["bad_path"]


def test_count_tokens_is_served_for_an_allowed_model(tmp_path: Path) -> None:
    path = "/v1beta/models/gemini-x:countTokens"
    with Upstream() as upstream:
        upstream.replies[path] = Reply(json_body={"totalTokens": 31})
        write_config(tmp_path, upstream.url, models=["gemini-x"])
        with running_gateway(tmp_path) as port:
            answer = call(port, f"/gemini{path}", {"contents": REQUEST["contents"]},
                          headers={"x-goog-api-key": TOKEN_A})
    assert (answer.status, answer.json()) == (200, {"totalTokens": 31})
    [line] = records(tmp_path)
    assert (line["model_requested"], line["stream"], line["usage"], line["refused"]) == (
        "gemini-x", False, None, None)
