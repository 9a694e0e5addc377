"""`[contract] judge`: who scores the four subjective dims, never a contestant.

    judge = "none"                                   no judge: the dims are not scored
    judge = "command:python3 judge.py {input}"       a program (rig.judge), run on the host
    judge = "claude-code:<model>@<effort>"           a real CLI through the model gateway,
    judge = "codex:<model>@<effort>"                   pinned at `judge_version`

An agent judge runs the pinned CLI in a container of its own whose only reachable
address is the model gateway; the key it uses (`judge_key`, by default the provider's
usual variable) stays in the gateway, like an arm's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from runner.manifest.arms import key_provider
from runner.manifest.models import ContractSection
from runner.manifest.rules import RuleViolation

NONE = "none"
COMMAND_PREFIX = "command:"
DEFAULT_KEYS = {"claude-code": "ANTHROPIC_API_KEY", "codex": "OPENAI_API_KEY"}
PROVIDERS = {"claude-code": "anthropic", "codex": "openai"}
_AGENT = re.compile(r"(?P<cli>[a-z-]+):(?P<model>[A-Za-z0-9][A-Za-z0-9._/:-]*)"
                    r"@(?P<effort>[a-z]+)")
FORMS = ('"none", "command:<program> {input}", "claude-code:<model>@<effort>" or '
         '"codex:<model>@<effort>"')


@dataclass(frozen=True)
class JudgeSpec:
    """`[contract] judge`, read: its kind and what that kind needs."""

    kind: Literal["none", "command", "agent"]
    template: str = ""        # command: the shell template
    cli: str = ""             # agent: claude-code | codex
    model: str = ""
    effort: str = ""
    version: str = ""         # agent: judge_version
    key: str = ""             # agent: the variable holding its real key (the gateway's)

    @property
    def provider(self) -> str:
        return PROVIDERS.get(self.cli, "")


def parse(contract: ContractSection) -> tuple[JudgeSpec, list[RuleViolation]]:
    """The judge the contract names, and what is wrong with it (every problem at once)."""
    text = contract.judge.strip()
    if text == NONE:
        return JudgeSpec("none"), _stray(contract)
    if text.startswith(COMMAND_PREFIX):
        template = text.removeprefix(COMMAND_PREFIX).strip()
        problems = [] if template else [RuleViolation(
            ("contract", "judge"), "names no command", f"write one of {FORMS}", found=text)]
        return JudgeSpec("command", template=template), problems + _stray(contract)
    found = _AGENT.fullmatch(text)
    if found is None or found["cli"] not in DEFAULT_KEYS:  # the CLIs that can judge
        return JudgeSpec("none"), [RuleViolation(
            ("contract", "judge"), "is not a judge this tool runs", f"write one of {FORMS}",
            found=text)]
    spec = JudgeSpec("agent", cli=found["cli"], model=found["model"], effort=found["effort"],
                     version=contract.judge_version or "",
                     key=contract.judge_key or DEFAULT_KEYS[found["cli"]])
    return spec, _agent_problems(spec, contract)


def _agent_problems(spec: JudgeSpec, contract: ContractSection) -> list[RuleViolation]:
    problems = []
    if not spec.version:
        problems.append(RuleViolation(
            ("contract", "judge_version"), f"the {spec.cli} judge needs a pinned CLI",
            f'set judge_version (the {spec.cli} version to install, e.g. the arms\' '
            "agent_version)"))
    if key_provider(spec.key) != spec.provider:
        problems.append(RuleViolation(
            ("contract", "judge_key"), f"is not a key of {spec.provider}, the judge's provider",
            f"name a variable that starts with {spec.provider.upper()}_, or remove judge_key "
            f"(default {DEFAULT_KEYS[spec.cli]})", found=contract.judge_key))
    return problems


def _stray(contract: ContractSection) -> list[RuleViolation]:
    """judge_version / judge_key mean something only for an agent judge."""
    return [RuleViolation(("contract", key), "applies to an agent judge only",
                          'remove it, or set judge = "claude-code:<model>@<effort>"',
                          found=value)
            for key, value in (("judge_version", contract.judge_version),
                               ("judge_key", contract.judge_key)) if value is not None]


def spec_of(contract: ContractSection) -> JudgeSpec:
    """The judge of a contract that validated (its problems were refused at load)."""
    return parse(contract)[0]
