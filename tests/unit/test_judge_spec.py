"""`[contract] judge`: a command, or an agent CLI through the gateway (issue 13, item 6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rig.contract.content import build_contract
from runner.commands import demo
from runner.commands import judges as judges_mod
from runner.commands.dispatch.agents import CODEX_PROVIDER, judge_command
from runner.errors import BadInputError, ManifestError
from runner.manifest import LoadedManifest, load_manifest
from runner.manifest.judge import JudgeSpec, spec_of

AGENT = 'judge = "claude-code:claude-judge-5@high"\njudge_version = "2.1.328"'


def manifest(tmp_path: Path, judge: str) -> LoadedManifest:
    path = demo.prepare(tmp_path / "example")
    text = path.read_text()
    old = 'judge = "command:python3 judge.py {input}"'
    assert old in text
    path.write_text(text.replace(old, judge))
    return load_manifest(path)


def refusal(tmp_path: Path, judge: str) -> str:
    with pytest.raises(ManifestError) as caught:
        manifest(tmp_path, judge)
    return str(caught.value)


def test_an_agent_judge_names_its_cli_model_effort_version_and_default_key(
        tmp_path: Path) -> None:
    spec = spec_of(manifest(tmp_path, AGENT).manifest.contract)
    assert spec == JudgeSpec("agent", cli="claude-code", model="claude-judge-5", effort="high",
                             version="2.1.328", key="ANTHROPIC_API_KEY")
    codex = spec_of(manifest(tmp_path / "b", 'judge = "codex:gpt-judge@low"\n'
                             'judge_version = "0.169.0"\njudge_key = "OPENAI_JUDGE_KEY"'
                             ).manifest.contract)
    assert (codex.provider, codex.key, codex.effort) == ("openai", "OPENAI_JUDGE_KEY", "low")


@pytest.mark.parametrize(("judge", "why"), [
    ('judge = "claude-code:claude-judge-5@high"',
     "contract.judge_version: the claude-code judge needs a pinned CLI"),
    ('judge = "gemini:g-2@high"\njudge_version = "1"', "contract.judge: is not a judge this tool"),
    ('judge = "claude-code:claude-judge-5"\njudge_version = "1"', "is not a judge this tool runs"),
    ('judge = "claude-opus"',
     "contract.judge: is not a judge this tool runs (found 'claude-opus')"),
    (AGENT + '\njudge_key = "OPENAI_API_KEY"',
     "contract.judge_key: is not a key of anthropic, the judge's provider"),
    ('judge = "command:python3 judge.py {input}"\njudge_version = "1"',
     "contract.judge_version: applies to an agent judge only"),
    ('judge = "command:  "', "contract.judge: names no command"),
    ('judge = "codex:scripted-fixer@high"\njudge_version = "0.169.0"',
     "a contestant cannot grade itself"),
])
def test_a_judge_the_tool_cannot_run_is_refused_at_load_with_the_key_path(
        tmp_path: Path, judge: str, why: str) -> None:
    assert why in refusal(tmp_path, judge)


def test_the_judge_s_pinned_version_is_part_of_the_contract(tmp_path: Path) -> None:
    """Another CLI version grades differently: a new pin is a contract change; a command
    judge's contract text is exactly what it was before agent judges existed."""
    def judge_of(loaded: LoadedManifest) -> str:
        return build_contract(loaded, base_commit="0" * 40, image_identity="i",
                              read_at_base=lambda path: b"", resolve_reference=lambda r: None
                              ).judge
    pinned = "claude-code:claude-judge-5@high (version 2.1.328)"
    assert judge_of(manifest(tmp_path, AGENT)) == pinned
    command = 'judge = "command:python3 judge.py {input}"'
    assert judge_of(manifest(tmp_path / "b", command)) == "command:python3 judge.py {input}"


def test_the_judge_commands_run_without_tools_through_the_gateway() -> None:
    claude = judge_command("claude-code", "/opt/bakeoff/agent/bin/claude", "claude-judge-5",
                           "high")
    assert claude == ("/opt/bakeoff/agent/bin/claude --print --model claude-judge-5 --effort "
                      "high --tools '' --no-session-persistence --output-format json")
    codex = judge_command("codex", "codex", "gpt-judge", "low")
    assert codex.endswith(" --json -")  # the prompt is its stdin, no file of any host
    assert CODEX_PROVIDER in codex and "--config model_reasoning_effort=low" in codex
    assert "--dangerously-bypass-approvals-and-sandbox" not in codex


def test_score_asks_for_the_judge_s_key_before_any_sample(tmp_path: Path) -> None:
    loaded = manifest(tmp_path, AGENT)
    with pytest.raises(BadInputError, match=r"needs its key in \$ANTHROPIC_API_KEY"):
        judges_mod.judge_key(loaded, {"ANTHROPIC_API_KEY": " "})
    assert judges_mod.judge_key(loaded, {"ANTHROPIC_API_KEY": "sk-1"}) == "sk-1"
    assert judges_mod.judge_key(manifest(tmp_path / "b", 'judge = "none"'), {}) is None
