"""`up`: per change, build and prove the stage's contract, freeze it, then make the
arms' sandboxes (network, checkout and HOME volumes, container, database, limits).

`up` labels everything it creates with a fresh run id and records that run as committed
only at the very end; a run that never committed (the orchestrator was killed) is an
orphan, and `gc` (`runner.commands.down`) removes it by label. If `up` fails, it removes
what it made before it re-raises (testcontainers' rule: clean up inside a failed start).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from rig import contract as contract_mod
from runner import contract as freeze
from runner import workspace
from runner.commands import down as down_mod
from runner.commands import proofs as stage_mod
from runner.commands import score as score_mod
from runner.commands.dispatch.brief import BRIEF_DIR, brief_dir
from runner.containers import arms as arms_mod
from runner.containers import checkout, database, images, prepared, sandbox
from runner.containers.engine import LABEL_EXPERIMENT, LABEL_RUN, Engine, Labels
from runner.errors import BadInputError
from runner.manifest import LoadedManifest
from runner.store import state as state_mod
from runner.store.files import ensure_excluded, experiment_dir, experiment_lock, stage_dir
from runner.store.state import ArmSandbox, DbState, ExperimentState
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
            down_mod.remove_orphans(engine, directory, name, keep_run=None)
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
        with score_mod.executor_for(engine, loaded, plan.base_commit, progress,
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
