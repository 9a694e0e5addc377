"""Gateway arms and pinned CLIs in the manifest and the adapters (issue 13)."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from runner.commands import demo
from runner.commands import up as up_mod
from runner.commands.dispatch.agents import ADAPTERS, CODEX_PROVIDER, cli_env, gateway_env
from runner.errors import BadInputError, ManifestError
from runner.manifest import Arm, Gateway, load_manifest

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
