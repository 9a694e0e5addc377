"""`[[gateway.upstreams]]` and an arm's `upstream` (issue 32): the manifest's rules, the
keys `up` reads, the grant each arm gets, and the config.json the gateway parses back."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway import config as gateway_config
from gateway.errors import Provider
from runner.commands import demo
from runner.commands import up as up_mod
from runner.containers import gateway as gateway_mod
from runner.containers.backend import Labels
from runner.errors import BadInputError, ManifestError
from runner.manifest import LoadedManifest, load_manifest

UPSTREAMS = '''
[[gateway.upstreams]]
name = "vendor"
protocol = "anthropic"
base_url = "https://api.anthropic.example/"
key = "VENDOR_KEY"

[[gateway.upstreams]]
name = "moonshot"
protocol = "anthropic"
base_url = "https://api.moonshot.example/anthropic"
key = "MOONSHOT_KEY"
prices = { "kimi-k9" = { input = 0.6, output = 2.5 } }
'''


def arm_toml(arm_id: str, model: str, upstream: str, agent: str = "claude-code",
             version: str = "2.1.328", extra: str = "") -> str:
    return f'''
[[arms]]
id = "{arm_id}"
model = "{model}"
effort = "high"
effort_normalized = "high"
effort_provenance = "experiment_config"
effort_evidence = "declared"
mode = "single_agent"
agent = "{agent}"
agent_version = "{version}"
upstream = "{upstream}"
{extra}
'''


def example(tmp_path: Path, *parts: str) -> Path:
    """The bundled agents.toml (five gateway arms on the implicit upstreams) plus `parts`."""
    path = demo.prepare(tmp_path / "example").parent / "agents.toml"
    path.write_text(path.read_text() + "".join(parts))
    return path


def two_upstreams(tmp_path: Path) -> LoadedManifest:
    return load_manifest(example(tmp_path, UPSTREAMS, arm_toml("opus-vendor", "claude-opus-4-8",
                                                               "vendor"),
                                 arm_toml("kimi", "kimi-k9", "moonshot")))


def load_error(path: Path) -> str:
    with pytest.raises(ManifestError) as error:
        load_manifest(path)
    return str(error.value)


def test_two_upstreams_of_one_protocol_each_arm_granted_its_own(tmp_path: Path) -> None:
    loaded = two_upstreams(tmp_path)
    by_id = {arm.id: arm for arm in loaded.manifest.arms}
    kimi, opus, legacy = (up_mod._door(by_id[a], "net") for a in ("kimi", "opus-vendor",
                                                                  "claude-high"))
    assert (kimi.upstream, kimi.keys) == ("moonshot", {})
    assert (opus.upstream, opus.keys) == ("vendor", {})
    assert (legacy.upstream, legacy.keys) == (None, {"anthropic": "ANTHROPIC_API_KEY"})
    plan = gateway_mod.plan_launch(loaded.manifest.gateway, "gw", "sha256:b",
                                   Labels("exp", "gateway", "", "r1"), tmp_path, "change-1",
                                   [kimi, opus, legacy], {})
    assert plan.config["upstreams"] == {
        "anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com",
        "gemini": "https://generativelanguage.googleapis.com",
        "vendor": {"protocol": "anthropic", "base_url": "https://api.anthropic.example",
                   "key": "VENDOR_KEY", "prices": {}},
        "moonshot": {"protocol": "anthropic", "base_url": "https://api.moonshot.example/anthropic",
                     "key": "MOONSHOT_KEY", "prices": {"kimi-k9": {
                         "input": 0.6, "output": 2.5, "cache_read": None,
                         "cache_write": None}}}}
    parsed = gateway_config.parse(plan.config)  # the gateway reads what the runner writes
    assert parsed.upstreams["moonshot"] == gateway_config.Upstream(
        "moonshot", Provider.ANTHROPIC, "https://api.moonshot.example/anthropic",
        "MOONSHOT_KEY", {"kimi-k9": gateway_config.Price(0.6, 2.5)})
    assert {g.arm: g.upstream for g in parsed.tokens.values()} == {
        "kimi": "moonshot", "opus-vendor": "vendor", "claude-high": None}


def test_up_reads_each_used_upstream_s_key_and_names_the_missing_one(tmp_path: Path) -> None:
    loaded = two_upstreams(tmp_path)
    environ = {"ANTHROPIC_API_KEY": "sk-ant", "OPENAI_API_KEY": "sk-oai",
               "VENDOR_KEY": "sk-vendor", "MOONSHOT_KEY": "sk-moon", "UNUSED": "x"}
    assert up_mod.gateway_keys(loaded, environ) == {
        "ANTHROPIC_API_KEY": "sk-ant", "OPENAI_API_KEY": "sk-oai",
        "VENDOR_KEY": "sk-vendor", "MOONSHOT_KEY": "sk-moon"}
    with pytest.raises(BadInputError) as error:
        up_mod.gateway_keys(loaded, {**environ, "MOONSHOT_KEY": ""})
    assert str(error.value).splitlines()[0] == (
        "key(s) not set (or empty) in the environment: "
        f"{loaded.path}: [[gateway.upstreams]] moonshot: key MOONSHOT_KEY")


def test_an_upstream_no_arm_names_needs_no_key(tmp_path: Path) -> None:
    loaded = load_manifest(example(tmp_path, UPSTREAMS))
    keys = {"ANTHROPIC_API_KEY": "sk-ant", "OPENAI_API_KEY": "sk-oai"}
    assert up_mod.gateway_keys(loaded, keys) == keys


def test_an_arm_naming_an_unknown_upstream_is_told_the_known_ones(tmp_path: Path) -> None:
    text = load_error(example(tmp_path, UPSTREAMS, arm_toml("kimi", "kimi-k9", "moonshot-cn")))
    assert "arms[5].upstream: names no [[gateway.upstreams]] entry" in text
    assert ('use one of: vendor, moonshot; or add [[gateway.upstreams]] name = "moonshot-cn" '
            "(protocol, base_url, key)") in text


def test_two_upstreams_with_one_name_or_a_protocol_s_name_are_refused(tmp_path: Path) -> None:
    again = UPSTREAMS.replace('"vendor"', '"moonshot"')
    text = load_error(example(tmp_path / "a", again))
    assert "gateway.upstreams[1].name: duplicates upstreams[0].name" in text
    assert "give every [[gateway.upstreams]] its own name" in text
    implicit = UPSTREAMS.replace('"vendor"', '"anthropic"')
    text = load_error(example(tmp_path / "b", implicit))
    assert "gateway.upstreams[0].name: is the implicit upstream of [gateway] anthropic" in text
    assert "set [gateway] anthropic = its base_url" in text


def test_a_cli_that_cannot_speak_the_upstream_s_protocol_is_refused(tmp_path: Path) -> None:
    qwen = UPSTREAMS.replace('name = "vendor"\nprotocol = "anthropic"',
                             'name = "dashscope"\nprotocol = "openai"')
    text = load_error(example(tmp_path, qwen, arm_toml("cc-qwen", "qwen-9", "dashscope")))
    assert ("arms[5].upstream: is an openai upstream and claude-code speaks anthropic only"
            in text)
    assert "name an anthropic upstream, or another agent" in text


def test_an_upstream_arm_s_secrets_are_its_upstream_s_key_at_most(tmp_path: Path) -> None:
    own = arm_toml("kimi", "kimi-k9", "moonshot", extra='secrets = ["MOONSHOT_KEY"]')
    assert load_manifest(example(tmp_path / "a", UPSTREAMS, own)).manifest.arms[5].secrets == [
        "MOONSHOT_KEY"]
    other = arm_toml("kimi", "kimi-k9", "moonshot",
                     extra='secrets = ["MOONSHOT_KEY", "ANTHROPIC_API_KEY"]')
    text = load_error(example(tmp_path / "b", UPSTREAMS, other))
    assert ("arms[5].secrets[1]: is not the key of upstream moonshot (MOONSHOT_KEY), the only "
            "upstream the arm reaches") in text


def test_upstream_belongs_to_gateway_arms_only(tmp_path: Path) -> None:
    egress = arm_toml("kimi", "kimi-k9", "moonshot", extra='network = "egress"')
    text = load_error(example(tmp_path, UPSTREAMS, egress))
    assert ("arms[5].upstream: is reached through the model gateway: only a gateway arm "
            "names one") in text


def test_an_upstream_s_prices_count_for_a_dollar_budget(tmp_path: Path) -> None:
    """kimi-k9 is priced by moonshot only: enough for max_usd_per_arm; the same model on
    another upstream still needs [gateway.prices]."""
    path = example(tmp_path, UPSTREAMS, arm_toml("kimi", "kimi-k9", "moonshot"))
    budget = path.read_text().replace(
        "max_requests_per_arm = 6", "max_requests_per_arm = 6\nmax_usd_per_arm = 5.0").replace(
        "[gateway.prices]", '[gateway.prices]\n"claude-loop-4-8" = { input = 1.0, output = 2.0 }')
    path.write_text(budget)
    assert load_manifest(path).manifest.gateway.max_usd_per_arm == 5.0
    path.write_text(budget + arm_toml("kimi-vendor", "kimi-k9", "vendor"))
    assert "gateway.max_usd_per_arm: needs a price for kimi-k9" in load_error(path)
