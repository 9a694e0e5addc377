"""Resume restores the experiment's services (issue 31): `restore`, run by `run`, `score`,
`dispatch` and `merge` before they start work, when the experiment is up.

What an engine restart leaves (dockerd stopped and started again, no live-restore):
every container of ours stopped, not removed; named volumes and networks kept, except
what lived on a tmpfs. So the experiment's Postgres starts with an empty cluster (its
data is a tmpfs: the arms' roles and databases and `up`'s lock-down are gone), and an
arm's sandbox with an empty checkout and HOME (tmpfs volumes, kept only while a
container holds them). The gateway's state is a volume on the engine's disk: it comes
back as it was.

For each service `up` recorded (`runner.store.state`: the Postgres, the gateway, every
arm's sandbox) the engine is asked what became of its container (`found`), and `decide`
says what to do: a running one is kept (the Postgres still has its arm databases
checked), a stopped one is brought back and waited for. The gateway: started, until
/healthz answers. A sandbox: started, and the checkout of an arm whose dispatch is not
done made again at the base, as `up` made it. The Postgres: made again as it was made
(`database.recreated`: a restarted container's tmpfs comes back root's 0755, where
initdb cannot write; its cluster held nothing to keep), then every recorded arm role
and database made again with its recorded password, after the lock-down. A container
the engine no longer has is never guessed back: when an arm still to dispatch needs it
(`needed`), `GoneError` (exit 3) names each and the one command that fixes it; when
none does (every arm dispatched, its work kept), it is said and left (`score` and
`merge` make a Postgres of their own when the experiment's is gone). An engine that
does not answer at all is one `EngineUnreachableError` naming its address. Each thing
restored is one line
(`restored: the experiment's Postgres (made again: it was stopped; 2 arm databases
re-made)`).

An arm's work already fetched back as a bundle (its record in `DONE_STATES`) is never
touched here; an arm whose dispatch the outage cut (its record `rig_error`, or
`running` when the orchestrator died with it) is never scored as if it had finished
(`require_dispatched`): dispatch redoes it from the base, a new attempt.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from runner.commands.dispatch.record import DONE_STATES, ArmRecord, load_record
from runner.commands.dispatch.work import reset_to_base
from runner.containers import arms as arms_mod
from runner.containers import database, sandbox
from runner.containers import gateway as gateway_mod
from runner.containers.backend import ContainerEngine
from runner.errors import InfraError
from runner.manifest import LoadedManifest
from runner.store import layout
from runner.store import state as state_mod
from runner.store.layout import experiment_dir
from runner.store.state import ExperimentState

Say = Callable[[str], None]
POSTGRES, GATEWAY, SANDBOX = "postgres", "gateway", "sandbox"


class ServiceState(StrEnum):
    """What became of a recorded container."""

    RUNNING = "running"
    STOPPED = "stopped"   # the engine can start it again
    GONE = "gone"         # removed, lost with the engine's store, or dead


class Step(StrEnum):
    KEEP = "keep"
    START = "start"
    REFUSE = "refuse"   # gone, and an arm still to dispatch needs it
    SPARE = "spare"     # gone, and nothing needs it any more: said, and left


# The engine's container states (`docker inspect` .State.Status), and `missing` for a
# container it does not know. A paused sandbox is dispatch's to unpause; a dead or
# half-removed container cannot be started.
FOUND = {"running": ServiceState.RUNNING, "paused": ServiceState.RUNNING,
         "restarting": ServiceState.RUNNING,
         "created": ServiceState.STOPPED, "exited": ServiceState.STOPPED,
         "dead": ServiceState.GONE, "removing": ServiceState.GONE, "missing": ServiceState.GONE}
STEPS = {ServiceState.RUNNING: Step.KEEP, ServiceState.STOPPED: Step.START,
         ServiceState.GONE: Step.REFUSE}


def found(engine_state: str) -> ServiceState:
    """The engine's word for a container as one of ours (an unknown word: gone)."""
    return FOUND.get(engine_state, ServiceState.GONE)


def decide(state: ServiceState, needed: bool = True) -> Step:
    """What to do with a service whose container is in `state`; `needed`: an arm still
    to dispatch relies on it (a gone one that none does is spared, not refused)."""
    step = STEPS[state]
    return Step.SPARE if step is Step.REFUSE and not needed else step


@dataclass(frozen=True)
class Service:
    """One container `up` recorded."""

    kind: str              # POSTGRES, GATEWAY or SANDBOX
    shown: str             # "the experiment's Postgres", "arm A's sandbox"
    container_id: str
    arm: str = ""

    def __str__(self) -> str:
        return f"{self.shown} (container {sandbox.shown_id(self.container_id)})"


def services(current: ExperimentState) -> list[Service]:
    """What `up` made that a resumed command relies on, in the order it is restored:
    the Postgres first (the arms' databases), then the gateway, then the sandboxes."""
    found_: list[Service] = []
    if current.db is not None:
        found_.append(Service(POSTGRES, "the experiment's Postgres", current.db.container_id))
    if current.gateway is not None:
        found_.append(Service(GATEWAY, "the model gateway", current.gateway.container_id))
    found_ += [Service(SANDBOX, f"arm {arm.arm}'s sandbox", arm.container_id, arm.arm)
               for arm in current.arms]
    return found_


def needed(service: Service, current: ExperimentState, done: set[str]) -> bool:
    """Whether an arm still to dispatch relies on `service`: its own sandbox, the
    Postgres (its database; `score` and `merge` make a server of their own without it),
    the gateway (a gateway arm's only way to a model). Dispatched arms need none."""
    pending = [arm for arm in current.arms if arm.arm not in done]
    if service.kind == SANDBOX:
        return service.arm not in done
    if service.kind == GATEWAY:
        return any(arm.gateway_token for arm in pending)
    return bool(pending)


@dataclass(frozen=True)
class RestorePlan:
    """What `restore` does: each service with its step."""

    steps: list[tuple[Service, Step]]

    @property
    def gone(self) -> list[Service]:
        return [service for service, step in self.steps if step is Step.REFUSE]

    @property
    def to_start(self) -> list[Service]:
        return [service for service, step in self.steps if step is Step.START]


def plan(current: ExperimentState, states: dict[str, str], done: set[str]) -> RestorePlan:
    """Each recorded service's step, from the engine's state of its container (by id;
    a container not in `states` is gone) and the arms whose dispatch is `done`."""
    return RestorePlan([(service, decide(found(states.get(service.container_id, "missing")),
                                         needed(service, current, done)))
                        for service in services(current)])


class GoneError(InfraError):
    """A service `up` made is gone from the engine: never guessed back (exit 3)."""


def gone_error(gone: list[Service], address: str, manifest: Path) -> GoneError:
    listed = ", ".join(str(service) for service in gone)
    return GoneError(
        f"the engine at {address} no longer has {listed}: the experiment cannot resume on it",
        hint=f"run `bakeoff-sandbox down -f {manifest}`, then `bakeoff-sandbox run -f "
             f"{manifest}` (an arm whose work is kept is not dispatched again)")


def restore(engine: ContainerEngine, loaded: LoadedManifest, say: Say) -> list[str]:
    """The experiment's services as `up` left them, before a command starts work on them:
    stopped ones started, what they lost made again; the lines said (one per service
    restored). Nothing when the experiment is not up. `GoneError` when a container is gone,
    `EngineUnreachableError` when no engine answers."""
    directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    current = state_mod.load(directory)
    if current is None or current.phase != "up":
        return []
    engine.ping()
    states = {s.container_id: str(sandbox.describe(engine, s.container_id)["state"])
              for s in services(current)}
    done = done_arms(loaded, current.change)
    chosen = plan(current, states, done)
    if chosen.gone:
        raise gone_error(chosen.gone, engine.address, loaded.path)
    lines = []
    for service, step in chosen.steps:
        line = (f"gone: {service}: nothing needs it any more (every arm that used it is "
                "dispatched, its work kept)" if step is Step.SPARE else
                _restored(engine, loaded, current, service, step is Step.START, done))
        if line is not None:
            say(line)
            lines.append(line)
    return lines


def _restored(engine: ContainerEngine, loaded: LoadedManifest, current: ExperimentState,
              service: Service, start: bool, done: set[str]) -> str | None:
    """One service brought back (`start`: it was stopped); its line, None when it was
    as `up` left it."""
    if service.kind == POSTGRES:
        remade = _postgres(engine, loaded, current, start)
        if not start and not remade:
            return None
        what = "made again: it was stopped" if start else "running"
        return (f"restored: {service.shown} ({what}; {len(remade)} arm "
                f"database{'' if len(remade) == 1 else 's'} re-made)")
    if not start:
        return None
    # Their scratch tmpfs come back 1777: mounted over the image's own /tmp and /var/tmp,
    # they take its mode (a tmpfs over a directory the image lacks would not: Postgres).
    engine.start(service.container_id, what=service.shown)
    if service.kind == GATEWAY:
        gateway_mod.wait_healthy(engine, service.container_id)
        return f"restored: {service.shown} (started; /healthz answers)"
    if service.arm in done:
        return f"restored: {service.shown} (started; its dispatch is done, its work kept)"
    _remake_checkout(engine, loaded, current, service.arm)
    return (f"restored: {service.shown} (started; checkout made again at the base "
            f"{current.base_commit[:12]})")


def _postgres(engine: ContainerEngine, loaded: LoadedManifest, current: ExperimentState,
              start: bool) -> list[str]:
    """The Postgres answering, with every recorded arm database; the names re-made. A
    stopped one is made again (`database.recreated`: it cannot start again), its new
    container recorded in the state."""
    assert current.db is not None
    db = current.db
    if start:
        server = database.recreated(engine, db.container_id, db.admin_password, db.network)
        directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
        state_mod.save(directory, current.model_copy(update={
            "db": db.model_copy(update={"container_id": server.container_id})}))
    else:
        server = database.find_server(engine, db.container_id, db.admin_password)
    schemas = [database.DbSchema(arm.schema_name, arm.schema_password)
               for arm in current.arms if arm.schema_name and arm.schema_password]
    with database.HeldAdmin(engine, server) as admin:
        return database.remake(admin, schemas, database.role_name(current.experiment, ""))


def record_of(loaded: LoadedManifest, change: str, arm: str) -> ArmRecord | None:
    directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    return load_record(layout.arm_record(directory, change, arm))


def done_arms(loaded: LoadedManifest, change: str) -> set[str]:
    """The arms whose work for `change` is kept (their dispatch done, in any `up`)."""
    return {arm.id for arm in loaded.manifest.arms
            if (record := record_of(loaded, change, arm.id)) is not None
            and record.state in DONE_STATES}


def _remake_checkout(engine: ContainerEngine, loaded: LoadedManifest, current: ExperimentState,
                     arm_id: str) -> None:
    """The arm's checkout (its tmpfs volume came back empty) made again at the base."""
    arm = current.arm(arm_id)
    assert arm is not None
    directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    scratch = layout.keep_dir(layout.arm_dir(directory, current.change, arm_id))
    scratch.mkdir(parents=True, exist_ok=True)
    reset_to_base(engine, arms_mod.arm_box(current, arm), loaded.repo_path,
                  current.base_commit, scratch, threading.Lock())


class DispatchCutError(InfraError):
    """An arm's dispatch did not finish (the engine or the orchestrator stopped under
    it): its commits are not a result (exit 3)."""


def require_dispatched(loaded: LoadedManifest, change: str, *, fix: str | None = None) -> None:
    """Every arm's dispatch finished before it is scored: an arm whose record says the
    outage cut it (`rig_error`, or `running`/`interrupted`: the orchestrator stopped) is
    never scored as if it had finished, whatever its branch holds. An arm with no record
    is `score`'s to judge (its branch). `fix`: the caller's own (`run`: run it again)."""
    cut = []
    for arm in loaded.manifest.arms:
        record = record_of(loaded, change, arm.id)
        if record is not None and record.state not in DONE_STATES:
            why = f": {record.error.splitlines()[0]}" if record.error else ""  # no hint
            cut.append(f"arm {arm.id} (attempt {record.attempt}, {record.state}{why})")
    if cut:
        raise DispatchCutError(
            f"{change}: the dispatch of {'; '.join(cut)} did not finish: not scored",
            hint=fix or f"run `bakeoff-sandbox run -f {loaded.path}` (or `dispatch`): it "
                        "dispatches that arm again from the base")

