"""The adapters of OpenCode, Gemini CLI and Qwen Code render exactly: model and effort
explicit, the gateway's URL and the arm's token variable (never a key), web tools and
telemetry off; an egress arm gets no gateway URL. The settings are checked against the
pinned CLIs themselves in tests/integration/test_cross_agents.py."""

from __future__ import annotations

import json
import shlex

from runner.commands.dispatch.agents import ADAPTERS, cli_env, gateway_env
from runner.commands.dispatch.cli_settings import opencode_config
from runner.manifest import Arm

BRIEF = "/tmp/bakeoff/brief.md"
QUIET = {"general": {"disableAutoUpdate": True, "disableUpdateNag": True},
         "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False}}


def arm(agent: str, model: str, **more: object) -> Arm:
    return Arm.model_validate({"id": "a1", "model": model, "effort": "high",
                               "effort_normalized": "high", "effort_evidence": "declared",
                               "effort_provenance": "experiment_config",
                               "mode": "single_agent", "agent": agent,
                               "agent_version": "1.0.0", **more}, strict=False)


def render(found: Arm) -> list[str]:
    return shlex.split(ADAPTERS[found.agent].render(found, BRIEF, program="/x/cli"))


def test_opencode_runs_the_arm_s_model_at_its_variant_through_the_gateway() -> None:
    words = render(arm("opencode", "gpt-6.1-sol", allow_models=["gpt-6.1-mini"]))
    config = json.loads(words[0].removeprefix("OPENCODE_CONFIG_CONTENT="))
    assert words[1:] == ["/x/cli", "run", "--pure", "--model", "openai/gpt-6.1-sol",
                         "--variant", "high", "--title", "a1", "--format", "json", "<", BRIEF]
    assert config == {
        "autoupdate": False, "share": "disabled", "model": "openai/gpt-6.1-sol",
        "small_model": "openai/gpt-6.1-mini",
        "provider": {"openai": {
            "models": {"gpt-6.1-sol": {"name": "gpt-6.1-sol", "reasoning": True},
                       "gpt-6.1-mini": {"name": "gpt-6.1-mini", "reasoning": True}},
            "options": {"baseURL": "http://model-gateway:8080/openai/v1",
                        "apiKey": "{env:BAKEOFF_GATEWAY_TOKEN}"}}},
        "permission": {"webfetch": "deny", "websearch": "deny"}}
    assert cli_env(arm("opencode", "m")) == {
        "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1"}


def test_opencode_sends_claude_through_messages_and_an_egress_arm_to_no_gateway() -> None:
    claude = opencode_config(arm("opencode", "claude-opus-4-8"))
    assert claude["small_model"] == "anthropic/claude-opus-4-8"
    assert claude["provider"]["anthropic"]["options"]["baseURL"] == (
        "http://model-gateway:8080/anthropic/v1")
    egress = opencode_config(arm("opencode", "gpt-6.1-sol", network="egress"))
    assert egress["provider"] == {"openai": {"models": {
        "gpt-6.1-sol": {"name": "gpt-6.1-sol", "reasoning": True}}}}


def _settings(words: list[str]) -> dict[str, object]:
    found: dict[str, object] = json.loads(words[words.index("%s") + 1])
    return found


def test_gemini_cli_sets_the_effort_on_the_model_it_runs_and_reads_the_gateway_env() -> None:
    words = render(arm("gemini-cli", "gemini-9-pro", secrets=["GEMINI_API_KEY"]))
    assert words[words.index("/x/cli"):] == [
        "/x/cli", "--model", "gemini-9-pro", "--yolo", "--output-format", "stream-json",
        "--prompt", "", "<", BRIEF]
    assert _settings(words) == {
        **QUIET, "security": {"auth": {"selectedType": "gemini-api-key"}},
        "model": {"name": "gemini-9-pro"},
        "modelConfigs": {"customOverrides": [{"match": {"model": "gemini-9-pro"},
                                              "modelConfig": {"generateContentConfig": {
                                                  "thinkingConfig": {"thinkingLevel": "HIGH"}}}}]},
        "tools": {"exclude": ["google_web_search", "web_fetch"]}}
    env = gateway_env("bkf-tok")
    assert (env["GOOGLE_GEMINI_BASE_URL"], env["GEMINI_API_KEY"]) == (
        "http://model-gateway:8080/gemini", "bkf-tok")
    assert cli_env(arm("gemini-cli", "m")) == {"GEMINI_CLI_TRUST_WORKSPACE": "true",
                                                "NO_BROWSER": "true"}


def test_qwen_code_speaks_chat_completions_to_the_gateway_at_the_arm_s_effort() -> None:
    words = render(arm("qwen-code", "qwen-coder-9"))
    assert words[words.index("/x/cli"):] == [
        "/x/cli", "--auth-type", "openai", "--model", "qwen-coder-9", "--openai-base-url",
        "http://model-gateway:8080/openai/v1", "--yolo", "--chat-recording", "false",
        "--output-format", "stream-json", "<", BRIEF]
    assert _settings(words) == {
        **QUIET, "security": {"auth": {"selectedType": "openai"}},
        "model": {"name": "qwen-coder-9", "generationConfig": {"reasoning": {"effort": "high"}}},
        "tools": {"exclude": ["web_fetch", "web_search"]}}
    egress = render(arm("qwen-code", "qwen-coder-9", network="egress"))
    assert "--openai-base-url" not in egress


def test_mini_swe_agent_runs_its_litellm_model_at_the_arm_s_effort_through_the_gateway(
        ) -> None:
    words = render(arm("mini-swe-agent", "open-coder-9"))
    assert words == [
        "/x/cli", "--config", "mini.yaml", "--config", "model.model_kwargs.reasoning_effort=high",
        "--config", "model.model_kwargs.api_base=http://model-gateway:8080/openai/v1",
        "--model", "openai/open-coder-9", "--task", f"$(cat {BRIEF})", "--yolo",
        "--exit-immediately", "--cost-limit", "0", "--output", "$HOME/mini-trajectory.json",
        "<", "/dev/null"]
    claude = render(arm("mini-swe-agent", "claude-opus-4-8"))
    assert "model.model_kwargs.api_base=http://model-gateway:8080/anthropic" in claude
    assert "anthropic/claude-opus-4-8" in claude
    assert not [w for w in render(arm("mini-swe-agent", "m", network="egress"))
                if "api_base" in w]
    assert cli_env(arm("mini-swe-agent", "m")) == {
        "MSWEA_CONFIGURED": "true", "MSWEA_COST_TRACKING": "ignore_errors",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
