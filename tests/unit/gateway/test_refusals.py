"""What the gateway refuses, with the exact status and provider-shaped body each CLI
knows, recorded and never forwarded."""

from __future__ import annotations

import gzip
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from gateway import records as records_mod
from tests.unit.gateway.harness import (
    TOKEN_A,
    Reply,
    Upstream,
    call,
    records,
    running_gateway,
    write_config,
)
from tests.unit.gateway.streams import ANTHROPIC_JSON, PRICES, RESPONSES_JSON

ANTHROPIC = ("/anthropic/v1/messages", {"x-api-key": TOKEN_A}, "claude-x", ANTHROPIC_JSON)
OPENAI = ("/openai/v1/responses", {"Authorization": f"Bearer {TOKEN_A}"}, "gpt-x",
          RESPONSES_JSON)


def anthropic_error(kind: str, message: str) -> dict[str, object]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def openai_error(kind: str, message: str, code: str | None) -> dict[str, object]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


UNKNOWN_TOKEN = ("bakeoff gateway: unknown token (send the token the sandbox was given as "
                 "x-api-key, Authorization: Bearer, x-goog-api-key or ?key=)")
SERVED = ("POST /anthropic/v1/messages[/count_tokens], /openai/v1/responses, "
          "/openai/v1/chat/completions, /gemini/v1beta/models/MODEL:generateContent "
          "(or :streamGenerateContent, :countTokens)")


@pytest.mark.parametrize(("path", "headers", "expected"), [
    ("/anthropic/v1/messages", {"x-api-key": "tok-guess"},
     anthropic_error("authentication_error", UNKNOWN_TOKEN)),
    ("/openai/v1/responses", {"Authorization": "Bearer tok-guess"},
     openai_error("invalid_request_error", UNKNOWN_TOKEN, "invalid_api_key")),
    ("/openai/v1/responses", {}, openai_error("invalid_request_error", UNKNOWN_TOKEN,
                                              "invalid_api_key")),
])
def test_unknown_token_is_401_never_forwarded_and_only_in_refused_jsonl(
        tmp_path: Path, path: str, headers: dict[str, str], expected: dict[str, object]
        ) -> None:
    with Upstream() as upstream:
        write_config(tmp_path, upstream.url)
        with running_gateway(tmp_path) as port:
            answer = call(port, path + "?beta=true", {"model": "m"}, headers=headers)
    assert (answer.status, answer.json()) == (401, expected)
    assert upstream.seen == []
    [line] = [json.loads(t) for t in (tmp_path / "records" / "_refused.jsonl").read_text()
              .splitlines()]
    line.pop("time")
    assert line == {"provider": path.split("/")[1], "method": "POST", "path": path,
                    "status": 401, "refused": "unknown_token"}
    assert "tok-guess" not in (tmp_path / "records" / "_refused.jsonl").read_text()
    assert not (tmp_path / "records" / "s1").exists()


@pytest.mark.parametrize(("route", "status", "expected"), [
    (ANTHROPIC, 404, anthropic_error(
        "not_found_error", "bakeoff gateway: model 'claude-big' is not allowed for this arm "
        "(allowed: claude-x, gpt-x; widen it with allow_models)")),
    (OPENAI, 400, openai_error(
        "invalid_request_error", "bakeoff gateway: model 'claude-big' is not allowed for this "
        "arm (allowed: claude-x, gpt-x; widen it with allow_models)", "model_not_found")),
])
def test_model_outside_the_allow_list_is_refused_in_provider_shape(
        tmp_path: Path, route: tuple[str, dict[str, str], str, dict[str, object]],
        status: int, expected: dict[str, object]) -> None:
    path, headers, _, _ = route
    with Upstream() as upstream:
        write_config(tmp_path, upstream.url, models=["claude-x", "gpt-x"])
        with running_gateway(tmp_path) as port:
            answer = call(port, path, {"model": "claude-big"}, headers=headers)
    assert (answer.status, answer.json()) == (status, expected)
    assert upstream.seen == []
    [line] = records(tmp_path)
    assert (line["status"], line["refused"], line["model_requested"], line["usage"]) == (
        status, "model_not_allowed", "claude-big", None)
    body = tmp_path / "records" / "s1" / line["response_body"]
    assert json.loads(body.read_bytes()) == expected


def budget_refusal(route: tuple[str, dict[str, str], str, dict[str, object]], limit: str
                   ) -> tuple[int, dict[str, object]]:
    message = f"bakeoff gateway: budget exhausted ({limit})"
    if route is ANTHROPIC:
        return 400, anthropic_error("invalid_request_error", message)
    return 429, openai_error("insufficient_quota", message, "insufficient_quota")


@pytest.mark.parametrize("route", [ANTHROPIC, OPENAI], ids=["anthropic", "openai"])
@pytest.mark.parametrize(("budget", "limit", "served"), [
    ({"max_requests": 2}, "max_requests_per_arm=2", 2),
    # ANTHROPIC_JSON uses 23 tokens, RESPONSES_JSON 49: one request passes 20
    ({"max_tokens": 20}, "max_tokens_per_arm=20", 1),
    ({"max_usd": 0.0001}, "max_usd_per_arm=0.0001", 1),
], ids=["requests", "tokens", "usd"])
def test_each_budget_refuses_the_request_after_it_is_spent(
        tmp_path: Path, route: tuple[str, dict[str, str], str, dict[str, object]],
        budget: dict[str, Any], limit: str, served: int) -> None:
    path, headers, model, document = route
    with Upstream() as upstream:
        upstream.replies["/" + path.split("/", 2)[2]] = Reply(json_body=document)
        write_config(tmp_path, upstream.url, prices=PRICES, **budget)
        with running_gateway(tmp_path) as port:
            answers = [call(port, path, {"model": model}, headers=headers) for _ in range(4)]
    assert [a.status for a in answers[:served]] == [200] * served
    assert [(a.status, a.json()) for a in answers[served:]] == [
        budget_refusal(route, limit)] * (4 - served)
    assert len(upstream.seen) == served
    assert [line["refused"] for line in records(tmp_path)] == (
        [None] * served + ["budget_exhausted"] * (4 - served))


def test_budget_of_one_arm_leaves_the_other_arm_alone(tmp_path: Path) -> None:
    path, _, model, document = ANTHROPIC
    with Upstream() as upstream:
        upstream.replies["/v1/messages"] = Reply(json_body=document)
        write_config(tmp_path, upstream.url, max_requests=1)
        with running_gateway(tmp_path) as port:
            statuses = [call(port, path, {"model": model}, headers={"x-api-key": token}).status
                        for token in (TOKEN_A, TOKEN_A, "tok-arm-b-77e0aa")]
    assert statuses == [200, 400, 200]


@pytest.mark.parametrize(("path", "headers", "status", "expected"), [
    ("/anthropic/v1/complete", {"x-api-key": TOKEN_A}, 404, anthropic_error(
        "not_found_error", "bakeoff gateway: no route for POST /anthropic/v1/complete "
        f"(served: {SERVED})")),
    ("/v1/messages", {"Authorization": f"Bearer {TOKEN_A}"}, 404, openai_error(
        "invalid_request_error", f"bakeoff gateway: no route for POST /v1/messages (served: "
        f"{SERVED})", "unknown_url")),
])
def test_unknown_path_is_404_in_provider_shape_and_recorded(
        tmp_path: Path, path: str, headers: dict[str, str], status: int,
        expected: dict[str, object]) -> None:
    with Upstream() as upstream:
        write_config(tmp_path, upstream.url)
        with running_gateway(tmp_path) as port:
            answer = call(port, path, {"model": "claude-x"}, headers=headers)
    assert (answer.status, answer.json()) == (status, expected)
    assert upstream.seen == []
    [line] = records(tmp_path)
    assert (line["path"], line["status"], line["refused"], line["request_body"]) == (
        path, 404, "bad_path", "bodies/a-1.request.json")


def test_unreachable_upstream_is_502_upstream_error(tmp_path: Path) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()  # nothing listens there now
    write_config(tmp_path, dead)
    with running_gateway(tmp_path) as port:
        answer = call(port, "/openai/v1/responses", {"model": "gpt-x"},
                      headers={"Authorization": f"Bearer {TOKEN_A}"})
    assert answer.status == 502
    error = answer.json()["error"]
    assert (error["type"], error["code"]) == ("server_error", "upstream_error")
    assert error["message"].startswith(
        f"bakeoff gateway: upstream {dead} did not answer POST /v1/responses: "
        "ConnectionRefusedError")
    [line] = records(tmp_path)
    assert (line["status"], line["refused"]) == (502, "upstream_error")


def test_body_that_is_not_a_json_object_is_400_bad_body(tmp_path: Path) -> None:
    with Upstream() as upstream:
        write_config(tmp_path, upstream.url)
        with running_gateway(tmp_path) as port:
            answer = call(port, "/anthropic/v1/messages", b"[1, 2]",
                          headers={"x-api-key": TOKEN_A})
    assert (answer.status, answer.json()) == (400, anthropic_error(
        "invalid_request_error", "bakeoff gateway: the request body is not a JSON object"))
    assert upstream.seen == [] and records(tmp_path)[0]["refused"] == "bad_body"


def test_gzip_body_is_decoded_and_forwarded_plain_and_zstd_is_415(tmp_path: Path) -> None:
    request = {"model": "claude-x", "messages": []}
    with Upstream() as upstream:
        upstream.replies["/v1/messages"] = Reply(json_body=ANTHROPIC_JSON)
        write_config(tmp_path, upstream.url)
        with running_gateway(tmp_path) as port:
            zipped = call(port, "/anthropic/v1/messages", gzip.compress(json.dumps(
                request).encode()), headers={"x-api-key": TOKEN_A, "Content-Encoding": "gzip"})
            zstd = call(port, "/anthropic/v1/messages", b"\x28\xb5\x2f\xfd",
                        headers={"x-api-key": TOKEN_A, "Content-Encoding": "zstd"})
    assert zipped.status == 200
    [seen] = upstream.seen
    assert json.loads(seen.body) == request and "content-encoding" not in seen.headers
    assert (zstd.status, zstd.json()) == (415, anthropic_error(
        "invalid_request_error", "bakeoff gateway: Content-Encoding zstd is not supported "
        "(send gzip, deflate or none)"))
    assert [line["refused"] for line in records(tmp_path)] == [None, "bad_body"]


def test_refused_requests_stop_being_written_past_the_cap_with_one_line_saying_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An arm looping refused requests (a model it may not call, a guessed token) cannot
    fill the disk: MAX_REFUSED_LINES lines, one `records_capped`, then nothing; a
    restarted gateway goes on counting from what is on disk."""
    monkeypatch.setattr(records_mod, "MAX_REFUSED_LINES", 3)
    with Upstream() as upstream:
        write_config(tmp_path, upstream.url, models=["claude-x"])
        for _ in range(2):  # a restart between the two rounds
            with running_gateway(tmp_path) as port:
                for _ in range(3):
                    assert call(port, "/anthropic/v1/messages", {"model": "claude-other"},
                                headers={"x-api-key": TOKEN_A}).status == 404
                    assert call(port, "/anthropic/v1/messages", {"model": "m"},
                                headers={"x-api-key": "tok-guess"}).status == 401
    assert upstream.seen == []
    assert [r["refused"] for r in records(tmp_path)] == [
        "model_not_allowed"] * 3 + ["records_capped"]
    unknown = (tmp_path / "records" / "_refused.jsonl").read_text().splitlines()
    assert [json.loads(t)["refused"] for t in unknown] == ["unknown_token"] * 3 + [
        "records_capped"]
    assert len(list((tmp_path / "records" / "s1" / "bodies").iterdir())) == 6  # 3 x 2 bodies
