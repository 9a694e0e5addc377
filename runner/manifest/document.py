"""`Manifest`: the whole bakeoff.toml, with the rules that span sections."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import Field, model_validator

from runner.manifest import judge
from runner.manifest.arms import Arm
from runner.manifest.criteria import Change, Check
from runner.manifest.gateway import Gateway
from runner.manifest.models import (
    MIN_SAMPLES,
    RESERVED_CHECK_NAMES,
    ContractSection,
    Database,
    Experiment,
    KubernetesSection,
    Limits,
    Section,
    Toolchain,
)
from runner.manifest.rules import RuleViolation, raise_if_any

# The protocol of each agent CLI that speaks one only (OpenCode and mini-swe-agent choose
# by the model's name).
CLI_PROTOCOL = {"claude-code": "anthropic", "codex": "openai", "gemini-cli": "gemini",
                "qwen-code": "openai"}


class Manifest(Section):
    """bakeoff.toml. Sections as in the reference manifest; see `bakeoff-sandbox init`."""

    experiment: Experiment = Field(description="what is compared, where, from which base")
    contract: ContractSection = Field(description="the grading, frozen at `up`")
    toolchain: Toolchain = Field(description="the image every container runs")
    limits: Limits = Field(default_factory=Limits, description="per-container limits")
    database: Database | None = Field(default=None, description="optional per-arm Postgres")
    checks: list[Check] = Field(default_factory=list, description="objective checks")
    changes: list[Change] = Field(min_length=1, description="one stage each, run in order")
    arms: list[Arm] = Field(min_length=1, description="the contestants; one is the control")
    gateway: Gateway = Field(default_factory=Gateway, description="the model gateway")
    engine: Literal["docker", "kubernetes"] = Field(
        default="docker", description="where the containers run: the Docker engine "
        "DOCKER_HOST names (else this machine's), or a Kubernetes cluster ([kubernetes])")
    kubernetes: KubernetesSection | None = Field(
        default=None, description='the cluster, when engine = "kubernetes"')

    @property
    def control_arms(self) -> list[Arm]:
        """The arms marked ``control = true`` (at least one)."""
        return [arm for arm in self.arms if arm.control]

    @property
    def caveats(self) -> list[str]:
        """What weakens every measurement of this manifest, one line each."""
        caveats = []
        if self.contract.samples < MIN_SAMPLES:
            caveats.append(
                f"samples={self.contract.samples} < {MIN_SAMPLES} (allow_fewer_samples)"
            )
        return caveats

    @model_validator(mode="after")
    def _cross_section_rules(self) -> Manifest:
        raise_if_any([
            *_duplicates("arms", "id", [arm.id for arm in self.arms]),
            *_duplicates("checks", "name", [check.name for check in self.checks]),
            *_duplicates("changes", "id", [change.id for change in self.changes]),
            *_reserved_check_names(self.checks),
            *self._control_violations(),
            *self._judge_violations(),
            *self._price_violations(),
            *self._upstream_violations(),
            *self._engine_violations(),
        ])
        return self

    def _control_violations(self) -> list[RuleViolation]:
        if self.control_arms:
            return []
        return [RuleViolation(
            ("arms",), "no arm has control = true (a control arm is mandatory)",
            "add control = true to the arm that runs the default/no-intervention configuration",
        )]

    def _judge_violations(self) -> list[RuleViolation]:
        spec, problems = judge.parse(self.contract)
        named = spec.model if spec.kind == "agent" else self.contract.judge
        for index, arm in enumerate(self.arms):
            if _same_model(named, arm.model):
                return [*problems, RuleViolation(
                    ("contract", "judge"),
                    f"is the model of arms[{index}] ({arm.id}): a contestant cannot grade itself",
                    'use a model no arm runs, or judge = "none"', found=self.contract.judge,
                )]
        return problems


    def _engine_violations(self) -> list[RuleViolation]:
        """A cluster is named exactly when the engine is one."""
        if self.engine == "kubernetes" and self.kubernetes is None:
            return [RuleViolation(("kubernetes",), 'engine = "kubernetes" needs a '
                                  "[kubernetes] table (its registry at least)",
                                  '[kubernetes] registry = "HOST[:PORT]" (context and '
                                  "namespace: the kubeconfig's unless named)")]
        if self.engine == "docker" and self.kubernetes is not None:
            return [RuleViolation(("engine",), 'is "docker" while a [kubernetes] table is '
                                  "given", 'set engine = "kubernetes" (at the top of the '
                                  "file), or remove [kubernetes]", found=self.engine)]
        return []

    def _upstream_violations(self) -> list[RuleViolation]:
        """Each arm's `upstream` is a [[gateway.upstreams]] entry its CLI can speak to,
        and its secrets are that upstream's key at most (it reaches no other)."""
        found = []
        names = [u.name for u in self.gateway.upstreams]
        for index, arm in enumerate(self.arms):
            if arm.upstream is None or arm.network != "gateway":
                continue
            upstream = self.gateway.upstream(arm.upstream)
            if upstream is None:
                found.append(RuleViolation(
                    ("arms", index, "upstream"), "names no [[gateway.upstreams]] entry",
                    (f"use one of: {', '.join(names)}; or " if names else "")
                    + f'add [[gateway.upstreams]] name = "{arm.upstream}" (protocol, '
                    "base_url, key)", found=arm.upstream))
                continue
            spoken = CLI_PROTOCOL.get(arm.installs or arm.agent)
            if spoken is not None and spoken != upstream.protocol:
                found.append(RuleViolation(
                    ("arms", index, "upstream"), f"is an {upstream.protocol} upstream and "
                    f"{arm.agent} speaks {spoken} only", f"name an {spoken} upstream, or "
                    "another agent", found=arm.upstream))
            found += [RuleViolation(
                ("arms", index, "secrets", at), f"is not the key of upstream {upstream.name} "
                f"({upstream.key}), the only upstream the arm reaches",
                "remove it (the gateway holds the upstream's key), or remove upstream",
                found=name) for at, name in enumerate(arm.secrets) if name != upstream.key]
        return found

    def _own_prices(self, arm: Arm) -> set[str]:
        """The models the arm's named upstream prices itself."""
        upstream = self.gateway.upstream(arm.upstream) if arm.upstream else None
        return set(upstream.prices) if upstream else set()

    def _price_violations(self) -> list[RuleViolation]:
        """A dollar budget needs the price of every model it counts: without one the
        gateway could not know when an arm has spent it."""
        if self.gateway.max_usd_per_arm is None:
            return []
        spec = judge.spec_of(self.contract)
        models = [m for arm in self.arms if arm.network == "gateway"
                  for m in (arm.model, *arm.allow_models) if m not in self._own_prices(arm)]
        models += [spec.model] if spec.kind == "agent" else []
        missing = sorted(set(models) - set(self.gateway.prices))
        return [RuleViolation(
            ("gateway", "max_usd_per_arm"), f"needs a price for {', '.join(missing)}",
            "add each to [gateway.prices] (USD per million tokens), or remove the budget",
            found=self.gateway.max_usd_per_arm)] if missing else []


def _duplicates(table: str, key: str, values: Iterable[str]) -> list[RuleViolation]:
    seen: dict[str, int] = {}
    violations = []
    for index, value in enumerate(values):
        if value in seen:
            violations.append(RuleViolation(
                (table, index, key), f"duplicates {table}[{seen[value]}].{key}",
                f"give every entry of [[{table}]] its own {key}", found=value,
            ))
        seen.setdefault(value, index)
    return violations


def _reserved_check_names(checks: list[Check]) -> list[RuleViolation]:
    return [
        RuleViolation(
            ("checks", index, "name"),
            "is reserved for the success criterion (samples are CHANGE/ARM/success/N)",
            "rename the check", found=check.name,
        )
        for index, check in enumerate(checks) if check.name in RESERVED_CHECK_NAMES
    ]


def _same_model(judge: str, model: str) -> bool:
    """True when the judge names `model`, bare or as the last part of provider:model."""
    judge_name = judge.strip().lower()
    model_name = model.strip().lower()
    last_part = judge_name.replace(":", "/").rsplit("/", 1)[-1]
    return model_name in (judge_name, last_part)
