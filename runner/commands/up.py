"""`up`, `down`, `gc`, `status`, `exec`: the life of an experiment's sandboxes.

`up` labels everything it creates with a fresh run id and records that run as committed
only at the very end; a run that never committed (the orchestrator was killed) is an
orphan, and `gc` removes it by label. If `up` fails, it removes what it made before it
re-raises (testcontainers' rule: clean up inside a failed start).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker.errors

from rig import contract as contract_mod
from rig.record import SampleRecord
from rig.verdict import Verdict
from runner import contract as freeze
from runner.commands import proofs as stage_mod
from runner.commands import scoring
from runner.commands.dispatch.brief import BRIEF_DIR, brief_dir
from runner.commands.dispatch.record import RECORD_FILE, load_record, record_dir
from runner.containers import arms as arms_mod
from runner.containers import checkout, database, images, prepared, sandbox
from runner.containers.engine import LABEL_EXPERIMENT, LABEL_RUN, Engine, Labels
from runner.errors import BadInputError, DatabaseError, NotUpError, UnknownArmError
from runner.manifest import LoadedManifest
from runner.store import state as state_mod
from runner.store.files import ensure_excluded, experiment_dir, experiment_lock, stage_dir
from runner.store.state import ArmSandbox, DbState, ExperimentState
from runner.workspace import git as workspace
from runner.workspace import merge

Progress = Callable[[str], None]
AGENTS_DIR = "/agents"


def _quiet(_: str) -> None:
    return None


@dataclass(frozen=True)
class UpPlan:
    loaded: LoadedManifest
    change: str
    run: str
    base_commit: str
    image: images.BuiltImage
    db_image: images.BuiltImage | None


@dataclass(frozen=True)
class UpOptions:
    """`up`'s choices. `prove=False` skips preflight and the baseline/reference proofs
    (the library's tests of the sandbox core and the sandbox benchmark use it)."""

    refreeze: bool = False
    allow_passing_baseline: bool = False
    prove: bool = True


def up(engine: Engine, loaded: LoadedManifest, change: str | None = None,
       progress: Progress = _quiet, options: UpOptions = UpOptions()) -> ExperimentState:
    """Check and freeze the stage's contract, prove the base fails, then make one sandbox
    per arm: network, checkout and HOME volumes, container, database, limits."""
    repo = loaded.repo_path
    name = loaded.manifest.experiment.name
    ensure_excluded(repo)
    workspace.require_clean(repo)
    directory = experiment_dir(repo, name)
    with experiment_lock(directory, name, "up"):
        existing = state_mod.load(directory)
        if existing is not None and existing.phase == "up":
            raise BadInputError(f"experiment {name!r} is already up (run {existing.run})",
                                hint="run `bakeoff-sandbox down` first, or use it as it is")
        if existing is not None:
            progress(f"removing leftovers of an interrupted up (run {existing.run})")
            _remove_orphans(engine, directory, name, keep_run=None)
        plan = _plan(engine, loaded, change, progress)
        contract = _contract(plan, directory, options)  # a changed contract fails fast
        state_mod.save(directory, _starting_state(plan))
        try:
            made = _make(engine, plan, directory, progress)
            # The proofs use the experiment's Postgres; a failed proof removes it all.
            _freeze(engine, plan, directory, options, progress, contract, made.db)
            # Last: an image the preflight refuses is named by the preflight.
            _make_checkouts(engine, plan, directory, made, progress)
        except BaseException:
            progress("up failed: removing what this run created")
            engine.remove_labelled({LABEL_EXPERIMENT: name, LABEL_RUN: plan.run})
            state_mod.clear(directory)
            raise
        state_mod.save(directory, made)
        return made


def _contract(plan: UpPlan, directory: Path, options: UpOptions) -> contract_mod.Contract:
    """The stage's contract, refused (exit 4) if it changed since frozen, unless refreeze."""
    stage = stage_dir(directory, plan.change)
    current = freeze.build_contract(plan.loaded, plan.change, plan.base_commit, plan.image)
    if contract_mod.load_lock(stage) is not None and not options.refreeze:
        contract_mod.verify(stage, current)
    return current


def _freeze(engine: Engine, plan: UpPlan, directory: Path, options: UpOptions,
            progress: Progress, current: contract_mod.Contract, db: DbState | None) -> None:
    """Prove the stage (preflight, baseline, reference, ratchets), then freeze it."""
    loaded, change = plan.loaded, plan.change
    stage = stage_dir(directory, change)
    proofs = stage / "proofs" / contract_mod.contract_sha256(current)[:12]
    proof = None
    shared = None if db is None else database.DbServer(db.container_id, db.host_port,
                                                       db.admin_password)
    if options.prove:
        with scoring.executor_for(engine, loaded, plan.base_commit, progress,
                                  shared_db=shared) as executor:
            proof = stage_mod.prove(executor, loaded, change, plan.base_commit, proofs,
                                    progress,
                                    allow_passing_baseline=options.allow_passing_baseline)
    if proof is not None and proof.ratchets:  # the ratchets' base values, measured or carried
        current = current.model_copy(update={"ratchet_baselines": proof.baselines})
    version = contract_mod.freeze(stage, current, refreeze=options.refreeze)
    progress(f"contract v{version.version} frozen ({version.sha256[:12]}) in "
             f"{contract_mod.lock_path(stage)}")
    if proof is not None:
        stage_mod.record(stage, change, plan.base_commit, proof, version)


def _plan(engine: Engine, loaded: LoadedManifest, change: str | None,
          progress: Progress) -> UpPlan:
    manifest = loaded.manifest
    change_ids = [c.id for c in manifest.changes]
    chosen = change or change_ids[0]
    if chosen not in change_ids:
        raise BadInputError(f"--change {chosen!r} is not in {loaded.path}",
                            hint=f"choose one of: {', '.join(change_ids)}")
    # The first change starts from the manifest's base, later ones from the last merge.
    base = merge.stage_base(loaded, chosen)
    toolchain = images.resolve(engine, manifest.toolchain.image)
    # The same prepared image (setup baked in) that scores the base serves the sandboxes.
    image = prepared.prepare(engine, loaded.repo_path, base, toolchain,
                             list(manifest.toolchain.setup), progress)
    db_image = images.resolve(engine, manifest.database.image) if manifest.database else None
    return UpPlan(loaded, chosen, secrets.token_hex(3), base, image, db_image)


def _starting_state(plan: UpPlan) -> ExperimentState:
    manifest = plan.loaded.manifest
    limits = manifest.limits
    return ExperimentState(
        experiment=manifest.experiment.name, run=plan.run, change=plan.change,
        phase="starting", base_commit=plan.base_commit, image=plan.image.tag,
        image_id=plan.image.image_id, image_identity=plan.image.identity,
        limits={"cpus": limits.cpus, "memory_mb": limits.memory_mb, "pids": limits.pids,
                "disk_mb": limits.disk_mb})


def _labels(plan: UpPlan, role: str, arm: str = "") -> Labels:
    return Labels(plan.loaded.manifest.experiment.name, role, arm, plan.run)


def _arm_setup(plan: UpPlan, directory: Path) -> arms_mod.ArmSetup:
    manifest = plan.loaded.manifest
    brief = brief_dir(stage_dir(directory, plan.change))
    brief.mkdir(parents=True, exist_ok=True)
    return arms_mod.ArmSetup(
        manifest.experiment.name, plan.run, plan.image.image_id, manifest.limits,
        (*agents_mount(plan.loaded), (brief, BRIEF_DIR)),
        manifest.database.url_env if manifest.database else None)


def _make(engine: Engine, plan: UpPlan, directory: Path, progress: Progress) -> ExperimentState:
    manifest = plan.loaded.manifest
    experiment = manifest.experiment.name
    arms = manifest.arms
    setup = _arm_setup(plan, directory)
    with ThreadPoolExecutor(max_workers=len(arms) + 1) as pool:
        db_future = pool.submit(_start_db, engine, plan) if plan.db_image else None
        prepared = list(pool.map(lambda arm: arms_mod.prepare(engine, setup, arm), arms))
        server = db_future.result() if db_future else None
    schemas: dict[str, database.DbSchema] = {}
    if server is not None and manifest.database is not None:
        for item in prepared:
            _connect_db(engine, server.container_id, item.network)
        # Connecting a network can re-publish the container's ports: read the port again.
        server = database.refresh_port(engine, server)
        progress("Postgres ready: one database and owner role per arm")
        database.lock_down(server)
        for arm in arms:
            schemas[arm.id] = database.create_schema(server, database.role_name(experiment, arm.id))
    sandboxes = _start_arms(engine, setup, prepared, schemas, progress)
    db_state = None
    if server is not None and manifest.database is not None:
        db_state = DbState(container_id=server.container_id, host_port=server.host_port,
                           admin_password=server.admin_password,
                           network=_db_network_name(plan), url_env=manifest.database.url_env)
    return _starting_state(plan).model_copy(
        update={"phase": "up", "arms": sandboxes, "db": db_state})


def _start_arms(engine: Engine, setup: arms_mod.ArmSetup,
                prepared: list[arms_mod.PreparedArm], schemas: dict[str, database.DbSchema],
                progress: Progress) -> list[ArmSandbox]:
    def one(item: arms_mod.PreparedArm) -> ArmSandbox:
        schema = schemas.get(item.arm)
        made = arms_mod.start(engine, setup, item, schema.url() if schema else None,
                              progress)
        if schema is None:
            return made
        return made.model_copy(update={"schema_name": schema.name,
                                       "schema_password": schema.password})

    with ThreadPoolExecutor(max_workers=len(prepared)) as pool:
        return list(pool.map(one, prepared))


def _make_checkouts(engine: Engine, plan: UpPlan, directory: Path, made: ExperimentState,
                    progress: Progress) -> None:
    """Every arm's checkout, made inside its (held) volume from one bundle of the base."""
    bundle = stage_dir(directory, plan.change) / "base.bundle"
    ref = workspace.base_bundle(plan.loaded.repo_path, plan.base_commit, bundle)

    def one(arm: ArmSandbox) -> None:
        checkout.make(engine, arms_mod.arm_box(made, arm), bundle, plan.base_commit, ref)
        progress(f"arm {arm.arm}: checkout made at {plan.base_commit[:12]}")

    try:
        with ThreadPoolExecutor(max_workers=len(made.arms)) as pool:
            list(pool.map(one, made.arms))
    finally:
        bundle.unlink(missing_ok=True)


def _db_network_name(plan: UpPlan) -> str:
    return sandbox.network_name(plan.loaded.manifest.experiment.name, "db", plan.run)


def _start_db(engine: Engine, plan: UpPlan) -> database.DbServer:
    assert plan.db_image is not None
    network = _db_network_name(plan)
    # Not internal: a published port (127.0.0.1 only) needs a routable bridge.
    sandbox.create_network(engine, network, _labels(plan, "database-network"), egress=True)
    manifest = plan.loaded.manifest
    assert manifest.database is not None
    name = f"bakeoff-{manifest.experiment.name}-db-{plan.run}"
    # Room for every arm's database and for the samples that `score` runs on this server.
    return database.start_server(engine, plan.db_image.image_id, _labels(plan, "database"),
                                 network, name, policy=database.policy_of(manifest.database),
                                 databases=len(manifest.arms) + database.SAMPLE_DATABASES)


def _connect_db(engine: Engine, db_container: str, network: str) -> None:
    net = engine.call("find network", engine.client.networks.get, network, retry=True)
    engine.call("connect db", net.connect, db_container, aliases=[database.DB_ALIAS])


def agents_mount(loaded: LoadedManifest) -> tuple[tuple[Path, str], ...]:
    agents = loaded.agents_path
    return () if agents is None else ((agents, AGENTS_DIR),)


def current_change(loaded: LoadedManifest) -> str:
    """The change in progress: the one that is up; else the first frozen change not yet
    merged; else the last frozen one; else the first change."""
    directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    current = state_mod.load(directory)
    if current is not None and current.phase == "up":
        return current.change
    frozen = [c.id for c in loaded.manifest.changes
              if contract_mod.load_lock(stage_dir(directory, c.id)) is not None]
    open_ = [c for c in frozen if not (stage_dir(directory, c) / "merge.json").exists()]
    return (open_ or frozen[-1:] or [loaded.manifest.changes[0].id])[0]


def require_up(loaded: LoadedManifest) -> tuple[Path, ExperimentState]:
    directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    current = state_mod.load(directory)
    if current is None or current.phase != "up":
        raise NotUpError(f"experiment {loaded.manifest.experiment.name!r} is not up",
                         hint=f"run `bakeoff-sandbox up -f {loaded.path}` first")
    return directory, current


def exec_arm(engine: Engine, loaded: LoadedManifest, arm_id: str,
             command: list[str]) -> sandbox.ExecResult:
    _, current = require_up(loaded)
    arm = current.arm(arm_id)
    if arm is None:
        raise UnknownArmError(f"no arm {arm_id!r} in experiment {current.experiment!r}",
                              hint=f"arms: {', '.join(a.arm for a in current.arms)}")
    return sandbox.exec_in(engine, arm.container_id, command,
                           timeout_s=loaded.manifest.limits.check_timeout_s)


@dataclass(frozen=True)
class DownReport:
    removed: dict[str, int]
    dropped: list[str]  # databases, each with its owner role of the same name
    databases_left: list[str]
    roles_left: list[str]


def down(engine: Engine, loaded: LoadedManifest, progress: Progress = _quiet) -> DownReport:
    """Keep the arms' work not kept yet, drop databases and roles, remove by label.

    Whatever state an arm left its checkout in, everything of the experiment is removed:
    an arm whose work cannot be kept is reported, never a reason to stop."""
    repo = loaded.repo_path
    name = loaded.manifest.experiment.name
    directory = experiment_dir(repo, name)
    dropped: list[str] = []
    left: tuple[list[str], list[str]] = ([], [])
    with experiment_lock(directory, name, "down"):
        current = state_mod.load(directory)
        try:
            if current is not None and current.phase == "up":
                arms_mod.keep_all(engine, loaded, directory, current, progress)
                dropped, left = _drop_databases(engine, current, progress)
        finally:
            removed = engine.remove_labelled({LABEL_EXPERIMENT: name})
            state_mod.clear(directory)
    progress(f"removed {removed['container']} containers, {removed['network']} networks, "
             f"dropped {len(dropped)} databases and their roles")
    return DownReport(removed, dropped, *left)


def _drop_databases(engine: Engine, current: ExperimentState,
                    progress: Progress) -> tuple[list[str], tuple[list[str], list[str]]]:
    """Drop every arm's database and role, then any other of the experiment's (a sample's,
    orphaned by a killed `score`); then list what is left under our prefix."""
    if current.db is None:
        return [], ([], [])
    server = database.DbServer(current.db.container_id, current.db.host_port,
                               current.db.admin_password)
    prefix = database.role_name(current.experiment, "")
    dropped: list[str] = []
    try:
        server = database.refresh_port(engine, server)  # a network connect may re-publish
        for arm in current.arms:
            if arm.schema_name:
                database.drop_schema(server, arm.schema_name)
                dropped.append(arm.schema_name)
        databases, roles = database.list_owned(server, prefix)
        for orphan in sorted(set(databases) | set(roles)):
            database.drop_schema(server, orphan)
            dropped.append(orphan)
        left = database.list_owned(server, prefix)
    except (DatabaseError, docker.errors.NotFound) as error:
        what = error.message if isinstance(error, DatabaseError) else "its container is gone"
        progress(f"could not drop databases ({what}); removing the server anyway")
        return dropped, ([], [])
    return dropped, left


def gc(engine: Engine, loaded: LoadedManifest | None) -> dict[str, int]:
    """Remove orphans: labelled resources of a run that never finished `up`.

    Without a manifest (`--all`), every resource carrying our experiment label goes.
    """
    if loaded is None:
        return engine.remove_labelled({LABEL_EXPERIMENT: ""})
    name = loaded.manifest.experiment.name
    directory = experiment_dir(loaded.repo_path, name)
    with experiment_lock(directory, name, "gc"):
        current = state_mod.load(directory)
        keep = current.run if current is not None and current.phase == "up" else None
        if current is not None and keep is not None:
            _drop_orphan_databases(engine, current)
        return _remove_orphans(engine, directory, name, keep_run=keep)


def _drop_orphan_databases(engine: Engine, current: ExperimentState) -> list[str]:
    """The databases and roles in the live Postgres that no arm owns: a killed `score`'s
    samples left them (an arm's stays)."""
    if current.db is None:
        return []
    server = database.DbServer(current.db.container_id, current.db.host_port,
                               current.db.admin_password)
    mine = {arm.schema_name for arm in current.arms if arm.schema_name}
    try:
        server = database.refresh_port(engine, server)
        databases, roles = database.list_owned(
            server, database.role_name(current.experiment, ""))
        orphans = sorted((set(databases) | set(roles)) - mine)
        for orphan in orphans:
            database.drop_schema(server, orphan)
    except (DatabaseError, docker.errors.NotFound):
        return []  # the server itself is gone or broken: `down` removes it
    return orphans


def _remove_orphans(engine: Engine, directory: Path, name: str,
                    keep_run: str | None) -> dict[str, int]:
    removed = engine.remove_labelled(
        {LABEL_EXPERIMENT: name},
        keep=lambda labels: keep_run is not None and labels.get(LABEL_RUN) == keep_run)
    if keep_run is None:
        state_mod.clear(directory)
    return removed


def status_rows(engine: Engine, loaded: LoadedManifest) -> list[dict[str, Any]]:
    """One row per arm: state, image, commit, schema (and verdicts, once scored)."""
    directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    current = state_mod.load(directory)
    change = current_change(loaded)
    rows = []
    for arm in loaded.manifest.arms:
        live = current.arm(arm.id) if current is not None and current.phase == "up" else None
        row: dict[str, Any] = {"arm": arm.id, "model": arm.model, "control": arm.control,
                               "state": "down", "image": None, "commit": None, "schema": None,
                               "change": change, "verdicts": verdicts(directory, change, arm.id)}
        if live is not None and current is not None:
            try:
                described = sandbox.describe(engine, live.container_id)
            except docker.errors.APIError:
                described = {"state": "unknown"}
            row.update(state=described["state"], image=current.image_id,
                       commit=_arm_commit(directory, current, arm.id),
                       schema=live.schema_name, container=live.container_name)
        rows.append(row)
    return rows


def _arm_commit(directory: Path, current: ExperimentState, arm: str) -> str:
    """The arm's commit from its dispatch record (this `up`'s), else the base it starts
    from: never read from the checkout."""
    record = load_record(record_dir(directory, current.change, arm) / RECORD_FILE)
    if record is not None and record.run == current.run and record.commit:
        return record.commit
    return current.base_commit


def verdicts(directory: Path, change: str, arm: str) -> dict[str, str]:
    """`passed/samples` per scored check of an arm (from the stored sample records)."""
    shown: dict[str, str] = {}
    for folder in sorted((stage_dir(directory, change) / "samples" / arm).glob("*")):
        records = [SampleRecord.model_validate_json(p.read_text(encoding="utf-8"))
                   for p in folder.glob("*.json")]
        if records:
            passed = sum(r.verdict is Verdict.PASS for r in records)
            errors = sum(r.verdict is Verdict.RIG_ERROR for r in records)
            shown[folder.name] = f"{passed}/{len(records)}" + (f" ({errors} rig)" if errors
                                                               else "")
    return shown

