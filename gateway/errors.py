"""The error bodies the gateway answers with, each in its provider's own shape.

A CLI that talks to the gateway must see an error it already knows how to handle (and
does not retry forever), so every refusal is what the real API would say for the same
situation: Anthropic `{"type": "error", "error": {"type", "message"}}`, OpenAI
`{"error": {"message", "type", "param", "code"}}`, Gemini `{"error": {"code", "message",
"status"}}`. Gemini CLI retries a 429 and a 5xx (ten times): what no retry can cure (a
budget spent, a refused tool) is a 400 on every provider but OpenAI's budget (429
`insufficient_quota`, which its CLIs do not retry).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum


class Provider(StrEnum):
    ANTHROPIC = "anthropic"
    OPENAI = "openai"
    GEMINI = "gemini"


class Refusal(StrEnum):
    """Why a request was not served (the `refused` field of a record)."""

    UNKNOWN_TOKEN = "unknown_token"      # only in _refused.jsonl
    MODEL_NOT_ALLOWED = "model_not_allowed"
    BUDGET_EXHAUSTED = "budget_exhausted"
    BAD_PATH = "bad_path"
    BAD_BODY = "bad_body"
    UPSTREAM_ERROR = "upstream_error"
    TOO_BUSY = "too_busy"                # the arm had MAX_IN_FLIGHT requests in flight
    SERVER_TOOL = "server_tool"          # a provider-side tool that reaches the internet
    WRONG_UPSTREAM = "wrong_upstream"    # an upstream the arm's token does not reach
    RECORDS_CAPPED = "records_capped"    # MAX_REFUSED_LINES reached: later ones unwritten


@dataclass(frozen=True)
class ErrorReply:
    """One refusal: the HTTP status and the provider-shaped JSON body."""

    status: int
    body: bytes
    refused: Refusal


# (status, anthropic error type, openai error type, openai code) per refusal kind.
_SHAPES: dict[str, tuple[int, str, str, str | None]] = {
    "unknown_token": (401, "authentication_error", "invalid_request_error", "invalid_api_key"),
    "bad_path": (404, "not_found_error", "invalid_request_error", "unknown_url"),
    "bad_body": (400, "invalid_request_error", "invalid_request_error", None),
    "bad_encoding": (415, "invalid_request_error", "invalid_request_error", None),
    "too_large": (413, "request_too_large", "invalid_request_error", None),
    "upstream_error": (502, "api_error", "server_error", "upstream_error"),
    "too_busy": (429, "rate_limit_error", "rate_limit_exceeded", "rate_limit_exceeded"),
    "refused": (400, "invalid_request_error", "invalid_request_error", None),
    "forbidden": (403, "permission_error", "invalid_request_error", "wrong_upstream"),
}
# Gemini's (status, google.rpc status) per kind: an unknown key is a 400 INVALID_ARGUMENT
# there ("API key not valid"), as the real API answers it.
_GEMINI: dict[str, tuple[int, str]] = {
    "unknown_token": (400, "INVALID_ARGUMENT"),
    "bad_path": (404, "NOT_FOUND"),
    "bad_body": (400, "INVALID_ARGUMENT"),
    "bad_encoding": (415, "INVALID_ARGUMENT"),
    "too_large": (413, "INVALID_ARGUMENT"),
    "upstream_error": (502, "UNAVAILABLE"),
    "too_busy": (429, "RESOURCE_EXHAUSTED"),
    "refused": (400, "INVALID_ARGUMENT"),
    "forbidden": (403, "PERMISSION_DENIED"),
}


def anthropic_body(kind: str, message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()


def openai_body(kind: str, message: str, code: str | None) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": None,
                                 "code": code}}).encode()


def gemini_body(status: int, rpc_status: str, message: str) -> bytes:
    return json.dumps({"error": {"code": status, "message": message,
                                 "status": rpc_status}}).encode()


def reply(provider: Provider, shape: str, refused: Refusal, message: str) -> ErrorReply:
    """The refusal `shape` (a key of _SHAPES) as `provider` would answer it."""
    status, anthropic_type, openai_type, code = _SHAPES[shape]
    if provider is Provider.GEMINI:
        status, rpc_status = _GEMINI[shape]
        return ErrorReply(status, gemini_body(status, rpc_status, message), refused)
    if provider is Provider.ANTHROPIC:
        return ErrorReply(status, anthropic_body(anthropic_type, message), refused)
    return ErrorReply(status, openai_body(openai_type, message, code), refused)


def unknown_token(provider: Provider) -> ErrorReply:
    return reply(provider, "unknown_token", Refusal.UNKNOWN_TOKEN,
                 "bakeoff gateway: unknown token (send the token the sandbox was given as "
                 "x-api-key, Authorization: Bearer, x-goog-api-key or ?key=)")


def model_not_allowed(provider: Provider, model: str | None, allowed: tuple[str, ...]
                      ) -> ErrorReply:
    message = (f"bakeoff gateway: model {model!r} is not allowed for this arm "
               f"(allowed: {', '.join(allowed)}; widen it with allow_models)")
    if provider is Provider.GEMINI:
        return ErrorReply(404, gemini_body(404, "NOT_FOUND", message),
                          Refusal.MODEL_NOT_ALLOWED)
    if provider is Provider.ANTHROPIC:
        return ErrorReply(404, anthropic_body("not_found_error", message),
                          Refusal.MODEL_NOT_ALLOWED)
    return ErrorReply(400, openai_body("invalid_request_error", message, "model_not_found"),
                      Refusal.MODEL_NOT_ALLOWED)


def too_busy(provider: Provider, limit: int) -> ErrorReply:
    return reply(provider, "too_busy", Refusal.TOO_BUSY,
                 f"bakeoff gateway: this arm already has {limit} requests in flight; retry")


def budget_exhausted(provider: Provider, limit: str) -> ErrorReply:
    """`limit` names the budget that ran out, e.g. `max_requests_per_arm=5`."""
    message = f"bakeoff gateway: budget exhausted ({limit})"
    if provider is not Provider.OPENAI:
        return reply(provider, "refused", Refusal.BUDGET_EXHAUSTED, message)
    return ErrorReply(429, openai_body("insufficient_quota", message, "insufficient_quota"),
                      Refusal.BUDGET_EXHAUSTED)


def server_tool(provider: Provider, tools: tuple[str, ...]) -> ErrorReply:
    """A provider-side tool that reaches the internet, declared by an arm not granted it."""
    return reply(provider, "refused", Refusal.SERVER_TOOL,
                 f"bakeoff gateway: provider-side tool(s) {', '.join(tools)} reach the "
                 "internet from outside the sandbox and are refused (an arm is granted them "
                 "with allow_server_tools = true, which flags its round)")


def wrong_upstream(provider: Provider, arm: str, meant: str, own: str) -> ErrorReply:
    """A request for an upstream the arm's token does not reach (another protocol's route,
    or a path that names another upstream): 403, never forwarded, its key never used."""
    return reply(provider, "forbidden", Refusal.WRONG_UPSTREAM,
                 f"bakeoff gateway: arm {arm}'s token does not reach upstream {meant!r} "
                 f"(it reaches {own} only)")
