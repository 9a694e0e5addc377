"""What an arm really ran, read from the model gateway's records (one JSON line per
request: `gateway/`), not from what the arm declares or prints.

`summarize` totals an arm's requests (tokens, cost, per model); `observe` compares the
wire with the arm's declared identity: the model it called and the effort each request
carried. A record's `effort` holds every effort field of its API's dialect, by dotted name
(`output_config.effort`, `thinking.budget_tokens`, `reasoning.effort`, `reasoning_effort`,
`reasoning.max_tokens`, `enable_thinking`, `thinking_budget`, Gemini's
`generationConfig.thinkingConfig.thinkingLevel` / `thinkingBudget` / `includeThoughts`);
a request carries the declared effort when one of them has its value (records older than
that field: `output_config_effort` and `reasoning_effort`). A declared effort the wire
contradicts (or never carries) is `effort_mismatch`; requests to no model but others
(forwarded, or refused as `model_not_allowed`: a CLI that rewrote the model name), or
answers from another model, are `model_mismatch` (an arm whose own model was called too is
not flagged for side requests to another, refused or not: Claude Code's small model); a
provider-side tool that reaches the internet, forwarded because the arm was granted
`allow_server_tools`, is `server_tools`. All are marks: the round is flagged, the arm still scored.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

TOKEN_KINDS = ("input", "output", "cache_read", "cache_write", "reasoning")
EFFORT_FIELDS = (("output_config_effort", "output_config.effort"),
                 ("reasoning_effort", "reasoning.effort"))
# The field a request that carries no effort is shown under, by the route's path.
UNCARRIED = (("/anthropic", "output_config.effort"),
             ("/gemini", "generationConfig.thinkingConfig.thinkingLevel"),
             ("/openai/v1/chat", "reasoning_effort"), ("", "reasoning.effort"))
UNSTATED_EFFORTS = frozenset({"", "unknown", "default", "none"})
NO_PRICE = "no price for {models} in [gateway.prices]: cost is null"


class ModelUsage(BaseModel):
    """One model's requests of one arm (by the model the arm asked for)."""

    model_config = ConfigDict(frozen=True)
    model: str
    requests: int = 0
    refused: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    cost_usd: float | None = 0.0


class WireSummary(BaseModel):
    """arm.json's `gateway`: an arm's requests through the gateway, totalled."""

    model_config = ConfigDict(frozen=True)
    records: str                       # the gateway's request log, relative to the stage
    requests: int = 0
    refused: dict[str, int] = {}       # reason -> count (never forwarded)
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    cost_usd: float | None = 0.0       # None: a model without a price was called
    by_model: list[ModelUsage] = []
    budget_exhausted: bool = False

    @property
    def tokens(self) -> int:
        return self.input + self.output


@dataclass(frozen=True)
class WireCheck:
    """The wire against the declaration."""

    model_observed: str | None
    effort_observed: str | None
    evidence: str
    marks: tuple[str, ...]     # effort_mismatch, model_mismatch, budget_exhausted, ...
    caveats: tuple[str, ...]


def read_lines(path: Path, arm: str, role: str = "arm") -> list[dict[str, Any]]:
    """The records of one arm (a line that does not parse is skipped: the gateway
    writes whole lines under a lock, so only a torn last line can be half-written)."""
    if not path.is_file():
        return []
    found = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("arm") == arm and data.get("role", "arm") == role:
            found.append(data)
    return found


def _usage(line: Mapping[str, Any]) -> dict[str, int]:
    usage = line.get("usage") or {}
    return {kind: int(usage.get(kind) or 0) for kind in TOKEN_KINDS}


def _add_cost(total: float | None, cost: Any) -> float | None:
    if total is None or cost is None:
        return None
    return round(total + float(cost), 6)


def summarize(lines: Sequence[Mapping[str, Any]], records: str) -> WireSummary:
    """Totals over one arm's records; a forwarded request without a cost (no price)
    makes the cost None."""
    per_model: dict[str, dict[str, Any]] = {}
    refused: Counter[str] = Counter()
    totals = dict.fromkeys(TOKEN_KINDS, 0)
    cost: float | None = 0.0
    for line in lines:
        model = str(line.get("model_requested") or "?")
        entry = per_model.setdefault(model, {"model": model, "requests": 0, "refused": 0,
                                             **dict.fromkeys(TOKEN_KINDS, 0), "cost_usd": 0.0})
        entry["requests"] += 1
        reason = line.get("refused")
        if reason:
            refused[str(reason)] += 1
            entry["refused"] += 1
            continue
        for kind, value in _usage(line).items():
            entry[kind] += value
            totals[kind] += value
        entry["cost_usd"] = _add_cost(entry["cost_usd"], line.get("cost_usd"))
        cost = _add_cost(cost, line.get("cost_usd"))
    return WireSummary(records=records, requests=len(lines), refused=dict(refused), **totals,
                       cost_usd=cost, by_model=[ModelUsage(**e) for e in per_model.values()],
                       budget_exhausted=refused["budget_exhausted"] > 0)


def _carried(line: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every (field, value) of effort a request carried, in its record's order."""
    fields = line.get("effort")
    if isinstance(fields, dict):
        return [(str(name), _text(value)) for name, value in fields.items()
                if value not in (None, "")]
    return [(name, str(line[key])) for key, name in EFFORT_FIELDS
            if line.get(key) not in (None, "")]


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _effort(line: Mapping[str, Any], declared: str) -> tuple[str, str | None]:
    """(the field's name, its value) of the effort a request carried: the field that
    carries the declared value when one does, else the first."""
    carried = _carried(line)
    for name, value in carried:
        if value.lower() == declared.strip().lower():
            return name, value
    if carried:
        return carried[0]
    path = _route(line)
    return next(name for prefix, name in UNCARRIED if path.startswith(prefix)), None


def _route(line: Mapping[str, Any]) -> str:
    """The record's path under its protocol's prefix: a named upstream's path
    (`/moonshot/v1/messages`, provider anthropic) reads as `/anthropic/v1/messages`."""
    path = str(line.get("path", ""))
    provider = line.get("provider")
    return f"/{provider}/{path.lstrip('/').partition('/')[2]}" if provider else path


def _same_model(asked: str, answered: str | None) -> bool:
    """An answer names the model asked for, or a dated snapshot of it."""
    return answered is None or answered == asked or answered.startswith(asked + "-")


def observe(model: str, effort: str, lines: Sequence[Mapping[str, Any]]) -> WireCheck:
    """The arm's declared `model` and `effort` against its forwarded requests."""
    sent = [line for line in lines if not line.get("refused")]
    own = [line for line in sent if line.get("model_requested") == model]
    others = Counter(str(line.get("model_requested")) for line in sent
                     if line.get("model_requested") != model)
    marks: list[str] = []
    caveats: list[str] = []
    answered = Counter(str(line.get("model_response")) for line in own
                       if not _same_model(model, line.get("model_response")))
    rewritten = Counter(str(line.get("model_requested")) for line in lines
                        if line.get("refused") == "model_not_allowed"
                        and line.get("model_requested") != model)
    if not own and (sent or rewritten):
        marks.append("model_mismatch")
        caveats.append(_only_others(model, others, rewritten))
    elif answered:
        marks.append("model_mismatch")
        caveats.append(f"model_mismatch: requests to {model!r} were answered by "
                       f"{', '.join(sorted(answered))}")
    efforts = Counter(_effort(line, effort) for line in own)
    observed = _effort_observed(efforts)
    if own and effort.strip().lower() not in UNSTATED_EFFORTS and any(
            value is None or value.lower() != effort.strip().lower() for _, value in efforts):
        marks.append("effort_mismatch")
        seen = ", ".join(f"{v or 'none'} in {n}/{len(own)}" for (_, v), n in efforts.items())
        caveats.append(f"effort_mismatch: the arm declares effort {effort!r}, the gateway saw "
                       f"{seen} of its requests to {model}")
    if any(line.get("refused") == "budget_exhausted" for line in lines):
        marks.append("budget_exhausted")
        caveats.append("budget_exhausted: the gateway refused the arm's requests past its "
                       "budget; its work so far is what was scored")
    granted = _tools(line for line in sent if line.get("server_tools_allowed"))
    if granted:
        marks.append("server_tools")
        caveats.append(f"server_tools: the arm's requests used provider-side tools that reach "
                       f"the internet ({granted}), allowed by allow_server_tools")
    refused = _tools(line for line in lines if line.get("refused") == "server_tool")
    if refused:
        caveats.append(f"the gateway refused the arm's requests for provider-side tools "
                       f"that reach the internet ({refused})")
    return WireCheck(_model_observed(own, model), observed,
                       evidence(model, own, efforts, others), tuple(marks), tuple(caveats))


def _only_others(model: str, others: Counter[str], rewritten: Counter[str]) -> str:
    """The caveat of an arm none of whose requests named its model: the models they did
    name, and those refused as not the arm's (a CLI that rewrote the model, e.g. Gemini
    CLI's aliases: the arm's work never reached a model)."""
    text = (f"model_mismatch: the arm declares {model!r}, the gateway saw requests only to "
            f"{', '.join(sorted({*others, *rewritten}))}")
    if rewritten:
        text += "; refused as not the arm's model: " + ", ".join(
            f"{name} in {n} request{'s' * (n != 1)}" for name, n in sorted(rewritten.items()))
    return text


def _tools(lines: Iterable[Mapping[str, Any]]) -> str:
    """`web_search_20250305 in 3 requests, googleSearch in 1`, or ""."""
    counted = Counter(str(tool) for line in lines for tool in line.get("server_tools") or ())
    return ", ".join(f"{tool} in {n} request{'s' * (n != 1)}"
                     for tool, n in sorted(counted.items()))


def _effort_observed(efforts: Counter[tuple[str, str | None]]) -> str | None:
    values = {value for _, value in efforts}
    return values.pop() if len(values) == 1 else None


def _model_observed(own: Sequence[Mapping[str, Any]], model: str) -> str | None:
    answers = Counter(str(line.get("model_response") or model) for line in own)
    return answers.most_common(1)[0][0] if answers else None


def evidence(model: str, own: Sequence[Mapping[str, Any]],
             efforts: Counter[tuple[str, str | None]], others: Counter[str]) -> str:
    """e.g. ``gateway: 14 requests to claude-opus-4-8, output_config.effort=high in 14/14``."""
    if not own:
        text = f"gateway: no request to {model}"
    else:
        parts = [f"{name}={value or 'none'} in {n}/{len(own)}"
                 for (name, value), n in sorted(efforts.items(), key=lambda i: -i[1])]
        text = (f"gateway: {len(own)} request{'s' * (len(own) != 1)} to {model}, "
                + ", ".join(parts))
    if others:
        text += " (+ " + ", ".join(f"{n} to {m}" for m, n in sorted(others.items())) + ")"
    return text


def unpriced(lines: Iterable[Mapping[str, Any]]) -> list[str]:
    """The models forwarded to without a price (their cost is null)."""
    return sorted({str(line.get("model_requested")) for line in lines
                   if not line.get("refused") and line.get("cost_usd") is None})
