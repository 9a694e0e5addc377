"""Named upstreams (`[[gateway.upstreams]]`, issue 32): two Anthropic-compatible endpoints
with different keys in one gateway; each arm's token reaches its own upstream only, with
that upstream's key; a request on another protocol's route, or a path naming another
upstream, is refused in the provider's shape, recorded, and never forwarded."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway import config as config_mod
from gateway.config import ConfigError
from gateway.errors import Provider
from gateway.server import Gateway, GatewayServer
from tests.unit.gateway.harness import (
    ANTHROPIC_KEY,
    Reply,
    Upstream,
    call,
    records,
)
from tests.unit.gateway.streams import (
    ANTHROPIC_JSON,
    ANTHROPIC_STREAM,
    CHAT_STREAM,
    GEMINI_SSE,
    GEMINI_USAGE,
    RESPONSES_STREAM,
)

VENDOR_KEY = "sk-ant-VENDOR-1111111111"
MOONSHOT_KEY = "sk-moonshot-2222222222"
ENVIRON = {"BAKEOFF_KEY_0": ANTHROPIC_KEY, "VENDOR_KEY": VENDOR_KEY,
           "MOONSHOT_KEY": MOONSHOT_KEY}
OPUS, KIMI, LEGACY = "tok-opus-0a0a0a", "tok-kimi-1b1b1b", "tok-legacy-2c2c2c"
STRICT, LOST = "tok-strict-3d3d3d", "tok-lost-4e4e4e"
KIMI_JSON: dict[str, Any] = {**ANTHROPIC_JSON, "id": "msg_k", "model": "kimi-k9"}


def message(model: str) -> dict[str, Any]:
    return {"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}


def grant(arm: str, upstream: str | None, models: list[str] | None = None
          ) -> dict[str, Any]:
    return {"stage": "s1", "arm": arm, "role": "arm", "models": models, "upstream": upstream,
            "keys": {} if upstream else {"anthropic": "BAKEOFF_KEY_0"}}


@dataclass
class Bench:
    port: int
    vendor: Upstream
    moonshot: Upstream
    implicit: Upstream      # the [gateway] anthropic URL: the legacy arm's
    state: Path

    def untouched(self) -> bool:
        return not (self.vendor.seen or self.moonshot.seen or self.implicit.seen)


@contextmanager
def bench(state: Path) -> Iterator[Bench]:
    """Arm `opus` on upstream `vendor`, arm `kimi` on `moonshot` (both Anthropic-compatible,
    each its own key), arm `legacy` on the implicit `anthropic` upstream."""
    with ExitStack() as stack:
        vendor, moonshot, implicit = (stack.enter_context(Upstream()) for _ in range(3))
        for server, body in ((vendor, ANTHROPIC_JSON), (moonshot, KIMI_JSON),
                             (implicit, ANTHROPIC_JSON)):
            server.replies["/v1/messages"] = Reply(json_body=body)
        config = {
            "upstreams": {
                "anthropic": implicit.url, "openai": implicit.url,
                "vendor": {"protocol": "anthropic", "base_url": vendor.url, "key": "VENDOR_KEY"},
                "moonshot": {"protocol": "anthropic", "base_url": moonshot.url + "/anthropic",
                             "key": "MOONSHOT_KEY",
                             "prices": {"kimi-k9": {"input": 0.6, "output": 2.5,
                                                    "cache_read": 0.06, "cache_write": 0.6}}}},
            "tokens": {OPUS: grant("opus", "vendor"), KIMI: grant("kimi", "moonshot"),
                       LEGACY: grant("legacy", None),
                       STRICT: grant("strict", "moonshot", ["kimi-k9"]),
                       LOST: grant("lost", "moonshot-cn")},
            "prices": {"kimi-k9": {"input": 100.0, "output": 100.0}}}
        state.mkdir(parents=True, exist_ok=True)
        (state / "config.json").write_text(json.dumps(config), encoding="utf-8")
        moonshot.replies["/anthropic/v1/messages"] = Reply(json_body=KIMI_JSON)
        with running_gateway_with(state) as port:
            yield Bench(port, vendor, moonshot, implicit, state)


@contextmanager
def running_gateway_with(state: Path) -> Iterator[int]:
    """The gateway on loopback, with this module's keys in its environment."""
    server = GatewayServer(("127.0.0.1", 0), Gateway(state, ENVIRON))
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def anthropic_call(port: int, token: str, model: str, path: str = "/anthropic/v1/messages"
                   ) -> Any:
    return call(port, path, message(model),
                headers={"x-api-key": token, "anthropic-version": "2023-06-01"})


def test_each_arm_reaches_its_own_upstream_with_its_own_key(tmp_path: Path) -> None:
    with bench(tmp_path) as b:
        opus = anthropic_call(b.port, OPUS, "claude-x")
        kimi = anthropic_call(b.port, KIMI, "kimi-k9")
        legacy = anthropic_call(b.port, LEGACY, "claude-x")
    assert (opus.status, opus.json()) == (200, ANTHROPIC_JSON)
    assert (kimi.status, kimi.json()) == (200, KIMI_JSON)
    assert legacy.status == 200
    [to_vendor], [to_moonshot], [to_implicit] = b.vendor.seen, b.moonshot.seen, b.implicit.seen
    assert (to_vendor.path, to_vendor.headers["x-api-key"]) == ("/v1/messages", VENDOR_KEY)
    assert (to_moonshot.path, to_moonshot.headers["x-api-key"]) == (
        "/anthropic/v1/messages", MOONSHOT_KEY)
    assert (to_implicit.path, to_implicit.headers["x-api-key"]) == ("/v1/messages",
                                                                    ANTHROPIC_KEY)
    assert json.loads(to_moonshot.body) == message("kimi-k9")
    lines = {line["arm"]: line for line in records(tmp_path)}
    assert {arm: (line["provider"], line["upstream"], line["status"], line["refused"])
            for arm, line in lines.items()} == {
        "opus": ("anthropic", "vendor", 200, None),
        "kimi": ("anthropic", "moonshot", 200, None),
        "legacy": ("anthropic", "anthropic", 200, None)}
    # 11 in, 5 cache read, 7 out at moonshot's own prices (not [gateway.prices]' 100/100).
    assert lines["kimi"]["cost_usd"] == pytest.approx((11 * 0.6 + 5 * 0.06 + 7 * 2.5) / 1e6)
    assert lines["kimi"]["usage"] == {"input": 11, "output": 7, "cache_read": 5,
                                      "cache_write": 0, "reasoning": 0}


def test_a_path_naming_another_upstream_is_refused_and_its_key_never_used(
        tmp_path: Path) -> None:
    """The kimi arm asks for `vendor` by path: 403 in Anthropic's shape, recorded as
    wrong_upstream under the upstream it was meant for; vendor's key crosses no arm."""
    with bench(tmp_path) as b:
        crossed = anthropic_call(b.port, KIMI, "claude-x", "/vendor/v1/messages")
        own = anthropic_call(b.port, KIMI, "kimi-k9", "/moonshot/v1/messages")
        legacy = anthropic_call(b.port, LEGACY, "claude-x", "/moonshot/v1/messages")
    message_text = ("bakeoff gateway: arm kimi's token does not reach upstream 'vendor' "
                    "(it reaches moonshot only)")
    assert (crossed.status, crossed.json()) == (403, {"type": "error", "error": {
        "type": "permission_error", "message": message_text}})
    assert legacy.status == 403 and legacy.json()["error"]["message"] == (
        "bakeoff gateway: arm legacy's token does not reach upstream 'moonshot' (it reaches "
        "the implicit upstream of each provider it holds a key for only)")
    assert own.status == 200  # the honest twin: its own upstream, named by path
    assert b.vendor.seen == [] and b.implicit.seen == []
    assert [s.headers["x-api-key"] for s in b.moonshot.seen] == [MOONSHOT_KEY]
    assert [(line["arm"], line["path"], line["upstream"], line["status"], line["refused"])
            for line in records(tmp_path)] == [
        ("kimi", "/vendor/v1/messages", "vendor", 403, "wrong_upstream"),
        ("kimi", "/moonshot/v1/messages", "moonshot", 200, None),
        ("legacy", "/moonshot/v1/messages", "moonshot", 403, "wrong_upstream")]


@pytest.mark.parametrize(("path", "headers", "status", "body"), [
    ("/openai/v1/responses", {"Authorization": f"Bearer {KIMI}"}, 403,
     {"error": {"message": "bakeoff gateway: arm kimi's token does not reach upstream "
                           "'openai' (it reaches moonshot only)",
                "type": "invalid_request_error", "param": None, "code": "wrong_upstream"}}),
    ("/gemini/v1beta/models/gemini-x:generateContent", {"x-goog-api-key": KIMI}, 403,
     {"error": {"code": 403, "message": "bakeoff gateway: arm kimi's token does not reach "
                                        "upstream 'gemini' (it reaches moonshot only)",
                "status": "PERMISSION_DENIED"}}),
])
def test_another_protocol_s_route_is_refused_in_that_provider_s_shape(
        tmp_path: Path, path: str, headers: dict[str, str], status: int,
        body: dict[str, Any]) -> None:
    request = {"model": "gpt-x", "input": "hi", "contents": []}
    with bench(tmp_path) as b:
        answer = call(b.port, path, request, headers=headers)
    assert (answer.status, answer.json()) == (status, body)
    assert b.untouched()
    [line] = records(tmp_path)
    assert (line["arm"], line["upstream"], line["refused"], line["status"]) == (
        "kimi", path.split("/")[1], "wrong_upstream", 403)


def test_both_upstream_keys_are_redacted_from_every_stored_body(tmp_path: Path) -> None:
    """A request body that carries another upstream's key value (pasted by an arm that
    somehow learnt it) is stored with the value replaced, like every grant's key."""
    with bench(tmp_path) as b:
        body = {**message("kimi-k9"), "metadata": {"note": f"{VENDOR_KEY} {MOONSHOT_KEY}"}}
        call(b.port, "/anthropic/v1/messages", body, headers={"x-api-key": KIMI})
    stored = (tmp_path / "records" / "s1" / "bodies" / "kimi-1.request.json").read_text()
    assert VENDOR_KEY not in stored and MOONSHOT_KEY not in stored
    assert json.loads(stored)["metadata"] == {"note": "[REDACTED] [REDACTED]"}


def test_config_json_reads_implicit_and_named_upstreams() -> None:
    parsed = config_mod.parse({"upstreams": {
        "openai": "https://api.openai.com",
        "qwen": {"protocol": "openai", "base_url": "https://dashscope.example/compatible",
                 "key": "QWEN_KEY", "prices": {"qwen-9": {"input": 1, "output": 2}}}},
        "tokens": {"t": {"stage": "s", "arm": "a", "upstream": "qwen"}}})
    assert parsed.upstreams == {
        "openai": config_mod.Upstream("openai", Provider.OPENAI, "https://api.openai.com"),
        "qwen": config_mod.Upstream("qwen", Provider.OPENAI,
                                    "https://dashscope.example/compatible", "QWEN_KEY",
                                    {"qwen-9": config_mod.Price(1.0, 2.0)})}
    assert parsed.tokens["t"].upstream == "qwen"
    assert parsed.key_names() == {"QWEN_KEY"}


@pytest.mark.parametrize(("upstreams", "message"), [
    ({"moonshot": "https://api.moonshot.example"},
     "config.json: upstreams.moonshot: a bare URL is only for anthropic/openai/gemini; a "
     "named upstream is an object {protocol, base_url, key}"),
    ({"m": {"protocol": "grpc", "base_url": "https://x", "key": "K"}},
     "config.json: upstreams.m needs a protocol (anthropic/openai/gemini)"),
    ({"m": {"protocol": "anthropic", "base_url": "https://x"}},
     "config.json: upstreams.m.key must name the variable with its key"),
    ({"m": {"protocol": "anthropic", "base_url": "ftp://x", "key": "K"}},
     "config.json: upstreams.m.base_url must be an http(s) URL"),
])
def test_a_malformed_upstream_is_a_config_error_naming_it(upstreams: dict[str, Any],
                                                          message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config_mod.parse({"upstreams": upstreams})
    assert str(raised.value) == message


QWEN_KEY, GOOGLE_KEY = "sk-qwen-3333333333", "AIza-GOOGLE-4444444444"


@pytest.mark.parametrize(("protocol", "path", "headers", "reply_path", "credential", "key",
                          "chunks", "usage"), [
    ("openai", "/openai/v1/responses", {"Authorization": "Bearer tok-x"}, "/v1/responses",
     "authorization", f"Bearer {QWEN_KEY}", RESPONSES_STREAM,
     {"input": 300, "output": 80, "cache_read": 200, "cache_write": 0, "reasoning": 64}),
    ("openai", "/openai/v1/chat/completions", {"Authorization": "Bearer tok-x"},
     "/v1/chat/completions", "authorization", f"Bearer {QWEN_KEY}", CHAT_STREAM,
     {"input": 80, "output": 12, "cache_read": 10, "cache_write": 0, "reasoning": 0}),
    ("gemini", "/gemini/v1beta/models/gemini-x:streamGenerateContent?alt=sse&key=tok-x", {},
     "/v1beta/models/gemini-x:streamGenerateContent", "x-goog-api-key", GOOGLE_KEY,
     GEMINI_SSE, GEMINI_USAGE),
    ("anthropic", "/anthropic/v1/messages", {"x-api-key": "tok-x"}, "/v1/messages",
     "x-api-key", MOONSHOT_KEY, ANTHROPIC_STREAM,
     {"input": 120, "output": 57, "cache_read": 400, "cache_write": 30, "reasoning": 0}),
])
def test_a_named_upstream_of_each_protocol_gets_its_key_where_its_api_takes_one(
        tmp_path: Path, protocol: str, path: str, headers: dict[str, str], reply_path: str,
        credential: str, key: str, chunks: list[bytes], usage: dict[str, int]) -> None:
    """Streamed, each protocol's credential header carries the named upstream's key (the
    token, even as Gemini's ?key=, never leaves the gateway); usage read as it passes."""
    environ = {"QWEN_KEY": QWEN_KEY, "GOOGLE_KEY": GOOGLE_KEY, "MOONSHOT_KEY": MOONSHOT_KEY}
    variable = {"openai": "QWEN_KEY", "gemini": "GOOGLE_KEY", "anthropic": "MOONSHOT_KEY"}
    with Upstream() as provider:
        provider.replies[reply_path] = Reply(chunks=chunks)
        config = {"upstreams": {"own": {"protocol": protocol, "base_url": provider.url,
                                        "key": variable[protocol]}},
                  "tokens": {"tok-x": grant("x", "own")}}
        tmp_path.joinpath("config.json").write_text(json.dumps(config))
        server = GatewayServer(("127.0.0.1", 0), Gateway(tmp_path, environ))
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        try:
            body = {"model": "m-1", "stream": True, "messages": [], "input": "hi"}
            answer = call(server.server_address[1], path, body, headers=headers)
        finally:
            server.shutdown()
            server.server_close()
    assert (answer.status, answer.body) == (200, b"".join(chunks))
    [seen] = provider.seen
    assert seen.headers[credential] == key and "tok-x" not in json.dumps(seen.headers)
    assert "tok-x" not in seen.path
    [line] = records(tmp_path)
    assert (line["upstream"], line["provider"], line["usage"], line["refused"]) == (
        "own", protocol, usage, None)


def test_another_upstream_is_refused_as_such_before_the_model_is_checked(
        tmp_path: Path) -> None:
    """An arm allowed only kimi-k9 asks vendor for claude-x: wrong_upstream, never counted
    as a model_not_allowed (which rig.wire reads as a CLI's rewrite of the model)."""
    with bench(tmp_path) as b:
        crossed = anthropic_call(b.port, STRICT, "claude-x", "/vendor/v1/messages")
        own_path = anthropic_call(b.port, STRICT, "claude-x")
    assert (crossed.status, own_path.status) == (403, 404)
    assert [line["refused"] for line in records(tmp_path)] == ["wrong_upstream",
                                                               "model_not_allowed"]
    assert b.untouched()


def test_a_grant_naming_an_upstream_the_configuration_lacks_is_404_never_elsewhere(
        tmp_path: Path) -> None:
    with bench(tmp_path) as b:
        answer = anthropic_call(b.port, LOST, "kimi-k9")
    assert (answer.status, answer.json()["error"]["message"]) == (
        404, "bakeoff gateway: the gateway has no anthropic upstream 'moonshot-cn' (arm lost)")
    assert b.untouched()
    [line] = records(tmp_path)
    assert (line["upstream"], line["refused"]) == ("moonshot-cn", "bad_path")
