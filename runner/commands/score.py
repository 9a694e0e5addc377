"""`score` (and `oracle`): samples of checks on commits, each in a fresh container, and the
rubric. `run_all` runs samples (at most one per core at a time), judging a sample that
looks like a rig fault against the base's run of its check (`BaseRuns`); `score` runs
every arm's final commit through every check and the success criterion, asks the judge
for the subjective dims, and writes SCORECARD.md. Execute, persist, then grade: the
scorecard is rebuilt from the stored sample records and judge answers alone
(`stage_scores`), without docker.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import docker.errors

from rig import contract as contract_mod
from rig import harness, rubric
from rig import judge as judge_mod
from rig import ratchet as ratchet_mod
from rig.contract import LockVersion
from rig.diagnosis import BaseRun
from rig.oracle import (
    PassRate,
    SampleSpec,
    ServerSpec,
    StackSpec,
    base_run,
    pass_rate,
    run_sample,
)
from rig.persist import write_text_atomic
from rig.record import SampleRecord
from rig.report import render_scorecard
from rig.tree import UnsafeTreeError
from runner import contract, workspace
from runner.commands import judges
from runner.commands.dispatch.record import load_record
from runner.containers import database, prepared, sandbox
from runner.containers.engine import Engine
from runner.containers.prepared import Toolchain
from runner.containers.samples import DockerSampleExecutor
from runner.errors import BadInputError, DatabaseError
from runner.manifest import Arm, LoadedManifest
from runner.store import layout, state
from runner.store.files import ensure_excluded
from runner.store.layout import experiment_dir, stage_dir
from runner.workspace import merge

Say = Callable[[str], None]
SUCCESS = "success"
METRIC_PARSER = "metric"  # a ratchet's samples: read by rig.ratchet, not by a parser


@dataclass(frozen=True)
class CheckPlan:
    name: str
    command: str
    parser: str


def check_plan(loaded: LoadedManifest, change: str, check: str) -> CheckPlan:
    """The command and parser of `check` (or the change's success criterion)."""
    if check == SUCCESS:
        success = loaded.change(change).success
        return CheckPlan(SUCCESS, success.run, success.parser)
    for item in loaded.manifest.checks:
        if item.name == check:
            if item.parser is None:
                raise BadInputError(f"check {check!r} has no parser (a ratchet?)",
                                    hint="score a test check or `success`")
            return CheckPlan(item.name, item.run, item.parser)
    known = ", ".join([SUCCESS, *(c.name for c in loaded.manifest.checks)])
    raise BadInputError(f"{loaded.path}: no check {check!r}", hint=f"use one of: {known}")


def executor_for(toolchain: Toolchain, commit: str,
                 shared_db: database.DbServer | None = None) -> DockerSampleExecutor:
    """An executor for samples of `commit`, in its prepared image (`toolchain` made it
    once for this command), on the experiment's Postgres when it is up."""
    engine, loaded = toolchain.engine, toolchain.loaded
    manifest = loaded.manifest
    limits = sandbox.SandboxLimits(manifest.limits.cpus, manifest.limits.memory_mb,
                                   manifest.limits.pids, manifest.limits.disk_mb)
    return DockerSampleExecutor(engine, loaded.repo_path, manifest.experiment.name,
                                toolchain.for_commit(commit), limits,
                                manifest.database.url_env if manifest.database else None,
                                toolchain.database,
                                shared_db=shared_db or live_db(engine, loaded),
                                db_policy=database.policy_of(manifest.database))


def live_db(engine: Engine, loaded: LoadedManifest) -> database.DbServer | None:
    """The experiment's Postgres, when `up` left it running (its port as it is now)."""
    directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    current = state.load(directory)
    if current is None or current.phase != "up" or current.db is None:
        return None
    server = database.DbServer(current.db.container_id, current.db.host_port,
                               current.db.admin_password)
    try:
        return database.refresh_port(engine, server)
    except (docker.errors.NotFound, DatabaseError):
        return None


def specs(loaded: LoadedManifest, change: str, arm: str, plan: CheckPlan, commit: str,
          base: str, samples: int, graded_under: str | None = None) -> list[SampleSpec]:
    manifest = loaded.manifest
    protected = contract.protected_paths(loaded, change, base)
    server = loaded.change(change).success.server if plan.name == SUCCESS else None
    serve = None if server is None else ServerSpec(server.run, server.health, server.port_env,
                                                   server.startup_timeout_s)
    return [SampleSpec(change=change, arm=arm, check=plan.name, n=n, commit=commit,
                       base_commit=base, command=plan.command, parser=plan.parser,
                       timeout_s=manifest.limits.check_timeout_s, protected=protected,
                       requires=tuple(manifest.toolchain.requires), contract=graded_under,
                       server=serve, stack=stack_of(loaded, change) if plan.name == SUCCESS
                       else None, harness="base" if plan.name == SUCCESS else "arm")
            for n in range(1, samples + 1)]


def stack_of(loaded: LoadedManifest, change: str) -> StackSpec | None:
    """The success criterion's stack: the manifest's compose file, by path and hash (the
    hash the contract froze whenever it verifies)."""
    path = loaded.stack_path(change)
    if path is None:
        return None
    return StackSpec(str(path), hashlib.sha256(path.read_bytes()).hexdigest(),
                     loaded.change(change).success.stack_timeout_s)


BASE_ARM = "@base"  # never an arm id (ids are [A-Za-z0-9_-])


class BaseRuns:
    """The base's run of each check in one executor's image, made once and kept under
    the stage's `diagnosis/<image>/` (`rig.diagnosis`): `up`'s baseline proof in the same
    image is reused for the success criterion."""

    def __init__(self, executor: DockerSampleExecutor, stage: Path,
                 proofs: Path | None = None) -> None:
        self.executor, self.stage, self.proofs = executor, stage, proofs
        self.lock = threading.Lock()
        self.locks: dict[str, threading.Lock] = {}
        self.found: dict[str, BaseRun] = {}

    def __call__(self, spec: SampleSpec) -> BaseRun:
        with self.lock:
            lock = self.locks.setdefault(spec.check, threading.Lock())
        with lock:
            if spec.check not in self.found:
                record = self._proof(spec) or run_sample(
                    self.executor, dataclasses.replace(
                        spec, arm=BASE_ARM, n=1, commit=spec.base_commit, token=None,
                        refused=None),
                    layout.diagnosis_dir(self.stage, self.executor.image.image_id))
                self.found[spec.check] = base_run(record)
            return self.found[spec.check]

    def _proof(self, spec: SampleSpec) -> SampleRecord | None:
        if self.proofs is None:
            return None
        proved = (found for root in layout.proof_roots(self.proofs)  # in path order
                  for found in layout.sample_records(root, "baseline", spec.check))
        for path in proved:
            record = SampleRecord.model_validate_json(path.read_text(encoding="utf-8"))
            if (record.image_id == self.executor.image.image_id and record.commit ==
                    spec.base_commit and record.command == spec.command):
                return record
        return None


def run_all(executor: DockerSampleExecutor, todo: list[SampleSpec], stage: Path,
            say: Callable[[str], None], *, diagnose: bool = True,
            proofs: Path | None = None) -> list[SampleRecord]:
    """Every sample in its own fresh container, at most one per core at a time. With
    `diagnose`, a sample that looks like a rig fault (or whose canaries did not come out
    as planted) is judged against the base's run of its check (`BaseRuns`); the proofs
    of the base itself run without (`diagnose=False`)."""
    base = BaseRuns(executor, stage, proofs) if diagnose else None

    def one(spec: SampleSpec) -> SampleRecord:
        record = run_sample(executor, spec, stage, base)
        counts = record.counts
        shown = "" if counts is None else f" ({counts.passed} passed, {counts.failed} failed)"
        reason = f" {record.reason}" if record.reason else ""
        say(f"{record.sample}: {record.verdict}{reason}{shown} in {record.duration_s:.1f}s")
        return record

    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        return list(pool.map(one, todo))


def oracle(engine: Engine, loaded: LoadedManifest, ref: str, check: str, samples: int,
           change: str | None, say: Callable[[str], None]
           ) -> tuple[list[SampleRecord], PassRate, Path]:
    """`bakeoff-sandbox oracle`: score one commit; records go to a new directory."""
    repo = loaded.repo_path
    change_id = change or loaded.manifest.changes[0].id
    plan = check_plan(loaded, change_id, check)
    commit = workspace.resolve_commit(repo, ref)
    toolchain = Toolchain(engine, loaded, say)
    frozen = contract.verify(toolchain, change_id)
    graded_under = None if frozen is None else f"v{frozen.version}:{frozen.sha256}"
    base = merge.stage_base(loaded, change_id)
    ensure_excluded(repo)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    stage = layout.oracle_dir(experiment_dir(repo, loaded.manifest.experiment.name),
                              f"{stamp}-{commit[:12]}-{plan.name}")
    todo = specs(loaded, change_id, "oracle", plan, commit, base, samples, graded_under)
    with executor_for(toolchain, commit) as executor:
        records = run_all(executor, todo, stage, say,
                          proofs=stage_dir(experiment_dir(repo, loaded.manifest.experiment.name),
                                           change_id))
    return records, pass_rate(r.verdict for r in records), stage


def stage_path(loaded: LoadedManifest, change: str) -> Path:
    return stage_dir(experiment_dir(loaded.repo_path, loaded.manifest.experiment.name), change)


def arm_commits(loaded: LoadedManifest, change: str) -> dict[str, str]:
    """Each arm's final commit, as dispatch fetched it back."""
    commits: dict[str, str] = {}
    for arm in loaded.manifest.arms:
        branch = workspace.arm_branch(loaded.manifest.experiment.name, change, arm.id)
        head = merge.branch_head(loaded.repo_path, branch)
        if head is None:
            raise BadInputError(f"arm {arm.id!r} has no commits for {change!r} ({branch})",
                                hint="run `bakeoff-sandbox dispatch` first")
        commits[arm.id] = head
    return commits


def plans(loaded: LoadedManifest, change: str) -> list[CheckPlan]:
    """The success criterion, then every check; a ratchet is a check (its pass-rate counts
    in the checks dim), graded on its metric by `rig.ratchet`, never by a parser."""
    return [check_plan(loaded, change, SUCCESS),
            *(check_plan(loaded, change, c.name) if c.kind == "test"
              else CheckPlan(c.name, c.run, METRIC_PARSER)
              for c in loaded.manifest.checks)]


def ratchet_of(loaded: LoadedManifest, check: str,
               baselines: Mapping[str, float] | None) -> ratchet_mod.Ratchet | None:
    """The ratchet `check` graded against its frozen base value; None for a test check.
    `baselines` None: the base's own value is being measured (at `up`)."""
    for item in loaded.manifest.checks:
        if item.name != check or item.kind != "ratchet":
            continue
        assert item.metric is not None and item.better is not None  # the manifest's rule
        if baselines is not None and check not in baselines:
            raise ratchet_mod.RatchetError(
                f"ratchet {check!r} has no frozen base value in the stage's contract",
                hint="run `bakeoff-sandbox up` with its proofs: it measures the base's value")
        base = None if baselines is None else baselines[check]
        return ratchet_mod.Ratchet(item.metric, item.better, item.tolerance, base)
    return None


def plan_specs(loaded: LoadedManifest, change: str, arm: str, plan: CheckPlan,
               commit: str, base: str, baselines: Mapping[str, float] | None,
               graded_under: str | None = None) -> list[SampleSpec]:
    """`specs` of one plan; a ratchet's samples carry what they are graded on."""
    todo = specs(loaded, change, arm, plan, commit, base,
                         loaded.manifest.contract.samples, graded_under)
    ratchet = ratchet_of(loaded, plan.name, baselines) if plan.name != SUCCESS else None
    return todo if ratchet is None else [replace(spec, ratchet=ratchet) for spec in todo]


def frozen_baselines(loaded: LoadedManifest, change: str) -> dict[str, float]:
    """The ratchet base values frozen in the stage's contract (none before `up`)."""
    lock = contract_mod.load_lock(stage_path(loaded, change))
    return {} if lock is None else dict(lock.latest.contract.ratchet_baselines)


def run_samples(toolchain: Toolchain, change: str, commits: dict[str, str], say: Say,
                stage: Path, frozen: LockVersion) -> None:
    """Every (arm, check, n) sample; arms sharing a prepared image share an executor."""
    loaded = toolchain.loaded
    base, graded_under = frozen.contract.base_commit, f"v{frozen.version}:{frozen.sha256}"
    groups: dict[str, list[SampleSpec]] = {}
    for arm, commit in commits.items():
        refused = work_refused(loaded, change, arm)
        try:
            image = toolchain.for_commit(commit)
        except UnsafeTreeError as error:  # its tree cannot even be built into an image
            image, refused = toolchain.for_commit(base), error.message
        for plan in plans(loaded, change):
            groups.setdefault(commit if image.name == prepared.PREPARED else "", []).extend(
                replace(spec, refused=refused) for spec in plan_specs(
                    loaded, change, arm, plan, commit, base,
                    frozen.contract.ratchet_baselines, graded_under))
    for key, todo in groups.items():
        with executor_for(toolchain, key or base) as executor:
            run_all(executor, todo, stage, say, proofs=stage)


def work_refused(loaded: LoadedManifest, change: str, arm: str) -> str | None:
    """Why the arm's work was refused at import (its samples are FAIL unsafe_work)."""
    directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    record = load_record(layout.arm_record(directory, change, arm))
    why = None if record is None else record.work_refused
    return None if why is None else f"the arm's work was refused at import: {why}"


def records_of(stage: Path, arm: str, check: str) -> list[SampleRecord]:
    found = [SampleRecord.model_validate_json(p.read_text(encoding="utf-8"))
             for p in layout.sample_records(stage, arm, check)]
    return sorted(found, key=lambda r: r.n)


def stage_scores(loaded: LoadedManifest, change: str) -> list[rubric.ArmScore]:
    """The rubric for every arm, from stored records and judge answers (no docker)."""
    stage = stage_path(loaded, change)
    scored = []
    for arm in loaded.manifest.arms:
        success = rubric.check_result(SUCCESS,
                                      records_of(stage, arm.id, SUCCESS))
        checks = {p.name: rubric.check_result(p.name, records_of(stage, arm.id, p.name))
                  for p in plans(loaded, change)[1:]}
        answer = layout.judge_answer(stage, arm.id)
        judged = judge_mod.parse_judgement(answer.read_text()) if answer.exists() else None
        scored.append(rubric.score_arm(arm, success, checks, judged,
                                       loaded.manifest.contract.weights,
                                       harness_touched(loaded, change, success),
                                       dispatched(loaded, change, arm)))
    return scored


def dispatched(loaded: LoadedManifest, change: str, arm: Arm) -> rubric.Dispatched | None:
    """What the arm's dispatch record adds to its score: the identity with the wire's
    evidence, when the gateway saw it, and the marks; None without a record (as before)."""
    directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    record = load_record(layout.arm_record(directory, change, arm.id))
    if record is None:
        return None
    identity = record.identity() if record.gateway is not None else arm.identity()
    notes = [c for c in record.caveats if c.split(":", 1)[0] in record.marks]
    return rubric.Dispatched(identity, tuple(record.marks), tuple(notes), record.gateway,
                             record.agent_cli)


def harness_touched(loaded: LoadedManifest, change: str,
                    success: rubric.CheckResult) -> list[str]:
    """The harness files (of any parser the stage uses) the arm's commit changed."""
    record = next(iter(success.records), None)
    if record is None or record.commit == record.base_commit:
        return []
    changed = merge.changed(loaded.repo_path, record.base_commit, record.commit)
    parsers = {p.parser for p in plans(loaded, change) if p.parser != METRIC_PARSER}
    return sorted({path for parser in parsers for path in harness.touched(parser, sorted(changed))})


def write_scorecard(loaded: LoadedManifest, change: str, merge_note: str = "not merged yet",
                    grafts: list[dict[str, object]] | None = None) -> Path:
    arms = stage_scores(loaded, change)
    terms = loaded.manifest.contract
    decision = rubric.decide_winner(arms, terms.threshold)
    text = render_scorecard(change, arms, terms.weights, rubric.flags(arms, decision),
                            decision, merge_note, grafts or [])
    path = layout.scorecard_file(stage_path(loaded, change))
    write_text_atomic(path, text)
    return path


def score(engine: Engine, loaded: LoadedManifest, change: str, say: Say,
          toolchain: Toolchain | None = None) -> tuple[list[rubric.ArmScore], Path]:
    """Every arm's final commit through every check and the success criterion, the judge,
    SCORECARD.md. `toolchain`: the images of the command that calls it (`run`)."""
    toolchain = toolchain or Toolchain(engine, loaded, say)
    stage = stage_path(loaded, change)
    commits = arm_commits(loaded, change)
    frozen = contract.require(toolchain, change)
    judges.judge_key(loaded, os.environ)  # a missing judge key fails before any sample
    run_samples(toolchain, change, commits, say, stage, frozen)
    judges.run_judges(toolchain, change, commits, frozen.contract.base_commit, stage,
                      [p.name for p in plans(loaded, change)], say)
    return stage_scores(loaded, change), write_scorecard(loaded, change)
