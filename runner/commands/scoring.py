"""Scoring commits: N fresh-container samples of a check, concurrently (bounded by cores)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import docker.errors

from rig.diagnosis import BaseRun
from rig.oracle import PassRate, SampleSpec, ServerSpec, base_run, pass_rate, run_sample
from rig.record import SampleRecord
from runner import contract as freeze
from runner.containers import database, images, prepared, sandbox
from runner.containers.engine import Engine
from runner.containers.samples import DockerSampleExecutor
from runner.errors import BadInputError, DatabaseError
from runner.manifest import LoadedManifest
from runner.store import state
from runner.store.files import ensure_excluded, experiment_dir, stage_dir
from runner.workspace import git as workspace
from runner.workspace import merge

SUCCESS = "success"


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


def executor_for(engine: Engine, loaded: LoadedManifest, commit: str,
                 say: Callable[[str], None],
                 shared_db: database.DbServer | None = None) -> DockerSampleExecutor:
    manifest = loaded.manifest
    toolchain = images.resolve(engine, manifest.toolchain.image)
    image = prepared.prepare(engine, loaded.repo_path, commit, toolchain,
                             list(manifest.toolchain.setup), say)
    db_image = images.resolve(engine, manifest.database.image) if manifest.database else None
    limits = sandbox.SandboxLimits(manifest.limits.cpus, manifest.limits.memory_mb,
                                   manifest.limits.pids, manifest.limits.disk_mb)
    return DockerSampleExecutor(engine, loaded.repo_path, manifest.experiment.name, image,
                                limits, manifest.database.url_env if manifest.database else None,
                                db_image, shared_db=shared_db or live_db(engine, loaded),
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
          base: str, samples: int, contract: str | None = None) -> list[SampleSpec]:
    manifest = loaded.manifest
    protected = freeze.protected_paths(loaded, change, base)
    server = loaded.change(change).success.server if plan.name == SUCCESS else None
    serve = None if server is None else ServerSpec(server.run, server.health, server.port_env,
                                                   server.startup_timeout_s)
    return [SampleSpec(change=change, arm=arm, check=plan.name, n=n, commit=commit,
                       base_commit=base, command=plan.command, parser=plan.parser,
                       timeout_s=manifest.limits.check_timeout_s, protected=protected,
                       requires=tuple(manifest.toolchain.requires), contract=contract,
                       server=serve, harness="base" if plan.name == SUCCESS else "arm")
            for n in range(1, samples + 1)]


BASE_ARM = "@base"  # never an arm id (ids are [A-Za-z0-9_-])


class BaseRuns:
    """The base's run of each check in one executor's image, made once and kept under
    `stage/diagnosis/<image>/` (`rig.diagnosis`): `up`'s baseline proof in the same
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
                    self.stage / "diagnosis" / self.executor.image.image_id[7:19])
                self.found[spec.check] = base_run(record)
            return self.found[spec.check]

    def _proof(self, spec: SampleSpec) -> SampleRecord | None:
        if self.proofs is None:
            return None
        for path in sorted(self.proofs.glob(f"proofs/*/samples/baseline/{spec.check}/*.json")):
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
    frozen = freeze.verify(engine, loaded, change_id)
    contract = None if frozen is None else f"v{frozen.version}:{frozen.sha256}"
    base = merge.stage_base(loaded, change_id)
    ensure_excluded(repo)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    stage = (experiment_dir(repo, loaded.manifest.experiment.name) / "oracle"
             / f"{stamp}-{commit[:12]}-{plan.name}")
    todo = specs(loaded, change_id, "oracle", plan, commit, base, samples, contract)
    with executor_for(engine, loaded, commit, say) as executor:
        records = run_all(executor, todo, stage, say,
                          proofs=stage_dir(experiment_dir(repo, loaded.manifest.experiment.name),
                                           change_id))
    return records, pass_rate(r.verdict for r in records), stage
