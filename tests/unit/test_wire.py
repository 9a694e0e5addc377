"""rig.wire: what an arm really ran, from the gateway's records (issue 13)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rig import wire


def line(model: str = "claude-opus-4-8", effort: str | None = "high", *,
         answered: str | None = None,
         refused: str | None = None, cost: float | None = 0.5, arm: str = "A",
         path: str = "/anthropic/v1/messages?beta=true", field: str = "output_config_effort",
         **usage: int) -> dict[str, Any]:
    return {"arm": arm, "role": "arm", "path": path, "model_requested": model,
            field: effort, "model_response": answered or model, "refused": refused,
            "usage": {"input": 100, "output": 20, "cache_read": 10, "cache_write": 5,
                      "reasoning": 3, **usage} if refused is None else None,
            "cost_usd": cost if refused is None else None}


def test_the_effort_on_every_request_is_the_evidence_and_no_mark() -> None:
    lines = [line() for _ in range(14)]
    seen = wire.observe("claude-opus-4-8", "high", lines)
    assert seen.evidence == ("gateway: 14 requests to claude-opus-4-8, "
                             "output_config.effort=high in 14/14")
    assert (seen.model_observed, seen.effort_observed, seen.marks) == (
        "claude-opus-4-8", "high", ())


def test_a_declared_effort_the_wire_contradicts_is_effort_mismatch() -> None:
    lines = [line(effort="low"), line(effort="low")]
    seen = wire.observe("claude-opus-4-8", "high", lines)
    assert seen.marks == ("effort_mismatch",)
    assert seen.effort_observed == "low"
    assert seen.caveats == ("effort_mismatch: the arm declares effort 'high', the gateway saw "
                            "low in 2/2 of its requests to claude-opus-4-8",)


def test_an_effort_the_wire_never_carries_is_a_mismatch_too() -> None:
    seen = wire.observe("gpt-5", "high", [line("gpt-5", None, field="reasoning_effort",
                                               path="/openai/v1/responses")])
    assert seen.marks == ("effort_mismatch",)
    assert seen.evidence == "gateway: 1 request to gpt-5, reasoning.effort=none in 1/1"


def test_side_requests_to_an_allowed_model_are_named_apart() -> None:
    lines = [line(), line("claude-haiku-4-5", None)]
    seen = wire.observe("claude-opus-4-8", "high", lines)
    assert seen.marks == ()
    assert seen.evidence == ("gateway: 1 request to claude-opus-4-8, output_config.effort=high "
                             "in 1/1 (+ 1 to claude-haiku-4-5)")


def test_requests_only_to_another_model_or_answered_by_one_are_model_mismatch() -> None:
    only_other = wire.observe("claude-opus-4-8", "high", [line("claude-haiku-4-5")])
    assert only_other.marks == ("model_mismatch",)
    assert only_other.model_observed is None
    swapped = wire.observe("claude-opus-4-8", "high", [line(answered="claude-sonnet-4-5")])
    assert swapped.marks == ("model_mismatch",)
    assert swapped.caveats == ("model_mismatch: requests to 'claude-opus-4-8' were answered "
                               "by claude-sonnet-4-5",)
    dated = wire.observe("gpt-5", "high", [line("gpt-5", answered="gpt-5-2026-08-07")])
    assert dated.marks == ()


def test_totals_per_model_refusals_and_a_missing_price() -> None:
    lines = [line(), line(), line("claude-haiku-4-5", None, cost=None),
             line(refused="budget_exhausted")]
    summary = wire.summarize(lines, "gateway/records/c1/requests.jsonl")
    assert (summary.requests, summary.refused, summary.budget_exhausted) == (
        4, {"budget_exhausted": 1}, True)
    assert (summary.input, summary.output, summary.cache_read, summary.cache_write,
            summary.reasoning, summary.tokens) == (300, 60, 30, 15, 9, 360)
    assert summary.cost_usd is None  # haiku has no price
    opus = next(m for m in summary.by_model if m.model == "claude-opus-4-8")
    assert (opus.requests, opus.refused, opus.input, opus.cost_usd) == (3, 1, 200, 1.0)
    assert wire.unpriced(lines) == ["claude-haiku-4-5"]
    assert wire.observe("claude-opus-4-8", "high", lines).marks == ("budget_exhausted",)


def test_read_lines_keeps_the_arm_s_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_text(json.dumps(line()) + "\n" + json.dumps(line(arm="B")) + "\n"
                    + json.dumps({**line(), "role": "judge"}) + "\n" + '{"arm": "A", "to')
    assert len(wire.read_lines(path, "A")) == 1
    assert len(wire.read_lines(path, "A", role="judge")) == 1
    assert wire.read_lines(tmp_path / "absent.jsonl", "A") == []


def carried(model: str, path: str, effort: dict[str, Any], **more: Any) -> dict[str, Any]:
    """A record as the gateway writes it since issue 32: every effort field by name."""
    return {**line(model, None, path=path), "effort": effort, **more}


GEMINI = "/gemini/v1beta/models/gemini-x:streamGenerateContent?alt=sse"
LEVEL = "generationConfig.thinkingConfig.thinkingLevel"


@pytest.mark.parametrize(("path", "effort", "declared", "evidence"), [
    ("/anthropic/v1/messages", {"thinking.budget_tokens": 32000}, "32000",
     "thinking.budget_tokens=32000 in 2/2"),
    ("/anthropic/v1/messages", {"output_config.effort": "high",
                                "thinking.budget_tokens": 31999}, "high",
     "output_config.effort=high in 2/2"),
    ("/openai/v1/chat/completions", {"enable_thinking": True, "thinking_budget": 4096},
     "4096", "thinking_budget=4096 in 2/2"),
    ("/openai/v1/chat/completions", {"reasoning.effort": "high", "reasoning.max_tokens": 2000},
     "high", "reasoning.effort=high in 2/2"),
    (GEMINI, {LEVEL: "high", "generationConfig.thinkingConfig.includeThoughts": True},
     "HIGH", f"{LEVEL}=high in 2/2"),
], ids=["messages-budget", "messages-both", "qwen", "openrouter", "gemini"])
def test_the_field_that_carries_the_declared_effort_is_the_evidence(
        path: str, effort: dict[str, Any], declared: str, evidence: str) -> None:
    seen = wire.observe("m-1", declared, [carried("m-1", path, effort) for _ in range(2)])
    assert (seen.marks, seen.evidence) == ((), f"gateway: 2 requests to m-1, {evidence}")


@pytest.mark.parametrize(("path", "effort", "evidence"), [
    (GEMINI, {}, f"{LEVEL}=none in 1/1"),
    (GEMINI, {"generationConfig.thinkingConfig.thinkingBudget": 0},
     "generationConfig.thinkingConfig.thinkingBudget=0 in 1/1"),
    ("/openai/v1/chat/completions", {}, "reasoning_effort=none in 1/1"),
    ("/openai/v1/chat/completions", {"enable_thinking": False}, "enable_thinking=false in 1/1"),
], ids=["gemini-none", "gemini-budget-0", "chat-none", "qwen-off"])
def test_an_effort_no_field_carries_is_effort_mismatch_on_every_wire(
        path: str, effort: dict[str, Any], evidence: str) -> None:
    seen = wire.observe("m-1", "high", [carried("m-1", path, effort)])
    assert (seen.marks, seen.evidence) == (
        ("effort_mismatch",), f"gateway: 1 request to m-1, {evidence}")


def test_server_tools_let_through_flag_the_round_and_refused_ones_are_a_caveat() -> None:
    granted = carried("m-1", GEMINI, {LEVEL: "high"}, server_tools=["googleSearch"],
                      server_tools_allowed=True)
    refused = {**line("m-1", None, refused="server_tool", path="/anthropic/v1/messages"),
               "server_tools": ["web_search_20250305"], "server_tools_allowed": False}
    plain = carried("m-1", GEMINI, {LEVEL: "high"}, server_tools=[],
                    server_tools_allowed=False)
    seen = wire.observe("m-1", "high", [granted, granted, refused, plain])
    assert seen.marks == ("server_tools",)
    assert seen.caveats == (
        "server_tools: the arm's requests used provider-side tools that reach the internet "
        "(googleSearch in 2 requests), allowed by allow_server_tools",
        "the gateway refused the arm's requests for provider-side tools that reach the "
        "internet (web_search_20250305 in 1 request)")
    assert wire.observe("m-1", "high", [refused, plain]).marks == ()
    assert wire.summarize([refused, plain], "r").refused == {"server_tool": 1}


def test_a_model_the_cli_rewrote_and_the_gateway_refused_is_model_mismatch() -> None:
    """Gemini CLI 0.61.0 sends gemini-3-pro-preview as gemini-3.1-pro-preview: every
    request is refused as not the arm's model, none is forwarded; the arm is marked (not a
    silent refusal) and the caveat names the model really asked for."""
    rewritten = "gemini-3.1-pro-preview"
    lines = [line(rewritten, None, refused="model_not_allowed",
                  path=f"/gemini/v1beta/models/{rewritten}:streamGenerateContent")]
    seen = wire.observe("gemini-3-pro-preview", "high", lines)
    assert seen.marks == ("model_mismatch",)
    assert seen.caveats == (
        "model_mismatch: the arm declares 'gemini-3-pro-preview', the gateway saw requests "
        "only to gemini-3.1-pro-preview; refused as not the arm's model: "
        "gemini-3.1-pro-preview in 1 request",)
    assert (seen.model_observed, seen.effort_observed) == (None, None)
    assert seen.evidence == "gateway: no request to gemini-3-pro-preview"


def test_refused_side_requests_beside_the_arm_s_own_model_flag_nothing() -> None:
    """The honest twin: Claude Code's small-model side requests in an arm without
    allow_models are refused, while its work goes to its own model: no mark."""
    lines = [line(), line("claude-haiku-4-5", None, refused="model_not_allowed"), line()]
    seen = wire.observe("claude-opus-4-8", "high", lines)
    assert (seen.marks, seen.caveats) == ((), ())
    assert seen.evidence == ("gateway: 2 requests to claude-opus-4-8, "
                             "output_config.effort=high in 2/2")


def test_only_refusals_of_another_kind_are_no_model_mismatch() -> None:
    """A request for the arm's own model refused by its budget is not a rewrite."""
    seen = wire.observe("claude-opus-4-8", "high",
                        [line(refused="budget_exhausted"), line(refused="upstream_error")])
    assert seen.marks == ("budget_exhausted",)


def test_forwarded_and_refused_other_models_are_named_together() -> None:
    lines = [line("flash-sent"), line("flash-other", None, refused="model_not_allowed"),
             line("flash-other", None, refused="model_not_allowed")]
    seen = wire.observe("flash", "high", lines)
    assert seen.caveats == (
        "model_mismatch: the arm declares 'flash', the gateway saw requests only to "
        "flash-other, flash-sent; refused as not the arm's model: flash-other in 2 requests",)


def test_an_effort_missing_on_a_named_upstream_s_path_is_named_by_its_protocol() -> None:
    """`/moonshot/v1/messages` (a [[gateway.upstreams]] entry of protocol anthropic) is a
    Messages request: the effort it lacks is output_config.effort, not Responses' field."""
    record = {**line("kimi-k9", None, path="/moonshot/v1/messages"), "provider": "anthropic"}
    seen = wire.observe("kimi-k9", "high", [record])
    assert seen.evidence == "gateway: 1 request to kimi-k9, output_config.effort=none in 1/1"
    chat = {**line("qwen-9", None, path="/dashscope/v1/chat/completions",
                   field="reasoning_effort"), "provider": "openai"}
    assert wire.observe("qwen-9", "high", [chat]).evidence == (
        "gateway: 1 request to qwen-9, reasoning_effort=none in 1/1")
