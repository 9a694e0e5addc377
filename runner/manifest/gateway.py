"""`[gateway]`: the model gateway, the only door from a gateway arm to a model API.

Upstream base URLs (paths `/v1/...` are appended), an optional docker network to reach
them through, budgets per arm (and per change: every `up` gives the arm a fresh token),
and prices, USD per million tokens, per model. `[[gateway.upstreams]]` names more
upstreams, each of one protocol with a key of its own (Kimi on Moonshot's Anthropic-
compatible endpoint, Qwen on an OpenAI-compatible one); an arm names the one it uses
(`upstream = "moonshot"`) and reaches that one only. The three URLs above stay the
implicit upstreams `anthropic`, `openai` and `gemini`, whose keys the arms' secrets hold.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints, field_validator, model_validator

from runner.manifest.models import EnvName, NonBlank, Section
from runner.manifest.rules import RuleViolation, raise_if_any, rule_error

PROTOCOLS = ("anthropic", "openai", "gemini")
Protocol = Literal["anthropic", "openai", "gemini"]
# An upstream's name is the first segment of its gateway path (/moonshot/v1/messages).
UPSTREAM_NAME = r"^[a-z0-9][a-z0-9_-]*$"

DEFAULT_ANTHROPIC = "https://api.anthropic.com"
DEFAULT_OPENAI = "https://api.openai.com"
DEFAULT_GEMINI = "https://generativelanguage.googleapis.com"


class Price(Section):
    """One model's prices, USD per million tokens."""

    input: float = Field(ge=0, description="per million input tokens")
    output: float = Field(ge=0, description="per million output tokens (reasoning included)")
    cache_read: float | None = Field(
        default=None, ge=0, description="per million cached input tokens read (default: input)"
    )
    cache_write: float | None = Field(
        default=None, ge=0, description="per million input tokens written to the cache "
                                        "(default: input)"
    )


def _base_url(value: str) -> str:
    if not value.startswith(("http://", "https://")) or value.rstrip("/").count("/") < 2:
        raise rule_error([RuleViolation(
            (), "is not an http(s) base URL",
            'write the API\'s base, e.g. "https://api.anthropic.com"', found=value)])
    return value.rstrip("/")


class Upstream(Section):
    """``[[gateway.upstreams]]``: one upstream API, its protocol, its key, its prices."""

    name: Annotated[str, StringConstraints(pattern=UPSTREAM_NAME)] = Field(
        description="what an arm's `upstream` names (lower case, digits, - and _)"
    )
    protocol: Protocol = Field(description="the API it speaks: anthropic, openai or gemini")
    base_url: NonBlank = Field(description="its base URL (paths `/v1/...` are appended)")
    key: EnvName = Field(
        description="the variable holding its key, in the environment of `up` (the gateway "
                    "holds it; no sandbox sees it)"
    )
    prices: dict[str, Price] = Field(
        default_factory=dict,
        description="USD per million tokens, by model, on this upstream (before "
                    "[gateway.prices])"
    )

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return _base_url(value)


class Gateway(Section):
    """``[gateway]``: where the gateway forwards, what each arm may spend, what it costs."""

    anthropic: NonBlank = Field(
        default=DEFAULT_ANTHROPIC, description="the Anthropic Messages API base URL"
    )
    openai: NonBlank = Field(
        default=DEFAULT_OPENAI, description="the OpenAI Responses / Chat Completions base URL"
    )
    gemini: NonBlank = Field(
        default=DEFAULT_GEMINI,
        description="the Gemini API base URL (generateContent, streamGenerateContent)"
    )
    upstream_network: NonBlank | None = Field(
        default=None,
        description="an existing docker network the gateway joins to reach the upstreams; "
                    "then it joins that network only (no other egress)",
    )
    max_usd_per_arm: float | None = Field(
        default=None, gt=0, description="per arm and change; needs a price for every model"
    )
    max_requests_per_arm: int | None = Field(default=None, ge=1, description="per arm and change")
    max_tokens_per_arm: int | None = Field(
        default=None, ge=1, description="input + output tokens, per arm and change"
    )
    prices: dict[str, Price] = Field(
        default_factory=dict, description="USD per million tokens, by model name"
    )
    upstreams: list[Upstream] = Field(
        default_factory=list,
        description="named upstreams, each of one protocol with its own key; an arm names "
                    "the one it uses (upstream = NAME)"
    )

    @field_validator("anthropic", "openai", "gemini")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return _base_url(value)

    @model_validator(mode="after")
    def _names(self) -> Gateway:
        seen: dict[str, int] = {}
        found = []
        for index, upstream in enumerate(self.upstreams):
            if upstream.name in PROTOCOLS:
                found.append(RuleViolation(
                    ("upstreams", index, "name"), f"is the implicit upstream of [gateway] "
                    f"{upstream.name}", f"give it a name of its own, or set [gateway] "
                    f"{upstream.name} = its base_url", found=upstream.name))
            elif upstream.name in seen:
                found.append(RuleViolation(
                    ("upstreams", index, "name"), f"duplicates upstreams[{seen[upstream.name]}]"
                    ".name", "give every [[gateway.upstreams]] its own name",
                    found=upstream.name))
            seen.setdefault(upstream.name, index)
        raise_if_any(found)
        return self

    def upstream(self, name: str) -> Upstream | None:
        """The named upstream `name`, or None."""
        return next((u for u in self.upstreams if u.name == name), None)

    def config_upstreams(self) -> dict[str, object]:
        """config.json's `upstreams`: the implicit three, then the named ones."""
        named = {u.name: {"protocol": u.protocol, "base_url": u.base_url, "key": u.key,
                          "prices": {m: p.model_dump() for m, p in u.prices.items()}}
                 for u in self.upstreams}
        return {"anthropic": self.anthropic, "openai": self.openai, "gemini": self.gemini,
                **named}
