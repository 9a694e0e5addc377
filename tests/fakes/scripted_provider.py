"""A scripted model provider: the Anthropic Messages, OpenAI Responses and Chat Completions
wire formats and the Gemini API (generateContent, streamGenerateContent as SSE with
?alt=sse, else a streamed JSON array; the model in the path), answering from a JSON
script instead of a model.

    python3 scripted_provider.py --script FILE --log FILE [--port 8000] [--host 0.0.0.0]

Stdlib only (Python 3.11), one file: it runs in `bakeoff/python`, bind-mounted read-only.

    {"steps": [{"shell": "CMD"}, ..., {"say": "done"}],
     "usage": {"input": 100, "output": 20, "cache_read": 0, "cache_write": 0, "reasoning": 5},
     "model": null, "loop": false, "models": {"MODEL": {...a script of its own...}}}

The step is chosen statelessly: by the number of tool results already in the conversation,
so a retried request gets the same answer; past the last step, the last one again.
`{"shell": CMD}` is the call that makes the CLI run CMD with the shell tool its request
offers (Claude Code: a `Bash` tool_use; Codex: its code-mode `exec` tool, else the
`exec_command` function; OpenCode and mini-swe-agent: `bash`; Gemini CLI and Qwen Code:
`run_shell_command`), `{"say": TEXT}` a final text,
`{"error": STATUS}` that status in the provider's own error shape. `loop: true` answers every
request with the first shell step (an agent that never stops); `model` overrides the
response's model (null echoes the requested one); `models` gives a requested model a script
of its own (one provider can loop one arm and let another finish). A request that offers
no tools gets its step when that is a `say` (a judge run without tools), else a short
text (a side request: a title, a summary).

Every request is appended to the log as one JSON line: method, path (with the query), all
headers, the parsed body, and what was answered. GET /healthz answers `ok`.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Json = dict[str, Any]
SIDE_TEXT = "ok"
COMPACT = (",", ":")  # the APIs send compact JSON
BASH_DESCRIPTION = "Run the scripted command"


# ---------------------------------------------------------------------------------- the script

@dataclass(frozen=True)
class Step:
    """One scripted answer: a shell command to have run, or a final text."""

    shell: str | None = None
    say: str | None = None
    error: int | None = None  # answer this HTTP status in the API's own error shape


@dataclass(frozen=True)
class Usage:
    input: int = 100
    output: int = 20
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0


@dataclass(frozen=True)
class Script:
    steps: tuple[Step, ...]
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    loop: bool = False
    models: tuple[tuple[str, Script], ...] = ()

    def for_model(self, requested: object) -> Script:
        """The script of the requested model, when it has one of its own."""
        return next((script for name, script in self.models if name == requested), self)

    def step_for(self, tool_results: int) -> Step:
        """The answer after `tool_results` tool results (stateless, so retries agree)."""
        if self.loop:
            return next((s for s in self.steps if s.shell is not None), self.steps[0])
        return self.steps[min(tool_results, len(self.steps) - 1)]

    def model_for(self, requested: object) -> str:
        if self.model is not None:
            return self.model
        return requested if isinstance(requested, str) else "scripted-model"


class ScriptError(Exception):
    """The script file cannot be used; the message says which field and how to fix it."""


def parse_script(raw: Json) -> Script:
    steps_raw = raw.get("steps")
    if not isinstance(steps_raw, list) or not steps_raw:
        raise ScriptError("script: `steps` must be a non-empty list of {shell} / {say} objects")
    steps = []
    for index, item in enumerate(steps_raw):
        if not isinstance(item, dict) or len(item) != 1 or not (STEP_KINDS & item.keys()):
            raise ScriptError(f"script: steps[{index}] must be {{\"shell\": CMD}}, "
                              f"{{\"say\": TEXT}} or {{\"error\": STATUS}}, got {item!r}")
        steps.append(Step(shell=item.get("shell"), say=item.get("say"), error=item.get("error")))
    usage = Usage(**{k: int(v) for k, v in (raw.get("usage") or {}).items()})
    models = raw.get("models") or {}
    if not isinstance(models, dict):
        raise ScriptError("script: `models` must map a model name to a script")
    return Script(tuple(steps), usage, raw.get("model"), bool(raw.get("loop", False)),
                  tuple((str(name), parse_script(sub)) for name, sub in models.items()))


STEP_KINDS = frozenset({"shell", "say", "error"})


def load_script(path: Path) -> Script:
    try:
        return parse_script(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError) as error:
        raise ScriptError(f"script {path}: {error}; fix the JSON file") from error


# ---------------------------------------------------------------------------- request reading

def count_tool_results(path: str, body: Json) -> int:
    """Tool results already in the conversation, in whichever API the path speaks."""
    if path.startswith("/v1/messages"):
        return sum(1 for m in body.get("messages") or [] if isinstance(m.get("content"), list)
                   for block in m["content"] if block.get("type") == "tool_result")
    if path.startswith("/v1/responses"):
        kinds = {"function_call_output", "custom_tool_call_output"}
        return sum(1 for item in _list(body.get("input")) if item.get("type") in kinds)
    if GEMINI_PATH.fullmatch(path):
        return sum(1 for c in _list(body.get("contents")) for part in _list(c.get("parts"))
                   if "functionResponse" in part)
    return sum(1 for m in body.get("messages") or [] if m.get("role") == "tool")


def offered_tools(body: Json) -> list[Json]:
    """The tools a request offers: `tools`, plus Codex's `additional_tools` input items,
    with the tools of a `namespace` entry flattened in."""
    tools = _list(body.get("tools"))
    for item in _list(body.get("input")):
        if item.get("type") == "additional_tools":
            tools.extend(_list(item.get("tools")))
    flat: list[Json] = []
    for tool in tools:
        flat.extend(_list(tool.get("tools")) if tool.get("type") == "namespace" else [tool])
    return flat


def _list(value: object) -> list[Json]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def codex_call(tools: list[Json], command: str) -> tuple[str, str, str]:
    """(item type, tool name, input or JSON arguments) of the call a Responses client runs
    `command` for: Codex 0.169's code-mode `exec` (JavaScript calling tools.exec_command)
    when offered (a model in its catalogue), else the client's own shell function."""
    names = {t.get("name"): t for t in tools}
    if names.get("exec", {}).get("type") == "custom":
        args = json.dumps({"cmd": command, "yield_time_ms": 30000})
        code = f"const r = await tools.exec_command({args});\ntext(JSON.stringify(r));"
        return "custom_tool_call", "exec", code
    name, arguments = shell_call(set(names), command)
    return "function_call", name, json.dumps(arguments)


# The shell tool of each client, as it names it and the arguments it requires: Codex's
# exec_command (fallback metadata), OpenCode's and mini-swe-agent's bash, Gemini CLI's
# and Qwen Code's run_shell_command; else `shell` (Codex's oldest).
SHELL_TOOLS: tuple[tuple[str, Callable[[str], Json]], ...] = (
    ("exec_command", lambda cmd: {"cmd": cmd}),
    ("bash", lambda cmd: {"command": cmd, "description": BASH_DESCRIPTION}),
    ("run_shell_command", lambda cmd: {"command": cmd, "description": BASH_DESCRIPTION,
                                       "is_background": False}),
)


SHELL_NAMES = frozenset(name for name, _ in SHELL_TOOLS)


def shell_call(offered: set[object], command: str) -> tuple[str, Json]:
    """(tool name, arguments) of the call that makes a client run `command`, chosen by
    the tools its request offers."""
    for name, arguments in SHELL_TOOLS:
        if name in offered:
            return name, arguments(command)
    return "shell", {"command": command}


def tool_names(body: Json) -> set[object]:
    """The names of the tools a request offers, in any of the wire formats."""
    names: set[object] = set()
    for tool in offered_tools(body):
        names.add(tool.get("name") or (tool.get("function") or {}).get("name"))
        names.update(d.get("name") for d in _list(tool.get("functionDeclarations")))
    return names


# ------------------------------------------------------------------------ Anthropic Messages

def anthropic_blocks(step: Step | None, offered: set[object],
                     turn: int) -> tuple[list[Json], str]:
    """The content blocks and stop_reason for a step (None: a side request's text): a
    shell step is Claude Code's `Bash` tool_use, or the client's own shell tool."""
    if step is not None and step.shell is not None:
        name, arguments = (("Bash", {"command": step.shell, "description": BASH_DESCRIPTION})
                           if "Bash" in offered or not offered & SHELL_NAMES
                           else shell_call(offered, step.shell))
        block = {"type": "tool_use", "id": f"toolu_scripted_{turn:04d}", "name": name,
                 "input": arguments}
        return [block], "tool_use"
    text = SIDE_TEXT if step is None else (step.say or "")
    return [{"type": "text", "text": text}], "end_turn"


def anthropic_usage(usage: Usage, output: int) -> Json:
    return {"input_tokens": usage.input, "cache_creation_input_tokens": usage.cache_write,
            "cache_read_input_tokens": usage.cache_read, "output_tokens": output}


def anthropic_message(blocks: list[Json], stop: str, model: str, usage: Usage, turn: int) -> Json:
    return {"id": f"msg_scripted_{turn:04d}", "type": "message", "role": "assistant",
            "model": model, "content": blocks, "stop_reason": stop, "stop_sequence": None,
            "usage": anthropic_usage(usage, usage.output)}


def anthropic_events(blocks: list[Json], stop: str, model: str, usage: Usage,
                     turn: int) -> list[Json]:
    """The SSE events of a streamed message, in the order the Messages API sends them: a
    tool_use's input arrives as input_json_delta parts (an empty one first), one ping."""
    start = anthropic_message([], "", model, usage, turn)
    start.update(stop_reason=None, usage=anthropic_usage(usage, 1))
    events: list[Json] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(blocks):
        at = {"type": "content_block_delta", "index": index}
        if block["type"] == "text":
            opened: Json = {"type": "text", "text": ""}
            deltas = [dict(at, delta={"type": "text_delta", "text": block["text"]})]
        else:
            opened = {**block, "input": {}}
            deltas = [dict(at, delta={"type": "input_json_delta", "partial_json": part})
                      for part in ("", json.dumps(block["input"]))]
        events += [{"type": "content_block_start", "index": index, "content_block": opened},
                   *([{"type": "ping"}] if index == 0 else []), *deltas,
                   {"type": "content_block_stop", "index": index}]
    return [*events,
            {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
             "usage": {"output_tokens": usage.output}},
            {"type": "message_stop"}]


# ---------------------------------------------------------------------- OpenAI Responses API

def responses_items(step: Step | None, tools: list[Json], turn: int) -> list[Json]:
    """The output items for a step (None: a side request's text), completed."""
    if step is not None and step.shell is not None:
        kind, name, payload = codex_call(tools, step.shell)
        custom = kind == "custom_tool_call"
        item: Json = {"type": kind, "id": f"{'ctc' if custom else 'fc'}_scripted_{turn:04d}",
                      "status": "completed", "call_id": f"call_scripted_{turn:04d}",
                      "name": name, ("input" if custom else "arguments"): payload}
        return [item]
    text = SIDE_TEXT if step is None else (step.say or "")
    return [{"type": "message", "id": f"msg_scripted_{turn:04d}", "status": "completed",
             "role": "assistant",
             "content": [{"type": "output_text", "text": text, "annotations": []}]}]


def responses_usage(usage: Usage) -> Json:
    return {"input_tokens": usage.input,
            "input_tokens_details": {"cached_tokens": usage.cache_read},
            "output_tokens": usage.output,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning},
            "total_tokens": usage.input + usage.output}


def responses_object(items: list[Json], model: str, usage: Usage | None, turn: int) -> Json:
    return {"id": f"resp_scripted_{turn:04d}", "object": "response", "created_at": int(time.time()),
            "status": "completed" if usage is not None else "in_progress", "model": model,
            "output": items, "usage": None if usage is None else responses_usage(usage)}


def responses_events(items: list[Json], model: str, usage: Usage, turn: int) -> list[Json]:
    """The SSE events of a streamed response, in the order the Responses API sends them."""
    events: list[Json] = [
        {"type": "response.created", "response": responses_object([], model, None, turn)},
        {"type": "response.in_progress", "response": responses_object([], model, None, turn)}]
    for index, item in enumerate(items):
        events += _item_events(index, item)
    events.append({"type": "response.completed",
                   "response": responses_object(items, model, usage, turn)})
    return [dict(event, sequence_number=n) for n, event in enumerate(events)]


def _item_events(index: int, item: Json) -> list[Json]:
    at = {"item_id": item["id"], "output_index": index}
    if item["type"] == "message":
        text = item["content"][0]["text"]
        part = {"type": "output_text", "text": "", "annotations": []}
        middle = [
            dict(at, type="response.content_part.added", content_index=0, part=part),
            dict(at, type="response.output_text.delta", content_index=0, delta=text),
            dict(at, type="response.output_text.done", content_index=0, text=text),
            dict(at, type="response.content_part.done", content_index=0,
                 part=dict(part, text=text))]
        blank: Json = {"content": []}
    else:
        field, event = (("input", "response.custom_tool_call_input")
                        if item["type"] == "custom_tool_call"
                        else ("arguments", "response.function_call_arguments"))
        middle = [dict(at, type=f"{event}.delta", delta=item[field]),
                  dict(at, type=f"{event}.done", **{field: item[field]})]
        blank = {field: ""}
    added = dict(item, status="in_progress", **blank)
    return [{"type": "response.output_item.added", "output_index": index, "item": added},
            *middle,
            {"type": "response.output_item.done", "output_index": index, "item": item}]


# ---------------------------------------------------------------------- OpenAI Chat Completions

def chat_message(step: Step | None, offered: set[object], turn: int) -> tuple[Json, str]:
    if step is not None and step.shell is not None:
        name, arguments = shell_call(offered, step.shell)
        call = {"id": f"call_scripted_{turn:04d}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    text = SIDE_TEXT if step is None else (step.say or "")
    return {"role": "assistant", "content": text}, "stop"


def chat_usage(usage: Usage) -> Json:
    return {"prompt_tokens": usage.input, "completion_tokens": usage.output,
            "total_tokens": usage.input + usage.output,
            "prompt_tokens_details": {"cached_tokens": usage.cache_read},
            "completion_tokens_details": {"reasoning_tokens": usage.reasoning}}


def chat_completion(message: Json, finish: str, model: str, usage: Usage, turn: int) -> Json:
    return {"id": f"chatcmpl-scripted-{turn:04d}", "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": chat_usage(usage)}


def chat_chunks(message: Json, finish: str, model: str, usage: Usage, turn: int) -> list[Json]:
    """The chunks of a streamed completion as the API sends them: the role first, a tool
    call's id and name with empty arguments, then its arguments in two parts; the
    finish_reason on a chunk of its own, the usage on the last (choices empty)."""
    base = {"id": f"chatcmpl-scripted-{turn:04d}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}
    deltas: list[Json] = []
    for index, call in enumerate(message.get("tool_calls") or []):
        text = call["function"]["arguments"]
        opened = dict(call, index=index, function={"name": call["function"]["name"],
                                                   "arguments": ""})
        deltas += [{"role": "assistant", "content": None, "tool_calls": [opened]},
                   *({"tool_calls": [{"index": index, "function": {"arguments": part}}]}
                     for part in (text[:len(text) // 2], text[len(text) // 2:]))]
    if message.get("content") is not None:
        deltas += [{"role": "assistant", "content": ""}, {"content": message["content"]}]
    return [*(dict(base, choices=[{"index": 0, "delta": d, "finish_reason": None}])
              for d in deltas),
            dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]),
            dict(base, choices=[], usage=chat_usage(usage))]


# ------------------------------------------------------------------------------ Gemini API

GEMINI_PATH = re.compile(r"/(?:v1|v1beta|v1alpha)/models/([A-Za-z0-9._-]+)"
                         r":(generateContent|streamGenerateContent)")


def gemini_parts(step: Step | None, offered: set[object]) -> list[Json]:
    """The candidate's parts for a step (None: a side request's text)."""
    if step is not None and step.shell is not None:
        name, arguments = shell_call(offered, step.shell)
        return [{"functionCall": {"name": name, "args": arguments}}]
    return [{"text": SIDE_TEXT if step is None else (step.say or "")}]


def gemini_usage(usage: Usage) -> Json:
    """usageMetadata: promptTokenCount includes the cached tokens, candidatesTokenCount
    excludes the thoughts, totalTokenCount is all of them."""
    prompt = usage.input + usage.cache_read
    output = max(usage.output - usage.reasoning, 0)
    return {"promptTokenCount": prompt, "candidatesTokenCount": output,
            "thoughtsTokenCount": usage.reasoning, "cachedContentTokenCount": usage.cache_read,
            "totalTokenCount": prompt + output + usage.reasoning}


def gemini_chunks(parts: list[Json], model: str, usage: Usage, turn: int) -> list[Json]:
    """The chunks of streamGenerateContent as the API sends them: a text in two pieces, a
    functionCall whole; finishReason STOP and the final usageMetadata on the last."""
    pieces = ([[{"text": t}] for t in (parts[0]["text"][:2], parts[0]["text"][2:])]
              if "text" in parts[0] else [parts])
    chunks = []
    for index, piece in enumerate(pieces):
        last = index == len(pieces) - 1
        candidate: Json = {"content": {"parts": piece, "role": "model"}, "index": 0}
        if last:
            candidate["finishReason"] = "STOP"
        partial = Usage(input=usage.input, output=0, cache_read=usage.cache_read)
        chunks.append({"candidates": [candidate],
                       "usageMetadata": gemini_usage(usage if last else partial),
                       "modelVersion": model, "responseId": f"scripted-{turn:04d}"})
    return chunks


def answer_gemini(step: Step | None, body: Json, model: str, usage: Usage,
                  turn: int) -> tuple[Json, EventList]:
    chunks = gemini_chunks(gemini_parts(step, tool_names(body)), model, usage, turn)
    whole = dict(chunks[-1], candidates=[dict(chunks[-1]["candidates"][0], content={
        "parts": gemini_parts(step, tool_names(body)), "role": "model"})])
    return whole, [(None, chunk) for chunk in chunks]


# ----------------------------------------------------------------------------------- errors

ANTHROPIC_ERRORS = {400: "invalid_request_error", 401: "authentication_error",
                    404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}
GEMINI_ERRORS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND",
                 429: "RESOURCE_EXHAUSTED"}
OPENAI_ERRORS = {400: ("invalid_request_error", "invalid_request_error"),  # (type, code)
                 401: ("invalid_request_error", "invalid_api_key"),
                 404: ("invalid_request_error", "model_not_found"),
                 429: ("insufficient_quota", "insufficient_quota")}


def error_body(path: str, status: int) -> Json:
    """A scripted error in the provider's own shape (Anthropic or OpenAI)."""
    message = f"scripted provider: scripted error {status}"
    if path.startswith("/v1/messages"):
        kind = ANTHROPIC_ERRORS.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    if GEMINI_PATH.fullmatch(path):
        return {"error": {"code": status, "message": message,
                          "status": GEMINI_ERRORS.get(status, "INTERNAL")}}
    kind, code = OPENAI_ERRORS.get(status, ("server_error", "server_error"))
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


# ------------------------------------------------------------------------------- the server

class RequestLog:
    """The append-only JSON-lines log of every request (one line each, flushed)."""

    def __init__(self, path: Path) -> None:
        self.path, self.lock, self.seq = path, threading.Lock(), 0

    def write(self, line: Json) -> None:
        """Append `line` with the next sequence number (1, 2, ...: the order of the file)."""
        with self.lock, self.path.open("a", encoding="utf-8") as out:
            self.seq += 1
            out.write(json.dumps(line | {"seq": self.seq}, sort_keys=True) + "\n")
            out.flush()


DECODERS: dict[str, Callable[[bytes], bytes]] = {
    "": bytes, "identity": bytes, "gzip": gzip.decompress, "deflate": zlib.decompress}


def decode_body(raw: bytes, encoding: str) -> bytes:
    """The request body without its Content-Encoding (gzip, deflate; others raise)."""
    if encoding not in DECODERS:
        raise ValueError(f"unsupported Content-Encoding {encoding!r}")
    return DECODERS[encoding](raw)


@dataclass(frozen=True)
class Answer:
    """What the provider answers: a status, a JSON body or SSE events, and the log's name."""

    status: int
    reply: str
    json: Json | None = None
    events: tuple[tuple[str | None, Json | str], ...] = ()
    text: bytes | None = None
    array: bool = False  # the events as a streamed JSON array (Gemini without alt=sse)


def answer(script: Script, path: str, body: Json, sse: bool = True) -> Answer:
    """The answer to a POST of `body` to `path` (pure: the same request, the same answer,
    ids included: they are numbered by the turn, the count of tool results so far).
    A Gemini path names the model and whether it streams (`sse`: with ?alt=sse, else
    a streamed JSON array)."""
    gemini = GEMINI_PATH.fullmatch(path)
    requested = gemini.group(1) if gemini else body.get("model")
    script = script.for_model(requested)
    if path == "/v1/messages/count_tokens":
        return Answer(200, "count_tokens", {"input_tokens": script.usage.input})
    answerer = answer_gemini if gemini else ANSWERERS.get(path)
    if answerer is None:
        return Answer(404, "not_found", {"type": "error", "error": {
            "type": "not_found_error", "message": f"scripted provider: no route {path}"}})
    turn = count_tool_results(path, body)
    step = script.step_for(turn)
    if not offered_tools(body) and step.say is None:
        step = None  # a side request (no tools to run a command with): a short text
    if step is not None and step.error is not None:
        return Answer(step.error, "error", error_body(path, step.error))
    reply = "side_text" if step is None else ("shell" if step.shell is not None else "say")
    payload, events = answerer(step, body, script.model_for(requested), script.usage, turn)
    if gemini and gemini.group(2) == "streamGenerateContent":
        return Answer(200, reply, events=tuple(events), array=not sse)
    if body.get("stream") and not gemini:
        return Answer(200, reply, events=tuple(events))
    return Answer(200, reply, payload)


EventList = list[tuple[str | None, Json | str]]


def answer_messages(step: Step | None, body: Json, model: str, usage: Usage,
                    turn: int) -> tuple[Json, EventList]:
    blocks, stop = anthropic_blocks(step, tool_names(body), turn)
    events = anthropic_events(blocks, stop, model, usage, turn)
    return anthropic_message(blocks, stop, model, usage, turn), [(e["type"], e) for e in events]


def answer_responses(step: Step | None, body: Json, model: str, usage: Usage,
                     turn: int) -> tuple[Json, EventList]:
    items = responses_items(step, offered_tools(body), turn)
    events = responses_events(items, model, usage, turn)
    return responses_object(items, model, usage, turn), [(e["type"], e) for e in events]


def answer_chat(step: Step | None, body: Json, model: str, usage: Usage,
                turn: int) -> tuple[Json, EventList]:
    message, finish = chat_message(step, tool_names(body), turn)
    chunks: EventList = [(None, c) for c in chat_chunks(message, finish, model, usage, turn)]
    return chat_completion(message, finish, model, usage, turn), [*chunks, (None, "[DONE]")]


ANSWERERS = {"/v1/messages": answer_messages, "/v1/responses": answer_responses,
             "/v1/chat/completions": answer_chat}


class Handler(BaseHTTPRequestHandler):
    server: ProviderServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _handle(self) -> None:
        """Read, answer, log (before sending: whoever got an answer finds its line), send."""
        line: Json = {"time": time.time(), "method": self.command, "path": self.path,
                      "headers": {k.lower(): v for k, v in self.headers.items()}}
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            text = decode_body(raw, self.headers.get("Content-Encoding", "").lower())
            body = json.loads(text) if text else None
        except (ValueError, OSError, zlib.error) as error:
            line.update(body=None, body_error=str(error), body_bytes=len(raw))
            result = Answer(415, "bad_body", {"error": {
                "type": "invalid_request_error", "message": f"scripted provider: {error}"}})
        else:
            line["body"] = body
            result = self._answer(body if isinstance(body, dict) else {})
        self.server.log.write(line | {"status": result.status, "reply": result.reply})
        self._send(result)

    do_GET = do_POST = do_HEAD = _handle

    def _answer(self, body: Json) -> Answer:
        path = self.path.split("?", 1)[0]
        if path == "/healthz" and self.command in ("GET", "HEAD"):
            return Answer(200, "healthz", text=b"ok")
        if self.command != "POST":
            path = f"{self.command} {path}"  # no GET route but /healthz
        return answer(self.server.script, path, body, "alt=sse" in self.path.partition("?")[2])

    def _send(self, result: Answer) -> None:
        if result.array:
            return self._array(result.events)
        if result.events:
            return self._sse(result.events)
        if result.text is not None:
            return self._body(result.status, "text/plain", result.text)
        data = json.dumps(result.json, separators=COMPACT).encode()
        return self._body(result.status, "application/json", data)

    def _head(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()

    def _body(self, status: int, content_type: str, data: bytes) -> None:
        self._head(status, {"Content-Type": content_type, "Content-Length": str(len(data))})
        if self.command != "HEAD":
            self.wfile.write(data)

    def _sse(self, events: tuple[tuple[str | None, Json | str], ...]) -> None:
        """Stream events as SSE, one write and flush each (connection closed at the end)."""
        self._head(200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                         "Connection": "close"})
        self.close_connection = True
        for name, data in events:
            payload = data if isinstance(data, str) else json.dumps(data, separators=COMPACT)
            prefix = f"event: {name}\n" if name else ""
            self.wfile.write(f"{prefix}data: {payload}\n\n".encode())
            self.wfile.flush()


    def _array(self, events: tuple[tuple[str | None, Json | str], ...]) -> None:
        """Stream events as one JSON array, an element per write (Gemini without alt=sse)."""
        self._head(200, {"Content-Type": "application/json", "Connection": "close"})
        self.close_connection = True
        for index, (_, data) in enumerate(events):
            text = json.dumps(data, separators=COMPACT)
            self.wfile.write(f"{'[' if index == 0 else ','}{text}\n".encode())
            self.wfile.flush()
        self.wfile.write(b"]")


class ProviderServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], script: Script, log: RequestLog) -> None:
        super().__init__(address, Handler)
        self.script = script
        self.log = log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--host", default="0.0.0.0")
    args = parser.parse_args(argv)
    try:
        script = load_script(args.script)
    except ScriptError as error:
        print(error, file=sys.stderr)
        return 2
    server = ProviderServer((args.host, args.port), script, RequestLog(args.log))
    print(f"scripted provider on {args.host}:{server.server_address[1]}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
