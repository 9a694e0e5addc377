"""What `init` asks, and the bakeoff.toml, brief and agent scripts the answers make.

`render_manifest` fills the commented template (`templates/bakeoff.toml`) with the
answers, every value written as a TOML string; `TEMPLATE_ANSWERS` are the placeholders the
bare template shows (which `up` refuses: `runner.manifest.placeholders`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from runner.manifest.arms import _EXAMPLE_VERSION, AGENT_CLIS
from runner.manifest.models import EffortNormalized

# The `agent` values a manifest accepts: a scripted command, or a pinned CLI.
KNOWN_AGENTS = ("command", *AGENT_CLIS)
AGENTS_DIR = "agents"  # [experiment] agents_dir, beside the manifest
# The provider key each CLI's gateway arm needs (OpenCode and mini-swe-agent: by model).
CLI_KEY = {"claude-code": "ANTHROPIC_API_KEY", "codex": "OPENAI_API_KEY",
           "gemini-cli": "GEMINI_API_KEY", "qwen-code": "OPENAI_API_KEY"}
DEFAULT_EFFORT = "high"


@dataclass(frozen=True)
class ArmAnswer:
    """One arm as init writes it. A command arm without a model is scripted."""

    id: str
    agent: str = "command"
    model: str | None = None
    effort: str | None = None  # a CLI arm's effort (DEFAULT_EFFORT when None)
    control: bool = False

    @property
    def script(self) -> str | None:
        """The script (under agents_dir) a command arm runs; None for a CLI arm."""
        return f"{self.id}.sh" if self.agent == "command" else None


@dataclass(frozen=True)
class Answers:
    """Everything `init` asks (or takes from flags, or guesses)."""

    name: str
    repo: str                     # as the manifest says it: relative to the manifest
    success: str                  # FAILS at the base, PASSES once solved
    test: str
    image: str = "python"
    base: str = "main"
    change: str = "first-change"
    test_parser: str = "exit-code"
    success_parser: str = "exit-code"
    setup: tuple[str, ...] = ()
    requires: tuple[str, ...] = ("git",)
    protected: tuple[str, ...] = ()
    arms: tuple[ArmAnswer, ...] = field(default_factory=tuple)

    @property
    def brief_file(self) -> str:
        return f"briefs/{self.change}.md"


def toml_string(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(value, ensure_ascii=False)


def toml_list(values: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(toml_string(value) for value in values) + "]"


def render_manifest(template: str, answers: Answers) -> str:
    """The template with every `__TOKEN__` replaced by the answers."""
    values = {
        "__NAME__": toml_string(answers.name), "__SLUG__": answers.name,
        "__REPO__": toml_string(answers.repo),
        "__BASE__": toml_string(answers.base), "__IMAGE__": toml_string(answers.image),
        "__SETUP__": toml_list(answers.setup), "__REQUIRES__": toml_list(answers.requires),
        "__TEST_PARSER__": toml_string(answers.test_parser),
        "__TEST__": toml_string(answers.test),
        "__CHANGE__": toml_string(answers.change),
        "__BRIEF__": toml_string(answers.brief_file),
        "__PROTECTED__": toml_list(answers.protected),
        "__SUCCESS_PARSER__": toml_string(answers.success_parser),
        "__SUCCESS__": toml_string(answers.success),
        "__ARMS__": "\n\n".join(arm_block(arm, at) for at, arm in enumerate(answers.arms)),
    }
    for token, value in values.items():
        template = template.replace(token, value)
    return template


def arm_block(arm: ArmAnswer, index: int) -> str:
    """One `[[arms]]` table, commented."""
    head = ("[[arms]]                         # the control: the default / no-intervention "
            "configuration" if arm.control else "[[arms]]")
    lines = [head, f"id = {toml_string(arm.id)}", f"agent = {toml_string(arm.agent)}"]
    if arm.agent == "command":
        lines += _scripted(arm, index)
    else:
        lines += _cli(arm, index)
    lines.append(f"control = {'true' if arm.control else 'false'}")
    return "\n".join(lines)


def _scripted(arm: ArmAnswer, index: int) -> list[str]:
    lines = [f"command = {toml_string(f'sh /agents/{arm.script} {{brief}}')}"
             "  # run in the arm's sandbox, cwd = its checkout; /agents is agents_dir, "
             "read-only; {brief}, {model}, {effort}, {arm} are filled in"]
    if arm.model is None:
        lines.insert(0, "# a scripted contestant: with no model its identity is model "
                        '"scripted", effort "none" (not applicable)')
        return lines
    return _identity(arm.model, arm.effort, f"bakeoff.toml arms[{index}].effort, passed on "
                     "by the command") + lines


def _cli(arm: ArmAnswer, index: int) -> list[str]:
    key = CLI_KEY.get(arm.agent) or (
        "ANTHROPIC_API_KEY" if (arm.model or "").startswith(("claude", "anthropic/"))
        else "OPENAI_API_KEY")
    effort = arm.effort or DEFAULT_EFFORT
    return [f"agent_version = {toml_string(_EXAMPLE_VERSION[arm.agent])}"
            "  # the pinned CLI, installed into the arm's agent layer",
            *_identity(arm.model or "", effort,
                       f"bakeoff.toml arms[{index}].effort, passed to the CLI"),
            f"secrets = {toml_list([key])}"
            "  # the provider key: the model gateway holds it, never the sandbox"]


UNSTATED_EFFORT = "dispatch surface cannot set effort; none recorded"


def _identity(model: str, effort: str | None, evidence: str) -> list[str]:
    """The identity keys of an arm with a model; no effort stated is `unknown` (the
    honest value: the round is flagged effort_confounded)."""
    normalized = effort if effort is not None and effort in set(EffortNormalized) else "unknown"
    provenance = "experiment_config" if effort else "unknown"
    return [f"model = {toml_string(model)}",
            f"effort = {toml_string(effort or 'unknown')}",
            f"effort_normalized = {toml_string(normalized)}"
            "  # none|minimal|low|medium|high|xhigh|max|ultra|unknown",
            f"effort_provenance = {toml_string(provenance)}",
            f"effort_evidence = {toml_string(evidence if effort else UNSTATED_EFFORT)}",
            'mode = "single_agent"'.ljust(33) + "# single_agent|multi_agent|adaptive|unknown"]


TEMPLATE_ANSWERS = Answers(
    name="__NAME__", repo=".", success="pytest -q -p no:cacheprovider",
    test="pytest -q -p no:cacheprovider", test_parser="pytest", success_parser="pytest",
    setup=("pip install -e .",), requires=("python3", "pytest", "git"),
    arms=(ArmAnswer("C0", model="your-control-model", control=True),
          ArmAnswer("C1", model="your-candidate-model", effort="high")),
)


def script_text(arm: ArmAnswer) -> str:
    """A command arm's script as init writes it: a no-op contestant to replace."""
    return (
        "#!/bin/sh\n"
        f"# The scripted contestant {arm.id!r}, written by `bakeoff-sandbox init`. It runs in\n"
        "# the arm's sandbox, in /work (the arm's checkout at the base commit), with the\n"
        "# brief's path as $1. Only what it commits is scored. Replace the body with your\n"
        "# contestant (a wrapper around an agent, or a scripted fix); as written it changes\n"
        "# nothing: a no-op baseline.\n"
        "set -eu\n"
        f"echo \"{arm.id}: no change (brief: $1)\"\n"
    )


def brief_text(answers: Answers) -> str:
    """A brief from the commands alone, for a user who gave none: what fails and what
    must pass. Edit it to state the symptom as a user would see it."""
    return (
        f"# {answers.change}\n\n## Symptom\n\n`{answers.success}` fails.\n\n"
        f"## Acceptance criteria\n\n- [ ] `{answers.success}` passes.\n"
        f"- [ ] `{answers.test}` still passes everything it passes today.\n\n"
        "## Constraints\n\n- Do not edit the protected files (they are restored before "
        "every sample).\n- Commit your work; only committed code is scored.\n"
    )
