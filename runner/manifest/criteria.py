"""What a sample is graded on, in bakeoff.toml: ``[[checks]]`` (a test check, or a ratchet
and its metric) and ``[[changes]]`` with each one's success criterion (a command, or a
browser file driving the sample's fresh server). Validated as `runner.manifest.models`'
sections are (frozen, strict, each violation under its own key path).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, field_validator, model_validator

from runner.manifest.expectation import ExpectationError, parse_expectation
from runner.manifest.models import (
    CHECK_NAME,
    COVERAGE_JSON_PREFIX,
    PARSER_NAMES,
    EnvName,
    NonBlank,
    ParserName,
    Section,
    Slug,
    compile_problem,
    relative_path_problem,
    relative_paths,
    stack_path_checked,
)
from runner.manifest.rules import RuleViolation, raise_if_any, rule_error


class Check(Section):
    """``[[checks]]``: an objective check (weight "checks"), or a ratchet."""

    name: Annotated[str, StringConstraints(pattern=CHECK_NAME)] = Field(
        description="unique; [a-z0-9_-]"
    )
    run: NonBlank = Field(description="the command, run in the checkout")
    parser: ParserName | None = Field(
        default=None, description="how the output is read (required for kind = \"test\")"
    )
    kind: Literal["test", "ratchet"] = Field(
        default="test", description='"test", or "ratchet": a metric that must not get worse'
    )
    metric: str | None = Field(
        default=None,
        description="ratchet only: a regex with a named group 'value', or coverage-json:<path>",
    )
    better: Literal["higher", "lower"] | None = Field(
        default=None, description="ratchet only: which direction is an improvement"
    )
    tolerance: float = Field(default=0.0, ge=0, description="ratchet only: allowed worsening")
    junit: str | None = Field(default=None, description="the JUnit XML file the run writes")
    build: bool = Field(default=True,
                        description="run [toolchain] build first (false: the check needs none)")

    @field_validator("metric")
    @classmethod
    def _metric_readable(cls, value: str | None) -> str | None:
        if value is None:
            return value
        problem = metric_problem(value)
        if problem is not None:
            fix = ("use a regex with a named group, e.g. 'coverage: (?P<value>[0-9.]+)%', "
                   f"or '{COVERAGE_JSON_PREFIX}<path>'")
            raise rule_error([RuleViolation((), problem, fix, found=value)])
        return value

    @model_validator(mode="after")
    def _kind_fields(self) -> Check:
        raise_if_any(self._ratchet_violations() if self.kind == "ratchet"
                     else self._test_violations())
        return self

    def _ratchet_violations(self) -> list[RuleViolation]:
        missing = [key for key in ("metric", "better") if getattr(self, key) is None]
        return [RuleViolation((key,), "a ratchet requires it", _RATCHET_FIX[key])
                for key in missing]

    def _test_violations(self) -> list[RuleViolation]:
        ratchet_only = {"metric": self.metric, "better": self.better,
                        "tolerance": self.tolerance or None}
        violations = [
            RuleViolation((key,), 'only a kind = "ratchet" check may set it',
                          f'remove {key}, or set kind = "ratchet"', found=value)
            for key, value in ratchet_only.items() if value is not None
        ]
        if self.parser is None:
            violations.append(RuleViolation(
                ("parser",), "a test check requires a parser",
                f"set parser to one of: {', '.join(PARSER_NAMES)}",
            ))
        return violations


_RATCHET_FIX = {
    "metric": "set metric = a regex with a named group 'value', or 'coverage-json:<path>'",
    "better": 'set better = "higher" or "lower"',
}


def metric_problem(metric: str) -> str | None:
    """Why a ratchet metric cannot be read, or None."""
    if metric.startswith(COVERAGE_JSON_PREFIX):
        path = metric.removeprefix(COVERAGE_JSON_PREFIX)
        return None if path.strip() else "names no coverage JSON file after 'coverage-json:'"
    problem = compile_problem(metric)
    if problem is not None:
        return problem
    if "value" not in re.compile(metric).groupindex:
        return "has no named group 'value' (write (?P<value>...))"
    return None


class Server(Section):
    """``server = {...}``: a fresh server per sample, health-checked before the run."""

    run: NonBlank = Field(description="the command that starts the server; $PORT is set")
    health: str = Field(default="/", pattern=r"^/", description="the HTTP path polled for 2xx")
    port_env: EnvName = Field(default="PORT", description="the variable that carries the port")
    startup_timeout_s: float = Field(default=30, gt=0, description="how long to wait for health")


class Success(Section):
    """``[changes.success]``: the success criterion of a change: a command (`run`), or a
    pytest-playwright file of the manifest's directory (`browser`) that drives the page of
    the sample's fresh server in a real browser."""

    run: NonBlank | None = Field(default=None, description="the command whose pass is success")
    browser: str | None = Field(
        default=None,
        description="instead of run: a pytest-playwright file (relative to the manifest, e.g. "
                    "ui/test_cap.py) run in the rig's browser against the sample's server "
                    "(`server` is required); never read from an arm's tree",
    )
    expect_requests: list[str] = Field(
        default_factory=list,
        description='browser only: "METHOD /path [STATUS]" the flow must get from the app\'s '
                    "server (a 2xx unless a status or class is named): else FAIL "
                    "not_real_path",
    )
    parser: ParserName = Field(default="pytest", description="how the output is read")
    server: Server | None = Field(default=None, description="optional: a fresh server per sample")
    stack: str | None = Field(
        default=None,
        description="optional: a compose file (relative to the manifest, e.g. "
                    "compose/NAME.yml) started fresh per sample, never read from an arm's tree",
    )
    stack_timeout_s: float = Field(default=60, gt=0,
                                   description="how long the stack's health is awaited")
    build: bool = Field(default=True,
                        description="run [toolchain] build first (false: the criterion needs none)")

    @field_validator("stack")
    @classmethod
    def _stack_relative(cls, value: str | None) -> str | None:
        return stack_path_checked(value)

    @field_validator("browser")
    @classmethod
    def _browser_relative(cls, value: str | None) -> str | None:
        problem = None if value is None else relative_path_problem(value)
        if problem is not None:
            raise_if_any([RuleViolation((), problem, "name the pytest-playwright file "
                                        "relative to the manifest, e.g. ui/test_cap.py",
                                        found=value)])
        return value

    @field_validator("expect_requests")
    @classmethod
    def _expectations_read(cls, value: list[str]) -> list[str]:
        violations = []
        for index, text in enumerate(value):
            try:
                parse_expectation(text)
            except ExpectationError as error:
                violations.append(RuleViolation((index,), str(error).split(": write")[0],
                                                'write "METHOD /path" or "METHOD /path 400"',
                                                found=text))
        raise_if_any(violations)
        return value

    @model_validator(mode="after")
    def _one_criterion(self) -> Success:
        raise_if_any(self._criterion_violations())
        return self

    def _criterion_violations(self) -> list[RuleViolation]:
        if self.browser is None:
            found = [] if self.run is not None else [RuleViolation(
                ("run",), "a success criterion needs run (a command) or browser (a file)",
                'set run = "pytest -q tests/test_x.py", or browser = "ui/test_x.py"')]
            if self.expect_requests:
                found.append(RuleViolation(("expect_requests",), "needs browser",
                                           "set browser, or remove expect_requests"))
            return found
        found = []
        if self.run is not None:
            found.append(RuleViolation(("run",), "and browser are exclusive: the browser "
                                       "criterion is the rig's pytest", "remove one of them",
                                       found=self.run))
        if self.server is None:
            found.append(RuleViolation(("server",), "a browser criterion drives the sample's "
                                       "own fresh server", 'set server = { run = "...", '
                                       'health = "/healthz" }'))
        if self.parser != "pytest":
            found.append(RuleViolation(("parser",), "a browser criterion is read as pytest",
                                       'remove parser (or set "pytest")', found=self.parser))
        return found

    @property
    def command(self) -> str:
        """The criterion's command as records and the contract show it."""
        return self.run if self.run is not None else f"browser {self.browser}"


class Change(Section):
    """``[[changes]]``: one stage; run in order, each from the previous merge."""

    id: Slug = Field(description="unique; [a-z0-9-]")
    brief: NonBlank = Field(
        description="the brief file (symptom + acceptance criteria), relative to the manifest"
    )
    protected: list[str] = Field(
        default_factory=list,
        description="restored from the contract before every sample: files, directories "
                    "(every file under them) or git-style globs (* ? [...], ** for any "
                    "depth), expanded against the base commit and frozen as the file list",
    )
    reference: str = Field(
        default="", description="optional: a commit or patch file that must PASS"
    )
    success: Success = Field(description="the success criterion")

    @field_validator("protected")
    @classmethod
    def _protected_relative(cls, value: list[str]) -> list[str]:
        relative_paths(value, "name a path relative to the repository root")
        # A git path never holds `.` or empty segments: such an entry would match nothing.
        raise_if_any([RuleViolation((i,), "holds an empty or '.' path segment",
                                    "write tests/test_x.py, not ./tests//test_x.py", found=p)
                      for i, p in enumerate(value)
                      if any(part in ("", ".") for part in p.rstrip("/").split("/"))])
        return value
