"""One Postgres per experiment, a container of ours; a DATABASE and owner role per arm and
per sample, all administered by `psql` INSIDE that container through the engine's exec API.

A schema is not a boundary: the catalog (pg_proc, pg_views, pg_constraint), NOTIFY and
advisory locks are per database, so arms sharing one database read each other's function
sources and disturb each other. Here each arm (dispatch) and each sample (scoring) gets
its own database, owned by its own login role with a CONNECTION LIMIT, a statement_timeout
and a temp_file_limit; CONNECT is revoked from PUBLIC on every database (the server's own
`postgres`, `template1` and the admin database included), so a role reaches only its own.

The server publishes no port and mounts nothing of this machine: every role, database,
grant, lock-down, limit and drop is a `psql` script sent to the container (`Admin`: one
exec per script; `HeldAdmin`: one psql held open for many, ~25 ms less per script), so
the same code works on an engine elsewhere (DOCKER_HOST=tcp://… or ssh://…). Its networks
are all internal; it runs as the image's postgres user with no capability added back,
its data on a tmpfs inside its memory limit.

The policy (those three limits) travels with the server: `start_server` passes it as
`bakeoff.*` settings and sizes `max_connections` from it, and the creation script reads it
back, so every caller that only knows the server's container (`up`, `score`, `reproduce`)
creates databases under the same policy, and the sum of every role's CONNECTION LIMIT
always stays below `max_connections` minus the admin's reserved slots.

The names (`DbSchema`, `create_schema`, `drop_schema`) are kept from the schema era:
each now means "a database and the role that owns it, both called `name`".
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
import threading
from dataclasses import dataclass
from types import TracebackType

from runner.containers import psql, sandbox
from runner.containers.backend import (
    LABEL_ARM,
    LABEL_EXPERIMENT,
    LABEL_ROLE,
    LABEL_RUN,
    ContainerEngine,
    ContainerSpec,
    ExecOutput,
    HeldProcess,
    Labels,
    Resources,
    Tmpfs,
    require_labels,
)
from runner.containers.held_exec import exec_with_input
from runner.containers.psql import (  # noqa: F401  (the names callers and tests use)
    ADMIN_LOCK,
    ADMIN_USER,
    DB_NAME,
    GUC,
    SERVER_DATABASES,
    StatementError,
    Strategy,
)
from runner.errors import DatabaseError, EngineError, NotFoundError
from runner.manifest.models import Database

DB_ALIAS = "db"
PORT = 5432
# Slots only a superuser (the admin) may take: every arm role together can never use them.
ADMIN_CONNECTIONS = 10
# WAL_LOG (PG15's default) vs FILE_COPY on the tmpfs cluster: bench/database_cost.py.
STRATEGY: Strategy = "WAL_LOG"
USER = "postgres"  # the image's; the server and every psql of ours run as it
# The admin's password: a Secret's on a cluster (`secret_env`), never in the Pod's spec.
PASSWORD_ENV = "POSTGRES_PASSWORD"
DATA = "/var/lib/postgresql/data"  # a tmpfs; the cluster in a directory initdb makes
PGDATA = f"{DATA}/cluster"
DATA_MB = 4096  # the cluster, temp files included (each role's temp_file_limit is less)
HEADROOM_MB = 2048  # the server's memory beyond its data tmpfs (shared buffers, backends)
EXTRA_PIDS = 64  # processes beyond one per connection (checkpointer, walwriter, psql)
READY_S = 60.0
POLL_S = 0.05
ADMIN_TIMEOUT_S = 120.0  # one script: the lock's wait included
ROLES = ("database", "score-database")  # the label roles of a server of ours
CANNOT_REACH = "run `bakeoff-sandbox status`; `up` again if it is gone"


@dataclass(frozen=True)
class DbPolicy:
    """What every arm's and sample's role gets (the manifest's `[database]` keys)."""

    connection_limit: int = 20
    statement_timeout_s: float = 120.0
    temp_file_limit_mb: int = 1024

    def settings(self) -> dict[str, str]:
        """The `bakeoff.*` settings that carry this policy on the server."""
        return {f"{GUC}connection_limit": str(self.connection_limit),
                f"{GUC}statement_timeout_ms": str(int(self.statement_timeout_s * 1000)),
                f"{GUC}temp_file_limit_kb": str(self.temp_file_limit_mb * 1024)}

    def max_connections(self, databases: int) -> int:
        """Room for `databases` roles at their full CONNECTION LIMIT, plus the admin's."""
        return databases * self.connection_limit + ADMIN_CONNECTIONS

    def defaults(self) -> psql.Defaults:
        return psql.Defaults(self.connection_limit, int(self.statement_timeout_s * 1000),
                             self.temp_file_limit_mb * 1024)


def sample_databases(engine: ContainerEngine) -> int:
    """How many sample databases may exist at once on one server: an executor runs one
    sample per worker of the engine (`sandbox.workers`), and `score`, `oracle` and
    `reproduce` may share the experiment's server: four times that, never fewer than 8."""
    return max(8, 4 * sandbox.workers(engine))


def server_command(policy: DbPolicy, databases: int) -> list[str]:
    """The server's command line (the image's entrypoint passes it to `postgres`)."""
    options = {"max_connections": str(policy.max_connections(databases)),
               "superuser_reserved_connections": str(ADMIN_CONNECTIONS),
               # A connection stalled in authentication holds a slot of max_connections
               # before any role's limit applies: keep that window short.
               "authentication_timeout": "10s",
               # Every refusal in the server's log (`docker logs`) with its SQLSTATE, role
               # and database: the evidence of who tried what.
               "log_line_prefix": "%m [%p] %q%e %u@%d ", **policy.settings()}
    return ["postgres", *(arg for key, value in options.items()
                          for arg in ("-c", f"{key}={value}"))]


def settings_of(command: list[str]) -> dict[str, str]:
    """The `-c key=value` settings of a server's command line."""
    found: dict[str, str] = {}
    for flag, value in itertools.pairwise(command):
        if flag == "-c" and "=" in value:
            key, _, setting = value.partition("=")
            found[key] = setting
    return found


def policy_from(command: list[str]) -> DbPolicy:
    """The policy a server was started with, read back from its command line (defaults
    for one without `bakeoff.*` settings)."""
    found, default = settings_of(command), DbPolicy()

    def get(key: str, fallback: float) -> float:
        value = found.get(f"{GUC}{key}", "")
        return float(value) if value else fallback

    return DbPolicy(
        connection_limit=int(get("connection_limit", default.connection_limit)),
        statement_timeout_s=get("statement_timeout_ms",
                                default.statement_timeout_s * 1000) / 1000,
        temp_file_limit_mb=int(get("temp_file_limit_kb",
                                   default.temp_file_limit_mb * 1024)) // 1024)


@dataclass(frozen=True)
class DbServer:
    """The experiment's Postgres: its container (by id, on whatever engine runs it), the
    admin's password (TCP logins only: psql in the container is trusted on its socket)
    and the policy it applies."""

    container_id: str
    admin_password: str
    policy: DbPolicy = DbPolicy()

    def shown(self) -> str:
        return f"in container {sandbox.shown_id(self.container_id)}"


@dataclass(frozen=True)
class DbSchema:
    """One arm's (or one sample's) database and the role that owns it, both `name`."""

    name: str
    password: str

    def url(self, host: str = DB_ALIAS, port: int = PORT) -> str:
        return f"postgresql://{self.name}:{self.password}@{host}:{port}/{self.name}"


def policy_of(section: Database | None) -> DbPolicy:
    """The manifest's `[database]` limits, as every arm's and sample's role gets them."""
    if section is None:
        return DbPolicy()
    return DbPolicy(connection_limit=section.connection_limit,
                    statement_timeout_s=section.statement_timeout_s,
                    temp_file_limit_mb=section.temp_file_limit_mb)


def server_spec(image_id: str, labels: Labels, network: str, name: str, password: str,
                policy: DbPolicy, databases: int, cpus: int) -> ContainerSpec:
    """The server's container: no port, no host path, the image's postgres user, no
    capability added back, its data on a tmpfs within its memory limit, the engine's
    `cpus` (its every CPU: it serves every arm and sample at once)."""
    return ContainerSpec(
        image=image_id, command=tuple(server_command(policy, databases)), labels=labels,
        resources=Resources(cpus=float(cpus), memory_mb=DATA_MB + HEADROOM_MB,
                            pids=policy.max_connections(databases) + EXTRA_PIDS),
        user=USER, purpose=f"Postgres {name}", name=name,
        # 1777: initdb, as postgres, makes the cluster's own 0700 directory inside.
        tmpfs=(Tmpfs(DATA, DATA_MB, mode="1777", executable=False),),
        network=network, log_max_mb=64,
        env={"POSTGRES_USER": ADMIN_USER, "POSTGRES_DB": DB_NAME, "PGDATA": PGDATA},
        secret_env={PASSWORD_ENV: password})


def start_server(engine: ContainerEngine, image_id: str, labels: Labels, network: str, name: str,
                 *, policy: DbPolicy | None = None,
                 databases: int | None = None) -> DbServer:
    """Start Postgres on `network` (one of ours, internal) and wait until it answers.

    `policy` applies to every database created on it; `databases` is how many may exist at
    once (arms plus concurrent samples): `max_connections` is sized from both."""
    require_labels(labels, f"Postgres {name}")
    policy = policy or DbPolicy()
    databases = sample_databases(engine) if databases is None else databases
    password = secrets.token_urlsafe(18)
    container_id = engine.create(server_spec(image_id, labels, network, name, password,
                                             policy, databases, engine.cpus))
    try:
        engine.start(container_id, what=f"Postgres {name}")
        _wait_ready(engine, container_id)
    except Exception as error:
        with contextlib.suppress(Exception):  # `gc` catches anything left
            engine.remove(container_id)
        raise DatabaseError(
            f"Postgres ({image_id[:19]}) did not start: {error}",
            hint="check `bakeoff-sandbox images build postgres` succeeded") from error
    return DbServer(container_id, password, policy)


def _wait_ready(engine: ContainerEngine, container_id: str) -> None:
    """Until psql logs in over TCP with the password, inside the container (the server
    that listens on TCP starts only once the entrypoint's init is done): one exec that
    polls in there, so the wait costs no exec start per attempt. The password is the
    container's own variable, never in the exec's command: on a cluster that command is
    in the API request's URL (audit logs keep it) and in the Pod's process list."""
    probe = (f"psql -X -q -h 127.0.0.1 -U {ADMIN_USER} -d {DB_NAME} -c 'SELECT 1'")
    tries = int(READY_S / POLL_S)
    script = (f'PGPASSWORD="${PASSWORD_ENV}"; export PGPASSWORD; '
              f"i=0; while [ $i -lt {tries} ]; do {probe} >/dev/null 2>&1 && exit 0; "
              f"i=$((i+1)); sleep {POLL_S}; done; {probe}")
    out = exec_with_input(engine, container_id, ["sh", "-c", script], b"", user=USER,
                          timeout_s=READY_S * 2, what="Postgres' readiness check",
                          env={"PGCONNECT_TIMEOUT": "5"})
    if out.exit_code == 0:
        return
    status = engine.inspect(container_id).status
    if status != "running":
        tail = engine.logs(container_id, stdout=True, stderr=True, tail=20)
        raise DatabaseError(f"the server exited ({status}): "
                            f"{tail.decode(errors='replace').strip()}")
    raise DatabaseError(f"no answer within {READY_S:.0f}s: "
                        f"{out.stderr.decode(errors='replace').strip()}")


def find_server(engine: ContainerEngine, container_id: str, admin_password: str = "") -> DbServer:
    """The server of ours in `container_id`, its policy read back from its settings.
    DatabaseError when it is gone, not ours, or not running."""
    try:
        container = engine.inspect(container_id)
    except NotFoundError as error:
        raise DatabaseError(f"the experiment's Postgres (container "
                            f"{sandbox.shown_id(container_id)}) is gone",
                            hint=CANNOT_REACH) from error
    labels = container.labels
    if LABEL_EXPERIMENT not in labels or labels.get(LABEL_ROLE) not in ROLES:
        raise DatabaseError(f"container {sandbox.shown_id(container_id)} is not a Postgres of ours",
                            hint="run `bakeoff-sandbox gc`, then `up` again")
    if container.status != "running":
        raise DatabaseError(f"the experiment's Postgres (container "
                            f"{sandbox.shown_id(container_id)}) is {container.status}",
                            hint=CANNOT_REACH)
    return DbServer(container.id, admin_password, policy_from(list(container.command)))


def recreated(engine: ContainerEngine, container_id: str, admin_password: str,
              network: str) -> DbServer:
    """The stopped server of ours in `container_id` made again, as it was made (image,
    command, labels, name, admin password, on `network` first and, as `db`, on every
    other network it was on), once psql answers. A stopped server holds nothing worth
    keeping (its cluster was a tmpfs), and it cannot simply be started again: a tmpfs of
    a restarted container comes back root's, mode 0755 (docker/for-linux#138,
    moby/moby#20437), where initdb as the image's postgres user cannot write."""
    old = engine.inspect(container_id)
    command = list(old.command)
    policy = policy_from(command)
    room = int(settings_of(command).get("max_connections", 0)) - ADMIN_CONNECTIONS
    labels = old.labels
    spec = server_spec(old.image,
                       Labels(labels.get(LABEL_EXPERIMENT, ""), labels.get(LABEL_ROLE, ""),
                              labels.get(LABEL_ARM, ""), labels.get(LABEL_RUN, "")),
                       network, old.name, admin_password, policy,
                       max(1, room // policy.connection_limit), engine.cpus)
    others = [name for name in old.networks if name != network]
    engine.remove(container_id)
    made = engine.create(spec)
    engine.start(made, what="Postgres")
    for name in others:
        with contextlib.suppress(NotFoundError):  # a killed score's network, since removed
            attach(engine, made, name)
    _wait_ready(engine, made)
    return DbServer(made, admin_password, policy)


# -- the administration: psql in the server's container ---------------------------------

def _answer(server: DbServer, out: ExecOutput) -> str:
    """psql's stdout, or the error it ended with: a refused statement is a
    `StatementError` (its SQLSTATE), psql unable to reach its server a DatabaseError."""
    stderr = out.stderr.decode(errors="replace")
    refused = psql.statement_error(stderr)
    if refused is not None:
        raise refused
    if out.exit_code not in (0, None):
        raise DatabaseError(
            f"cannot reach the experiment's Postgres {server.shown()}: psql exited "
            f"{out.exit_code}: {stderr.strip()}", hint=CANNOT_REACH)
    return out.stdout.decode(errors="replace")


def _unreachable(server: DbServer, error: Exception) -> DatabaseError:
    return DatabaseError(f"cannot reach the experiment's Postgres {server.shown()}: {error}",
                         hint=CANNOT_REACH)


class Admin:
    """The admin's session as one `psql` exec per script (a one-off; the tests use it:
    every command holds one psql, `HeldAdmin`)."""

    def __init__(self, engine: ContainerEngine, server: DbServer) -> None:
        self.engine, self.server = engine, server

    def run(self, script: str) -> str:
        try:
            out = exec_with_input(self.engine, self.server.container_id, list(psql.ARGV),
                                  script.encode(), user=USER, timeout_s=ADMIN_TIMEOUT_S,
                                  what="the database admin's psql")
        except EngineError as error:
            raise _unreachable(self.server, error) from error
        return _answer(self.server, out)


class HeldAdmin:
    """One `psql` held open for many scripts (an executor's samples, `up`, `down`): each
    script is followed by an `\\echo` of a marker, read back up to it. A script that fails
    ends that psql (ON_ERROR_STOP), and with it the session's advisory lock; the next
    script starts another."""

    def __init__(self, engine: ContainerEngine, server: DbServer) -> None:
        self.engine, self.server = engine, server
        self._stack = contextlib.ExitStack()
        self._held: HeldProcess | None = None
        self._lock = threading.Lock()
        self._marker = f"bakeoff-done-{secrets.token_hex(8)}"
        self.started = 0  # psql processes started: one, unless a script failed

    def __enter__(self) -> HeldAdmin:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def run(self, script: str) -> str:
        with self._lock:
            try:
                held = self._open()
                held.send(f"{script}\n\\echo {self._marker}\n".encode())
                out = held.until(self._marker.encode(), ADMIN_TIMEOUT_S)
            except EngineError as error:
                self.close()
                raise _unreachable(self.server, error) from error
            if held.ended:
                self.close()
                answer = _answer(self.server, out)
                raise DatabaseError(f"psql ended before the script's end: {answer!r}",
                                    hint=CANNOT_REACH)
            return _answer(self.server, out)

    def _open(self) -> HeldProcess:
        if self._held is None:
            self._held = self._stack.enter_context(self.engine.hold_exec(
                self.server.container_id, list(psql.ARGV), user=USER,
                what="the database admin's psql"))
            self.started += 1
        return self._held

    def close(self) -> None:
        if self._held is not None:
            self._held.close_input()
        self._held = None
        self._stack.close()


Session = Admin | HeldAdmin


def lock_down(admin: Session) -> None:
    """Once per server: no role but an explicit grantee connects to any database, and
    nobody creates in the admin database's public schema."""
    admin.run(psql.lock_down())


def role_name(experiment: str, owner: str) -> str:
    """Roles and databases are cluster-wide: prefix them with the experiment.
    Lower case, [a-z0-9_], at most 63 characters."""
    raw = f"bk_{experiment}_{owner}".lower()
    return "".join(ch if ch.isalnum() else "_" for ch in raw)[:63]


def create_schema(admin: Session, name: str, *, strategy: Strategy = STRATEGY,
                  password: str | None = None) -> DbSchema:
    """A login role `name` and a database `name` it owns, that only it may connect to,
    under the server's policy. Refused (nothing left behind) when the server has no room
    for another role at its full CONNECTION LIMIT. `password`: the one recorded for it
    (a restarted server's arm database made again, `remake`), else a fresh one."""
    schema = DbSchema(name, password or secrets.token_urlsafe(18))
    script = psql.create(name, schema.password, strategy, admin.server.policy.defaults())
    try:
        decided = psql.created(admin.run(script))
    except StatementError:
        drop_schema(admin, name)  # ours alone: the name was free under the lock
        raise
    if decided.outcome == "taken":  # checked under ADMIN_LOCK: no creator can race us to it
        raise DatabaseError(f"a role or database {name!r} already exists on the "
                            "experiment's Postgres", hint="`down`, then `up` again")
    if decided.outcome == "full":
        raise DatabaseError(
            f"the experiment's Postgres {admin.server.shown()} is full: its roles hold "
            f"{decided.used} of {decided.room} connection slots and another needs "
            f"{decided.needed}",
            hint="wait for running samples to finish (another `score` or `oracle` shares "
                 "the server), or `down` and `up` again")
    return schema


def remake(admin: Session, schemas: list[DbSchema], prefix: str) -> list[str]:
    """The arms' databases a restarted server lost (its cluster is a tmpfs: a start
    begins with an empty one), made again under their recorded names and passwords after
    the lock-down `up` did; the names made again (none when every one is there)."""
    databases, roles = list_owned(admin, prefix)
    lost = [s for s in schemas if s.name not in databases or s.name not in roles]
    if not lost:
        return []
    lock_down(admin)
    for schema in lost:
        drop_schema(admin, schema.name)  # half of one (a role without its database)
        create_schema(admin, schema.name, password=schema.password)
    return [schema.name for schema in lost]


def drop_schema(admin: Session, name: str) -> None:
    """Terminate the role's sessions, DROP DATABASE, then DROP ROLE (no 2BP01 left)."""
    admin.run(psql.drop(name))


def list_owned(admin: Session, prefix: str) -> tuple[list[str], list[str]]:
    """(databases, roles) whose names start with `prefix`: what `down` must leave empty."""
    return psql.owned(admin.run(psql.list_owned(prefix)))


def attach(engine: ContainerEngine, server: str, network: str) -> None:
    """Put the Postgres container `server` on `network`, reachable there as `db`."""
    engine.connect(network, server, aliases=[DB_ALIAS], what="connect db")
