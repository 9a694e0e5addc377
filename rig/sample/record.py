"""The sample record: one JSON per sample, with everything `reproduce` needs.

Execute, persist, then grade: a record's `ran` part is written from what ran, and its
verdict can always be recomputed from the stored log (`rig.sample.oracle.assess`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from rig.sample.outcome import Verdict
from rig.sample.tree import clean


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


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True)


class BrowserAsked(_Part):
    """A browser criterion (`[changes.success] browser`): the pytest-playwright file as
    the contract froze it (its host path and sha256, the rig's input, never the arm's),
    and the endpoints its flow must reach on the app's server (`rig.guards.real_path`)."""

    file: str
    sha256: str
    expect_requests: list[str] = []


class BrowserRan(_Part):
    """What a browser sample's browser did: the image and its identity (Chromium's and
    Playwright's versions), its container's limits, the requests the page made (each with
    who answered it) and its console errors, kept beside the log (`files`: what -> name),
    its screenshots and its trace."""

    image: str
    image_id: str
    image_ref: str | None = None  # a cluster: the registry's `repo@sha256:...` it ran
    identity: dict[str, str] = {}
    base_url: str = ""  # the app as the browser opened it: http://localhost:PORT
    limits: dict[str, float] = {}  # its container's: cpus, memory_mb, pids, tmp/out/home MB
    requests: int = 0  # lines recorded (`requests.jsonl`)
    console_errors: int = 0  # console errors and uncaught page errors (`console.jsonl`)
    files: dict[str, str] = {}  # requests | console | events | artifacts -> file name
    screenshots: list[str] = []  # file names beside the log
    trace: str | None = None  # `trace.zip`'s name beside the log (playwright show-trace)


class RealPath(_Part):
    """One `expect_requests` entry as the requests decided it (`rig.guards.real_path.check`)."""

    expectation: str
    met: bool
    detail: str
    test: str = ""  # a test's own flow (`tests.jsonl`); empty: the sample's


class Allocation(_Part):
    """The limits a sample's container ran under, as its cgroup enforced them: what it
    was guaranteed apart from where it is stopped. Only memory kills: past its limit the
    OOM killer ends a process; CPU past its quota is throttled (slower, never killed);
    past the pids limit a fork fails."""

    memory_reserved_bytes: int = 0  # guaranteed: docker's reservation (v1 the soft limit;
    #                                 v2 memory.min or memory.low); 0: none, nothing reserved
    memory_limit_bytes: int | None = None  # the kill threshold (None: unlimited)
    cpu_quota: float | None = None  # CPUs: a ceiling, throttled past it (None: unlimited)
    cpu_weight: int | None = None  # its share under contention, relative (v1 cpu.shares,
    #                                default 1024; v2 cpu.weight, default 100)
    pids_limit: int | None = None  # processes: a fork fails past it (None: unlimited)


class Usage(_Part):
    """What a sample's container used (`rig.headroom`): the kernel's counters of its own
    cgroup, read by the root driver after the command (read-only inside), and the limits
    that cgroup enforced. The peak counts what the limit is enforced on: the processes'
    memory, the page cache and every tmpfs (the tree); the CPU time is the container's
    (layout, build, command)."""

    source: Literal["cgroup-v1", "cgroup-v2"]  # whose files were read
    memory_peak_bytes: int | None  # high-water mark (v2 before kernel 5.19: None)
    # times it reached its limit (v2 memory.events max; v1 failcnt, which this engine's
    # kernel left at 0 even for a sample the OOM killer ended: oom_kills says that)
    memory_limit_hits: int | None = None
    oom_kills: int | None = None  # processes the OOM killer ended
    cpu_s: float | None = None
    cpu_throttled_s: float | None = None  # time held back by the CPU quota
    pids_peak: int | None = None  # v2 only
    allocation: Allocation = Allocation()


class Asked(_Part):
    """What was asked: the sample and the command that grades it (the `SampleSpec`)."""

    sample: str  # CHANGE/ARM/CHECK/N
    change: str
    arm: str
    check: str
    n: int
    commit: str
    base_commit: str
    command: str
    parser: str
    requires: list[str]
    contract: str | None = None  # "v<N>:<sha256>": results after a refreeze are a new contract
    harness: str = "arm"  # "base": the success criterion ran under the base's harness
    build: list[str] = []  # `[toolchain] build`, run on the tree first (its log: N.build.log)
    browser: BrowserAsked | None = None  # a browser criterion


class Ran(_Part):
    """What ran: the container, its inputs and limits, and what came out of it."""

    image: str
    image_id: str
    image_identity: str
    image_ref: str | None = None  # a cluster: the registry's `repo@sha256:...` it ran
    env: dict[str, str]  # secrets redacted
    mounts: list[dict[str, str]]
    limits: dict[str, float | int]
    network: str
    db_schema: str | None
    protected: dict[str, str]  # path -> sha256 of the content restored from the base
    exit_code: int | None  # the command's exit status, as it was
    timed_out: bool
    oom_killed: bool
    program_present: bool
    server: str = "none"  # a server per sample: none | healthy | unhealthy | no_http_client
    collected: dict[str, str] = {}  # a ratchet: file the command wrote -> its copy beside the log
    started_at: str
    duration_s: float
    log: str  # file name of the full log, beside the record
    pinned: dict[str, list[str]] = {}  # what the rig changed: restored, removed, bytecode
    truncated_bytes: int = 0  # output left out between the kept head and tail of the log
    stack: StackRecord | None = None  # the stack under test, when the criterion has one
    outlived: bool = False  # the host stopped the container after its deadline
    build_exit: int | None = None  # `[toolchain] build`'s exit status (None: no build ran)
    browser_run: BrowserRan | None = None  # a browser criterion's browser
    engine: dict[str, str] = {}  # the engine it ran on: host (DOCKER_HOST), id, name
    # Peak memory, CPU time and the limits its cgroup enforced (a browser criterion's: its
    # browser's container; None: not read: a record from before, a sample that never ran)
    usage: Usage | None = None
    server_usage: Usage | None = None  # a server per sample: its own container's


class Graded(_Part):
    """How it was graded: the verdict and the evidence it rests on."""

    counts: SampleCounts | None
    tests_ran: int
    verdict: Verdict
    reason: str | None
    rig_error: str | None
    detail: str
    metric_value: float | None = None  # a ratchet: the value this sample measured
    metric_base: float | None = None  # a ratchet: the frozen base value it was graded against
    exit_code_graded: int | None = None  # the status graded (the must-fail canary's out)
    canaries: dict[str, object] | None = None  # planted canaries and how they came out
    diagnosis: dict[str, str | None] | None = None  # the base's run it was judged against
    unguarded: list[str] = []  # what this sample's grading could not check, and why
    # The tests by id (pytest: the rig's observer; else the runner's per-test lines),
    # the canaries left out: {id, status[, pinned, attested, verified]} (the base's are
    # what an arm's protected tests are checked against).
    tests: list[dict[str, str | bool]] = []
    duplicated: bool = False  # the runner's lines gave one test two outcomes
    observer: dict[str, object] | None = None  # pytest: sessions, anomalies, plugins, ini
    real_path: list[RealPath] = []  # a browser criterion's `expect_requests`, decided


PARTS: dict[str, type[_Part]] = {"asked": Asked, "ran": Ran, "graded": Graded}
SCHEMA = "bakeoff-sample/v2"


class SampleRecord(Asked, Ran, Graded):
    """docs/design.md, "Records": one sample of one check on one commit in one fresh container.

    Its facts are declared in three parts, each where it comes from: `Asked` (the sample
    and its command: what `reproduce` runs again), `Ran` (what the executor saw),
    `Graded` (the verdict and its evidence); a new kind of sample adds its facts as a
    model of the part they belong to. On disk the record is those parts
    (`bakeoff-sample/v2`); a record written flat by an earlier version
    (`bakeoff-sample/v1`) loads as it was. In Python every fact is a field of the record.

    Any name git allows can reach a record (a protected path, a test id, a message that
    names a file): one that is not UTF-8 is held in git's quoted form (`rig.sample.tree.clean`),
    so a record can always be written, read back and printed."""

    schema_version: str = SCHEMA

    @model_validator(mode="before")
    @classmethod
    def _flat_and_clean(cls, data: Any) -> Any:
        if isinstance(data, dict) and any(isinstance(data.get(p), dict) for p in PARTS):
            flat = {k: v for k, v in data.items() if k not in PARTS}
            for part in PARTS:
                found = data.get(part)
                if isinstance(found, dict):
                    flat.update(found)
            data = flat
        return cleaned(data)

    @model_serializer(mode="wrap")
    def _in_parts(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        flat: dict[str, Any] = handler(self)
        flat.pop("schema_version", None)  # what it was read as; what is written is v2
        found: dict[str, Any] = {"schema_version": SCHEMA}
        for name, part in PARTS.items():
            found[name] = {key: flat[key] for key in part.model_fields if key in flat}
        return found

    def part(self, name: str) -> _Part:
        """One part of the record, as its own model (`asked`, `ran` or `graded`)."""
        model = PARTS[name]
        return model.model_validate({key: getattr(self, key) for key in model.model_fields})


def cleaned(data: Any) -> Any:
    """`data` with every string in it (keys too) as `rig.sample.tree.clean` gives it."""
    if isinstance(data, str):
        return clean(data)
    if isinstance(data, dict):
        return {cleaned(k): cleaned(v) for k, v in data.items()}
    if isinstance(data, list):
        return [cleaned(v) for v in data]
    if isinstance(data, tuple):
        return tuple(cleaned(v) for v in data)
    return data
