"""`[gateway]`: the model gateway, the only door from a gateway arm to a model API.

Upstream base URLs (paths `/v1/...` are appended), an optional docker network to reach
them through, budgets per arm (and per change: every `up` gives the arm a fresh token),
and prices, USD per million tokens, per model.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from runner.manifest.models import NonBlank, Section
from runner.manifest.rules import RuleViolation, rule_error

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

    @field_validator("anthropic", "openai", "gemini")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")) or value.rstrip("/").count("/") < 2:
            raise rule_error([RuleViolation(
                (), "is not an http(s) base URL",
                'write the API\'s base, e.g. "https://api.anthropic.com"', found=value)])
        return value.rstrip("/")
