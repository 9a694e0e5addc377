"""The sample record: one JSON per sample, with everything `reproduce` needs.

Execute, persist, then grade: a record's `execution` part is written from what ran, and
its verdict can always be recomputed from the stored log (`rig.oracle.regrade`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from rig.outcome import Verdict
from rig.tree import clean


class SampleCounts(BaseModel):
    model_config = ConfigDict(frozen=True)
    passed: int
    failed: int
    skipped: int
    errors: int


class StackRecord(BaseModel):
    """The stack a sample ran with (`[changes.success] stack`): the compose file by path
    and hash, the sample's own project, each service's image ID, how it came up and how
    long that was awaited."""

    model_config = ConfigDict(frozen=True)
    file: str
    sha256: str
    project: str
    services: dict[str, str]  # service -> image ID
    health: str  # healthy | unhealthy
    timeout_s: float = 60  # how long its health was awaited


class SampleRecord(BaseModel):
    """DESIGN.md, "Records": one sample of one check on one commit in one fresh container.

    Any name git allows can reach a record (a protected path, a test id, a message that
    names a file): one that is not UTF-8 is held in git's quoted form (`rig.tree.clean`),
    so a record can always be written, read back and printed."""

    model_config = ConfigDict(frozen=True)
    schema_version: str = "bakeoff-sample/v1"
    sample: str  # CHANGE/ARM/CHECK/N
    change: str
    arm: str
    check: str
    n: int
    commit: str
    base_commit: str
    image: str
    image_id: str
    image_identity: str
    command: str
    parser: str
    env: dict[str, str]  # secrets redacted
    mounts: list[dict[str, str]]
    limits: dict[str, float | int]
    network: str
    db_schema: str | None
    protected: dict[str, str]  # path -> sha256 of the content restored from the base
    requires: list[str]
    exit_code: int | None  # the command's exit status, as it was
    timed_out: bool
    oom_killed: bool
    program_present: bool
    counts: SampleCounts | None
    tests_ran: int
    verdict: Verdict
    reason: str | None
    rig_error: str | None
    detail: str
    contract: str | None = None  # "v<N>:<sha256>": results after a refreeze are a new contract
    server: str = "none"  # a server per sample: none | healthy | unhealthy | no_http_client
    metric_value: float | None = None  # a ratchet: the value this sample measured
    metric_base: float | None = None  # a ratchet: the frozen base value it was graded against
    collected: dict[str, str] = {}  # a ratchet: file the command wrote -> its copy beside the log
    started_at: str
    duration_s: float
    log: str  # file name of the full log, beside the record
    exit_code_graded: int | None = None  # the status graded (the must-fail canary's out)
    harness: str = "arm"  # "base": the success criterion ran under the base's harness
    pinned: dict[str, list[str]] = {}  # what the rig changed: restored, removed, bytecode
    canaries: dict[str, object] | None = None  # planted canaries and how they came out
    truncated_bytes: int = 0  # output left out between the kept head and tail of the log
    diagnosis: dict[str, str | None] | None = None  # the base's run it was judged against
    stack: StackRecord | None = None  # the stack under test, when the criterion has one
    outlived: bool = False  # the host stopped the container after its deadline
    unguarded: list[str] = []  # what this sample's grading could not check, and why
    # The tests by id (pytest: the rig's observer; else the runner's per-test lines),
    # the canaries left out: {id, status[, pinned, attested, verified]} (the base's are
    # what an arm's protected tests are checked against).
    tests: list[dict[str, str | bool]] = []
    duplicated: bool = False  # the runner's lines gave one test two outcomes
    observer: dict[str, object] | None = None  # pytest: sessions, anomalies, plugins, ini
    build: list[str] = []  # `[toolchain] build`, run on the tree first (its log: N.build.log)
    build_exit: int | None = None  # its exit status (None: no build ran)

    @model_validator(mode="before")
    @classmethod
    def _names_as_text(cls, data: Any) -> Any:
        return cleaned(data)


def cleaned(data: Any) -> Any:
    """`data` with every string in it (keys too) as `rig.tree.clean` gives it."""
    if isinstance(data, str):
        return clean(data)
    if isinstance(data, dict):
        return {cleaned(k): cleaned(v) for k, v in data.items()}
    if isinstance(data, list):
        return [cleaned(v) for v in data]
    if isinstance(data, tuple):
        return tuple(cleaned(v) for v in data)
    return data
