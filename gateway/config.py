"""`<state>/config.json`: upstreams, tokens and prices; re-read whenever it changes.

`upstreams` maps a name to an upstream: a protocol's name to its base URL (the implicit
upstream of `[gateway] anthropic/openai/gemini`, its key named by each grant's `keys`), or
any other name to `{"protocol", "base_url", "key", "prices"}` (`[[gateway.upstreams]]`: the
key's variable and the prices are the upstream's own). A grant that names an `upstream`
reaches that one only.

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
    upstream: str | None = None             # the named upstream, its only one; None: the
                                            # implicit upstream of each provider in `keys`

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
class Upstream:
    """One upstream API: named, of one protocol; `key` is the variable holding its key
    (None: an implicit upstream, whose key each grant names)."""

    name: str
    protocol: Provider
    base_url: str
    key: str | None = None
    prices: Mapping[str, Price] = field(default_factory=dict)


@dataclass(frozen=True)
class Config:
    upstreams: Mapping[str, Upstream] = field(default_factory=dict)
    tokens: Mapping[str, Grant] = field(default_factory=dict)
    prices: Mapping[str, Price] = field(default_factory=dict)

    def grant(self, token: str | None) -> Grant | None:
        return None if token is None else self.tokens.get(token)

    def key_names(self) -> set[str]:
        """Every variable that holds a real key: the grants' and the upstreams'."""
        return ({name for grant in self.tokens.values() for name in grant.keys.values()}
                | {u.key for u in self.upstreams.values() if u.key is not None})


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
                 allow_server_tools=raw.get("allow_server_tools") is True,
                 upstream=_optional_name(raw.get("upstream"), f"{where}.upstream"))


def _optional_name(value: Any, where: str) -> str | None:
    if value is not None and not (isinstance(value, str) and value):
        raise ConfigError(f"config.json: {where} must be an upstream's name or null")
    return value


def _url(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise ConfigError(f"config.json: {where} must be an http(s) URL")
    return value


def _upstream(name: str, raw: Any) -> Upstream:
    """`"anthropic": URL` (implicit) or `"moonshot": {protocol, base_url, key, prices}`."""
    where = f"upstreams.{name}"
    protocols = {p.value: p for p in Provider}
    if isinstance(raw, str):
        if name not in protocols:
            raise ConfigError(f"config.json: {where}: a bare URL is only for anthropic/openai/"
                              "gemini; a named upstream is an object {protocol, base_url, key}")
        return Upstream(name, protocols[name], _url(raw, where))
    if not isinstance(raw, dict) or raw.get("protocol") not in protocols:
        raise ConfigError(f"config.json: {where} needs a protocol (anthropic/openai/gemini)")
    key = raw.get("key")
    if not isinstance(key, str) or not key:
        raise ConfigError(f"config.json: {where}.key must name the variable with its key")
    prices = raw.get("prices") or {}
    if not isinstance(prices, dict):
        raise ConfigError(f"config.json: {where}.prices must map a model to its prices")
    return Upstream(name, protocols[raw["protocol"]], _url(raw.get("base_url"),
                                                           f"{where}.base_url"), key,
                    {str(m): _price(p, f"{where}.prices.{m}") for m, p in prices.items()})


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
    if not isinstance(upstreams, dict):
        raise ConfigError("config.json: upstreams must map a name to an upstream")
    tokens = {str(t): _grant(g, f"tokens[{i}]")
              for i, (t, g) in enumerate((raw.get("tokens") or {}).items())}
    prices = {str(m): _price(p, f"prices.{m}") for m, p in (raw.get("prices") or {}).items()}
    return Config(upstreams={str(n): _upstream(str(n), u) for n, u in upstreams.items()},
                  tokens=tokens, prices=prices)


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
