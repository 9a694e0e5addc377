"""The real Claude Code and Codex CLIs, pinned and installed by the project's own agent
layers, through `up` -> `dispatch` -> `score`, behind the model gateway (issue 13).

The upstream is tests/fakes/scripted_provider.py, a container on an internal network the
test creates and names as `[gateway] upstream_network`: the gateway joins that network
only, so nothing here can resolve or reach an address outside this machine's own
containers. The provider tells every CLI to run the bundled example's fixer (which
fixes the bug and commits); it keeps `claude-loop` asking for tools until the gateway's
`max_requests_per_arm` stops it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import re
import secrets
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rig.report import read_observation
from runner.commands import demo
from runner.commands.dispatch.agents import (
    CLAUDE_CODE_TEMPLATE,
    CODEX_PROVIDER,
    CODEX_TEMPLATE,
    JUDGE_TEMPLATES,
)
from runner.containers import gateway as gateway_mod
from runner.containers import sandbox
from runner.containers.backend import LABEL_EXPERIMENT, LABEL_IDENTITY, Labels
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage, agent_cli
from runner.manifest import LoadedManifest, load_manifest
from runner.store import state as state_mod
from tests.integration.installed import Installed
from tests.integration.provider_lab import (
    JUDGE_ANSWER,
    JUDGE_SCORES,
    Upstream,
    scripted_provider,
)

FIX = "sh /agents/fixer.sh /tmp/bakeoff/brief.md"
JUDGE_MODEL = "gpt-judge-6"  # agents.toml's judge: codex through a gateway of its own
SCRIPT = {"steps": [{"shell": FIX}, {"say": "fixed and committed"}],
          "usage": {"input": 1000, "output": 200, "cache_read": 0, "cache_write": 0,
                    "reasoning": 50},
          "models": {"claude-loop-4-8": {"steps": [{"shell": FIX}], "loop": True,
                                         "usage": {"input": 1000, "output": 200}},
                     JUDGE_MODEL: {"steps": [{"say": JUDGE_ANSWER}],
                                   "usage": {"input": 3000, "output": 300}}}}
ANTHROPIC_KEY = "sk-ant-real-" + "k3y" * 8
OPENAI_KEY = "sk-openai-real-" + "k3y" * 8
CHANGE = "cap-horizon"
MAX_REQUESTS = 6


@pytest.fixture
def upstream(engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path
             ) -> Iterator[Upstream]:
    with scripted_provider(engine, tmp_path, SCRIPT) as found:
        yield found


def _manifest(tmp_path: Path, upstream: Upstream) -> LoadedManifest:
    path = demo.prepare(tmp_path / "example").parent / "agents.toml"
    name = f"ra-{secrets.token_hex(3)}"
    text = path.read_text().replace('"horizon-agents"', f'"{name}"')
    base = f"http://{upstream.provider}:8000"
    text = text.replace('anthropic = "https://api.anthropic.com"', f'anthropic = "{base}"')
    text = text.replace('openai = "https://api.openai.com"',
                        f'openai = "{base}"\nupstream_network = "{upstream.network}"')
    path.write_text(text)
    return load_manifest(path)


def _arm(state: Path, arm: str) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(
        (state / "stages" / CHANGE / "arms" / arm / "arm.json").read_text())
    return record


REACH = (
    "import socket, urllib.request\n"
    "print('gateway', urllib.request.urlopen('http://model-gateway:8080/healthz', "
    "timeout=5).status)\n"
    "for host, port in {targets}:\n"
    "    s = socket.socket(); s.settimeout(3)\n"
    "    try:\n"
    "        s.connect((host, port)); print('REACHED', host)\n"
    "    except OSError:\n"
    "        print('blocked', host)\n"
)


def _ip(engine: Engine, container: str, network: str | None = None) -> str:
    networks = engine.client.containers.get(container).attrs["NetworkSettings"]["Networks"]
    return str((networks[network] if network else next(iter(networks.values())))["IPAddress"])


def _host_listener(engine: Engine) -> tuple[socket.socket, str, int]:
    ipam = engine.client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    host = ipam.get("Gateway") or str(next(ipaddress.ip_network(ipam["Subnet"]).hosts()))
    listener = socket.create_server((host, 0))
    listener.settimeout(60)

    def accept() -> None:
        with contextlib.suppress(OSError):
            for _ in range(4):
                listener.accept()[0].close()

    threading.Thread(target=accept, daemon=True).start()
    return listener, host, listener.getsockname()[1]


def test_real_clis_through_the_gateway_fix_commit_and_are_measured_on_the_wire(
        engine: Engine, upstream: Upstream, built_images: dict[str, BuiltImage],
        installed_tool: Installed, tmp_path: Path) -> None:
    """Every step through the installed wheel's `bakeoff-sandbox` (issue 34), from a new
    directory with no PYTHONPATH and no BAKEOFF_* variable: the gateway the arms reach
    is built from the package the wheel carries."""
    loaded = _manifest(tmp_path, upstream)
    name = loaded.manifest.experiment.name
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    keys = {"ANTHROPIC_API_KEY": ANTHROPIC_KEY, "OPENAI_API_KEY": OPENAI_KEY}

    def bakeoff(*args: str) -> subprocess.CompletedProcess[str]:
        done = installed_tool.run(*args, "-f", str(loaded.path), cwd=elsewhere, env=keys,
                                  timeout=1800)
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
        return done

    listener, host, port = _host_listener(engine)
    try:
        bakeoff("up")
        bakeoff("dispatch")
        directory, current = state_mod.require_up(loaded)
        states = {arm: _arm(directory, arm)["state"] for arm in ARMS}
        assert states == {"claude-high": "finished", "claude-low": "finished",
                          "codex-high": "finished", "claude-wrapped": "finished",
                          "claude-loop": "failed"}, {a: _arm(directory, a)["error"] for a in ARMS}
        _assert_confined(engine, current, upstream, host, port)
        _assert_key_nowhere(engine, current)
        _assert_gateway_from_the_wheel(engine, current, installed_tool,
                                       built_images["python"])
        bakeoff("score", "--change", CHANGE)
        bakeoff("report")
    finally:
        listener.close()
        with contextlib.suppress(Exception):
            installed_tool.run("down", "-f", str(loaded.path), cwd=elsewhere, timeout=600)
        engine.remove_labelled({LABEL_EXPERIMENT: name})
    _assert_records(directory, upstream)


ARMS = ("claude-high", "claude-low", "codex-high", "claude-wrapped", "claude-loop")


def _assert_gateway_from_the_wheel(engine: Engine, current: state_mod.ExperimentState,
                                   installed_tool: Installed, python: BuiltImage) -> None:
    """The gateway container runs the image built from the installed package: its
    identity is the one computed from the wheel's gateway/ on the python toolchain."""
    assert current.gateway is not None
    container = engine.client.containers.get(current.gateway.container_id)
    labels = container.image.attrs["Config"]["Labels"]
    shipped = installed_tool.wheel_bytes("gateway/")
    assert "__main__.py" in shipped and not [n for n in shipped if n.endswith(".pyc")]
    assert labels[LABEL_IDENTITY] == gateway_mod.image_identity(python.image_id, shipped)


def _assert_confined(engine: Engine, current: state_mod.ExperimentState, upstream: Upstream,
                     host: str, port: int) -> None:
    """From a gateway arm's sandbox only `model-gateway` answers: not the provider (by
    name or address), not the host, not another arm."""
    arm = current.arm("claude-high")
    other = current.arm("codex-high")
    assert arm is not None and other is not None
    provider_ip = _ip(engine, upstream.provider)
    other_ip = _ip(engine, other.container_id)
    targets = ((provider_ip, 8000), (host, port), (other_ip, 22))
    probe = sandbox.exec_in(engine, arm.container_id,
                            ["python3", "-c", REACH.format(targets=targets)], timeout_s=60)
    assert probe.stdout.splitlines() == ["gateway 200", f"blocked {provider_ip}",
                                         f"blocked {host}", f"blocked {other_ip}"], probe.stderr
    by_name = sandbox.exec_in(engine, arm.container_id, ["getent", "hosts", upstream.provider],
                              timeout_s=30)
    assert by_name.exit_code == 2 and by_name.stdout == ""


def _assert_key_nowhere(engine: Engine, current: state_mod.ExperimentState) -> None:
    """The real keys are in no arm container: not its environment, not a file."""
    for arm in current.arms:
        env = engine.client.containers.get(arm.container_id).attrs["Config"]["Env"]
        assert not [e for e in env if ANTHROPIC_KEY in e or OPENAI_KEY in e]
        found = sandbox.exec_in(
            engine, arm.container_id,
            ["sh", "-c", f"grep -rlsF -e {ANTHROPIC_KEY} -e {OPENAI_KEY} / "
                         "--exclude-dir=proc --exclude-dir=sys; cat /proc/*/environ "
                         f"2>/dev/null | tr '\\0' '\\n' | grep -cF -e {ANTHROPIC_KEY} "
                         f"-e {OPENAI_KEY}"], timeout_s=120)
        assert found.stdout.split() == ["0"], (arm.arm, found.stdout[-2000:])


def _assert_records(directory: Path, upstream: Upstream) -> None:
    (round_,) = read_observation(directory / "OBSERVATION.json").rounds
    verdicts = {arm.arm: arm.results.success.pass_rate for arm in round_.arms}
    assert verdicts == dict.fromkeys(ARMS, 1.0)  # every arm's commit holds the fix
    for arm in ARMS:
        record = _arm(directory, arm)
        assert record["commits"] == 1 and record["commit"] != record["base_commit"], arm
        assert record["agent_cli"]["version"] in ("2.1.328", "0.169.0")
        assert record["network"].endswith(record["network"]) and not record["egress"]
    high, low = _arm(directory, "claude-high"), _arm(directory, "claude-low")
    assert (high["effort_observed"], low["effort_observed"]) == ("high", "low")
    assert high["effort_evidence"] == ("gateway: 2 requests to claude-opus-4-8, "
                                       "output_config.effort=high in 2/2")
    assert low["effort_provenance"] == "runtime_log" and low["marks"] == []
    codex = _arm(directory, "codex-high")
    assert codex["effort_evidence"] == ("gateway: 2 requests to gpt-6.1-sol, "
                                        "reasoning.effort=high in 2/2")
    assert codex["model_observed"] == "gpt-6.1-sol"
    # 2 requests x (1000 in, 200 out) at 1.25 / 10.0 per million.
    assert codex["gateway"]["cost_usd"] == pytest.approx(2 * (1000 * 1.25 + 200 * 10.0) / 1e6)
    wrapped = _arm(directory, "claude-wrapped")
    assert wrapped["marks"] == ["effort_mismatch"]
    assert wrapped["effort_observed"] == "low"
    loop = _arm(directory, "claude-loop")
    assert loop["marks"] == ["budget_exhausted"]
    assert loop["gateway"]["budget_exhausted"] is True
    assert loop["gateway"]["requests"] - sum(loop["gateway"]["refused"].values()) == MAX_REQUESTS
    # The provider saw the real keys (only from the gateway) and the CLIs' own efforts.
    seen = upstream.requests()
    anthropic = [r for r in seen if r["path"].startswith("/v1/messages")]
    openai = [r for r in seen if r["path"].startswith("/v1/responses")]
    assert {r["headers"].get("x-api-key") for r in anthropic} == {ANTHROPIC_KEY}
    assert {r["headers"].get("authorization") for r in openai} == {f"Bearer {OPENAI_KEY}"}
    # Nothing the run wrote holds a real key (the gateway redacts what it keeps).
    keys = (ANTHROPIC_KEY.encode(), OPENAI_KEY.encode())
    leaked = [str(p) for p in directory.rglob("*")
              if p.is_file() and any(key in p.read_bytes() for key in keys)]
    assert leaked == []
    _assert_judged(directory, upstream)


def _assert_judged(directory: Path, upstream: Upstream) -> None:
    """The codex judge answered for every arm through its own gateway: its scores are the
    rubric's, its usage is reported apart from the arms' (role judge, not in any arm's)."""
    (round_,) = read_observation(directory / "OBSERVATION.json").rounds
    arms = [arm.arm for arm in round_.arms]
    for entry in round_.arms:
        assert {d: getattr(entry.scores, d) for d in JUDGE_SCORES} == JUDGE_SCORES, entry.arm
    judged = [r for r in upstream.requests() if r["body"].get("model") == JUDGE_MODEL]
    assert len(judged) == len(arms)
    assert {r["body"]["reasoning"]["effort"] for r in judged} == {"medium"}
    records = [json.loads(line) for line in (directory / "stages" / CHANGE / "judge" / "gateway"
               / "records" / CHANGE / "requests.jsonl").read_text().splitlines()]
    assert sorted(r["arm"] for r in records) == sorted(arms)
    assert {r["role"] for r in records} == {"judge"}
    for entry in round_.arms:  # the pinned CLI each arm ran, as its record says
        assert entry.agent_cli == _arm(directory, entry.arm)["agent_cli"]
        assert entry.agent_cli is not None and len(entry.agent_cli["sha256"]) == 64
    assert [j.arm for j in round_.judge_usage] == arms
    for entry in round_.judge_usage:
        assert (entry.model_observed, entry.effort_observed) == (JUDGE_MODEL, "medium")
        assert entry.evidence == (f"gateway: 1 request to {JUDGE_MODEL}, "
                                  "reasoning.effort=medium in 1/1")
        assert entry.usage.cost_usd == pytest.approx((3000 * 2.0 + 300 * 8.0) / 1e6)
    assert all(e.usage.by_model[0].model != JUDGE_MODEL for e in round_.arms if e.usage)
    results = (directory / "RESULTS.md").read_text()
    assert "## Judge usage (its gateway's records)" in results
    row = f"| {CHANGE} | codex-high | codex:{JUDGE_MODEL}@medium (0.169.0) | 1 (0) | 3000 | 300 |"
    assert row in results
    observation = read_observation(directory / "OBSERVATION.json")
    (round_,) = observation.rounds
    assert {"effort_mismatch:claude-wrapped", "budget_exhausted:claude-loop"} <= set(round_.flags)
    assert "model_mismatch" not in " ".join(round_.flags)
    results = (directory / "RESULTS.md").read_text()
    assert "Model usage (the gateway's records)" in results and "| gpt-6.1-sol | 2 |" in results
    scorecard = (directory / "stages" / CHANGE / "SCORECARD.md").read_text()
    assert "effort_mismatch:claude-wrapped" in scorecard


FLAG = re.compile(r"(?<![\w-])(--[a-zA-Z][\w-]*)")
HELP = {"claude-code": ("2.1.328", ["claude", "--help"], CLAUDE_CODE_TEMPLATE),
        "codex": ("0.169.0", ["codex", "exec", "--help"], CODEX_TEMPLATE)}


@pytest.mark.parametrize("cli", sorted(HELP))
def test_every_flag_an_adapter_passes_is_in_the_pinned_cli_s_help(
        engine: Engine, built_images: dict[str, BuiltImage], cli: str) -> None:
    """The adapters' (and the agent judges') flags, checked against `--help` of the
    version the agent layer installs (a flag renamed in a new version fails here, not in
    a live bake-off)."""
    version, argv, template = HELP[cli]
    image = agent_cli.layer(engine, built_images["python"], agent_cli.cli_for(cli), version)
    labels = Labels(f"it-{secrets.token_hex(3)}", "image-check")
    text = sandbox.check_image(engine, image.image_id, argv, labels,
                               env={"HOME": "/tmp", "CODEX_HOME": "/tmp"})
    offered = set(FLAG.findall(text))
    used = set(FLAG.findall(template + JUDGE_TEMPLATES[cli]
                            + (CODEX_PROVIDER if cli == "codex" else "")))
    assert used and used <= offered, sorted(used - offered)
    assert agent_cli.installed(engine, image, labels).version == version
