"""`<state>/config.json`: upstreams, tokens and prices; re-read whenever it changes.

The runner writes the file atomically; the gateway compares its `(mtime_ns, size)` on
every request (one `os.stat`) and loads it again when either moved. A file that does not
parse keeps the last good configuration in force and says so on stderr, once per change;
at start, a missing file is an empty configuration (every token unknown) and a broken one
is a `ConfigError`.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway import GatewayError
from gateway.errors import Provider


class ConfigError(GatewayError):
    """config.json is not what the runner writes."""


@dataclass(frozen=True)
class Budget:
    max_requests: int | None = None
    max_tokens: int | None = None
    max_usd: float | None = None


@dataclass(frozen=True)
class Grant:
    """What one token allows: whose requests they are, which models, which keys."""

    stage: str
    arm: str
    role: str
    models: tuple[str, ...] | None          # None: any model
    keys: Mapping[str, str]                 # provider -> name of the env var with the key
    budget: Budget = field(default_factory=Budget)
    run: str = ""                           # the `up` that issued the token
    allow_server_tools: bool = False        # provider-side web search / fetch let through

    @property
    def owner(self) -> tuple[str, str, str, str]:
        """The budget's key: a token re-issued for the same arm in the same `up` shares
        its counters; a new `up` of the stage starts the arm's budget afresh."""
        return (self.stage, self.run, self.arm, self.role)


@dataclass(frozen=True)
class Price:
    """USD per million tokens; a cache price that is missing makes cost unknown."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None


@dataclass(frozen=True)
class Config:
    upstreams: Mapping[str, str] = field(default_factory=dict)
    tokens: Mapping[str, Grant] = field(default_factory=dict)
    prices: Mapping[str, Price] = field(default_factory=dict)

    def grant(self, token: str | None) -> Grant | None:
        return None if token is None else self.tokens.get(token)


def _optional_number(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"config.json: {where} must be a number or null, not {value!r}")
    return float(value)


def _budget(raw: Any, where: str) -> Budget:
    raw = raw or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"config.json: {where}.budget must be an object")
    requests, tokens = (_optional_number(raw.get(k), f"{where}.budget.{k}")
                        for k in ("max_requests", "max_tokens"))
    return Budget(max_requests=None if requests is None else int(requests),
                  max_tokens=None if tokens is None else int(tokens),
                  max_usd=_optional_number(raw.get("max_usd"), f"{where}.budget.max_usd"))


def _grant(raw: Any, where: str) -> Grant:
    if not isinstance(raw, dict):
        raise ConfigError(f"config.json: {where} must be an object")
    missing = [key for key in ("stage", "arm") if not isinstance(raw.get(key), str)]
    if missing:
        raise ConfigError(f"config.json: {where} needs a string {missing[0]!r}")
    models = raw.get("models")
    if models is not None and not (isinstance(models, list)
                                   and all(isinstance(m, str) for m in models)):
        raise ConfigError(f"config.json: {where}.models must be a list of names or null")
    keys = raw.get("keys") or {}
    if not isinstance(keys, dict) or not all(isinstance(v, str) for v in keys.values()):
        raise ConfigError(f"config.json: {where}.keys must map a provider to an env var name")
    return Grant(stage=raw["stage"], arm=raw["arm"], role=str(raw.get("role", "arm")),
                 models=None if models is None else tuple(models), keys=dict(keys),
                 budget=_budget(raw.get("budget"), where), run=str(raw.get("run", "")),
                 allow_server_tools=raw.get("allow_server_tools") is True)


def _price(raw: Any, where: str) -> Price:
    if not isinstance(raw, dict) or raw.get("input") is None or raw.get("output") is None:
        raise ConfigError(f"config.json: {where} needs numbers `input` and `output`")
    numbers = [_optional_number(raw.get(k), f"{where}.{k}")
               for k in ("input", "output", "cache_read", "cache_write")]
    return Price(numbers[0] or 0.0, numbers[1] or 0.0, numbers[2], numbers[3])


def parse(raw: Any) -> Config:
    """config.json's content (already JSON-decoded) as a `Config`."""
    if not isinstance(raw, dict):
        raise ConfigError("config.json must hold one JSON object")
    upstreams = raw.get("upstreams") or {}
    unknown = sorted(set(upstreams) - {p.value for p in Provider})
    if not isinstance(upstreams, dict) or unknown:
        raise ConfigError("config.json: upstreams must map anthropic/openai/gemini to a "
                          f"base URL (unknown: {unknown})")
    for name, url in upstreams.items():
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"config.json: upstreams.{name} must be an http(s) URL")
    tokens = {str(t): _grant(g, f"tokens[{i}]")
              for i, (t, g) in enumerate((raw.get("tokens") or {}).items())}
    prices = {str(m): _price(p, f"prices.{m}") for m, p in (raw.get("prices") or {}).items()}
    return Config(upstreams=dict(upstreams), tokens=tokens, prices=prices)


def load(path: Path) -> Config:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Config()
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error}") from error
    try:
        return parse(json.loads(text))
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path} is not JSON: {error}") from error


class ConfigSource:
    """The configuration in force: `current()` reloads it when the file changed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp = self._stat()
        self._config = load(path)

    def _stat(self) -> tuple[int, int] | None:
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (found.st_mtime_ns, found.st_size)

    def current(self) -> Config:
        stamp = self._stat()
        with self._lock:
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._config = load(self.path)
                except ConfigError as error:
                    print(f"gateway: {error}; the previous configuration stays in force "
                          f"(fix the file: the runner writes it atomically)", file=sys.stderr)
            return self._config
