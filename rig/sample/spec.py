"""What to run and what ran: one sample's spec (`SampleSpec`, with its server or stack),
the `SampleExecutor` that runs it somewhere, and what it reports (`Execution`).

The rig decides nothing about containers: an executor (runner's docker executor in
practice) takes a spec and returns an execution; a failed command is a value, a broken
rig an `infra_error`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from rig.guards.canary import Canary
from rig.guards.harness import Pinned
from rig.guards.tripwire import Finding, Tripwire
from rig.sample import metric
from rig.sample.record import BrowserAsked, BrowserRan, StackRecord, Usage


@dataclass(frozen=True)
class ServerSpec:
    """A fresh server per sample: started on a port the sample chooses, health-checked
    before the criterion runs, stopped after (`[changes.success].server`)."""

    run: str
    health: str = "/"
    port_env: str = "PORT"
    startup_timeout_s: float = 30


@dataclass(frozen=True)
class StackSpec:
    """A fresh compose project per sample (`[changes.success] stack`): the file as the
    contract froze it (its host path and sha256), and how long its health is awaited."""

    file: str
    sha256: str
    timeout_s: float = 60
    # service -> image ID, pinned (a reproduction: the record's); empty: resolved by name
    images: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class SampleSpec:
    """What to run: the identity of the sample and the command that grades it."""

    change: str
    arm: str
    check: str
    n: int
    commit: str
    base_commit: str
    command: str
    parser: str
    timeout_s: float
    protected: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    contract: str | None = None  # "v<N>:<sha256>" of the frozen contract it was graded under
    server: ServerSpec | None = None
    stack: StackSpec | None = None
    ratchet: metric.Ratchet | None = None  # a ratchet check: graded on its metric
    # "base": the sample runs under the base's harness (`rig.guards.harness`: conftest, runner
    # configuration, layout restored, the arm's additions removed), as every sample of
    # `score` does; "arm" (records from before issue 20, tests of the tree as committed):
    # the tree's own.
    harness: Literal["base", "arm"] = "base"
    refused: str | None = None  # the arm's work was refused at import: nothing to run
    token: str | None = None  # the canaries' names (None: fresh random ones; reproduce
    #                           re-plants the recorded ones)
    # An exit-code check (`rig.guards.tripwire`): this sample is its tripwire run (the file to
    # plant), or what the check's tripwire run showed for the arm (`guard`).
    tripwire: Tripwire | None = None
    guard: Finding | None = None
    # `[toolchain] build`: run on the arm's tree before the command (or the server), its
    # output kept apart; a failure is the arm's FAIL build_failed.
    build: tuple[str, ...] = ()
    browser: BrowserAsked | None = None  # a browser criterion: the rig's pytest drives the page

    @property
    def sample(self) -> str:
        return f"{self.change}/{self.arm}/{self.check}/{self.n}"

    @property
    def collect(self) -> tuple[str, ...]:
        """Files (relative to /work) the executor reads back after the command."""
        return () if self.ratchet is None else self.ratchet.collect


@dataclass(frozen=True)
class Execution:
    """What happened in the container. `infra_error` set: the rig itself failed."""

    exit_code: int | None
    log: str
    duration_s: float
    timed_out: bool = False
    oom_killed: bool = False
    program_present: bool = True
    missing_tools: tuple[str, ...] = ()
    infra_error: str | None = None
    image: str = ""
    image_id: str = ""
    image_identity: str = ""
    image_ref: str = ""  # a cluster: the `repo@sha256:...` the Pod ran (Docker: empty)
    env: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[Mapping[str, str], ...] = ()
    limits: Mapping[str, float | int] = field(default_factory=dict)
    network: str = "none"
    db_schema: str | None = None
    protected: Mapping[str, str] = field(default_factory=dict)
    server: str = "none"  # none | healthy | unhealthy | no_http_client
    server_log: str = ""
    files: Mapping[str, str] = field(default_factory=dict)  # `SampleSpec.collect`, as read
    canary: Canary | None = None  # the canaries planted in the sample's tree
    observed: bool = False  # the rig's observer was planted (pytest)
    observation: str | None = None  # its root reader's records, as read back
    outlived: bool = False  # the host stopped the container: it outlived its deadline
    pinned: Pinned = field(default_factory=Pinned)  # what the rig changed in the tree
    truncated: int = 0  # bytes of output left out between the kept head and tail
    refused: str | None = None  # the tree (or the arm's work) could not be used safely
    layout_failed: bool = False  # `infra_error` came while laying out the arm's tree
    stack: StackRecord | None = None  # the sample's stack, when it has one
    stack_detail: str = ""  # why the stack never got healthy
    stack_log: str = ""  # its services' log: kept apart, never parsed
    build_exit: int | None = None  # `[toolchain] build`'s exit status (None: none ran)
    build_log: str = ""  # its output: kept apart, never parsed
    browser_run: BrowserRan | None = None  # a browser criterion's browser, as recorded
    engine: Mapping[str, str] = field(default_factory=dict)  # host, id, name
    usage: Usage | None = None  # its container's cgroup, as the driver read it (rig.headroom)
    server_usage: Usage | None = None  # its server's container's, when it has a server
    browser_files: Mapping[str, bytes] = field(default_factory=dict)  # what it kept, by name
    # The outage that cut the sample (the engine, or one of the experiment's services,
    # failed under it), with `infra_error` set: not a result, run again on resume.
    interrupted: str | None = None


class SampleExecutor(Protocol):
    """Where samples run, with a provider's lifecycle (as inspect_ai's sandboxes have):
    `setup` before the first sample (networks, a database server), `execute` one sample
    in a fresh environment (a failed command is a value; a broken rig an `infra_error`),
    `teardown` after the last (everything it made is gone)."""

    def setup(self) -> None: ...

    def execute(self, spec: SampleSpec) -> Execution: ...

    def teardown(self) -> None: ...
