"""The cross-vendor example (examples/horizon/agents-cross.toml, issue 32): one arm per
agent CLI the project installs, each pinned, each in its own protocol through the model
gateway, run once through `up` -> `dispatch` -> `score` against the scripted provider
(Messages, Responses, Chat Completions and Gemini's streamGenerateContent, streamed with
tool calls as the real APIs stream them), and every assertion of "What it must show" for
each arm read off that one run (a module-scoped experiment: the suite's time is shared).

Claude Code and Codex are proved in depth by test_real_agents.py; here they run beside
the new CLIs so the example is the whole field, and their records are checked the same way.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runner.commands import demo, score
from runner.commands import down as down_mod
from runner.commands import up as up_mod
from runner.commands.dispatch import cli_settings
from runner.commands.dispatch import run as dispatch_mod
from runner.commands.dispatch.agents import (
    CLI_ENV,
    GEMINI_CLI_TEMPLATE,
    MINI_SWE_AGENT_TEMPLATE,
    OPENCODE_TEMPLATE,
    QWEN_CODE_TEMPLATE,
)
from runner.containers import sandbox
from runner.containers.backend import LABEL_EXPERIMENT, Labels
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage, agent_cli
from runner.manifest import Arm, LoadedManifest, load_manifest
from runner.store import state as state_mod
from tests.integration.provider_lab import JUDGE_ANSWER, Upstream, scripted_provider
from tests.integration.test_real_agents import REACH, _host_listener, _ip

FIX = "sh /agents/fixer.sh /tmp/bakeoff/brief.md"
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
JUDGE_MODEL = "gpt-judge-6"
SCRIPT = {"steps": [{"shell": FIX}, {"say": "fixed and committed"}],
          "usage": {"input": 1000, "output": 200, "cache_read": 0, "cache_write": 0,
                    "reasoning": 50},
          "models": {JUDGE_MODEL: {"steps": [{"say": JUDGE_ANSWER}],
                                   "usage": {"input": 3000, "output": 300}},
                     # mini-swe-agent ends when a command prints its submission word.
                     "open-coder-9": {"steps": [{"shell": FIX}, {"shell": SUBMIT}],
                                      "usage": {"input": 1000, "output": 200,
                                                "reasoning": 50}}}}
KEYS = {"ANTHROPIC_API_KEY": "sk-ant-real-" + "x9z" * 8,
        "OPENAI_API_KEY": "sk-openai-real-" + "x9z" * 8,
        "GEMINI_API_KEY": "AIza-real-" + "x9z" * 8}
CHANGE = "cap-horizon"
# arm -> (model, the effort field the wire carries, the route the provider saw)
WIRE = {"claude-code": ("claude-opus-4-8", "output_config.effort=high", "/v1/messages"),
        "codex": ("gpt-6.1-sol", "reasoning.effort=high", "/v1/responses"),
        "opencode": ("gpt-6.1-sol", "reasoning.effort=high", "/v1/responses"),
        "gemini-cli": ("gemini-9-pro", "generationConfig.thinkingConfig.thinkingLevel=HIGH",
                       "/v1beta/models/gemini-9-pro:streamGenerateContent"),
        "qwen-code": ("qwen-coder-9", "reasoning.effort=high", "/v1/chat/completions"),
        "mini-swe-agent": ("open-coder-9", "reasoning_effort=high", "/v1/chat/completions")}
VERSIONS = {"opencode": "1.18.33", "gemini-cli": "0.61.0", "qwen-code": "0.24.4",
            "mini-swe-agent": "2.4.6"}
# An arm that names a model Gemini CLI rewrites before sending (an alias): the test's own,
# not the example's.
ALIAS, REWRITTEN = "gemini-3-pro-preview", "gemini-3.1-pro-preview"
FLASH, FLASH_SENT = "flash", "gemini-3.8-flash"  # allowed: forwarded, model_mismatch
ALIAS_ARM = f"""
[[arms]]
id = "gemini-alias"
model = "{ALIAS}"
effort = "high"
effort_normalized = "high"
effort_provenance = "experiment_config"
effort_evidence = "the test's arm: an alias Gemini CLI rewrites"
mode = "single_agent"
agent = "gemini-cli"
agent_version = "0.61.0"
secrets = ["GEMINI_API_KEY"]

[[arms]]
id = "gemini-flash"
model = "{FLASH}"
effort = "high"
effort_normalized = "high"
effort_provenance = "experiment_config"
effort_evidence = "the test's arm: an alias Gemini CLI rewrites, its rewrite allowed"
mode = "single_agent"
agent = "gemini-cli"
agent_version = "0.61.0"
secrets = ["GEMINI_API_KEY"]
allow_models = ["{FLASH_SENT}"]
"""
TEST_ARMS = {"gemini-alias": ("failed", 0.0), "gemini-flash": ("finished", 1.0)}
UNSTREAMED = {"mini-swe-agent"}  # LiteLLM's completion() as mini-swe-agent calls it


@dataclass
class Run:
    directory: Path
    upstream: Upstream
    verdicts: dict[str, float]
    states: dict[str, str]
    probe: list[str]
    expected_probe: list[str]
    leaks: dict[str, str]
    seconds: float


def _manifest(tmp_path: Path, upstream: Upstream) -> LoadedManifest:
    path = demo.prepare(tmp_path / "example").parent / "agents-cross.toml"
    text = path.read_text().replace('"horizon-cross"', f'"rx-{secrets.token_hex(3)}"')
    base = f"http://{upstream.provider}:8000"
    for url in ("https://api.anthropic.com", "https://api.openai.com",
                "https://generativelanguage.googleapis.com"):
        text = text.replace(f'"{url}"', f'"{base}"', 1)
    text = text.replace("max_requests_per_arm = 6",
                        f'max_requests_per_arm = 6\nupstream_network = "{upstream.network}"')
    path.write_text(text + ALIAS_ARM)
    return load_manifest(path)


@pytest.fixture(scope="module")
def run(engine: Engine, built_images: dict[str, BuiltImage],
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """The one experiment of this module: up, dispatch, score; its probes taken while
    the sandboxes stand."""
    tmp_path = tmp_path_factory.mktemp("cross")
    started = time.monotonic()
    with pytest.MonkeyPatch.context() as patch, \
            scripted_provider(engine, tmp_path, SCRIPT) as upstream:
        for name, value in KEYS.items():
            patch.setenv(name, value)
        loaded = _manifest(tmp_path, upstream)
        listener, host, port = _host_listener(engine)
        try:
            up_mod.up(engine, loaded)
            dispatched = dispatch_mod.dispatch(engine, loaded)
            states = {o.record.arm: o.record.state for o in dispatched.outcomes}
            directory, current = state_mod.require_up(loaded)
            probe, expected = _probe(engine, current, upstream, host, port)
            leaks = _leaks(engine, current)
            scored, _ = score.score(engine, loaded, CHANGE, lambda _: None)
        finally:
            listener.close()
            with contextlib.suppress(Exception):
                down_mod.down(engine, loaded)
            engine.remove_labelled({LABEL_EXPERIMENT: loaded.manifest.experiment.name})
        verdicts = {arm.arm: arm.success.rate.rate for arm in scored}
        yield Run(directory, upstream, verdicts, states, probe, expected, leaks,
                  time.monotonic() - started)


def _probe(engine: Engine, current: state_mod.ExperimentState, upstream: Upstream,
           host: str, port: int) -> tuple[list[str], list[str]]:
    """From the Gemini CLI arm's sandbox: only `model-gateway` answers."""
    arm, other = current.arm("gemini-cli"), current.arm("qwen-code")
    assert arm is not None and other is not None
    provider_ip, other_ip = _ip(engine, upstream.provider), _ip(engine, other.container_id)
    targets = ((provider_ip, 8000), (host, port), (other_ip, 22))
    found = sandbox.exec_in(engine, arm.container_id,
                            ["python3", "-c", REACH.format(targets=targets)], timeout_s=60)
    return found.stdout.splitlines(), ["gateway 200", f"blocked {provider_ip}",
                                       f"blocked {host}", f"blocked {other_ip}"]


def _leaks(engine: Engine, current: state_mod.ExperimentState) -> dict[str, str]:
    """Per arm, what of the real keys its container holds (environment, files, processes)."""
    pattern = " ".join(f"-e {key}" for key in KEYS.values())
    found = {}
    for arm in current.arms:
        env = engine.client.containers.get(arm.container_id).attrs["Config"]["Env"]
        inside = sandbox.exec_in(
            engine, arm.container_id,
            ["sh", "-c", f"grep -rlsF {pattern} / --exclude-dir=proc --exclude-dir=sys; "
                         f"cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -cF {pattern}"],
            timeout_s=120)
        in_env = [e for e in env if any(key in e for key in KEYS.values())]
        found[arm.arm] = f"{len(in_env)} {inside.stdout.strip()}"
    return found


def _arm(run: Run, arm: str) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(
        (run.directory / "stages" / CHANGE / "arms" / arm / "arm.json").read_text())
    return record


def test_the_module_s_duration_is_reported(run: Run) -> None:
    print(f"\ncross-vendor experiment (up, dispatch, score): {run.seconds:.0f} s")
    assert run.seconds > 0


def test_every_arm_finishes_and_its_commit_passes(run: Run) -> None:
    assert run.states == {**dict.fromkeys(WIRE, "finished"),
                          **{arm: state for arm, (state, _) in TEST_ARMS.items()}}
    assert run.verdicts == {**dict.fromkeys(WIRE, 1.0),
                            **{arm: rate for arm, (_, rate) in TEST_ARMS.items()}}


def test_a_model_gemini_cli_rewrote_is_refused_and_flagged_model_mismatch(run: Run) -> None:
    """Gemini CLI 0.61.0 sends gemini-3-pro-preview as gemini-3.1-pro-preview: the gateway
    refuses it (not the arm's model, Gemini's error shape, so the CLI does not retry),
    nothing reaches the provider, the record names the model really asked for, and the arm
    is marked model_mismatch (never a silent refusal)."""
    record = _arm(run, "gemini-alias")
    gateway = record["gateway"]
    assert (gateway["requests"], gateway["refused"]) == (1, {"model_not_allowed": 1})
    assert [m["model"] for m in gateway["by_model"]] == [REWRITTEN]
    assert record["commits"] == 0 and record["model_observed"] is None
    assert record["marks"] == ["model_mismatch"]
    assert (f"model_mismatch: the arm declares {ALIAS!r}, the gateway saw requests only to "
            f"{REWRITTEN}; refused as not the arm's model: {REWRITTEN} in 1 request"
            ) in record["caveats"]
    assert [r for r in run.upstream.requests() if REWRITTEN in r["path"]] == []


def test_a_rewrite_the_arm_allows_is_forwarded_and_flagged_model_mismatch(run: Run) -> None:
    """`flash` goes out as gemini-3.8-flash; allowed, it is served, and the arm is marked:
    no request carried the model it declares."""
    record = _arm(run, "gemini-flash")
    assert record["marks"] == ["model_mismatch"]
    assert (f"model_mismatch: the arm declares {FLASH!r}, the gateway saw requests only "
            f"to {FLASH_SENT}") in record["caveats"]
    assert [m["model"] for m in record["gateway"]["by_model"]] == [FLASH_SENT]


@pytest.mark.parametrize("arm", sorted(WIRE))
def test_each_arm_record_shows_its_model_and_effort_seen_on_the_wire(run: Run, arm: str
                                                                     ) -> None:
    """Two requests per arm (a tool call, then the final text), both carrying the arm's
    own model and effort: the record's evidence is the gateway's, never the manifest's."""
    model, effort, _ = WIRE[arm]
    record = _arm(run, arm)
    assert record["commits"] == 1 and record["commit"] != record["base_commit"]
    assert (record["model_observed"], record["effort_observed"]) == (
        model, effort.split("=")[1])
    assert record["effort_provenance"] == "runtime_log" and record["marks"] == []
    assert record["effort_evidence"] == f"gateway: 2 requests to {model}, {effort} in 2/2"


@pytest.mark.parametrize("arm", sorted(WIRE))
def test_each_arm_s_tokens_are_exactly_the_provider_s(run: Run, arm: str) -> None:
    """2 requests x (1000 in, 200 out of which 50 reasoning where the wire says so)."""
    gateway = _arm(run, arm)["gateway"]
    assert (gateway["requests"], gateway["refused"]) == (2, {})
    assert (gateway["input"], gateway["output"], gateway["cache_read"]) == (2000, 400, 0)
    reasoning = 0 if arm == "claude-code" else 100  # the Messages API does not count them
    assert gateway["reasoning"] == reasoning


def test_the_cli_each_arm_ran_is_pinned_and_identified(run: Run) -> None:
    for arm, version in VERSIONS.items():
        cli = _arm(run, arm)["agent_cli"]
        assert (cli["cli"], cli["version"], cli["version_output"]) == (arm, version, version)
        assert re.fullmatch(r"[0-9a-f]{64}", cli["sha256"])


def test_the_provider_saw_each_protocol_streamed_with_the_gateway_s_real_key(run: Run
                                                                            ) -> None:
    """Each arm's requests reached the provider on its own protocol's route, streamed,
    with the real key put there by the gateway (never the arm's token)."""
    seen = [r for r in run.upstream.requests() if r["method"] == "POST"]
    for arm, (model, _, route) in WIRE.items():
        own = [r for r in seen if r["path"].split("?")[0] == route
               and (r["body"].get("model") == model or route.startswith("/v1beta"))]
        assert own, arm
        if route.startswith("/v1beta"):
            assert {r["path"] for r in own} == {route + "?alt=sse"}
            assert {r["headers"].get("x-goog-api-key") for r in own} == {
                KEYS["GEMINI_API_KEY"]}
        else:
            assert all(bool(r["body"].get("stream")) != (arm in UNSTREAMED) for r in own), arm
    assert {r["headers"].get("x-api-key") for r in seen
            if r["path"].startswith("/v1/messages")} == {KEYS["ANTHROPIC_API_KEY"]}
    assert {r["headers"].get("authorization") for r in seen
            if r["path"].startswith(("/v1/responses", "/v1/chat"))} == {
        f"Bearer {KEYS['OPENAI_API_KEY']}"}


def test_no_new_cli_offers_its_model_a_web_tool(run: Run) -> None:
    """OpenCode's webfetch/websearch, Gemini CLI's google_web_search/web_fetch and Qwen
    Code's web_fetch/web_search are switched off by the settings the adapters write."""
    web = {*cli_settings.OPENCODE_DENIED, *cli_settings.GEMINI_EXCLUDED,
           *cli_settings.QWEN_EXCLUDED}
    for request in run.upstream.requests():
        body = request.get("body") or {}
        names = {t.get("name") or (t.get("function") or {}).get("name")
                 for t in body.get("tools") or []}
        names |= {d.get("name") for t in body.get("tools") or []
                  for d in t.get("functionDeclarations") or []}
        assert not names & web, (request["path"], sorted(names & web))


def test_a_sandbox_reaches_nothing_but_the_gateway_and_holds_no_key(run: Run) -> None:
    assert run.probe == run.expected_probe
    assert run.leaks == dict.fromkeys([*WIRE, *TEST_ARMS], "0 0")
    keys = [key.encode() for key in KEYS.values()]
    leaked = [str(p) for p in run.directory.rglob("*")
              if p.is_file() and any(key in p.read_bytes() for key in keys)]
    assert leaked == []


# ------------------------------------------------------------ flags against the pinned CLI

FLAG = re.compile(r"(?<![\w-])(--[a-zA-Z][\w-]*)")
HELP = {"opencode": (["sh", "-c", "opencode run --help 2>&1"], OPENCODE_TEMPLATE),  # stderr
        "gemini-cli": (["gemini", "--help"], GEMINI_CLI_TEMPLATE),
        "qwen-code": (["qwen", "--help"], QWEN_CODE_TEMPLATE),
        "mini-swe-agent": (["mini", "--help"], MINI_SWE_AGENT_TEMPLATE)}
# Where each CLI's code is, to find the settings keys and variables it reads.
CODE = {"opencode": "/opt/bakeoff/agent/bin/opencode",
        "gemini-cli": "/opt/bakeoff/agent/node_modules/@google/gemini-cli/bundle",
        "qwen-code": "/opt/bakeoff/agent/node_modules/@qwen-code/qwen-code",
        "mini-swe-agent": "/opt/bakeoff/agent/venv/lib/python3.11/site-packages"}


def _keys(value: object) -> set[str]:
    if isinstance(value, dict):
        return {str(k) for k in value} | {k for v in value.values() for k in _keys(v)}
    return set().union(*(_keys(v) for v in value)) if isinstance(value, list) else set()


@pytest.mark.parametrize("cli", sorted(HELP))
def test_every_flag_setting_and_variable_an_adapter_uses_is_the_pinned_cli_s(
        engine: Engine, built_images: dict[str, BuiltImage], cli: str) -> None:
    """The template's flags are in `--help` of the version the agent layer installs; every
    key of the settings it writes and every variable it sets occurs in the CLI's own code
    (a renamed setting fails here, not in a live bake-off)."""
    argv, template = HELP[cli]
    image = agent_cli.layer(engine, built_images["python"], agent_cli.cli_for(cli),
                            VERSIONS[cli])
    labels = Labels(f"it-{secrets.token_hex(3)}", "image-check")
    text = sandbox.check_image(engine, image.image_id, argv, labels, env={"HOME": "/tmp"})
    raw = cli_settings.cli_settings(cli, _gateway_arm(cli))
    used = set(FLAG.findall(template + raw.get("base_url", "") + raw.get("api_base", "")))
    assert used and used <= set(FLAG.findall(text)), sorted(used - set(FLAG.findall(text)))
    settings = {"opencode": cli_settings.opencode_config, "gemini-cli":
                cli_settings.gemini_settings, "qwen-code": cli_settings.qwen_settings,
                "mini-swe-agent": _mini_config}[cli]
    names = (_keys(settings(_gateway_arm(cli))) - {"gpt-6.1-sol", "gemini-9-pro"}
             | set(CLI_ENV[cli]))
    found = sandbox.check_image(
        engine, image.image_id,
        ["sh", "-c", f"for n in {' '.join(sorted(names))}; do grep -rqaF \"$n\" {CODE[cli]} "
                     f"|| echo missing $n; done; echo checked"], labels)
    assert found.split() == ["checked"], found
    assert agent_cli.installed(engine, image, labels).version == VERSIONS[cli]


def _mini_config(arm: Arm) -> dict[str, Any]:
    """The keys of mini-swe-agent's config the adapter sets (`--config a.b.c=v`)."""
    return {"model": {"model_kwargs": {"reasoning_effort": arm.effort, "api_base": ""}}}


def _gateway_arm(cli: str) -> Arm:
    model = {"opencode": "gpt-6.1-sol", "gemini-cli": "gemini-9-pro",
             "qwen-code": "qwen-coder-9", "mini-swe-agent": "open-coder-9"}[cli]
    return Arm(id=cli, model=model, effort="high", effort_normalized="high",
               effort_provenance="experiment_config", effort_evidence="test",
               mode="single_agent", agent=cli, agent_version=VERSIONS[cli])
