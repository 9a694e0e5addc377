"""What a request asks for, read from its body before it is forwarded.

The model (Gemini's from the URL path), whether it streams, every effort setting the
API's wire carries (`effort`: dotted field name -> value, in the order listed below; a
field of another API's dialect is not read, since its upstream would ignore it), and the
provider-side tools that would reach the internet from outside the sandbox
(`server_tools`: refused unless the arm is granted them). Gemini's REST API takes
snake_case field names as well as camelCase, so both are read there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.usage import Api, get

Scalar = str | int | float | bool
MAX_TOOL_NAMES = 8
MAX_NAME_CHARS = 64
# The fields that carry effort, per API (a path of keys into the body).
EFFORT_PATHS: dict[Api, tuple[tuple[str, ...], ...]] = {
    Api.MESSAGES: (("output_config", "effort"), ("thinking", "budget_tokens")),
    Api.RESPONSES: (("reasoning", "effort"),),
    Api.CHAT: (("reasoning_effort",), ("reasoning", "effort"), ("reasoning", "max_tokens"),
               ("enable_thinking",), ("thinking_budget",),
               ("chat_template_kwargs", "enable_thinking")),
}
EFFORT_PATHS[Api.COUNT_TOKENS] = EFFORT_PATHS[Api.MESSAGES]
GEMINI_APIS = (Api.GENERATE, Api.STREAM_GENERATE, Api.COUNT_GEMINI)
GEMINI_CONFIG = (("generationConfig", "thinkingConfig"), ("generation_config", "thinking_config"))
GEMINI_EFFORT = (("thinkingLevel", "thinking_level"), ("thinkingBudget", "thinking_budget"),
                 ("includeThoughts", "include_thoughts"))
# Tool `type`s (by prefix) that run at the provider and reach the internet.
ANTHROPIC_TOOLS = ("web_search", "web_fetch")
OPENAI_TOOLS = ("web_search", "mcp")
GEMINI_TOOLS = frozenset({"googleSearch", "google_search", "googleSearchRetrieval",
                          "google_search_retrieval", "urlContext", "url_context",
                          "googleMaps", "google_maps", "enterpriseWebSearch",
                          "enterprise_web_search"})
# Chat Completions request keys that switch on a provider's own web search: OpenAI's
# search models, Qwen's DashScope, xAI's live search (and, below, Moonshot's builtin
# `$web_search` and OpenRouter's `web` plugin).
CHAT_SEARCH_KEYS = ("web_search_options", "enable_search", "search_parameters")


@dataclass(frozen=True)
class RequestFacts:
    model: str | None
    stream: bool
    thinking: dict[str, Any] | None
    output_config_effort: str | None
    reasoning_effort: str | None
    effort: dict[str, Scalar] = field(default_factory=dict)
    server_tools: tuple[str, ...] = ()


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float) and value != ""


def gemini_thinking(body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """Gemini's thinkingConfig and its dotted name, in whichever spelling was sent."""
    for path in GEMINI_CONFIG:
        found = get(body, *path)
        if isinstance(found, dict):
            return ".".join(path), found
    return None


def efforts(api: Api, body: dict[str, Any]) -> dict[str, Scalar]:
    """Every effort field `api`'s wire carries in `body`, by dotted name."""
    if api in GEMINI_APIS:
        thinking = gemini_thinking(body)
        if thinking is None:
            return {}
        prefix, config = thinking
        return {f"{prefix}.{key}": config[key] for names in GEMINI_EFFORT for key in names
                if _scalar(config.get(key))}
    return {".".join(path): value for path in EFFORT_PATHS.get(api, ())
            if _scalar(value := get(body, *path))}


def _typed_tools(body: dict[str, Any], prefixes: tuple[str, ...]) -> list[str]:
    tools = body.get("tools")
    return [kind for tool in tools if isinstance(tool, dict)
            and isinstance(kind := tool.get("type"), str) and kind.startswith(prefixes)
            ] if isinstance(tools, list) else []


def _chat_tools(body: dict[str, Any]) -> list[str]:
    found = [key for key in CHAT_SEARCH_KEYS if body.get(key) not in (None, False)]
    found += _typed_tools(body, ("web_search",))
    tools = body.get("tools")
    for tool in tools if isinstance(tools, list) else ():
        if get(tool, "type") == "builtin_function":  # Moonshot's $web_search
            found.append(f"builtin_function:{get(tool, 'function', 'name')}")
    plugins = body.get("plugins")
    for plugin in plugins if isinstance(plugins, list) else ():
        if get(plugin, "id") == "web":  # OpenRouter's web search
            found.append("plugins:web")
    return found


def _gemini_tools(body: dict[str, Any]) -> list[str]:
    tools = body.get("tools")
    return [key for tool in tools if isinstance(tool, dict) for key in tool
            if key in GEMINI_TOOLS] if isinstance(tools, list) else []


def server_tools(api: Api, body: dict[str, Any]) -> tuple[str, ...]:
    """The provider-side tools `body` declares that reach the internet (names capped)."""
    if api in (Api.MESSAGES, Api.COUNT_TOKENS):
        found = _typed_tools(body, ANTHROPIC_TOOLS)
        found += ["mcp_servers"] if body.get("mcp_servers") else []
    elif api is Api.RESPONSES:
        found = _typed_tools(body, OPENAI_TOOLS)
    elif api is Api.CHAT:
        found = _chat_tools(body)
    else:
        found = _gemini_tools(body)
    names = dict.fromkeys(name[:MAX_NAME_CHARS] for name in found)
    return tuple(names)[:MAX_TOOL_NAMES]


def request_facts(api: Api, body: dict[str, Any], path_model: str | None = None
                  ) -> RequestFacts:
    """The model, stream flag, effort settings and server-side tools of a request body
    (`path_model`: the model a Gemini URL names; the body's is then not read)."""
    if api in GEMINI_APIS:
        thinking = gemini_thinking(body)
        return RequestFacts(model=path_model, stream=api is Api.STREAM_GENERATE,
                            thinking=None if thinking is None else thinking[1],
                            output_config_effort=None, reasoning_effort=None,
                            effort=efforts(api, body), server_tools=server_tools(api, body))
    thinking = body.get("thinking")
    reasoning = _str(get(body, "reasoning", "effort")) or _str(body.get("reasoning_effort"))
    return RequestFacts(model=_str(body.get("model")), stream=body.get("stream") is True,
                        thinking=thinking if isinstance(thinking, dict) else None,
                        output_config_effort=_str(get(body, "output_config", "effort")),
                        reasoning_effort=reasoning, effort=efforts(api, body),
                        server_tools=server_tools(api, body))
