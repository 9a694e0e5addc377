"""`[[arms]]`: the contestants, and the identity every record of an arm carries.

An arm runs an adapter (`agent`): `command` (its own command line), or a real agent CLI
(`claude-code`, `codex`, `opencode`, `gemini-cli`, `qwen-code`, `mini-swe-agent`) pinned
at `agent_version` and installed into an agent layer of the arm's image. Its `network` says
what the sandbox can reach: nothing, only the model gateway (`gateway`, the CLI
adapters' default: the arm's API keys stay in the gateway),
or the internet (`egress`, flagged `unrestricted_network` in every report).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from runner.manifest.models import (
    ARM_ID,
    LENIENT,
    EffortNormalized,
    EffortProvenance,
    EnvName,
    Mode,
    NonBlank,
    Section,
    compile_problem,
)
from runner.manifest.rules import RuleViolation, raise_if_any, rule_error

# The adapters that run a real CLI, pinned (runner.containers.images.agent_cli installs them).
AGENT_CLIS = ("claude-code", "codex", "opencode", "gemini-cli", "qwen-code", "mini-swe-agent")
AgentCliName = Literal["claude-code", "codex", "opencode", "gemini-cli", "qwen-code",
                       "mini-swe-agent"]
# A gateway arm's secrets are provider keys, held by the gateway: the name says which.
KEY_PREFIXES = {"ANTHROPIC_": "anthropic", "OPENAI_": "openai", "GEMINI_": "gemini"}
Network = Literal["none", "egress", "gateway"]
# The placeholders an arm's command (a template) may hold; anything else in {braces}
# (not preceded by $, which is shell) is an error at load: `{breif}` never reaches dispatch.
PLACEHOLDERS = ("brief", "model", "effort", "arm")
PLACEHOLDER = re.compile(r"(?<!\$)\{([a-z_]+)\}")
SCRIPTED_MODEL = "scripted"
# A command arm without a model is a scripted contestant: no model, no reasoning budget.
# effort "none" is what the effort rules take for "not applicable" (effort_normalized
# "unknown" would flag every round effort_confounded, which is for real agents whose
# effort nobody knows).
SCRIPTED_IDENTITY = {
    "model": SCRIPTED_MODEL, "effort": "none", "effort_normalized": "none",
    "effort_provenance": "experiment_config",
    "effort_evidence": "scripted contestant (a command arm without a model): a fixed "
                       "program, no model and no reasoning budget",
    "mode": "single_agent",
}


def key_provider(name: str) -> str | None:
    """The provider whose key the variable `name` holds (by its prefix), or None."""
    return next((provider for prefix, provider in KEY_PREFIXES.items()
                 if name.startswith(prefix)), None)


class ArmIdentity(BaseModel):
    """The identity of an arm's measurement (docs/design.md principle 9), declared once.

    ``[[arms]]`` states it (`Arm`); the arm record, the rubric's `rig.rubric.ArmScore` and
    OBSERVATION.json's ``arms[]`` carry it unchanged. A subclass lists it after its own key
    (``id`` or ``arm``): pydantic orders fields from the last base class to the class itself.
    """

    model_config = ConfigDict(frozen=True)
    model: NonBlank = Field(description="the model under test")
    effort: NonBlank = Field(description="the effort as the dispatch surface names it")
    effort_normalized: Annotated[EffortNormalized, LENIENT] = Field(
        description="the effort on the common scale; never inferred from a model default"
    )
    effort_provenance: Annotated[EffortProvenance, LENIENT] = Field(
        description="where the stated effort comes from"
    )
    effort_evidence: NonBlank = Field(description="the evidence for the stated effort")
    mode: Annotated[Mode, LENIENT] = Field(description="how the contestant works")
    control: bool = Field(default=False, description="the default/no-intervention arm")

    @property
    def label(self) -> str:
        """``model @ effort / mode``, as every report heads an arm."""
        return f"{self.model} @ {self.effort} / {self.mode}"

    def identity(self) -> ArmIdentity:
        """The identity alone (a subclass's other fields dropped)."""
        return ArmIdentity(**{name: getattr(self, name) for name in ArmIdentity.model_fields})


_EXAMPLE_VERSION = {"claude-code": "2.1.328", "codex": "0.169.0", "opencode": "1.18.33",
                    "gemini-cli": "0.61.0", "qwen-code": "0.24.4", "mini-swe-agent": "2.4.6"}


class _ArmId(Section):
    id: Annotated[str, StringConstraints(pattern=ARM_ID)] = Field(description="unique")


# Keys: id, the identity, then how the arm runs (pydantic lists the last base's fields first).
def _identity_optional(schema: dict[str, Any]) -> None:
    """In the JSON Schema only `id` is required: a scripted command arm may state no
    identity (`SCRIPTED_IDENTITY`); any other arm's identity keys are enforced at load."""
    schema["required"] = ["id"]


class Arm(ArmIdentity, _ArmId):
    """``[[arms]]``: one contestant and the identity of its measurement."""

    model_config = ConfigDict(json_schema_extra=_identity_optional)

    agent: NonBlank = Field(
        default="command",
        description="the adapter: command, claude-code, codex, opencode, gemini-cli, "
                    "qwen-code or mini-swe-agent"
    )
    command: str = Field(
        default="",
        description="run inside the arm's container, cwd = the checkout (the template of a "
                    "command arm; for a CLI adapter, optionally the CLI program to run)",
    )
    agent_version: NonBlank | None = Field(
        default=None,
        description="the pinned version of the CLI (npm), installed into the arm's agent layer",
    )
    cli: AgentCliName | None = Field(
        default=None,
        description="the CLI to install at agent_version (default: the adapter's own); a "
                    "command arm that wraps a CLI names it here",
    )
    secrets: list[EnvName] = Field(
        default_factory=list,
        description="host variables: a gateway arm's are provider keys the gateway holds "
                    "(ANTHROPIC_*, OPENAI_*), any other arm's are passed to the agent (redacted)",
    )
    network: Network = Field(  # the default is filled in from the agent before validation
        default="none",
        description="dispatch network: none, gateway (only the model gateway; the CLI "
                    "adapters' default) or egress (the internet; flagged unrestricted_network)",
    )
    allow_models: list[NonBlank] = Field(
        default_factory=list,
        description="gateway arms: models the arm may call besides its own model",
    )
    upstream: NonBlank | None = Field(
        default=None,
        description="gateway arms: the [[gateway.upstreams]] entry the arm reaches, its only "
                    "one (its key is the upstream's; default: [gateway]'s URL per protocol "
                    "with the arm's ANTHROPIC_*/OPENAI_*/GEMINI_* keys)",
    )
    allow_server_tools: bool = Field(
        default=False,
        description="gateway arms: let provider-side tools that reach the internet (web "
                    "search and fetch, Gemini grounding) through; flags the arm's round",
    )
    commit_ignored: list[str] = Field(
        default_factory=list, description="ignored paths the agent's commit still includes"
    )
    effort_probe: str | None = Field(
        default=None, description="a regex that finds the effort in the agent's log"
    )

    @property
    def installs(self) -> str | None:
        """The CLI installed into the arm's agent layer, or None."""
        if self.agent_version is None:
            return None
        return self.cli or (self.agent if self.agent in AGENT_CLIS else None)

    @model_validator(mode="before")
    @classmethod
    def _scripted_identity(cls, data: Any) -> Any:
        """A command arm that states no identity (no model, no effort key) is scripted:
        `SCRIPTED_IDENTITY` (its mode may be given). One identity key given and the
        others are required as for any arm."""
        if (isinstance(data, dict) and data.get("agent", "command") == "command"
                and not set(data) & (set(SCRIPTED_IDENTITY) - {"mode"})):
            return {**SCRIPTED_IDENTITY, **data}
        return data

    @model_validator(mode="before")
    @classmethod
    def _default_network(cls, data: Any) -> Any:
        if isinstance(data, dict) and "network" not in data:
            return {**data, "network": "gateway" if data.get("agent") in AGENT_CLIS else "none"}
        return data

    @model_validator(mode="after")
    def _runs_something(self) -> Arm:
        raise_if_any([*self._agent_violations(), *self._gateway_violations(),
                      *self._placeholder_violations()])
        return self

    def _placeholder_violations(self) -> list[RuleViolation]:
        """A command arm's command is a template: each {name} must be a placeholder."""
        if self.agent != "command":  # a CLI adapter's command is the program, not rendered
            return []
        unknown = sorted({m.group(1) for m in PLACEHOLDER.finditer(self.command)}
                         - set(PLACEHOLDERS))
        known = ", ".join("{" + name + "}" for name in PLACEHOLDERS)
        return [RuleViolation(
            ("command",), f"unknown placeholder {{{name}}}; the known ones are {known}",
            f"write one of {known} (a shell variable is written ${{NAME}})",
            found=self.command) for name in unknown]

    def _agent_violations(self) -> list[RuleViolation]:
        found: list[RuleViolation] = []
        if self.agent == "command" and not self.command.strip():
            found.append(RuleViolation(("command",), "a command arm requires a command",
                                       'set command = "agents/contestant.sh {brief}"'))
        if self.agent in AGENT_CLIS and self.agent_version is None and not self.command.strip():
            found.append(RuleViolation(
                ("agent_version",), f"the {self.agent} adapter needs a pinned CLI",
                f'set agent_version (e.g. agent_version = "{_EXAMPLE_VERSION[self.agent]}"), '
                "or command = the CLI program to run"))
        if self.cli is not None and self.agent_version is None:
            found.append(RuleViolation(("agent_version",), f"cli = {self.cli!r} installs a "
                                       "pinned CLI: it needs a version",
                                       f'set agent_version = "{_EXAMPLE_VERSION[self.cli]}"'))
        if self.agent_version is not None and self.installs is None:
            found.append(RuleViolation(("cli",), "agent_version pins a CLI, and the "
                                       f"{self.agent!r} adapter is not one",
                                       'name the CLI to install: cli = "claude-code", "codex", '
                                       '"opencode", "gemini-cli", "qwen-code" or "mini-swe-agent"',
                                       found=self.agent_version))
        return found

    def _gateway_violations(self) -> list[RuleViolation]:
        if self.network != "gateway":
            found = [RuleViolation(("allow_models",), "only a gateway arm calls models through "
                                   "the gateway", 'set network = "gateway", or remove it',
                                   found=self.allow_models)] if self.allow_models else []
            found += [RuleViolation(
                ("upstream",), "is reached through the model gateway: only a gateway arm "
                "names one", 'set network = "gateway", or remove it', found=self.upstream)
                ] if self.upstream is not None else []
            return found + ([RuleViolation(
                ("allow_server_tools",), "is granted at the model gateway: only a gateway "
                "arm has it", 'set network = "gateway", or remove it', found=True)]
                if self.allow_server_tools else [])
        if self.upstream is not None:
            return []  # its secrets are checked against the upstream's key (Manifest)
        return [RuleViolation(
            ("secrets", index), "is not a provider key the gateway can hold",
            "name it ANTHROPIC_..., OPENAI_... or GEMINI_... (the provider it is for), or use "
            'network = "egress" to pass it into the sandbox', found=name)
            for index, name in enumerate(self.secrets) if key_provider(name) is None]

    @field_validator("effort_probe")
    @classmethod
    def _probe_compiles(cls, value: str | None) -> str | None:
        problem = None if value is None else compile_problem(value)
        if problem is not None:
            raise rule_error([RuleViolation(
                (), problem, "write a Python regular expression, e.g. 'effort[=: ]+(\\w+)'",
                found=value,
            )])
        return value
