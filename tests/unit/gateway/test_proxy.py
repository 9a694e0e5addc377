"""The gateway forwards what it should, how it should: routes, both token styles, the
real key out (never the token), streams unbuffered, usage and cost recorded exactly."""

from __future__ import annotations

import http.client
import json
import socket
import struct
import threading
from pathlib import Path

import pytest

from gateway import server as server_mod
from tests.unit.gateway.harness import (
    ANTHROPIC_KEY,
    OPENAI_KEY,
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
    ANTHROPIC_JSON,
    ANTHROPIC_STREAM,
    CHAT_JSON,
    CHAT_STREAM,
    PRICES,
    RESPONSES_JSON,
    RESPONSES_STREAM,
)

ANTHROPIC_REQUEST = {"model": "claude-x", "stream": True, "max_tokens": 64,
                     "thinking": {"type": "adaptive"}, "output_config": {"effort": "high"},
                     "messages": [{"role": "user", "content": "hello"}]}


def timing_fields(line: dict[str, object]) -> dict[str, object]:
    """The line without what differs run to run (checked for type and order instead)."""
    time, latency, first = line.pop("time"), line.pop("latency_ms"), line.pop("first_byte_ms")
    assert isinstance(time, str) and time.endswith("Z")
    assert isinstance(latency, float) and isinstance(first, float) and 0 <= first <= latency
    return line


def test_healthz_answers_ok_without_a_token(tmp_path: Path) -> None:
    with Upstream() as upstream:
        write_config(tmp_path, upstream.url)
        with running_gateway(tmp_path) as port:
            answer = call(port, "/healthz", method="GET")
    assert (answer.status, answer.body) == (200, b"ok")
    assert not (tmp_path / "records" / "s1").exists()


def test_anthropic_stream_goes_out_with_the_real_key_and_is_recorded_exactly(
        tmp_path: Path) -> None:
    with Upstream() as upstream:
        upstream.replies["/v1/messages"] = Reply(chunks=ANTHROPIC_STREAM)
        write_config(tmp_path, upstream.url, prices=PRICES)
        with running_gateway(tmp_path) as port:
            answer = call(port, "/anthropic/v1/messages?beta=true", ANTHROPIC_REQUEST,
                          headers={"x-api-key": TOKEN_A, "anthropic-version": "2023-06-01",
                                   "anthropic-beta": "x-2026", "Accept-Encoding": "gzip"})
    assert answer.status == 200 and answer.body == b"".join(ANTHROPIC_STREAM)
    assert answer.headers["content-type"] == "text/event-stream"
    [seen] = upstream.seen
    assert (seen.method, seen.path) == ("POST", "/v1/messages?beta=true")
    assert seen.headers["x-api-key"] == ANTHROPIC_KEY
    assert (seen.headers["anthropic-version"], seen.headers["anthropic-beta"]) == (
        "2023-06-01", "x-2026")
    assert seen.headers["accept-encoding"] == "identity" and "authorization" not in seen.headers
    assert json.loads(seen.body) == ANTHROPIC_REQUEST
    [line] = records(tmp_path)
    assert timing_fields(line) == {
        "seq": 1, "stage": "s1", "run": "", "arm": "a", "role": "arm", "provider": "anthropic",
        "upstream": "anthropic",
        "method": "POST", "path": "/anthropic/v1/messages?beta=true", "stream": True,
        "model_requested": "claude-x", "thinking": {"type": "adaptive"},
        "output_config_effort": "high", "reasoning_effort": None,
        "effort": {"output_config.effort": "high"}, "server_tools": [],
        "server_tools_allowed": False,
        "model_response": "claude-x-20260101", "status": 200,
        "usage": {"input": 120, "output": 57, "cache_read": 400, "cache_write": 30,
                  "reasoning": 0},
        "cost_usd": 0.0072375, "refused": None,
        "request_body": "bodies/a-1.request.json", "response_body": "bodies/a-1.response"}
    bodies = tmp_path / "records" / "s1" / "bodies"
    assert json.loads((bodies / "a-1.request.json").read_bytes()) == ANTHROPIC_REQUEST
    assert (bodies / "a-1.response").read_bytes() == b"".join(ANTHROPIC_STREAM)


def test_bearer_token_reaches_openai_responses_as_the_real_bearer_key(tmp_path: Path) -> None:
    request = {"model": "gpt-x", "stream": True, "reasoning": {"effort": "medium"},
               "input": [{"role": "user", "content": "hi"}]}
    with Upstream() as upstream:
        upstream.replies["/v1/responses"] = Reply(chunks=RESPONSES_STREAM)
        write_config(tmp_path, upstream.url, prices=PRICES)
        with running_gateway(tmp_path) as port:
            answer = call(port, "/openai/v1/responses", request,
                          headers={"Authorization": f"Bearer {TOKEN_B}"})
    assert answer.status == 200 and answer.body == b"".join(RESPONSES_STREAM)
    [seen] = upstream.seen
    assert seen.path == "/v1/responses" and seen.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert "x-api-key" not in seen.headers
    [line] = records(tmp_path)
    assert (line["arm"], line["reasoning_effort"], line["model_requested"],
            line["model_response"], line["usage"], line["cost_usd"]) == (
        "b", "medium", "gpt-x", "gpt-x-2026-01-01",
        {"input": 300, "output": 80, "cache_read": 200, "cache_write": 0, "reasoning": 64},
        0.0012)


def test_chat_completions_stream_usage_comes_from_the_usage_chunk(tmp_path: Path) -> None:
    request = {"model": "gpt-y", "stream": True, "reasoning_effort": "low",
               "stream_options": {"include_usage": True}, "messages": []}
    with Upstream() as upstream:
        upstream.replies["/v1/chat/completions"] = Reply(chunks=CHAT_STREAM)
        write_config(tmp_path, upstream.url, prices=PRICES)
        with running_gateway(tmp_path) as port:
            answer = call(port, "/openai/v1/chat/completions", request,
                          headers={"Authorization": f"Bearer {TOKEN_A}"})
    assert answer.status == 200 and answer.body == b"".join(CHAT_STREAM)
    [line] = records(tmp_path)
    assert (line["stream"], line["reasoning_effort"], line["model_response"], line["usage"],
            line["cost_usd"]) == (
        True, "low", "gpt-y",
        {"input": 80, "output": 12, "cache_read": 10, "cache_write": 0, "reasoning": 0}, None)


@pytest.mark.parametrize(("path", "model", "document", "usage", "cost"), [
    ("/anthropic/v1/messages", "claude-x", ANTHROPIC_JSON,
     {"input": 11, "output": 7, "cache_read": 5, "cache_write": 0, "reasoning": 0},
     (11 * 15.0 + 7 * 75.0 + 5 * 1.5) / 1e6),
    ("/openai/v1/responses", "gpt-x", RESPONSES_JSON,
     {"input": 40, "output": 9, "cache_read": 0, "cache_write": 0, "reasoning": 3},
     (40 * 1.25 + 9 * 10.0) / 1e6),
    ("/openai/v1/chat/completions", "gpt-y", CHAT_JSON,
     {"input": 21, "output": 4, "cache_read": 0, "cache_write": 0, "reasoning": 0}, None),
])
def test_non_streaming_json_usage_model_and_cost(
        tmp_path: Path, path: str, model: str, document: dict[str, object],
        usage: dict[str, int], cost: float | None) -> None:
    with Upstream() as upstream:
        upstream.replies["/" + path.split("/", 2)[2]] = Reply(json_body=document)
        write_config(tmp_path, upstream.url, prices=PRICES)
        with running_gateway(tmp_path) as port:
            answer = call(port, path, {"model": model, "messages": []},
                          headers={"x-api-key": TOKEN_A})
    assert answer.status == 200 and answer.json() == document
    assert answer.headers["content-length"] == str(len(answer.body))
    [line] = records(tmp_path)
    assert (line["stream"], line["model_response"], line["usage"], line["cost_usd"]) == (
        False, document["model"], usage, cost)


def test_stream_is_not_buffered_the_client_reads_event_one_while_upstream_holds_two(
        tmp_path: Path) -> None:
    """Pins streaming passthrough: the first SSE event must reach the client while the
    upstream is still holding the second back (a buffering gateway would time out here)."""
    hold = threading.Event()
    reply = Reply(chunks=ANTHROPIC_STREAM, hold=hold, hold_before=1)
    with Upstream() as upstream:
        upstream.replies["/v1/messages"] = reply
        write_config(tmp_path, upstream.url)
        with running_gateway(tmp_path) as port:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("POST", "/anthropic/v1/messages",
                               json.dumps(ANTHROPIC_REQUEST).encode(),
                               {"x-api-key": TOKEN_A})
            response = connection.getresponse()
            first = b""
            while not first.endswith(b"\n\n"):
                first += response.read1(65536)
            assert first == ANTHROPIC_STREAM[0] and reply.sent == [0] and not hold.is_set()
            hold.set()
            rest = response.read()
            connection.close()
    assert first + rest == b"".join(ANTHROPIC_STREAM)
    assert records(tmp_path)[0]["usage"]["output"] == 57


def test_upstream_errors_pass_through_with_their_status(tmp_path: Path) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    with Upstream() as upstream:
        upstream.replies["/v1/messages"] = Reply(status=529, json_body=overloaded)
        write_config(tmp_path, upstream.url)
        with running_gateway(tmp_path) as port:
            answer = call(port, "/anthropic/v1/messages", ANTHROPIC_REQUEST,
                          headers={"x-api-key": TOKEN_A})
    assert (answer.status, answer.json()) == (529, overloaded)
    [line] = records(tmp_path)
    assert (line["status"], line["refused"], line["usage"], line["cost_usd"]) == (
        529, None, None, None)


def test_client_sockets_have_nodelay_and_the_backlog_takes_eight_arms_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pins two stalls the bench found: with Nagle on, every response waited ~40 ms for
    the client's delayed ACK; with the default backlog of 5, eight streams opened at once
    lost SYNs and started 1 s late."""
    from gateway import server

    seen: list[int] = []
    setup = server.Handler.setup

    def spy(handler: server.Handler) -> None:
        setup(handler)
        seen.append(handler.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    monkeypatch.setattr(server.Handler, "setup", spy)
    with Upstream() as upstream:
        write_config(tmp_path, upstream.url)
        with running_gateway(tmp_path) as port:
            call(port, "/healthz", method="GET")
    assert seen == [1] and server.GatewayServer.request_queue_size == 128


def test_a_client_gone_mid_stream_still_leaves_one_line(tmp_path: Path) -> None:
    """The agent killed mid-stream: its request is still on record (status as sent, the
    usage the stream had shown so far: message_start's, the delta never came)."""
    hold = threading.Event()
    with Upstream() as upstream:
        upstream.replies["/v1/messages"] = Reply(chunks=ANTHROPIC_STREAM, hold=hold)
        write_config(tmp_path, upstream.url)
        with running_gateway(tmp_path) as port:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("POST", "/anthropic/v1/messages",
                               json.dumps(ANTHROPIC_REQUEST).encode(), {"x-api-key": TOKEN_A})
            response = connection.getresponse()
            response.read1(65536)
            assert connection.sock is not None
            # SO_LINGER 0: close sends RST, so the gateway's next write fails at once
            connection.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            connection.close()
            threading.Event().wait(0.2)
            hold.set()
            lines = tmp_path / "records" / "s1" / "requests.jsonl"
            for _ in range(100):
                if lines.exists():
                    break
                threading.Event().wait(0.05)
            [line] = records(tmp_path)
    assert (line["status"], line["refused"], line["model_response"], line["usage"]) == (
        200, None, "claude-x-20260101",
        {"input": 120, "output": 1, "cache_read": 400, "cache_write": 30, "reasoning": 0})


def test_an_arm_past_its_in_flight_limit_gets_429_and_another_arm_is_served(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One arm holding MAX_IN_FLIGHT streams open cannot take the gateway from the others:
    its next request is a 429 in the provider's shape (not forwarded, not counted against
    its budget), while arm b's request goes through."""
    monkeypatch.setattr(server_mod, "MAX_IN_FLIGHT", 2)
    hold = threading.Event()
    reply = Reply(chunks=ANTHROPIC_STREAM, hold=hold, hold_before=1)
    with Upstream() as upstream:
        upstream.replies["/v1/messages"] = reply
        write_config(tmp_path, upstream.url)
        with running_gateway(tmp_path) as port:
            streams = []
            for _ in range(2):
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                connection.request("POST", "/anthropic/v1/messages",
                                   json.dumps(ANTHROPIC_REQUEST).encode(), {"x-api-key": TOKEN_A})
                response = connection.getresponse()
                response.read1(65536)  # the first event: the stream is open upstream
                streams.append((connection, response))
            busy = call(port, "/anthropic/v1/messages", ANTHROPIC_REQUEST,
                        headers={"x-api-key": TOKEN_A})
            other = threading.Thread(target=lambda: call(
                port, "/anthropic/v1/messages", ANTHROPIC_REQUEST, headers={"x-api-key": TOKEN_B}))
            other.start()
            hold.set()
            other.join(10)
            for connection, response in streams:
                response.read()
                connection.close()
    assert (busy.status, busy.json()["error"]) == (429, {
        "type": "rate_limit_error",
        "message": "bakeoff gateway: this arm already has 2 requests in flight; retry"})
    assert len(upstream.seen) == 3  # a's two and b's one; never a's third
    lines = records(tmp_path)
    assert sorted((r["arm"], r.get("refused") or "") for r in lines) == [
        ("a", ""), ("a", ""), ("a", "too_busy"), ("b", "")]
