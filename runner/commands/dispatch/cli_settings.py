"""The configuration each real CLI adapter writes for an arm: what a flag cannot say.

OpenCode takes its configuration as JSON in OPENCODE_CONFIG_CONTENT; Gemini CLI and Qwen
Code read a settings file in $HOME; mini-swe-agent takes `--config key=value` pairs and
LiteLLM's `provider/model`. Each states the arm's model and effort explicitly,
points the CLI at the model gateway (a gateway arm), and switches off what an unattended
run must not do: auto-update, telemetry and usage statistics, web search and fetch.
Every key is one the pinned version knows (tests/integration/test_real_agents.py).
The values are returned shell-quoted, for `render_template`'s raw placeholders.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from runner.manifest import Arm

GATEWAY_URL = "http://model-gateway:8080"
TOKEN_ENV = "BAKEOFF_GATEWAY_TOKEN"
CODEX_PROVIDER = (
    "--config model_provider=bakeoff --config 'model_providers.bakeoff={name=\"bakeoff "
    f"gateway\",base_url=\"{GATEWAY_URL}/openai/v1\",env_key=\"{TOKEN_ENV}\","
    "wire_api=\"responses\"}' "
)
# Web tools each CLI has, switched off by name.
OPENCODE_DENIED = ("webfetch", "websearch")
GEMINI_EXCLUDED = ("google_web_search", "web_fetch")
QWEN_EXCLUDED = ("web_fetch", "web_search")
QUIET = {"general": {"disableAutoUpdate": True, "disableUpdateNag": True},
         "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False}}


def _quoted(value: dict[str, Any]) -> str:
    return shlex.quote(json.dumps(value, separators=(",", ":"), sort_keys=True))


def opencode_provider(model: str) -> str:
    """OpenCode's provider for a model: Claude models through the Messages API, any
    other through the Responses API (both gateway routes)."""
    return "anthropic" if model.startswith("claude") else "openai"


def opencode_config(arm: Arm) -> dict[str, Any]:
    """The arm's models declared (reasoning models, so `--variant` sets effort), its
    own model as `small_model` too unless it allows another (side requests otherwise
    go to a default small model the gateway refuses); web tools denied."""
    provider = opencode_provider(arm.model)
    models = {m: {"name": m, "reasoning": True} for m in (arm.model, *arm.allow_models)}
    entry: dict[str, Any] = {"models": models}
    if arm.network == "gateway":
        route = "anthropic/v1" if provider == "anthropic" else "openai/v1"
        entry["options"] = {"baseURL": f"{GATEWAY_URL}/{route}",
                            "apiKey": "{env:" + TOKEN_ENV + "}"}
    small = (arm.allow_models or [arm.model])[0]
    return {"autoupdate": False, "share": "disabled", "model": f"{provider}/{arm.model}",
            "small_model": f"{provider}/{small}", "provider": {provider: entry},
            "permission": dict.fromkeys(OPENCODE_DENIED, "deny")}


def gemini_settings(arm: Arm) -> dict[str, Any]:
    """API-key auth (the gateway's token: a custom base URL needs it), the arm's model,
    its effort as the model's thinkingLevel (`modelConfigs.customOverrides`: an effort
    set on an alias is dropped when the CLI rewrites the model's name)."""
    thinking = {"thinkingLevel": arm.effort.upper()}
    override = {"match": {"model": arm.model}, "modelConfig": {
        "generateContentConfig": {"thinkingConfig": thinking}}}
    return {**QUIET, "security": {"auth": {"selectedType": "gemini-api-key"}},
            "model": {"name": arm.model}, "modelConfigs": {"customOverrides": [override]},
            "tools": {"exclude": list(GEMINI_EXCLUDED)}}


def qwen_settings(arm: Arm) -> dict[str, Any]:
    """OpenAI-compatible auth (Chat Completions), the arm's model and its effort
    (`reasoning.effort` on the wire; `reasoning_effort` for GPT-named models)."""
    return {**QUIET, "security": {"auth": {"selectedType": "openai"}},
            "model": {"name": arm.model,
                      "generationConfig": {"reasoning": {"effort": arm.effort}}},
            "tools": {"exclude": list(QWEN_EXCLUDED)}}


def litellm_model(model: str) -> str:
    """mini-swe-agent's LiteLLM model: `anthropic/` for Claude (Messages), else `openai/`
    (Chat Completions)."""
    return f"{'anthropic' if model.startswith('claude') else 'openai'}/{model}"


def cli_settings(adapter: str, arm: Arm) -> dict[str, str]:
    """The raw (already shell-quoted) placeholders of `adapter`'s template for `arm`."""
    gateway = arm.network == "gateway"
    if adapter == "opencode":
        return {"config": _quoted(opencode_config(arm)), "provider_model": shlex.quote(
            f"{opencode_provider(arm.model)}/{arm.model}")}
    if adapter == "gemini-cli":
        return {"settings": _quoted(gemini_settings(arm))}
    if adapter == "qwen-code":
        base = f"--openai-base-url {GATEWAY_URL}/openai/v1 " if gateway else ""
        return {"settings": _quoted(qwen_settings(arm)), "base_url": base}
    if adapter == "mini-swe-agent":
        route = "anthropic" if arm.model.startswith("claude") else "openai/v1"
        api_base = (f"--config model.model_kwargs.api_base={GATEWAY_URL}/{route} "
                    if gateway else "")
        return {"api_base": api_base, "litellm_model": shlex.quote(litellm_model(arm.model))}
    return {"provider": CODEX_PROVIDER if gateway else ""}
