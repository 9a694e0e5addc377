"""Pydantic models of bakeoff.toml: every section and key of the reference manifest.

Models are frozen, forbid unknown keys and validate strictly (a TOML string is not an
integer). Enum fields alone accept their string values. Cross-field rules raise
`rules.rule_error` so each violation keeps its own key path.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic.config import JsonDict

from runner.manifest.rules import RuleViolation, raise_if_any, rule_error

PARSER_NAMES: tuple[str, ...] = (
    "pytest", "cargo", "go-test", "node-test", "jest", "vitest", "junit", "exit-code",
)
ParserName = Literal[
    "pytest", "cargo", "go-test", "node-test", "jest", "vitest", "junit", "exit-code"
]
MIN_SAMPLES = 3
RESERVED_CHECK_NAMES = ("success",)  # the success criterion's samples are CHANGE/ARM/success/N
COVERAGE_JSON_PREFIX = "coverage-json:"

SLUG = r"^[a-z0-9-]+$"
CHECK_NAME = r"^[a-z0-9_-]+$"
ARM_ID = r"^[A-Za-z0-9_-]+$"
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
NON_BLANK = r"\S"
PATTERN_HELP = {
    SLUG: "lowercase letters, digits and '-' only",
    CHECK_NAME: "lowercase letters, digits, '_' and '-' only",
    ARM_ID: "letters, digits, '_' and '-' only",
    ENV_NAME: "an environment variable name (letters, digits, '_'; not starting with a digit)",
    NON_BLANK: "a non-empty text",
}

Slug = Annotated[str, StringConstraints(pattern=SLUG)]
NonBlank = Annotated[str, StringConstraints(pattern=NON_BLANK)]
EnvName = Annotated[str, StringConstraints(pattern=ENV_NAME)]
LENIENT = Field(strict=False)  # an enum field: TOML gives its value as a string


class EffortNormalized(StrEnum):
    """The arm's effort on a common scale; ``unknown`` is the honest value."""

    NONE = "none"
    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    XHIGH = "xhigh"
    MAX = "max"
    ULTRA = "ultra"
    UNKNOWN = "unknown"


class EffortProvenance(StrEnum):
    """Where the stated effort comes from."""

    SOURCE_DOCUMENT = "source_document"
    EXPERIMENT_CONFIG = "experiment_config"
    RUNTIME_LOG = "runtime_log"
    UNKNOWN = "unknown"


class Mode(StrEnum):
    """How the contestant works."""

    SINGLE_AGENT = "single_agent"
    MULTI_AGENT = "multi_agent"
    ADAPTIVE = "adaptive"
    UNKNOWN = "unknown"


def compile_problem(pattern: str) -> str | None:
    """Why `pattern` is not a valid Python regex, or None when it compiles."""
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"is not a valid regular expression ({exc})"
    return None


def relative_path_problem(path: str) -> str | None:
    """Why `path` cannot name a file inside the repository, or None."""
    if not path.strip():
        return "is empty"
    if path.startswith("/") or ".." in path.replace("\\", "/").split("/"):
        return "must be a path relative to the repository root, without '..'"
    return None


def relative_paths(paths: list[str], fix: str) -> list[str]:
    violations = [
        RuleViolation((i,), problem, fix, found=p)
        for i, p in enumerate(paths)
        if (problem := relative_path_problem(p)) is not None
    ]
    raise_if_any(violations)
    return paths


def stack_path_checked(value: str | None) -> str | None:
    """A `stack = "compose/NAME.yml"` as written, or the rule it breaks."""
    problem = None if value is None else relative_path_problem(value)
    if problem is not None:
        raise_if_any([RuleViolation((), problem, "name the compose file relative to the "
                                    "manifest, e.g. compose/NAME.yml", found=value)])
    return value


def _no_schema_default(schema: JsonDict) -> None:
    schema.pop("default", None)


class Section(BaseModel):
    """Base of every manifest table: frozen, strict, unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Experiment(Section):
    """``[experiment]``: what is compared, where, from which base."""

    name: Slug = Field(description="names the state dir and the branches ([a-z0-9-])")
    repo: NonBlank = Field(
        default=".", description="the target git repository, relative to the manifest"
    )
    base: NonBlank = Field(default="main", description="a clean ref; each arm starts from it")
    branch: NonBlank = Field(  # the default is filled in from the name before validation
        default="",
        description="the experiment branch that accumulates merges (default bakeoff/<name>)",
        json_schema_extra=_no_schema_default,
    )
    agents_dir: NonBlank | None = Field(
        default=None,
        description="a directory (relative to the manifest) mounted read-only at /agents in "
                    "every arm's sandbox: scripted contestants or agent wrappers",
    )

    @model_validator(mode="before")
    @classmethod
    def _default_branch(cls, data: Any) -> Any:
        if isinstance(data, dict) and "branch" not in data and isinstance(data.get("name"), str):
            return {**data, "branch": f"bakeoff/{data['name']}"}
        return data

    @model_validator(mode="after")
    def _branch_is_not_base(self) -> Experiment:
        if self.branch == self.base:
            fix = f'name another branch, e.g. branch = "bakeoff/{self.name}"'
            raise rule_error([RuleViolation(
                ("branch",), "must differ from base (merges would land on the base)", fix,
                found=self.branch,
            )])
        return self


class Weights(Section):
    """``[contract.weights]``: the rubric; each weight scores 0..5."""

    success: int = Field(default=3, ge=0, description="objective: success-criterion pass-rate")
    checks: int = Field(default=2, ge=0, description="objective: checks pass-rates")
    diagnosis: int = Field(default=2, ge=0, description="subjective (judge)")
    plan: int = Field(default=1, ge=0, description="subjective (judge)")
    code_quality: int = Field(default=1, ge=0, description="subjective (judge)")
    intent: int = Field(default=1, ge=0, description="subjective (judge)")

    @property
    def total(self) -> int:
        """The sum of the weights."""
        return (self.success + self.checks + self.diagnosis + self.plan
                + self.code_quality + self.intent)

    @property
    def max(self) -> int:
        """The highest possible score: 5 * sum(weights)."""
        return 5 * self.total

    @model_validator(mode="after")
    def _not_all_zero(self) -> Weights:
        if self.total == 0:
            raise rule_error([RuleViolation(
                (), "all weights are 0: no score could be computed",
                "give at least one weight a positive value (e.g. success = 3)",
            )])
        return self


class ContractSection(Section):
    """``[contract]``: the grading, frozen at ``up`` and verified by every later command."""

    model_config = ConfigDict(title="Contract")  # the schema's title, as it was
    metric: NonBlank = Field(description="what is measured, in words")
    threshold: float = Field(
        default=1.0, ge=0.0, le=1.0,
        description="pass-rate an arm needs for the change to count as solved (0..1)",
    )
    samples: int = Field(
        default=MIN_SAMPLES, ge=1, description="fresh containers per check per arm (>= 3)"
    )
    judge: NonBlank = Field(
        default="none",
        description='"none", "command:<program> {input}", or "claude-code:<model>@<effort>" / '
                    '"codex:<model>@<effort>" through the gateway; never a contestant\'s model',
    )
    judge_version: NonBlank | None = Field(
        default=None, description="an agent judge: the CLI version to install (pinned)"
    )
    judge_key: EnvName | None = Field(
        default=None, description="an agent judge: the variable holding its real key, held "
                                  "by the gateway (default ANTHROPIC_API_KEY / OPENAI_API_KEY)"
    )
    weights: Weights = Field(default_factory=Weights, description="the rubric")
    allow_fewer_samples: bool = Field(
        default=False, description="permit samples < 3 (recorded as a caveat)"
    )

    @model_validator(mode="after")
    def _enough_samples(self) -> ContractSection:
        if self.samples < MIN_SAMPLES and not self.allow_fewer_samples:
            raise rule_error([RuleViolation(
                ("samples",), f"must be >= {MIN_SAMPLES} (one sample cannot show flakiness)",
                f"set samples = {MIN_SAMPLES} or more, or set allow_fewer_samples = true "
                "(recorded as a caveat)",
                found=self.samples,
            )])
        return self


class Toolchain(Section):
    """``[toolchain]``: the image every container of the experiment runs."""

    image: NonBlank = Field(
        default="python", description="a name under images/ or any image reference"
    )
    setup: list[str] = Field(
        default_factory=list, description="commands baked into a prepared image"
    )
    requires: list[NonBlank] = Field(
        default_factory=list, description="preflight: each must be on PATH in the image"
    )
    env_files: list[str] = Field(
        default_factory=list, description="files copied from the main checkout into every arm"
    )
    stack: str | None = Field(
        default=None,
        description="optional: a compose file (relative to the manifest, e.g. "
                    "compose/NAME.yml): each arm's own stack during dispatch, on the arm's "
                    "network, its tree services running the arm's live checkout",
    )
    stack_timeout_s: float = Field(default=60, gt=0,
                                   description="how long `up` awaits each arm stack's health")
    node: Literal["18", "20", "22", "24"] | None = Field(
        default=None,
        description='image = "node" only: the Node.js it runs, "18" (Debian\'s), "20", "22" '
                    "or \"24\"; unset: the repository's .nvmrc, .node-version or "
                    "package.json engines.node at the base, else 18",
    )
    keep: list[str] = Field(
        default_factory=list,
        description="what setup leaves in the tree that every sample keeps, beside the "
                    "dependency directories kept anyway (node_modules, virtualenvs, "
                    "*.egg-info, .yarn, target): paths or globs relative to the repository "
                    "root; the rest (dist/, *.tsbuildinfo, ...) is dropped",
    )
    build: list[str] = Field(
        default_factory=list,
        description="commands run in every sample on the arm's tree before its check "
                    "(e.g. npm run build): a failure is the arm's FAIL build_failed",
    )
    browser: bool = Field(
        default=False,
        description="the browser criteria's Chromium, Playwright and pytest-playwright in "
                    "every arm's sandbox during dispatch, so an agent can verify its work "
                    "the way the criterion will",
    )

    @field_validator("keep")
    @classmethod
    def _keep_relative(cls, value: list[str]) -> list[str]:
        return relative_paths(value, "name a path or glob relative to the repository root")

    @model_validator(mode="after")
    def _node_needs_the_node_image(self) -> Toolchain:
        if self.node is not None and self.image != "node":
            raise_if_any([RuleViolation(
                ("node",), f'applies to image = "node" only, and image is {self.image!r}',
                'remove node, or set image = "node"', found=self.node)])
        return self

    @field_validator("env_files")
    @classmethod
    def _env_files_relative(cls, value: list[str]) -> list[str]:
        return relative_paths(value, "name a file relative to the repository root")

    @field_validator("stack")
    @classmethod
    def _stack_relative(cls, value: str | None) -> str | None:
        return stack_path_checked(value)


MAX_FILES = 100_000  # `[limits].max_files`' default: entries of a tree a sample lays out


class Limits(Section):
    """``[limits]``: per container, the same for every arm."""

    cpus: float = Field(default=1.0, gt=0, description="CPUs per container")
    memory_mb: int = Field(default=2048, ge=64, description="memory per container, MiB")
    pids: int = Field(default=512, ge=16, description="process limit per container")
    dispatch_timeout_s: float = Field(default=1800, gt=0, description="agent wall-clock limit")
    check_timeout_s: float = Field(default=600, gt=0, description="one sample's wall-clock limit")
    disk_mb: int = Field(
        default=2048, ge=16,
        description="writable space per container (checkout, /tmp, HOME), MiB: size-limited "
                    "tmpfs, so filling it fails the arm, never the host",
    )
    max_files: int = Field(
        default=MAX_FILES, ge=100,
        description="entries (files, symlinks, directories) a commit's tree may hold to be "
                    "graded: a larger tree is the arm's FAIL unsafe_work, refused unread",
    )


class KubernetesSection(Section):
    """``[kubernetes]``: the cluster a run goes to when ``engine = "kubernetes"`` (issue 36;
    docs/scale-out.md). The images are built here and pushed to `registry`."""

    context: NonBlank | None = Field(
        default=None, description="the kubeconfig context (KUBECONFIG honoured, else "
                                  "~/.kube/config); default: its current context")
    namespace: Slug | None = Field(
        default=None, description="the namespace the tool works in; default: the context's, "
                                  "else default")
    registry: NonBlank = Field(
        description="where the images are pushed, HOST[:PORT][/PATH]; a Pod runs them by digest")
    accept_node_pids_limit: bool = Field(
        default=False, description="run although a Pod has no pids limit of its own (the "
                                   "kubelet's podPidsLimit is node-wide); every record says so")
    parallelism: int = Field(
        default=4, ge=1, le=256, description="Pods at once: the cluster's share, never this "
                                             "machine's CPU count")
    cpus: int = Field(default=4, ge=1, description="the most CPUs one container may ask")
    storage_class: Slug | None = Field(
        default=None, description="the StorageClass of the volumes' claims (one that gives "
                                  "the size asked: a larger one is refused); default: the "
                                  "cluster's default class")
    volume_mb: int = Field(
        default=1024, ge=1, description="the size of a volume docker keeps on its disk "
                                        "uncapped (a brief, a bundle, the gateway's state), MiB")


class Database(Section):
    """``[database]``: optional Postgres; a database + owner role per arm and per sample."""

    image: NonBlank = Field(default="postgres", description="the Postgres image")
    url_env: EnvName = Field(
        default="DATABASE_URL", description="the variable that carries the arm's URL"
    )
    connection_limit: int = Field(
        default=20, ge=1, le=100,
        description="connections each arm's (and each sample's) role may hold at once; the "
                    "server's max_connections is sized so every role can hold them all",
    )
    statement_timeout_s: float = Field(
        default=120, gt=0,
        description="statement_timeout of every arm's and sample's role, seconds",
    )
    temp_file_limit_mb: int = Field(
        default=1024, ge=1,
        description="temp_file_limit of every arm's and sample's role (superuser-only: the "
                    "role cannot lift it), MiB",
    )
