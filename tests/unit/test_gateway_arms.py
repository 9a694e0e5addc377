"""Gateway arms and pinned CLIs in the manifest and the adapters (issue 13)."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from gateway import config as gateway_config
from gateway.errors import Provider
from rig.standings import describe_flag
from runner.commands import demo
from runner.commands import up as up_mod
from runner.commands.dispatch.agents import ADAPTERS, CODEX_PROVIDER, cli_env, gateway_env
from runner.commands.dispatch.brief import BRIEF_PATH
from runner.commands.dispatch.record import ArmRecord, ArmState, apply_gateway
from runner.containers import gateway as gateway_mod
from runner.containers.backend import Labels
from runner.errors import BadInputError, ManifestError
from runner.manifest import Arm, Gateway, key_provider, load_manifest

BASE = {"id": "C1", "model": "claude-opus-4-8", "effort": "high", "effort_normalized": "high",
        "effort_provenance": "experiment_config", "effort_evidence": "declared",
        "mode": "single_agent"}


def arm(**changes: object) -> Arm:
    return Arm.model_validate({**BASE, **changes}, strict=False)


def problems(**changes: object) -> list[tuple[tuple[object, ...], str]]:
    with pytest.raises(pydantic.ValidationError) as error:
        arm(**changes)
    return [(tuple(e["loc"]), e["msg"]) for e in error.value.errors()]


def test_a_cli_adapter_defaults_to_the_gateway_and_a_command_arm_to_no_network() -> None:
    assert arm(agent="claude-code", agent_version="2.1.328").network == "gateway"
    assert arm(agent="codex", agent_version="0.169.0").installs == "codex"
    assert arm(command="sh x.sh").network == "none"
    wrapped = arm(command="claude -p", cli="claude-code", agent_version="2.1.328")
    assert (wrapped.installs, wrapped.network) == ("claude-code", "none")


def test_a_cli_adapter_without_a_pin_or_a_program_is_refused_with_the_fix() -> None:
    (found,) = problems(agent="claude-code")
    assert found[1].endswith("agent_version: the claude-code adapter needs a pinned CLI")


def test_a_gateway_arm_s_secrets_must_be_provider_keys() -> None:
    (found,) = problems(agent="codex", agent_version="0.169.0",
                        secrets=["OPENAI_API_KEY", "GITHUB_TOKEN"])
    assert found[1].endswith("secrets[1]: is not a provider key the gateway can hold")


def test_allow_models_and_agent_version_need_what_they_mean() -> None:
    assert "only a gateway arm" in problems(command="x", allow_models=["m"])[0][1]
    assert "agent_version pins a CLI" in problems(command="x", agent_version="1")[0][1]


def test_a_gateway_codex_arm_gets_the_gateway_provider_and_no_key() -> None:
    codex = arm(agent="codex", agent_version="0.169.0", model="gpt-6.1-sol")
    rendered = ADAPTERS["codex"].render(codex, "/tmp/bakeoff/brief.md",
                                        program="/opt/bakeoff/agent/bin/codex")
    assert CODEX_PROVIDER in rendered and "--model gpt-6.1-sol" in rendered
    egress = arm(agent="codex", agent_version="0.169.0", network="egress")
    assert "model_provider=bakeoff" not in ADAPTERS["codex"].render(
        egress, "/b", program="/opt/bakeoff/agent/bin/codex")
    env = gateway_env("bkf-gw-token")
    assert env["ANTHROPIC_BASE_URL"] == "http://model-gateway:8080/anthropic"
    assert env["OPENAI_BASE_URL"] == "http://model-gateway:8080/openai/v1"
    assert {env["ANTHROPIC_API_KEY"], env["OPENAI_API_KEY"],
            env["BAKEOFF_GATEWAY_TOKEN"]} == {"bkf-gw-token"}
    assert cli_env(codex) == {"CODEX_HOME": "/home/agent/.codex"}
    assert cli_env(arm(command="sh x")) == {}


def test_gateway_urls_must_be_http() -> None:
    assert Gateway(anthropic="http://proxy:8000/").anthropic == "http://proxy:8000"
    with pytest.raises(pydantic.ValidationError, match="is not an http"):
        Gateway(openai="api.openai.com")


def test_up_reads_every_gateway_key_from_the_environment_and_names_each_missing_one(
        tmp_path: Path) -> None:
    loaded = load_manifest(demo.prepare(tmp_path / "example").parent / "agents.toml")
    keys = {"ANTHROPIC_API_KEY": "sk-ant", "OPENAI_API_KEY": "sk-oai"}
    assert up_mod.gateway_keys(loaded, keys) == keys
    with pytest.raises(BadInputError) as error:
        up_mod.gateway_keys(loaded, {"ANTHROPIC_API_KEY": "sk-ant", "OPENAI_API_KEY": ""})
    assert str(error.value).splitlines()[0] == (
        "key(s) not set (or empty) in the environment: "
        f"{loaded.path}: arms[2] (codex-high): OPENAI_API_KEY")


def test_a_dollar_budget_needs_a_price_for_every_model_it_counts(tmp_path: Path) -> None:
    """agents.toml prices claude-opus-4-8, gpt-6.1-sol and the judge's gpt-judge-6, not the
    loop arm's claude-loop-4-8: with max_usd_per_arm the gateway could not count it."""
    path = demo.prepare(tmp_path / "example").parent / "agents.toml"
    path.write_text(path.read_text().replace("max_requests_per_arm = 6",
                                             "max_requests_per_arm = 6\nmax_usd_per_arm = 5.0"))
    with pytest.raises(ManifestError) as error:
        load_manifest(path)
    assert "gateway.max_usd_per_arm: needs a price for claude-loop-4-8" in str(error.value)
    path.write_text(path.read_text().replace(
        '[gateway.prices]', '[gateway.prices]\n"claude-loop-4-8" = { input = 1.0, output = 2.0 }'))
    assert load_manifest(path).manifest.gateway.max_usd_per_arm == 5.0


def test_a_gemini_key_is_a_provider_key_and_the_gemini_upstream_defaults_to_google() -> None:
    gemini = arm(agent="command", command="sh x", network="gateway", model="gemini-x",
                 secrets=["GEMINI_API_KEY"])
    assert key_provider("GEMINI_API_KEY") == "gemini" and gemini.secrets == ["GEMINI_API_KEY"]
    assert Gateway().gemini == "https://generativelanguage.googleapis.com"
    assert Gateway(gemini="http://proxy:8000/gemini/").gemini == "http://proxy:8000/gemini"
    with pytest.raises(pydantic.ValidationError, match="is not an http"):
        Gateway(gemini="generativelanguage.googleapis.com")


def test_allow_server_tools_is_granted_at_the_gateway_only() -> None:
    (found,) = problems(command="sh x", allow_server_tools=True)
    assert found[1].endswith("allow_server_tools: is granted at the model gateway: only a "
                             "gateway arm has it")
    assert arm(agent="codex", agent_version="0.169.0", allow_server_tools=True
               ).allow_server_tools is True
    assert arm(agent="codex", agent_version="0.169.0").allow_server_tools is False


def test_the_gateway_config_holds_the_gemini_upstream_and_each_arm_s_server_tools_grant(
        tmp_path: Path) -> None:
    doors = [gateway_mod.Door("g1", "net-g1", "bkf-gw-1", ("gemini-x",),
                              {"gemini": "GEMINI_API_KEY"}, allow_server_tools=True),
             gateway_mod.Door("c1", "net-c1", "bkf-gw-2", ("claude-x",),
                              {"anthropic": "ANTHROPIC_API_KEY"})]
    plan = gateway_mod.plan_launch(Gateway(gemini="http://gemini-proxy:9000"), "gw", "sha256:b",
                                   Labels("exp", "gateway", "", "r1"), tmp_path, "change-1",
                                   doors, {"GEMINI_API_KEY": "AIza-x"})
    assert plan.config["upstreams"] == {"anthropic": "https://api.anthropic.com",
                                        "openai": "https://api.openai.com",
                                        "gemini": "http://gemini-proxy:9000"}
    assert {token: (grant["arm"], grant["keys"], grant["allow_server_tools"])
            for token, grant in plan.config["tokens"].items()} == {
        "bkf-gw-1": ("g1", {"gemini": "GEMINI_API_KEY"}, True),
        "bkf-gw-2": ("c1", {"anthropic": "ANTHROPIC_API_KEY"}, False)}
    parsed = gateway_config.parse(plan.config)  # the gateway reads what the runner writes
    assert parsed.upstreams["gemini"] == gateway_config.Upstream(
        "gemini", Provider.GEMINI, "http://gemini-proxy:9000")
    assert (parsed.tokens["bkf-gw-1"].allow_server_tools,
            parsed.tokens["bkf-gw-2"].allow_server_tools) == (True, False)


def test_up_grants_server_tools_to_the_arm_that_declares_them() -> None:
    granted = arm(agent="codex", agent_version="0.169.0", allow_server_tools=True,
                  secrets=["OPENAI_API_KEY", "GEMINI_API_KEY"])
    door = up_mod._door(granted, "net")
    assert (door.allow_server_tools, door.keys) == (
        True, {"openai": "OPENAI_API_KEY", "gemini": "GEMINI_API_KEY"})
    assert up_mod._door(arm(agent="codex", agent_version="0.169.0"), "net"
                        ).allow_server_tools is False


def test_an_arm_whose_granted_server_tools_were_used_is_marked_and_its_round_flagged() -> None:
    """The mark reaches arm.json through the gateway's records alone (apply_gateway), and
    every report's flags through the marks: nothing in dispatch names it."""
    record = ArmRecord.model_validate(dict(
        experiment="e", change="c", arm="g1", attempt=1, state=ArmState.FINISHED, run="r",
        container="k", image_id="i", network="n", egress=False, adapter="command",
        command="x", env={}, secrets=[], brief_path=BRIEF_PATH, brief_sha256="s",
        brief_file_sha256="f", dispatch_timeout_s=10.0, base_commit="b", started_at="t",
        model="gemini-x", effort="high", effort_normalized="high",
        effort_provenance="experiment_config", effort_evidence="declared",
        mode="single_agent", control=False))
    line: dict[str, object] = {
        "arm": "g1", "role": "arm", "path": "/gemini/v1beta/models/gemini-x:generateContent",
        "model_requested": "gemini-x", "model_response": "gemini-x-001", "refused": None,
        "effort": {"generationConfig.thinkingConfig.thinkingLevel": "high"},
        "server_tools": ["googleSearch"], "server_tools_allowed": True,
        "usage": {"input": 10, "output": 5}, "cost_usd": None}
    marked = apply_gateway(record, [line], "gateway/records/c/requests.jsonl")
    assert marked.marks == ["server_tools"]
    assert marked.effort_evidence == ("gateway: 1 request to gemini-x, "
                                      "generationConfig.thinkingConfig.thinkingLevel=high in 1/1")
    assert ("server_tools: the arm's requests used provider-side tools that reach the "
            "internet (googleSearch in 1 request), allowed by allow_server_tools"
            ) in marked.caveats
    assert describe_flag("server_tools:g1").startswith(
        "server_tools:g1: the arm was granted allow_server_tools")
