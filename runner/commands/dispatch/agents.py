"""Agent adapters: turn (arm, brief path) into the command run inside the arm's sandbox.

An adapter is a shell template. `{brief}`, `{model}`, `{effort}` and `{arm}` are
substituted shell-quoted; the command runs with `sh -c` in `/work` (the arm's checkout).

- `command`: the arm's own `command` is the template (scripted contestants, wrappers);
- `claude-code`, `codex`: templates for those CLIs, where the arm's `command` names the
  CLI program (`claude`, `/agents/bin/codex`, ...). They pass model AND effort on the
  command line, so the CLI's default configuration never decides either. They are
  templates: no model API is reachable where this project is tested (docs/agents.md).

Any other `{name}` (not preceded by `$`, which is shell) is an error, so a typo such as
`{breif}` is caught before an agent starts.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from runner.errors import BadInputError
from runner.manifest import Arm

PLACEHOLDERS = ("brief", "model", "effort", "arm")
CLI_PLACEHOLDER = "cli"
_PLACEHOLDER = re.compile(r"(?<!\$)\{([a-z_]+)\}")

CLAUDE_CODE_TEMPLATE = (
    "{cli} --print --model {model} --effort {effort} --dangerously-skip-permissions "
    "--output-format stream-json --verbose < {brief}"
)
CODEX_TEMPLATE = (
    "{cli} exec --model {model} --config model_reasoning_effort={effort} "
    "--dangerously-bypass-approvals-and-sandbox --skip-git-repo-check --json - < {brief}"
)
UNSET_EFFORTS = frozenset({"", "unknown", "default"})


class AdapterError(BadInputError):
    """An arm names an adapter that does not exist, or its template cannot be rendered."""


@dataclass(frozen=True)
class Adapter:
    """One way of running an agent: a template, or (None) the arm's own command."""

    name: str
    summary: str
    template: str | None = None

    @property
    def needs_effort(self) -> bool:
        """CLI templates pass effort explicitly, so the arm must state one."""
        return self.template is not None

    def render(self, arm: Arm, brief_path: str, where: str = "arms") -> str:
        """The shell command for `arm`; `where` names the arm in errors (arms[2])."""
        if self.needs_effort and arm.effort.strip().lower() in UNSET_EFFORTS:
            raise AdapterError(
                f"{where}.effort: the {self.name} adapter passes effort explicitly and "
                f"{arm.effort!r} is not an effort the CLI accepts",
                hint="set effort to the CLI's own value (e.g. \"high\"), or use "
                     "agent = \"command\" with a wrapper script")
        values = {"brief": brief_path, "model": arm.model, "effort": arm.effort, "arm": arm.id}
        if self.template is None:
            return render_template(arm.command, values, f"{where}.command")
        raw = {CLI_PLACEHOLDER: arm.command}
        return render_template(self.template, values, f"{where}.agent", raw=raw)


ADAPTERS: dict[str, Adapter] = {
    adapter.name: adapter for adapter in (
        Adapter("command", "the arm's command is the template"),
        Adapter("claude-code", "Claude Code in print mode; command = the CLI program",
                CLAUDE_CODE_TEMPLATE),
        Adapter("codex", "Codex CLI `exec`; command = the CLI program", CODEX_TEMPLATE),
    )
}


def adapter_for(arm: Arm, where: str = "arms") -> Adapter:
    """The arm's adapter, or `AdapterError` naming the known ones."""
    adapter = ADAPTERS.get(arm.agent)
    if adapter is None:
        raise AdapterError(f"{where}.agent: no agent adapter {arm.agent!r}",
                           hint=f"use one of: {', '.join(sorted(ADAPTERS))}")
    return adapter


def render_template(template: str, values: dict[str, str], where: str,
                    raw: dict[str, str] | None = None) -> str:
    """Substitute `{name}` placeholders: `values` shell-quoted, `raw` as they are."""
    verbatim = raw or {}
    unknown = sorted({m.group(1) for m in _PLACEHOLDER.finditer(template)}
                     - set(values) - set(verbatim))
    if unknown:
        known = ", ".join("{" + name + "}" for name in PLACEHOLDERS)
        raise AdapterError(f"{where}: unknown placeholder(s) "
                           f"{', '.join('{' + n + '}' for n in unknown)} in {template!r}",
                           hint=f"use {known} (a shell variable is written ${{NAME}})")

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        return verbatim[name] if name in verbatim else shlex.quote(values[name])

    return _PLACEHOLDER.sub(substitute, template)
