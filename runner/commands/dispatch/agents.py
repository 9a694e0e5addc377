"""Agent adapters: turn (arm, brief path) into the command run inside the arm's sandbox.

An adapter is a shell template. `{brief}`, `{model}`, `{effort}` and `{arm}` are
substituted shell-quoted; the command runs with `sh -c` in `/work` (the arm's checkout).

- `command`: the arm's own `command` is the template (scripted contestants, wrappers);
- `claude-code`, `codex`: the real CLIs, pinned (`agent_version`: installed into the
  arm's agent layer, `runner.containers.images.agent_cli`), or the program the arm's `command`
  names. They pass model AND effort on the command line, so the CLI's default
  configuration never decides either, and switch off what an unattended run must not do
  (auto-update, telemetry, web tools). A gateway arm's CLI talks to `model-gateway` only,
  with the arm's token (`gateway_env`).

Any other `{name}` (not preceded by `$`, which is shell) is an error, so a typo such as
`{breif}` is caught when the manifest loads (`runner.manifest.arms`), before `up` builds
anything; each adapter's own template is checked against what it fills in by a unit test.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from runner.commands.dispatch.cli_settings import (
    CODEX_PROVIDER,
    GATEWAY_URL,
    TOKEN_ENV,
    cli_settings,
)
from runner.errors import BadInputError
from runner.manifest import Arm
from runner.manifest.arms import PLACEHOLDER as _PLACEHOLDER
from runner.manifest.arms import PLACEHOLDERS

CLI_PLACEHOLDER = "cli"

CLAUDE_CODE_TEMPLATE = (
    "{cli} --print --model {model} --effort {effort} --dangerously-skip-permissions "
    "--disallowedTools WebSearch WebFetch --output-format stream-json --verbose < {brief}"
)
# CODEX_HOME must exist before codex starts; every --config key below is one 0.169 knows.
CODEX_TEMPLATE = (
    'mkdir -p "$CODEX_HOME" && {cli} exec --model {model} '
    "--config model_reasoning_effort={effort} {provider}"
    "--config web_search=disabled --config check_for_update_on_startup=false "
    "--config analytics.enabled=false --config feedback.enabled=false "
    "--config otel.exporter=none --config otel.metrics_exporter=none "
    "--config history.persistence=none "
    "--dangerously-bypass-approvals-and-sandbox --skip-git-repo-check --json - < {brief}"
)
# A judge reads its prompt on its stdin and answers: no tools, no session kept, one JSON
# result.
CLAUDE_CODE_JUDGE = (
    "{cli} --print --model {model} --effort {effort} --tools '' --no-session-persistence "
    "--output-format json"
)
CODEX_JUDGE = (
    'mkdir -p "$CODEX_HOME" && {cli} exec --model {model} '
    "--config model_reasoning_effort={effort} {provider}"
    "--config web_search=disabled --config check_for_update_on_startup=false "
    "--config analytics.enabled=false --config feedback.enabled=false "
    "--config otel.exporter=none --config otel.metrics_exporter=none "
    "--config history.persistence=none --skip-git-repo-check --json -"
)
# OpenCode: its configuration inline (OPENCODE_CONFIG_CONTENT), its own title (no title
# request), the brief on stdin; effort as the model's variant.
OPENCODE_TEMPLATE = (
    "OPENCODE_CONFIG_CONTENT={config} {cli} run --pure --model {provider_model} "
    "--variant {effort} --title {arm} --format json < {brief}"
)
# Gemini CLI and Qwen Code read a settings file in $HOME (fresh at every `up`); the brief
# comes on stdin (Gemini CLI appends `--prompt` to it: an empty one).
GEMINI_CLI_TEMPLATE = (
    'mkdir -p "$HOME/.gemini" && printf %s {settings} > "$HOME/.gemini/settings.json" && '
    "{cli} --model {model} --yolo --output-format stream-json --prompt '' < {brief}"
)
QWEN_CODE_TEMPLATE = (
    'mkdir -p "$HOME/.qwen" && printf %s {settings} > "$HOME/.qwen/settings.json" && '
    "{cli} --auth-type openai --model {model} {base_url}--yolo --chat-recording false "
    "--output-format stream-json < {brief}"
)
# mini-swe-agent: its bash-only agent through LiteLLM (Chat Completions for `openai/`
# models), the brief as its task, effort a model_kwargs entry; it ends when its model
# submits (at once, no prompt), with no cost limit of its own (the gateway's budgets).
MINI_SWE_AGENT_TEMPLATE = (
    "{cli} --config mini.yaml --config model.model_kwargs.reasoning_effort={effort} "
    "{api_base}--model {litellm_model} --task \"$(cat {brief})\" --yolo --exit-immediately "
    '--cost-limit 0 --output "$HOME/mini-trajectory.json" < /dev/null'
)
# What an unattended run of each CLI needs in its environment (besides the gateway's).
CLI_ENV: dict[str, dict[str, str]] = {
    "claude-code": {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
                    "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1"},
    "codex": {"CODEX_HOME": "/home/agent/.codex"},
    "opencode": {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
                 "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_SHARE": "1",
                 "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1"},
    "gemini-cli": {"GEMINI_CLI_TRUST_WORKSPACE": "true", "NO_BROWSER": "true"},
    "qwen-code": {"QWEN_CODE_SUPPRESS_YOLO_WARNING": "1"},
    # No setup wizard; LiteLLM's bundled price map (no download); a model without a price
    # is no error (the gateway counts cost).
    "mini-swe-agent": {"MSWEA_CONFIGURED": "true", "MSWEA_COST_TRACKING": "ignore_errors",
                       "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
}
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

    def render(self, arm: Arm, brief_path: str, where: str = "arms",
               program: str | None = None) -> str:
        """The shell command for `arm`; `where` names the arm in errors (arms[2]).
        `program`: the installed CLI (else the arm's `command` names it)."""
        if self.needs_effort and arm.effort.strip().lower() in UNSET_EFFORTS:
            raise AdapterError(
                f"{where}.effort: the {self.name} adapter passes effort explicitly and "
                f"{arm.effort!r} is not an effort the CLI accepts",
                hint="set effort to the CLI's own value (e.g. \"high\"), or use "
                     "agent = \"command\" with a wrapper script")
        values = {"brief": brief_path, "model": arm.model, "effort": arm.effort, "arm": arm.id}
        if self.template is None:
            return render_template(arm.command, values, f"{where}.command")
        cli = arm.command.strip() or program
        if not cli:
            raise AdapterError(f"{where}.agent_version: the {self.name} adapter has no CLI "
                               "to run", hint="set agent_version, or command = the program")
        raw = {CLI_PLACEHOLDER: cli, **cli_settings(self.name, arm)}
        return render_template(self.template, values, f"{where}.agent", raw=raw)


ADAPTERS: dict[str, Adapter] = {
    adapter.name: adapter for adapter in (
        Adapter("command", "the arm's command is the template"),
        Adapter("claude-code", "Claude Code in print mode; command = the CLI program",
                CLAUDE_CODE_TEMPLATE),
        Adapter("codex", "Codex CLI `exec`; command = the CLI program", CODEX_TEMPLATE),
        Adapter("opencode", "OpenCode `run`; command = the CLI program", OPENCODE_TEMPLATE),
        Adapter("gemini-cli", "Gemini CLI headless; command = the CLI program",
                GEMINI_CLI_TEMPLATE),
        Adapter("qwen-code", "Qwen Code headless (Chat Completions); command = the CLI "
                "program", QWEN_CODE_TEMPLATE),
        Adapter("mini-swe-agent", "mini-swe-agent's `mini` (LiteLLM); command = the CLI "
                "program", MINI_SWE_AGENT_TEMPLATE),
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


def gateway_env(token: str) -> dict[str, str]:
    """A gateway arm's way to its models: the gateway's URLs and the arm's own token
    where each provider's SDKs and CLIs look for a base URL and a key."""
    return {"BAKEOFF_GATEWAY_URL": GATEWAY_URL, TOKEN_ENV: token,
            "ANTHROPIC_BASE_URL": f"{GATEWAY_URL}/anthropic", "ANTHROPIC_API_KEY": token,
            "OPENAI_BASE_URL": f"{GATEWAY_URL}/openai/v1", "OPENAI_API_KEY": token,
            "GOOGLE_GEMINI_BASE_URL": f"{GATEWAY_URL}/gemini", "GEMINI_API_KEY": token}


JUDGE_TEMPLATES = {"claude-code": CLAUDE_CODE_JUDGE, "codex": CODEX_JUDGE}


def judge_command(cli: str, program: str, model: str, effort: str) -> str:
    """The shell command of an agent judge (`[contract] judge = "CLI:MODEL@EFFORT"`),
    through the gateway like a gateway arm; its prompt comes on its stdin."""
    return render_template(JUDGE_TEMPLATES[cli], {"model": model, "effort": effort},
                           "contract.judge", raw={CLI_PLACEHOLDER: program,
                                                  "provider": CODEX_PROVIDER})


def cli_env(arm: Arm) -> dict[str, str]:
    """The unattended-run settings of the CLI the arm runs (or installs), else none."""
    name = arm.installs or (arm.agent if arm.agent in CLI_ENV else None)
    return dict(CLI_ENV.get(name or "", {}))
