"""`up`: per change, build the stage's contract and prove it (preflight passes, the
success criterion FAILS on the untouched base (principle 2) and, when a reference is
given, PASSES on it (principle 7); the ratchets' base values are measured:
`runner.commands.proofs`), freeze it, then make the arms' sandboxes (network, checkout
and HOME volumes, container, database, limits).

`up` labels everything it creates with a fresh run id and records that run as committed
only at the very end; a run that never committed (the orchestrator was killed) is an
orphan, and `gc` (`runner.commands.down`) removes it by label. If `up` fails, it removes
what it made before it re-raises (testcontainers' rule: clean up inside a failed start).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from rig import contract as contract_mod
from runner import contract, workspace
from runner.commands import down as down_mod
from runner.commands import sample_runs
from runner.commands.dispatch.brief import BRIEF_DIR
from runner.commands.proofs import prove, record
from runner.containers import arms as arms_mod
from runner.containers import browser, checkout, database, images, sandbox
from runner.containers import gateway as gateway_mod
from runner.containers.backend import LABEL_EXPERIMENT, LABEL_RUN, ContainerEngine, Labels
from runner.containers.images import reporters
from runner.containers.images.prepared import Toolchain
from runner.containers.stacks import arm as arm_stack
from runner.errors import BadInputError, InfraError
from runner.manifest import Arm, LoadedManifest, key_provider
from runner.manifest.placeholders import require_ready
from runner.store import layout
from runner.store import state as state_mod
from runner.store.files import ensure_excluded, experiment_lock
from runner.store.layout import experiment_dir, stage_dir
from runner.store.state import ArmSandbox, DbState, ExperimentState, GatewayState
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
    toolchain: Toolchain  # the images of this `up`, resolved once
    agents: dict[str, arms_mod.AgentImage] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)  # the gateway arms' real keys
    arm_image: images.BuiltImage | None = None  # the arms' (the image + a browser); None: image

    @property
    def sandbox_image(self) -> images.BuiltImage:
        """The image an arm's sandbox runs (before its agent CLI's layer, if any)."""
        return self.arm_image or self.image


@dataclass(frozen=True)
class UpOptions:
    """`up`'s choices. `prove=False` skips preflight and the baseline/reference proofs
    (the library's tests of the sandbox core and the sandbox benchmark use it)."""

    refreeze: bool = False
    allow_passing_baseline: bool = False
    prove: bool = True


def up(engine: ContainerEngine, loaded: LoadedManifest, change: str | None = None,
       progress: Progress = _quiet, options: UpOptions = UpOptions(),
       toolchain: Toolchain | None = None) -> ExperimentState:
    """Check and freeze the stage's contract, prove the base fails, then make one sandbox
    per arm: network, checkout and HOME volumes, container, database, limits.
    `toolchain`: the images of the command that calls it (`run`), else its own."""
    repo = loaded.repo_path
    name = loaded.manifest.experiment.name
    require_ready(loaded)
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
        plan = _plan(engine, loaded, change, progress, toolchain)
        for line in contract.unprotected_named(loaded, plan.change, plan.base_commit):
            progress(f"warning: {line}")
        # A changed contract fails fast; so does a stack that would pull (its images'
        # identities are part of the contract).
        terms = _contract(plan, directory, options)
        state_mod.save(directory, _starting_state(plan, engine))
        try:
            made = _make(engine, plan, directory, progress)
            # The proofs use the experiment's Postgres; a failed proof removes it all.
            _freeze(engine, plan, directory, options, progress, terms, made.db)
            # Last: an image the preflight refuses is named by the preflight.
            _make_checkouts(engine, plan, directory, made, progress)
            made = arm_stack.start_for(engine, loaded, made, terms.toolchain.stack,
                                       directory, progress)  # they run the checkouts
        except BaseException:
            progress("up failed: removing what this run created")
            try:
                engine.remove_labelled({LABEL_EXPERIMENT: name, LABEL_RUN: plan.run})
            except InfraError as left:  # never in place of why `up` failed (below)
                progress(f"up failed, and so did its cleanup (`gc` removes the rest): {left}")
            state_mod.clear(directory)
            raise
        state_mod.save(directory, made)
        return made


def _contract(plan: UpPlan, directory: Path, options: UpOptions) -> contract_mod.Contract:
    """The stage's contract, refused (exit 4) if it changed since frozen, unless refreeze."""
    stage = stage_dir(directory, plan.change)
    current = contract.build_contract(plan.loaded, plan.change, plan.base_commit, plan.image,
                                      plan.toolchain.stack_images(plan.change),
                                      plan.toolchain.arm_stack_images(),
                                      plan.toolchain.browser(plan.change))
    if contract_mod.load_lock(stage) is not None and not options.refreeze:
        contract_mod.verify(stage, current)
    return current


def _freeze(engine: ContainerEngine, plan: UpPlan, directory: Path, options: UpOptions,
            progress: Progress, current: contract_mod.Contract, db: DbState | None) -> None:
    """Prove the stage (preflight, baseline, reference, ratchets), then freeze it."""
    loaded, change = plan.loaded, plan.change
    stage = stage_dir(directory, change)
    proofs = layout.proofs_dir(stage, contract_mod.contract_sha256(current))
    proof = None
    shared = None if db is None else database.find_server(engine, db.container_id,
                                                          db.admin_password)
    if options.prove:
        with sample_runs.executor_for(plan.toolchain, plan.base_commit,
                                      shared_db=shared) as executor:
            proof = prove(executor, loaded, change, plan.base_commit, proofs, progress,
                          allow_passing_baseline=options.allow_passing_baseline)
    if proof is not None and proof.ratchets:  # the ratchets' base values, measured or carried
        current = current.model_copy(update={"ratchet_baselines": proof.baselines})
    version = contract_mod.freeze(stage, current, refreeze=options.refreeze)
    progress(f"contract v{version.version} frozen ({version.sha256[:12]}) in "
             f"{contract_mod.lock_path(stage)}")
    if proof is not None:
        record(stage, change, plan.base_commit, proof, version)


def _plan(engine: ContainerEngine, loaded: LoadedManifest, change: str | None,
          progress: Progress, toolchain: Toolchain | None) -> UpPlan:
    manifest = loaded.manifest
    change_ids = [c.id for c in manifest.changes]
    chosen = change or change_ids[0]
    if chosen not in change_ids:
        raise BadInputError(f"--change {chosen!r} is not in {loaded.path}",
                            hint=f"choose one of: {', '.join(change_ids)}")
    # The first change starts from the manifest's base, later ones from the last merge.
    base = merge.stage_base(loaded, chosen)
    toolchain = toolchain or Toolchain(engine, loaded, progress)
    keys = gateway_keys(loaded, os.environ)  # missing keys fail before anything is built
    # The same prepared image (setup baked in) that scores the base serves the sandboxes;
    # an arm that runs a pinned CLI gets that image plus the CLI (its agent layer).
    image = toolchain.for_commit(base)
    run = secrets.token_hex(3)
    # With `[toolchain] browser`, every arm's image also holds the criteria's browser.
    arm_image = (browser.layer(engine, image, reporters.current_reporter())
                 if manifest.toolchain.browser else image)
    agents = arms_mod.agent_images(engine, arm_image, list(manifest.arms),
                                   Labels(manifest.experiment.name, "image-check", "", run))
    return UpPlan(loaded, chosen, run, base, image, toolchain.database, toolchain, agents, keys,
                  arm_image)


def gateway_keys(loaded: LoadedManifest, environ: Mapping[str, str]) -> dict[str, str]:
    """The real keys the gateway arms name, from the orchestrator's environment (they go
    to the gateway's container, never to an arm's); every missing one at once."""
    arms = [arm for arm in loaded.manifest.arms if arm.network == "gateway"]
    found, missing = loaded.secret_values(arms, environ)
    for upstream in loaded.manifest.gateway.upstreams:
        if upstream.name not in {arm.upstream for arm in arms}:
            continue
        if environ.get(upstream.key):
            found[upstream.key] = environ[upstream.key]
        else:
            missing.append(f"{loaded.path}: [[gateway.upstreams]] {upstream.name}: key "
                           f"{upstream.key}")
    if missing:
        raise BadInputError(
            "key(s) not set (or empty) in the environment: " + "; ".join(missing),
            hint="export each before `up`: the model gateway holds them for the arms")
    return found


def _starting_state(plan: UpPlan, engine: ContainerEngine) -> ExperimentState:
    manifest = plan.loaded.manifest
    limits = manifest.limits
    return ExperimentState(
        experiment=manifest.experiment.name, run=plan.run, change=plan.change,
        phase="starting", base_commit=plan.base_commit, image=plan.image.tag,
        image_id=plan.image.image_id, image_identity=plan.image.identity,
        limits={"cpus": limits.cpus, "memory_mb": limits.memory_mb, "pids": limits.pids,
                "disk_mb": limits.disk_mb}, engine=engine.identity.as_record())


def _labels(plan: UpPlan, role: str, arm: str = "") -> Labels:
    return Labels(plan.loaded.manifest.experiment.name, role, arm, plan.run)


def _arm_setup(engine: ContainerEngine, plan: UpPlan) -> arms_mod.ArmSetup:
    """What every arm's sandbox shares; the agents directory and the brief reach them in
    volumes of the engine's (never a path of this machine)."""
    manifest = plan.loaded.manifest
    image = plan.sandbox_image.image_id
    agents, brief = arms_mod.shared_inputs(engine, manifest.experiment.name, plan.run, image,
                                           plan.loaded.agents_path)
    return arms_mod.ArmSetup(
        manifest.experiment.name, plan.run, image, manifest.limits,
        (*(((agents, AGENTS_DIR),) if agents else ()), (brief, BRIEF_DIR)),
        manifest.database.url_env if manifest.database else None, plan.agents)


def _make(engine: ContainerEngine, plan: UpPlan, directory: Path,
          progress: Progress) -> ExperimentState:
    manifest = plan.loaded.manifest
    experiment = manifest.experiment.name
    arms = manifest.arms
    setup = _arm_setup(engine, plan)
    with ThreadPoolExecutor(max_workers=len(arms) + 1) as pool:
        db_future = pool.submit(_start_db, engine, plan) if plan.db_image else None
        prepared = list(pool.map(lambda arm: arms_mod.prepare(engine, setup, arm), arms))
        server = db_future.result() if db_future else None
    gateway, tokens = _start_gateway(engine, plan, directory, prepared, progress)
    schemas: dict[str, database.DbSchema] = {}
    if server is not None and manifest.database is not None:
        for item in prepared:
            database.attach(engine, server.container_id, item.network)
        progress("Postgres ready: one database and owner role per arm")
        with database.HeldAdmin(engine, server) as admin:  # one psql for every script
            database.lock_down(admin)
            for arm in arms:
                schemas[arm.id] = database.create_schema(
                    admin, database.role_name(experiment, arm.id))
    sandboxes = _start_arms(engine, setup, prepared, schemas, tokens, progress)
    db_state = None
    if server is not None and manifest.database is not None:
        db_state = DbState(container_id=server.container_id,
                           admin_password=server.admin_password,
                           network=_db_network_name(plan), url_env=manifest.database.url_env)
    return _starting_state(plan, engine).model_copy(
        update={"phase": "up", "arms": sandboxes, "db": db_state, "gateway": gateway})


def _start_gateway(engine: ContainerEngine, plan: UpPlan, directory: Path,
                   prepared: list[arms_mod.PreparedArm], progress: Progress
                   ) -> tuple[GatewayState | None, dict[str, str]]:
    """The model gateway, when an arm has network = "gateway": a token per such arm,
    attached to its network as `model-gateway`."""
    manifest = plan.loaded.manifest
    by_id = {arm.id: arm for arm in manifest.arms}
    doors = [_door(by_id[item.arm], item.network) for item in prepared
             if by_id[item.arm].network == "gateway"]
    if not doors:
        return None, {}
    name = f"bakeoff-{manifest.experiment.name}-gateway-{plan.run}"
    state_dir = layout.gateway_dir(stage_dir(directory, plan.change))
    launch = gateway_mod.plan_launch(manifest.gateway, name,
                                     plan.toolchain.gateway_image.image_id,
                                     _labels(plan, "gateway"), state_dir, plan.change, doors,
                                     plan.keys)
    container_id = gateway_mod.launch(engine, launch, _labels(plan, "gateway-network"))
    network = launch.spec.network
    progress(f"model gateway {name} up: {len(doors)} arm(s) reach it as "
             f"{gateway_mod.ALIAS}, upstream via {network}")
    return (GatewayState(container_id=container_id, container_name=name, network=network,
                         state_dir=str(state_dir)),
            {door.arm: door.token for door in doors})


def _door(arm: Arm, network: str) -> gateway_mod.Door:
    """The arm's grant: its named upstream (whose key the gateway holds) or, without one,
    the implicit upstream of each provider whose key its secrets name."""
    keys = {provider: name for name in arm.secrets
            if (provider := key_provider(name)) is not None} if arm.upstream is None else {}
    return gateway_mod.Door(arm.id, network, gateway_mod.new_token(),
                            (arm.model, *arm.allow_models), keys,
                            allow_server_tools=arm.allow_server_tools, upstream=arm.upstream)


def _start_arms(engine: ContainerEngine, setup: arms_mod.ArmSetup,
                prepared: list[arms_mod.PreparedArm], schemas: dict[str, database.DbSchema],
                tokens: dict[str, str], progress: Progress) -> list[ArmSandbox]:
    def one(item: arms_mod.PreparedArm) -> ArmSandbox:
        schema = schemas.get(item.arm)
        made = arms_mod.start(engine, setup, item, schema.url() if schema else None,
                              progress, tokens.get(item.arm))
        if schema is None:
            return made
        return made.model_copy(update={"schema_name": schema.name,
                                       "schema_password": schema.password})

    with ThreadPoolExecutor(max_workers=len(prepared)) as pool:
        return list(pool.map(one, prepared))


def _make_checkouts(engine: ContainerEngine, plan: UpPlan, directory: Path, made: ExperimentState,
                    progress: Progress) -> None:
    """Every arm's checkout, made inside its (held) volume from one bundle of the base."""
    bundle = layout.base_bundle(stage_dir(directory, plan.change))
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


def _start_db(engine: ContainerEngine, plan: UpPlan) -> database.DbServer:
    assert plan.db_image is not None
    network = _db_network_name(plan)
    # Internal: the server is administered through the engine (psql by exec), never over
    # a network; arms reach it on their own networks (an egress arm's is routable).
    engine.create_network(network, _labels(plan, "database-network"), egress=False)
    manifest = plan.loaded.manifest
    assert manifest.database is not None
    name = f"bakeoff-{manifest.experiment.name}-db-{plan.run}"
    # Room for every arm's database and for the samples that `score` runs on this server.
    return database.start_server(engine, plan.db_image.image_id, _labels(plan, "database"),
                                 network, name, policy=database.policy_of(manifest.database),
                                 databases=len(manifest.arms) + database.sample_databases(engine))
