"""The scripted provider (tests/fakes/scripted_provider.py) speaks each wire format exactly.

It runs on loopback in a thread; every test sends real HTTP and checks the exact events.
"""

from __future__ import annotations

import gzip
import http.client
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import scripted_provider as sp

SHELL = "echo fixed > /work/out.txt && git add -A && git commit -qm fix"
SCRIPT = {"steps": [{"shell": SHELL}, {"say": "done"}],
          "usage": {"input": 100, "output": 20, "cache_read": 3, "cache_write": 4, "reasoning": 5}}
BASH = [{"name": "Bash", "input_schema": {"type": "object"}}]
CODE_MODE = [{"type": "additional_tools", "role": "developer", "tools": [
    {"type": "namespace", "name": "functions", "description": "",
     "tools": [{"type": "custom", "name": "exec", "description": "run JavaScript"}]}]}]


@dataclass
class Provider:
    port: int
    log: Path

    def post(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None,
             raw: bytes | None = None) -> tuple[int, str, str]:
        """(status, content type, body text) of one POST."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.request("POST", path, raw if raw is not None else json.dumps(body).encode(),
                     {"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        text = response.read().decode()
        conn.close()
        return response.status, response.getheader("Content-Type") or "", text

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[[dict[str, Any]], Provider]]:
    servers: list[sp.ProviderServer] = []

    def run(script: dict[str, Any]) -> Provider:
        log = tmp_path / f"requests-{len(servers)}.jsonl"
        server = sp.ProviderServer(("127.0.0.1", 0), sp.parse_script(script), sp.RequestLog(log))
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return Provider(server.server_address[1], log)

    yield run
    for server in servers:
        server.shutdown()
        server.server_close()


def sse(text: str) -> list[tuple[str | None, Any]]:
    """(event name, parsed data) of each SSE event."""
    events = []
    for chunk in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in chunk.splitlines())
        data = fields["data"]
        events.append((fields.get("event"), data if data == "[DONE]" else json.loads(data)))
    return events


def messages_body(tool_results: int, stream: bool = True) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the bug"}]
    for n in range(tool_results):
        messages += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}",
                                               "name": "Bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}",
                                          "content": ""}]}]
    return {"model": "claude-opus-4-8", "stream": stream, "max_tokens": 64000,
            "output_config": {"effort": "high"}, "tools": BASH, "messages": messages}


def responses_body(outputs: int, tools: str = "code_mode", stream: bool = True
                   ) -> dict[str, Any]:
    items: list[dict[str, Any]] = list(CODE_MODE) if tools == "code_mode" else []
    items.append({"type": "message", "role": "user",
                  "content": [{"type": "input_text", "text": "Fix the bug"}]})
    for n in range(outputs):
        items += [{"type": "custom_tool_call", "call_id": f"c{n}", "name": "exec", "input": ""},
                  {"type": "custom_tool_call_output", "call_id": f"c{n}", "output": "ok"}]
    body: dict[str, Any] = {"model": "gpt-6.1-sol", "stream": stream, "input": items,
                            "reasoning": {"effort": "high"}}
    body["tools"] = ([{"type": "function", "name": "exec_command"}]
                     if tools == "functions" else [])
    return body


# ----------------------------------------------------------------------- Anthropic Messages

def test_messages_stream_shell_step_is_a_bash_tool_use_in_api_event_order(start):
    status, ctype, text = start(SCRIPT).post("/v1/messages?beta=true", messages_body(0))
    events = sse(text)
    assert (status, ctype) == (200, "text/event-stream")
    assert [name for name, _ in events] == [
        "message_start", "content_block_start", "ping", "content_block_delta",
        "content_block_delta", "content_block_stop", "message_delta", "message_stop"]
    assert all(name == data["type"] for name, data in events)
    start_msg = events[0][1]["message"]
    assert start_msg["model"] == "claude-opus-4-8"
    assert start_msg["usage"] == {"input_tokens": 100, "cache_creation_input_tokens": 4,
                                  "cache_read_input_tokens": 3, "output_tokens": 1}
    assert events[1][1]["content_block"] == {"type": "tool_use", "id": "toolu_scripted_0000",
                                             "name": "Bash", "input": {}}
    partial = "".join(d["delta"]["partial_json"] for n, d in events if n == "content_block_delta")
    assert json.loads(partial) == {"command": SHELL, "description": sp.BASH_DESCRIPTION}
    assert events[6][1] == {"type": "message_delta", "usage": {"output_tokens": 20},
                            "delta": {"stop_reason": "tool_use", "stop_sequence": None}}


def test_messages_stream_say_step_after_one_tool_result_ends_the_turn(start):
    _, _, text = start(SCRIPT).post("/v1/messages", messages_body(1))
    events = sse(text)
    assert [name for name, _ in events] == [
        "message_start", "content_block_start", "ping", "content_block_delta",
        "content_block_stop", "message_delta", "message_stop"]
    assert events[3][1]["delta"] == {"type": "text_delta", "text": "done"}
    assert events[5][1]["delta"]["stop_reason"] == "end_turn"


def test_messages_non_stream_is_one_message_object(start):
    status, ctype, text = start(SCRIPT).post("/v1/messages", messages_body(0, stream=False))
    body = json.loads(text)
    assert (status, ctype) == (200, "application/json")
    assert body["stop_reason"] == "tool_use"
    assert body["content"] == [{"type": "tool_use", "id": "toolu_scripted_0000", "name": "Bash",
                                "input": {"command": SHELL,
                                          "description": sp.BASH_DESCRIPTION}}]
    assert body["usage"] == {"input_tokens": 100, "cache_creation_input_tokens": 4,
                             "cache_read_input_tokens": 3, "output_tokens": 20}


def test_messages_side_request_offering_no_tools_gets_short_text(start):
    body = messages_body(0, stream=False) | {"tools": [], "model": "claude-haiku-4-5"}
    reply = json.loads(start(SCRIPT).post("/v1/messages", body)[2])
    assert (reply["content"], reply["model"]) == ([{"type": "text", "text": "ok"}],
                                                  "claude-haiku-4-5")


def test_a_request_without_tools_gets_its_say_step_a_judge_s_answer(start):
    """A judge runs without tools: its model's `say` is the answer, not the side text."""
    script = {"steps": [{"shell": SHELL}], "models": {"judge-1": {"steps": [{"say": "{}"}]}}}
    body = messages_body(0, stream=False) | {"tools": [], "model": "judge-1"}
    reply = json.loads(start(script).post("/v1/messages", body)[2])
    assert reply["content"] == [{"type": "text", "text": "{}"}]


def test_count_tokens_answers_the_scripted_input_tokens(start):
    status, _, text = start(SCRIPT).post("/v1/messages/count_tokens?beta=true",
                                         messages_body(0))
    assert (status, json.loads(text)) == (200, {"input_tokens": 100})


# ----------------------------------------------------------------------- OpenAI Responses

def test_responses_stream_shell_step_is_a_code_mode_exec_call(start):
    _, _, text = start(SCRIPT).post("/v1/responses", responses_body(0))
    events = sse(text)
    assert [name for name, _ in events] == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done",
        "response.output_item.done", "response.completed"]
    assert [d["sequence_number"] for _, d in events] == list(range(7))
    item = events[5][1]["item"]
    assert {k: item[k] for k in ("type", "name", "call_id", "status")} == {
        "type": "custom_tool_call", "name": "exec", "call_id": "call_scripted_0000",
        "status": "completed"}
    assert item["input"] == ('const r = await tools.exec_command({"cmd": "' + SHELL.replace(
        '"', '\\"') + '", "yield_time_ms": 30000});\ntext(JSON.stringify(r));')
    done = events[6][1]["response"]
    assert (done["status"], done["model"], done["output"]) == ("completed", "gpt-6.1-sol",
                                                               [item])
    assert done["usage"] == {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 3},
                             "output_tokens": 20,
                             "output_tokens_details": {"reasoning_tokens": 5},
                             "total_tokens": 120}


def test_responses_without_code_mode_gets_an_exec_command_function_call(start):
    events = sse(start(SCRIPT).post("/v1/responses", responses_body(0, "functions"))[2])
    assert [name for name, _ in events][2:6] == [
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done"]
    item = events[5][1]["item"]
    assert (item["type"], item["name"], json.loads(item["arguments"])) == (
        "function_call", "exec_command", {"cmd": SHELL})


def test_responses_say_step_after_one_tool_output_is_an_assistant_message(start):
    events = sse(start(SCRIPT).post("/v1/responses", responses_body(1))[2])
    assert [name for name, _ in events] == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.content_part.added", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.completed"]
    assert events[7][1]["item"]["content"] == [{"type": "output_text", "text": "done",
                                                "annotations": []}]


def test_responses_non_stream_is_one_completed_response(start):
    body = json.loads(start(SCRIPT).post("/v1/responses", responses_body(1, stream=False))[2])
    assert (body["object"], body["status"], body["usage"]["output_tokens"]) == (
        "response", "completed", 20)
    assert body["output"][0]["content"][0]["text"] == "done"


# ------------------------------------------------------------------ OpenAI Chat Completions

def test_chat_completions_stream_and_non_stream(start):
    """A tool call streams as the API sends it: id and name with empty arguments, then
    the arguments in parts; finish_reason and usage on chunks of their own."""
    provider = start(SCRIPT)
    body = {"model": "m", "tools": [{"type": "function", "function": {"name": "shell"}}],
            "messages": [{"role": "user", "content": "x"}]}
    events = sse(provider.post("/v1/chat/completions", body | {"stream": True})[2])
    assert [d if d == "[DONE]" else d["object"] for _, d in events] == [
        "chat.completion.chunk"] * 5 + ["[DONE]"]
    deltas = [d["choices"][0]["delta"] for _, d in events[:3]]
    assert deltas[0] == {"role": "assistant", "content": None, "tool_calls": [
        {"index": 0, "id": "call_scripted_0000", "type": "function",
         "function": {"name": "shell", "arguments": ""}}]}
    parts = "".join(d["tool_calls"][0]["function"]["arguments"] for d in deltas[1:])
    assert json.loads(parts) == {"command": SHELL} and all(
        set(d["tool_calls"][0]) == {"index", "function"} for d in deltas[1:])
    assert events[3][1]["choices"] == [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]
    assert (events[4][1]["choices"], events[4][1]["usage"]["prompt_tokens"]) == ([], 100)
    body["messages"].append({"role": "tool", "tool_call_id": "c", "content": ""})
    plain = json.loads(provider.post("/v1/chat/completions", body)[2])
    assert plain["choices"][0] == {"index": 0, "finish_reason": "stop",
                                   "message": {"role": "assistant", "content": "done"}}
    text = sse(provider.post("/v1/chat/completions", body | {"stream": True})[2])
    assert [d["choices"][0]["delta"] for _, d in text[:2]] == [
        {"role": "assistant", "content": ""}, {"content": "done"}]


@pytest.mark.parametrize(("offered", "name", "arguments"), [
    ("run_shell_command", "run_shell_command",
     {"command": SHELL, "description": sp.BASH_DESCRIPTION, "is_background": False}),
    ("bash", "bash", {"command": SHELL, "description": sp.BASH_DESCRIPTION}),
    ("read_file", "shell", {"command": SHELL})])
def test_the_shell_call_is_the_clients_own_shell_tool(start, offered, name, arguments):
    """Qwen Code's and Gemini CLI's run_shell_command, OpenCode's and mini-swe-agent's
    bash: the call names the tool the request offers, with the arguments it requires."""
    provider = start(SCRIPT)
    chat = {"model": "m", "tools": [{"type": "function", "function": {"name": offered}}],
            "messages": [{"role": "user", "content": "x"}]}
    call = json.loads(provider.post("/v1/chat/completions", chat)[2])[
        "choices"][0]["message"]["tool_calls"][0]["function"]
    assert (call["name"], json.loads(call["arguments"])) == (name, arguments)
    responses = {"model": "m", "input": [], "tools": [{"type": "function", "name": offered}]}
    item = json.loads(provider.post("/v1/responses", responses)[2])["output"][0]
    assert (item["name"], json.loads(item["arguments"])) == (name, arguments)
    messages = dict(messages_body(0, stream=False), tools=[{"name": offered}])
    block = json.loads(provider.post("/v1/messages", messages)[2])["content"][0]
    assert (block["name"], block["input"]) == (
        (name, arguments) if name != "shell" else
        ("Bash", {"command": SHELL, "description": sp.BASH_DESCRIPTION}))


# --------------------------------------------------------------------------------- Gemini API

def gemini_body(tool_results: int) -> dict[str, Any]:
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "Fix the bug"}]}]
    for _ in range(tool_results):
        contents += [{"role": "model", "parts": [{"functionCall": {"name": "x", "args": {}}}]},
                     {"role": "user", "parts": [{"functionResponse": {"name": "x",
                                                                      "response": {}}}]}]
    return {"contents": contents, "generationConfig": {"thinkingConfig": {
        "thinkingLevel": "HIGH"}}, "tools": [{"functionDeclarations": [
            {"name": "read_file"}, {"name": "run_shell_command"}]}]}


GEMINI = "/v1beta/models/gemini-9-pro:streamGenerateContent"


def test_gemini_sse_stream_is_a_function_call_with_the_final_usage_last(start):
    """streamGenerateContent?alt=sse: the functionCall whole in one chunk, the model in
    modelVersion, usageMetadata as the API counts it (prompt includes the cached
    tokens, candidates exclude the thoughts)."""
    provider = start(SCRIPT)
    status, ctype, text = provider.post(GEMINI + "?alt=sse", gemini_body(0))
    (only,) = sse(text)
    assert (status, ctype, only[0]) == (200, "text/event-stream", None)
    assert only[1] == {
        "candidates": [{"content": {"role": "model", "parts": [{"functionCall": {
            "name": "run_shell_command", "args": {"command": SHELL, "is_background": False,
                                                  "description": sp.BASH_DESCRIPTION}}}]},
            "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 103, "candidatesTokenCount": 15,
                          "thoughtsTokenCount": 5, "cachedContentTokenCount": 3,
                          "totalTokenCount": 123},
        "modelVersion": "gemini-9-pro", "responseId": "scripted-0000"}


def test_gemini_text_streams_in_pieces_and_without_alt_sse_as_a_json_array(start):
    provider = start(SCRIPT)
    _, _, text = provider.post(GEMINI + "?alt=sse", gemini_body(1))
    chunks = [data for _, data in sse(text)]
    assert [c["candidates"][0]["content"]["parts"] for c in chunks] == [
        [{"text": "do"}], [{"text": "ne"}]]
    assert "finishReason" not in chunks[0]["candidates"][0]
    assert chunks[0]["usageMetadata"]["candidatesTokenCount"] == 0
    status, ctype, array = provider.post(GEMINI, gemini_body(1))
    assert (status, ctype, json.loads(array)) == (200, "application/json", chunks)
    whole = json.loads(provider.post(GEMINI.replace("streamG", "g"), gemini_body(1))[2])
    assert whole["candidates"][0]["content"]["parts"] == [{"text": "done"}]
    assert whole["usageMetadata"]["totalTokenCount"] == 123
    status, _, error = start({"steps": [{"error": 429}]}).post(GEMINI, gemini_body(0))
    assert (status, json.loads(error)) == (429, {"error": {
        "code": 429, "message": "scripted provider: scripted error 429",
        "status": "RESOURCE_EXHAUSTED"}})


# ------------------------------------------------------------------------ script semantics

def test_step_choice_is_stateless_so_a_retry_gets_the_same_answer(start):
    """A CLI retrying the same request must not advance the script."""
    provider = start(SCRIPT)
    first = provider.post("/v1/messages", messages_body(0, stream=False))[2]
    again = provider.post("/v1/messages", messages_body(0, stream=False))[2]
    assert first == again  # ids included
    after = json.loads(provider.post("/v1/messages", messages_body(1, stream=False))[2])
    assert after["content"] == [{"type": "text", "text": "done"}]
    past_end = json.loads(provider.post("/v1/messages", messages_body(7, stream=False))[2])
    assert past_end["content"] == [{"type": "text", "text": "done"}]


def test_loop_mode_answers_every_request_with_the_first_shell_step(start):
    provider = start({"steps": [{"say": "hi"}, {"shell": "true"}], "loop": True})
    for results in (0, 1, 5):
        body = json.loads(provider.post("/v1/messages", messages_body(results, False))[2])
        assert body["content"][0]["input"]["command"] == "true"
    assert [line["reply"] for line in provider.lines()] == ["shell"] * 3


def test_model_override_replaces_the_requested_model_in_every_api(start):
    provider = start(SCRIPT | {"model": "claude-other"})
    stream = sse(provider.post("/v1/messages", messages_body(0))[2])
    assert stream[0][1]["message"]["model"] == "claude-other"
    done = sse(provider.post("/v1/responses", responses_body(0))[2])[-1][1]
    assert done["response"]["model"] == "claude-other"


def test_scripted_error_answers_in_each_providers_error_shape(start):
    provider = start({"steps": [{"error": 429}]})
    status, _, text = provider.post("/v1/messages", messages_body(0))
    assert (status, json.loads(text)) == (429, {"type": "error", "error": {
        "type": "rate_limit_error", "message": "scripted provider: scripted error 429"}})
    status, _, text = provider.post("/v1/responses", responses_body(0))
    assert (status, json.loads(text)["error"]["code"]) == (429, "insufficient_quota")


def test_bad_script_names_the_step_and_the_allowed_forms():
    with pytest.raises(sp.ScriptError, match=r"steps\[1\] must be"):
        sp.parse_script({"steps": [{"say": "x"}, {"run": "ls"}]})


# ------------------------------------------------------------------------------ the log

def test_every_request_is_one_log_line_with_all_headers_and_the_body(start):
    provider = start(SCRIPT)
    provider.post("/v1/messages?beta=true", messages_body(0), {"x-api-key": "tok-1"})
    provider.post("/v1/nowhere", {})
    conn = http.client.HTTPConnection("127.0.0.1", provider.port, timeout=10)
    conn.request("GET", "/healthz")
    assert conn.getresponse().read() == b"ok"
    first, missing, health = provider.lines()
    assert (first["method"], first["path"], first["status"], first["reply"]) == (
        "POST", "/v1/messages?beta=true", 200, "shell")
    assert first["headers"]["x-api-key"] == "tok-1"
    assert first["body"] == messages_body(0)
    assert (missing["status"], missing["reply"]) == (404, "not_found")
    assert (health["method"], health["reply"], health["seq"]) == ("GET", "healthz", 3)


def test_gzip_request_body_is_decoded_and_zstd_is_refused_with_415(start):
    provider = start(SCRIPT)
    raw = gzip.compress(json.dumps(messages_body(0, stream=False)).encode())
    status, _, _ = provider.post("/v1/messages", {}, {"Content-Encoding": "gzip"}, raw)
    assert status == 200
    status, _, text = provider.post("/v1/responses", {}, {"Content-Encoding": "zstd"}, b"x")
    assert (status, json.loads(text)["error"]["message"]) == (
        415, "scripted provider: unsupported Content-Encoding 'zstd'")
    gz, zstd = provider.lines()
    assert gz["body"]["model"] == "claude-opus-4-8"
    assert (zstd["body"], zstd["body_error"]) == (None, "unsupported Content-Encoding 'zstd'")
