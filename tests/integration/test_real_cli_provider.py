"""The real Claude Code and Codex CLIs, pinned, complete a scripted turn against the scripted
provider: each runs a shell command that writes a file and commits, then stops.

Everything runs in `bakeoff/python` as uid 1000 on an internal network of the test's own,
the provider a container on it reached by name; the CLIs can reach nothing else. The
command lines and environments below are the ones an unattended arm needs (see
/work/notes/i13-cli-facts.md): model and effort explicit, a fresh HOME, no auto-update,
telemetry, error reporting or other nonessential traffic, web search and fetch off.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runner.containers.engine import (
    LABEL_EXPERIMENT,
    Bind,
    ContainerSpec,
    Engine,
    Labels,
    Resources,
    Tmpfs,
    create_container,
    create_network,
)
from runner.containers.images import BuiltImage

CLAUDE_PACKAGE, CLAUDE_VERSION = "@anthropic-ai/claude-code", "2.1.328"
CODEX_PACKAGE, CODEX_VERSION = "@openai/codex", "0.169.0"
PROVIDER = Path(__file__).resolve().parents[1] / "fakes" / "scripted_provider.py"
SHELL = "echo fixed > /work/out.txt && git add -A && git commit -qm fix"
SCRIPT = {"steps": [{"shell": SHELL}, {"say": "done"}],
          "usage": {"input": 100, "output": 20, "cache_read": 3, "cache_write": 4,
                    "reasoning": 5}}
TOKEN = "bakeoff-arm-token-0123"
AGENT_UID = 1000
RUN_TIMEOUT_S = 300
LIMITS = Resources(cpus=1.0, memory_mb=2048, pids=512)

# What every agent container gets: a fresh HOME (a tmpfs), a git identity, and git told to
# trust the bind-mounted /work whoever owns it on the host.
BASE_ENV = {"HOME": "/home/agent", "GIT_AUTHOR_NAME": "agent",
            "GIT_AUTHOR_EMAIL": "agent@bakeoff.invalid", "GIT_COMMITTER_NAME": "agent",
            "GIT_COMMITTER_EMAIL": "agent@bakeoff.invalid", "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}

CLAUDE_MODEL = "claude-opus-4-8"
CLAUDE_ENV = {"ANTHROPIC_API_KEY": TOKEN,
              "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
              "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1"}
CLAUDE_ARGV = ("/opt/agent/claude", "--print", "--model", CLAUDE_MODEL, "--effort", "high",
               "--dangerously-skip-permissions", "--output-format", "stream-json", "--verbose",
               "--disallowedTools", "WebSearch", "WebFetch")

CODEX_MODEL = "gpt-6.1-sol"
CODEX_ENV = {"CODEX_HOME": "/home/agent/.codex", "BAKEOFF_MODEL_TOKEN": TOKEN}
CODEX_ARGV = ("/opt/agent/codex", "exec", "--model", CODEX_MODEL,
              "-c", "model_reasoning_effort=high",
              "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check", "--json",
              "-c", "model_provider=bakeoff",
              "-c", 'model_providers.bakeoff={{name="bakeoff", base_url="{base}/v1", '
                    'env_key="BAKEOFF_MODEL_TOKEN", wire_api="responses"}}',
              "-c", "web_search=disabled", "-c", "check_for_update_on_startup=false",
              "-c", "analytics.enabled=false", "-c", "feedback.enabled=false",
              "-c", "otel.exporter=none", "-c", "otel.metrics_exporter=none",
              "-c", "history.persistence=none", "-")


@dataclass(frozen=True)
class AgentBinaries:
    """The pinned CLIs' native binaries on the host."""

    claude: Path      # the claude executable (a single static file)
    codex_dir: Path   # holds `codex` and `codex-code-mode-host` (code mode runs the latter)


def _npm_install(package: str, version: str, into: Path) -> Path:
    """`npm install` one pinned package into `into` (atomically: a half install is never
    reused); install scripts off, the platform binary comes as an optional dependency."""
    if (into / ".complete").exists():
        return into
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(f"npm is needed to install {package}@{version} for this test; "
                    "install node/npm (apt-get install npm)")
    staging = into.with_name(into.name + f".partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    subprocess.run([npm, "install", "--no-audit", "--no-fund", "--ignore-scripts",
                    "--prefix", str(staging), f"{package}@{version}"],
                   check=True, capture_output=True, timeout=600)
    (staging / ".complete").touch()
    shutil.rmtree(into, ignore_errors=True)
    staging.rename(into)
    return into


@pytest.fixture(scope="session")
def agent_binaries() -> AgentBinaries:
    """The pinned CLIs. For now installed here with npm into
    ~/.cache/bakeoff-sandbox/agents-test/<package>-<version>/ when missing; the lead wires
    this fixture to the project's own install path (the agent layer)."""
    cache = Path.home() / ".cache" / "bakeoff-sandbox" / "agents-test"
    claude = _npm_install(CLAUDE_PACKAGE, CLAUDE_VERSION, cache / f"claude-code-{CLAUDE_VERSION}")
    codex = _npm_install(CODEX_PACKAGE, CODEX_VERSION, cache / f"codex-{CODEX_VERSION}")
    modules = claude / "node_modules" / "@anthropic-ai"
    return AgentBinaries(
        claude=modules / "claude-code-linux-x64" / "claude",
        codex_dir=codex / "node_modules" / "@openai" / "codex-linux-x64" / "vendor"
        / "x86_64-unknown-linux-musl" / "bin")


@dataclass
class Bench:
    """One experiment's network, provider container and directories."""

    engine: Engine
    experiment: str
    network: str
    provider: str
    state: Path
    work: Path

    def labels(self, role: str) -> Labels:
        return Labels(experiment=self.experiment, role=role)

    def requests(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (self.state / "requests.jsonl").read_text()
                .splitlines()]


@pytest.fixture
def bench(engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path
          ) -> Iterator[Bench]:
    experiment = f"it-{secrets.token_hex(4)}"
    state, work = tmp_path / "state", tmp_path / "work"
    for path in (state, work):
        path.mkdir()
        path.chmod(0o777)  # written by uid 1000 in the containers
    (state / "script.json").write_text(json.dumps(SCRIPT))
    found = Bench(engine, experiment, f"{experiment}-net", f"{experiment}-provider", state,
                  work)
    try:
        create_network(engine, found.network, found.labels("network"), egress=False)
        _start_provider(found)
        yield found
    finally:
        engine.remove_labelled({LABEL_EXPERIMENT: experiment})


def _start_provider(bench: Bench) -> None:
    spec = ContainerSpec(
        image="bakeoff/python", labels=bench.labels("provider"), resources=LIMITS,
        user=f"{AGENT_UID}:{AGENT_UID}", purpose="scripted provider", name=bench.provider,
        command=("python3", "/provider/scripted_provider.py", "--script",
                 "/state/script.json", "--log", "/state/requests.jsonl", "--port", "8000"),
        mounts=(Bind(PROVIDER.parent, "/provider"), Bind(bench.state, "/state", False)),
        network=bench.network)
    container = create_container(bench.engine, spec)
    container.start()
    deadline = time.monotonic() + 30
    while b"scripted provider on" not in container.logs():
        if time.monotonic() > deadline:
            pytest.fail(f"scripted provider did not start: {container.logs()[-2000:]!r}")
        time.sleep(0.2)


def run_agent(bench: Bench, binary: Bind, argv: tuple[str, ...], env: dict[str, str]
              ) -> tuple[int, str]:
    """Run the CLI on the brief in a fresh git repository at /work; (exit code, output)."""
    brief = "Fix the bug, then commit."
    # Codex refuses a CODEX_HOME that does not exist ("Error finding codex home").
    script = ("set -e; mkdir -p \"${CODEX_HOME:-$HOME}\"; cd /work; git init -q; "
              "git commit -q --allow-empty -m init; "
              f"echo '{brief}' | {' '.join(_quote(a) for a in argv)}")
    spec = ContainerSpec(
        image="bakeoff/python", command=("bash", "-c", script), labels=bench.labels("arm"),
        resources=LIMITS, user=f"{AGENT_UID}:{AGENT_UID}", purpose="agent CLI",
        mounts=(binary, Bind(bench.work, "/work", False)), network=bench.network,
        tmpfs=(Tmpfs("/home/agent", 512, mode="0755", owner=AGENT_UID),
               Tmpfs("/tmp", 256)),
        env=BASE_ENV | env, working_dir="/work")
    container = create_container(bench.engine, spec)
    container.start()
    status = container.wait(timeout=RUN_TIMEOUT_S)
    return int(status["StatusCode"]), container.logs().decode(errors="replace")


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


def _git(work: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "safe.directory=*", "-C", str(work), *args],
                          check=True, capture_output=True, text=True).stdout


def assert_fixed_and_committed(bench: Bench, code: int, output: str) -> None:
    assert code == 0, output[-3000:]
    assert (bench.work / "out.txt").read_text() == "fixed\n"
    assert _git(bench.work, "log", "--format=%s").splitlines() == ["fix", "init"]
    assert _git(bench.work, "show", "--name-only", "--format=", "HEAD").split() == ["out.txt"]


def test_claude_code_runs_the_scripted_bash_call_and_commits(bench: Bench,
                                                             agent_binaries: AgentBinaries):
    """Claude Code 2.1.328 with --effort high: two streamed Messages calls, each naming the
    model and output_config.effort=high, the token as x-api-key, no web tools offered."""
    binary = Bind(agent_binaries.claude, "/opt/agent/claude")
    env = CLAUDE_ENV | {"ANTHROPIC_BASE_URL": f"http://{bench.provider}:8000"}
    code, output = run_agent(bench, binary, CLAUDE_ARGV, env)
    assert_fixed_and_committed(bench, code, output)
    result = json.loads(output.strip().splitlines()[-1])
    assert (result["type"], result["is_error"], result["result"]) == ("result", False, "done")
    requests = bench.requests()
    assert [(r["method"], r["path"], r["reply"]) for r in requests] == [
        ("POST", "/v1/messages?beta=true", "shell"), ("POST", "/v1/messages?beta=true", "say")]
    for request in requests:
        body = request["body"]
        assert (body["model"], body["output_config"], body["stream"]) == (
            CLAUDE_MODEL, {"effort": "high"}, True)
        assert body["thinking"]["type"] == "adaptive"
        assert request["headers"]["x-api-key"] == TOKEN
        assert "authorization" not in request["headers"]
        assert "WebSearch" not in json.dumps(body) and "WebFetch" not in json.dumps(body)


def test_codex_runs_the_scripted_exec_call_and_commits(bench: Bench,
                                                       agent_binaries: AgentBinaries):
    """Codex 0.169.0 with model_reasoning_effort=high: two streamed Responses calls, each
    naming the model and reasoning.effort=high, the token as a Bearer, no web_search tool."""
    binary = Bind(agent_binaries.codex_dir, "/opt/agent")
    argv = tuple(a.format(base=f"http://{bench.provider}:8000") if "{base}" in a else a
                 for a in CODEX_ARGV)
    code, output = run_agent(bench, binary, argv, CODEX_ENV)
    assert_fixed_and_committed(bench, code, output)
    events = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert events[-1]["type"] == "turn.completed"
    requests = bench.requests()
    assert [(r["method"], r["path"], r["reply"]) for r in requests] == [
        ("POST", "/v1/responses", "shell"), ("POST", "/v1/responses", "say")]
    assert requests[1]["body"]["input"][-1]["type"] == "custom_tool_call_output"
    for request in requests:
        body = request["body"]
        assert (body["model"], body["reasoning"]["effort"], body["stream"]) == (
            CODEX_MODEL, "high", True)
        assert request["headers"]["authorization"] == f"Bearer {TOKEN}"
        assert "content-encoding" not in request["headers"]
        assert '"web_search"' not in json.dumps(body)
