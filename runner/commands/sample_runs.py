"""Running a plan's samples (`run_all`): each in its own fresh container, at most one per
core at a time, in the executor of a commit's prepared image (`executor_for`). A sample
that looks like a rig fault is judged against the base's run of its check (`BaseRuns`: the
differential rule's base runs, made once per base sample), and an exit-code check's
samples against its tripwire run (`Tripwires`).
"""

from __future__ import annotations

import dataclasses
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from rig.errors import SampleInterruptedError
from rig.guards import tripwire
from rig.sample import links
from rig.sample.oracle import run_sample
from rig.sample.record import SampleRecord
from rig.sample.recorded import Base, base_run
from rig.sample.spec import SampleSpec
from rig.sample.tree import UnsafeTreeError
from runner.containers import database, sandbox
from runner.containers.backend import ContainerEngine
from runner.containers.images.prepared import ResolvedImages
from runner.containers.samples.executor import DockerSampleExecutor
from runner.errors import DatabaseError, OutageError
from runner.manifest import LoadedManifest
from runner.store import layout, state
from runner.store.layout import experiment_dir

Say = Callable[[str], None]


def executor_for(toolchain: ResolvedImages, commit: str,
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
    """Each exit-code check's tripwire run (`rig.guards.tripwire`) in one executor's image, once
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
