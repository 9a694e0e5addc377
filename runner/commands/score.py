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
import secrets
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from rig import contract as contract_mod
from rig import harness, links, rubric, tripwire
from rig import judge as judge_mod
from rig import ratchet as ratchet_mod
from rig import tree as tree_mod
from rig.contract import LockVersion
from rig.errors import SampleInterruptedError
from rig.oracle import (
    PassRate,
    SampleSpec,
    ServerSpec,
    StackSpec,
    base_run,
    pass_rate,
    run_sample,
    set_aside,
)
from rig.persist import write_text_atomic
from rig.record import BrowserAsked, SampleRecord
from rig.report import render_scorecard
from rig.report.scorecard import BrowserEvidence
from rig.tree import UnsafeTreeError
from rig.verdict import Base
from runner import contract, workspace
from runner.commands import judges, services
from runner.commands.dispatch.record import load_record
from runner.containers import database, sandbox
from runner.containers.backend import ContainerEngine
from runner.containers.images.prepared import Toolchain
from runner.containers.samples import DockerSampleExecutor
from runner.errors import BadInputError, DatabaseError, OutageError
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
    build: bool = True  # runs [toolchain] build first


def check_plan(loaded: LoadedManifest, change: str, check: str) -> CheckPlan:
    """The command and parser of `check` (or the change's success criterion)."""
    if check == SUCCESS:
        success = loaded.change(change).success
        return CheckPlan(SUCCESS, success.command, success.parser, success.build)
    for item in loaded.manifest.checks:
        if item.name == check:
            if item.parser is None:
                raise BadInputError(f"check {check!r} has no parser (a ratchet?)",
                                    hint="score a test check or `success`")
            return CheckPlan(item.name, item.run, item.parser, item.build)
    known = ", ".join([SUCCESS, *(c.name for c in loaded.manifest.checks)])
    raise BadInputError(f"{loaded.path}: no check {check!r}", hint=f"use one of: {known}")


def executor_for(toolchain: Toolchain, commit: str,
                 shared_db: database.DbServer | None = None) -> DockerSampleExecutor:
    """An executor in `commit`'s prepared image (`toolchain` made it once for this
    command; samples pass the base: its dependency files are the harness), on the
    experiment's Postgres when it is up."""
    engine, loaded = toolchain.engine, toolchain.loaded
    manifest = loaded.manifest
    limits = sandbox.SandboxLimits(manifest.limits.cpus, manifest.limits.memory_mb,
                                   manifest.limits.pids, manifest.limits.disk_mb,
                                   manifest.limits.max_files)
    return DockerSampleExecutor(engine, loaded.repo_path, manifest.experiment.name,
                                toolchain.for_commit(commit), limits,
                                manifest.database.url_env if manifest.database else None,
                                toolchain.database,
                                shared_db=shared_db or live_db(engine, loaded),
                                db_policy=database.policy_of(manifest.database))


def live_db(engine: ContainerEngine, loaded: LoadedManifest) -> database.DbServer | None:
    """The experiment's Postgres, when `up` left it running (found by its container)."""
    directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    current = state.load(directory)
    if current is None or current.phase != "up" or current.db is None:
        return None
    try:
        return database.find_server(engine, current.db.container_id,
                                    current.db.admin_password)
    except DatabaseError:
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
                       else None, harness="base",
                       build=tuple(manifest.toolchain.build) if plan.build else (),
                       browser=browser_of(loaded, change) if plan.name == SUCCESS else None)
            for n in range(1, samples + 1)]


def stack_of(loaded: LoadedManifest, change: str) -> StackSpec | None:
    """The success criterion's stack: the manifest's compose file, by path and hash (the
    hash the contract froze whenever it verifies)."""
    path = loaded.stack_path(change)
    if path is None:
        return None
    return StackSpec(str(path), hashlib.sha256(path.read_bytes()).hexdigest(),
                     loaded.change(change).success.stack_timeout_s)


def browser_of(loaded: LoadedManifest, change: str) -> BrowserAsked | None:
    """The success criterion's browser file, by path and hash (the hash the contract
    froze whenever it verifies), and the endpoints its flow must reach."""
    path = loaded.browser_path(change)
    if path is None:
        return None
    return BrowserAsked(file=str(path), sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
                        expect_requests=list(loaded.change(change).success.expect_requests))


BASE_ARM = "@base"  # never an arm id (ids are [A-Za-z0-9_-])


class BaseRuns:
    """The base's run of each check in one executor's image, made once per base sample
    (commit, command, parser, limits: what the verdict rules compare the arm's with) and
    kept under the stage's `diagnosis/<image>/`: `up`'s baseline proof in the same image
    is reused for the success criterion."""

    def __init__(self, executor: DockerSampleExecutor, stage: Path,
                 proofs: Path | None = None) -> None:
        self.executor, self.stage, self.proofs = executor, stage, proofs
        self.lock = threading.Lock()
        self.locks: dict[str, threading.Lock] = {}
        self.found: dict[str, Base] = {}

    def __call__(self, spec: SampleSpec) -> Base:
        # The base's own sample: one run per what makes it (its commit, command, parser,
        # limits, harness...), not per check name alone; the arm's guard is not the base's.
        base = dataclasses.replace(spec, arm=BASE_ARM, n=1, commit=spec.base_commit,
                                   token=None, refused=None, guard=None)
        key = repr(base)
        with self.lock:
            lock = self.locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self.found:
                record = self._proof(spec) or run_sample(
                    self.executor, base,
                    layout.diagnosis_dir(self.stage, self.executor.image.image_id))
                self.found[key] = base_run(record)
            return self.found[key]

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


class Tripwires:
    """Each exit-code check's tripwire run (`rig.tripwire`) in one executor's image, once
    per (commit, check), kept under the stage's `tripwires/` (`score`, `merge` and `oracle`
    share them: a commit scored once is not tripped again); the base's is run only when
    an arm's did not fail as planted."""

    def __init__(self, executor: DockerSampleExecutor, stage: Path) -> None:
        self.executor, self.stage = executor, stage
        self.lock = threading.Lock()
        self.locks: dict[tuple[str, str], threading.Lock] = {}
        self.found: dict[tuple[str, str], tripwire.Run | str | None] = {}
        self.tokens: dict[str, str] = {}  # check -> its tripwires' names, on every tree

    def guard(self, spec: SampleSpec, say: Say) -> tripwire.Finding | None:
        """What the check's tripwire shows for `spec`'s arm (None: its tree is refused)."""
        found = self._guard(spec)
        state = "none: its tree is refused" if found is None else "blind" if found.blind \
            else "says nothing" if found.unguarded else "failed as planted"
        say(f"{spec.change}/{spec.arm}/{spec.check}: tripwire {state}")
        return found

    def _guard(self, spec: SampleSpec) -> tripwire.Finding | None:
        arm = self.run(spec)
        if arm is None or isinstance(arm, str):
            return None if arm is None else tripwire.Finding(
                unguarded=f"no tripwire could be planted for this exit-code check: {arm}")
        found = tripwire.finding(arm, None)
        if found is not None:
            return found
        base = self.run(dataclasses.replace(spec, arm=BASE_ARM, commit=spec.base_commit))
        if base is None or isinstance(base, str):
            return tripwire.Finding(arm.sample, unguarded=(
                f"the tripwire did not fail as planted ({arm.sample}), and none could be "
                f"planted on the base's tree to compare: {base}"))
        return tripwire.finding(arm, base)

    def run(self, spec: SampleSpec) -> tripwire.Run | str | None:
        key = (spec.commit, spec.check)
        with self.lock:
            lock = self.locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self.found:
                self.found[key] = self._run(spec)
            return self.found[key]

    def _run(self, spec: SampleSpec) -> tripwire.Run | str | None:
        try:
            tree = dict(self.executor.checked_tree(spec.commit))
            links.lay_out(tree, self.executor.checked_tree(spec.base_commit))
        except UnsafeTreeError:
            return None  # its samples are refused
        with self.lock:
            token = self.tokens.setdefault(spec.check, secrets.token_hex(4))
        planted = tripwire.plan(spec.command, tree, token)
        if isinstance(planted, str):
            return planted
        root = layout.tripwire_dir(self.stage, self.executor.image.image_id, spec.command,
                                   spec.base_commit)
        record = run_sample(self.executor, dataclasses.replace(
            spec, arm=spec.commit[:12], n=1, tripwire=planted, token=None, guard=None), root)
        return tripwire.run_of(record)


def tripwired(spec: SampleSpec) -> bool:
    """A sample whose check gets a tripwire: graded by the exit code alone, of an arm."""
    return (spec.parser == "exit-code" and spec.ratchet is None and spec.refused is None
            and spec.commit != spec.base_commit and spec.tripwire is None)


def run_all(executor: DockerSampleExecutor, todo: list[SampleSpec], stage: Path,
            say: Callable[[str], None], *, diagnose: bool = True,
            proofs: Path | None = None,
            settled: Callable[[list[SampleRecord]], bool] | None = None
            ) -> list[SampleRecord]:
    """Every sample in its own fresh container, at most one per core at a time. With
    `diagnose`, a sample that looks like a rig fault (or whose canaries did not come out
    as planted) is judged against the base's run of its check (`BaseRuns`), and an
    exit-code check's samples against its tripwire run (`Tripwires`: one per (arm,
    check), queued first, its samples last); the proofs of the base itself run without
    (`diagnose=False`). `settled(records so far)` true: what they decide no further
    sample can change, so none not yet started runs (those under way finish); the
    records of the samples that ran, in `todo`'s order."""
    base = BaseRuns(executor, stage, proofs) if diagnose else None
    wires = Tripwires(executor, proofs or stage) if diagnose else None
    lock = threading.Lock()
    graded: list[SampleRecord] = []
    cut: list[SampleInterruptedError] = []
    stopped = threading.Event()

    def one(spec: SampleSpec, guard: Future[tripwire.Finding | None] | None
            ) -> SampleRecord | None:
        if stopped.is_set():
            return None
        try:
            if guard is not None:
                spec = dataclasses.replace(spec, guard=guard.result())
            record = run_sample(executor, spec, stage, base)
        except SampleInterruptedError as error:  # no result: no sample starts after it
            stopped.set()
            say(f"{spec.sample}: cut by an outage ({error.why}); it runs again on resume")
            with lock:
                cut.append(error)
            return None
        counts = record.counts
        shown = "" if counts is None else f" ({counts.passed} passed, {counts.failed} failed)"
        reason = f" {record.reason}" if record.reason else ""
        say(f"{record.sample}: {record.verdict}{reason}{shown} in {record.duration_s:.1f}s")
        if settled is not None:
            with lock:
                graded.append(record)
                if not stopped.is_set() and settled(list(graded)):
                    stopped.set()
        return record

    with ThreadPoolExecutor(max_workers=sandbox.workers(executor.engine)) as pool:
        guards: dict[tuple[str, str], Future[tripwire.Finding | None]] = {}
        if wires is not None:
            for spec in todo:
                if tripwired(spec) and (spec.arm, spec.check) not in guards:
                    guards[(spec.arm, spec.check)] = pool.submit(wires.guard, spec, say)
        # The guarded samples last: a worker reaches one when its tripwire is under way.
        order = sorted(range(len(todo)), key=lambda n: (todo[n].arm, todo[n].check) in guards)
        done = {n: pool.submit(one, todo[n], guards.get((todo[n].arm, todo[n].check)))
                for n in order}
        found = [done[n].result() for n in range(len(todo))]
    if cut:
        raise OutageError(sorted({error.sample for error in cut}), cut[0].why)
    return [record for record in found if record is not None]


def oracle(engine: ContainerEngine, loaded: LoadedManifest, ref: str, check: str, samples: int,
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
    with executor_for(toolchain, base) as executor:
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
              else CheckPlan(c.name, c.run, METRIC_PARSER, c.build)
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
    """Every (arm, check, n) sample, in the base's prepared image: the dependency files
    are harness (a sample runs under the base's, and the arm's setup code never runs),
    so every arm shares one executor."""
    loaded = toolchain.loaded
    base, graded_under = frozen.contract.base_commit, f"v{frozen.version}:{frozen.sha256}"
    todo: list[SampleSpec] = []
    for arm, commit in commits.items():
        refused = work_refused(loaded, change, arm)
        for plan in plans(loaded, change):
            todo.extend(replace(spec, refused=refused) for spec in plan_specs(
                loaded, change, arm, plan, commit, base,
                frozen.contract.ratchet_baselines, graded_under))
    with executor_for(toolchain, base) as executor:
        run_all(executor, todo, stage, say, proofs=stage)


def redo(loaded: LoadedManifest, stage: Path, say: Say) -> list[str]:
    """Set every arm's RIG_ERROR sample of the stage aside (`rig.oracle.set_aside`): no
    longer a result, it runs again. The samples set aside."""
    found = []
    for arm in loaded.manifest.arms:
        for path in layout.sample_records(stage, arm.id):
            record = SampleRecord.model_validate_json(path.read_text(encoding="utf-8"))
            if record.verdict == "RIG_ERROR":
                set_aside(stage, record)
                found.append(record.sample)
    say(f"set aside {len(found)} rig-error sample(s) to run again"
        + (f": {', '.join(found)}" if found else ""))
    return found


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


def browser_evidence(loaded: LoadedManifest, change: str
                     ) -> tuple[list[BrowserEvidence], str]:
    """The success criterion's browser samples, their trace and screenshots relative to
    the stage's folder, and the Playwright that wrote them."""
    stage = stage_path(loaded, change)
    found, playwright = [], ""
    for arm in loaded.manifest.arms:
        for record in records_of(stage, arm.id, SUCCESS):
            ran = record.browser_run
            if ran is None:
                continue
            folder = layout.sample_dir(stage, record.arm, record.check).relative_to(stage)
            playwright = ran.identity.get("playwright", playwright)
            found.append(BrowserEvidence(
                record.sample, str(record.verdict) + (f" {record.reason}" if record.reason
                                                      else ""),
                None if ran.trace is None else f"{folder}/{ran.trace}",
                tuple(f"{folder}/{s}" for s in ran.screenshots)))
    return found, playwright


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
        scored.append(replace(rubric.score_arm(arm, success, checks, judged,
                                               loaded.manifest.contract.weights,
                                               harness_touched(loaded, change, success),
                                               dispatched(loaded, change, arm)),
                              retried=len(layout.retried_attempts(stage, arm.id))))
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
    """The harness files the arm's commit changed (`rig.harness`: any runner's): by name
    or place from its diff (listed capped: `merge.listed`, a tree bomb's is never read
    whole), and by layout or content as its samples pinned them (a test directory made a
    package, a module shadowing another, a file a runner config names); the base's were
    used instead. As a record shows names (`rig.tree.shown`), at most HARNESS_SHOWN."""
    record = next(iter(success.records), None)
    if record is None or record.commit == record.base_commit:
        return []
    changed, cut = merge.listed(loaded.repo_path, record.base_commit, record.commit)
    pinned: set[str] = set()
    for sample in success.records:
        pinned.update(sample.pinned.get("restored", ()), sample.pinned.get("removed", ()))
    found = {tree_mod.shown(p, 300) for p in harness.touched(changed)
             if not _obeyed(p, pinned)} | pinned
    touched = sorted(found)
    shown = touched[:HARNESS_SHOWN]
    if len(touched) > HARNESS_SHOWN or cut:
        more = len(touched) - len(shown)
        shown.append(f"[and {more}{' or more' if cut else ''} more: the diff lists "
                     f"{'over ' if cut else ''}{len(changed)} paths]")
    return shown


def _obeyed(path: str, pinned: set[str]) -> bool:
    """A conftest of the arm's own (`rig.harness.own_conftests`: in a directory the base
    does not have) that its samples kept: obeyed, not touched."""
    return path.endswith("/conftest.py") and tree_mod.shown(path, 300) not in pinned


HARNESS_SHOWN = 50  # harness files a scorecard names per arm


CONTINUED = "continued_past_rig_errors"


def round_flags(loaded: LoadedManifest, change: str, arms: list[rubric.ArmScore],
                decision: rubric.WinnerDecision) -> list[str]:
    """The round's flags (`rubric.flags`), and `continued_past_rig_errors` when `run
    --continue-on-rig-error` went on past its rig errors."""
    flags = rubric.flags(arms, decision)
    if layout.continued_file(stage_path(loaded, change)).is_file():
        flags = sorted([*flags, CONTINUED])
    return flags


def write_scorecard(loaded: LoadedManifest, change: str, merge_note: str = "not merged yet",
                    grafts: list[dict[str, object]] | None = None) -> Path:
    arms = stage_scores(loaded, change)
    terms = loaded.manifest.contract
    decision = rubric.decide_winner(arms, terms.threshold)
    evidence, playwright = browser_evidence(loaded, change)
    flags = round_flags(loaded, change, arms, decision)
    text = render_scorecard(change, arms, terms.weights, flags, decision, merge_note,
                            grafts or [], evidence, playwright)
    path = layout.scorecard_file(stage_path(loaded, change))
    write_text_atomic(path, text)
    return path


def score(engine: ContainerEngine, loaded: LoadedManifest, change: str, say: Say,
          toolchain: Toolchain | None = None, *, redo_rig_errors: bool = False
          ) -> tuple[list[rubric.ArmScore], Path]:
    """Every arm's final commit through every check and the success criterion, the judge,
    SCORECARD.md. `toolchain`: the images of the command that calls it (`run`).
    `redo_rig_errors`: the stored RIG_ERROR samples are set aside first, so they run
    again (once the rig is fixed)."""
    toolchain = toolchain or Toolchain(engine, loaded, say)
    stage = stage_path(loaded, change)
    services.require_dispatched(loaded, change)
    services.restore(engine, loaded, say)  # the experiment's Postgres, after an outage
    commits = arm_commits(loaded, change)
    frozen = contract.require(toolchain, change)
    judges.judge_key(loaded, os.environ)  # a missing judge key fails before any sample
    if redo_rig_errors:
        redo(loaded, stage, say)
    run_samples(toolchain, change, commits, say, stage, frozen)
    judges.run_judges(toolchain, change, commits, frozen.contract.base_commit, stage,
                      [p.name for p in plans(loaded, change)], say)
    return stage_scores(loaded, change), write_scorecard(loaded, change)
