"""One Postgres per experiment (testcontainers); a DATABASE and owner role per arm and per
sample.

A schema is not a boundary: the catalog (pg_proc, pg_views, pg_constraint), NOTIFY and
advisory locks are per database, so arms sharing one database read each other's function
sources and disturb each other. Here each arm (dispatch) and each sample (scoring) gets
its own database, owned by its own login role with a CONNECTION LIMIT, a statement_timeout
and a temp_file_limit; CONNECT is revoked from PUBLIC on every database (the server's own
`postgres`, `template1` and the admin database included), so a role reaches only its own.

The policy (those three limits) travels with the server: `start_server` passes it as
`bakeoff.*` settings and sizes `max_connections` from it, and `create_schema` reads it
back, so every caller that only knows the server's address (`up`, `score`, `reproduce`)
creates databases under the same policy, and the sum of every role's CONNECTION LIMIT
always stays below `max_connections` minus the admin's reserved slots.

The names (`DbSchema`, `create_schema`, `drop_schema`) are kept from the schema era:
each now means "a database and the role that owns it, both called `name`".
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import psycopg
from psycopg import sql

from runner.containers.engine import Engine, Labels, require_labels
from runner.errors import DatabaseError
from runner.manifest.models import Database

ADMIN_USER = "bakeoff"
DB_NAME = "bakeoff"  # the admin database: no arm role may connect to it
SERVER_DATABASES = ("postgres", "template1", DB_NAME)
DB_ALIAS = "db"
PORT = 5432
CONNECT_TIMEOUT_S = 10
# Slots only a superuser (the admin) may take: every arm role together can never use them.
ADMIN_CONNECTIONS = 10
# How many sample databases may exist at once on one server: an executor runs one sample
# per core, and `score`, `oracle` and `reproduce` may share the experiment's server.
SAMPLE_DATABASES = max(8, 4 * (os.cpu_count() or 1))
# Serialises the admin's DDL across executors and processes (advisory locks are per
# database: every admin session is in DB_NAME). Held for the session, released on close.
ADMIN_LOCK = 0x6261_6B65  # "bake"
# WAL_LOG (PG15's default) vs FILE_COPY on the tmpfs cluster: bench/database_cost.py.
Strategy = Literal["WAL_LOG", "FILE_COPY"]
STRATEGY: Strategy = "WAL_LOG"
GUC = "bakeoff."  # a custom settings prefix: how the server carries its own policy


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


@dataclass(frozen=True)
class DbServer:
    """Where the experiment's Postgres is: its container and admin credentials."""

    container_id: str
    host_port: int
    admin_password: str

    def admin_dsn(self) -> str:
        return (f"host=127.0.0.1 port={self.host_port} user={ADMIN_USER} dbname={DB_NAME} "
                f"password={self.admin_password} connect_timeout={CONNECT_TIMEOUT_S}")


@dataclass(frozen=True)
class DbSchema:
    """One arm's (or one sample's) database and the role that owns it, both `name`."""

    name: str
    password: str

    def url(self, host: str = DB_ALIAS, port: int = PORT) -> str:
        return f"postgresql://{self.name}:{self.password}@{host}:{port}/{self.name}"


def _configure_testcontainers() -> None:
    # Ryuk cannot be pulled (no registry); cleanup is ours, by label. These machines have
    # an empty /.dockerenv: without docker_host mode testcontainers hands out bridge IPs.
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    os.environ.setdefault("TESTCONTAINERS_CONNECTION_MODE", "docker_host")


def policy_of(section: Database | None) -> DbPolicy:
    """The manifest's `[database]` limits, as every arm's and sample's role gets them."""
    if section is None:
        return DbPolicy()
    return DbPolicy(connection_limit=section.connection_limit,
                    statement_timeout_s=section.statement_timeout_s,
                    temp_file_limit_mb=section.temp_file_limit_mb)


def start_server(engine: Engine, image_id: str, labels: Labels, network: str, name: str,
                 *, policy: DbPolicy | None = None,
                 databases: int = SAMPLE_DATABASES) -> DbServer:
    """Start Postgres on `network`, published on 127.0.0.1 only, and wait until it answers.

    `policy` applies to every database created on it; `databases` is how many may exist at
    once (arms plus concurrent samples): `max_connections` is sized from both."""
    require_labels(labels, f"Postgres {name}")  # testcontainers creates it, with our labels
    _configure_testcontainers()
    from testcontainers.community.postgres import PostgresContainer  # after the env is set

    password = secrets.token_urlsafe(18)
    container = PostgresContainer(image=image_id, username=ADMIN_USER, password=password,
                                  dbname=DB_NAME, driver=None, name=name)
    container.ports = {f"{PORT}/tcp": ("127.0.0.1",)}  # type: ignore[dict-item]
    container.tmpfs = {"/var/lib/postgresql/data": "rw"}  # a throwaway cluster: fast, no volume
    container.with_command(server_command(policy or DbPolicy(), databases))
    container.with_kwargs(labels=labels.as_dict(), network=network)
    try:
        container.start()
    except Exception as error:
        _remove_quietly(container)
        raise DatabaseError(
            f"Postgres ({image_id[:19]}) did not start: {error}",
            hint="check `bakeoff-sandbox images build postgres` succeeded") from error
    wrapped = container.get_wrapped_container()
    port = int(container.get_exposed_port(PORT))
    return DbServer(str(wrapped.id), port, password)


def refresh_port(engine: Engine, server: DbServer) -> DbServer:
    """The host port as it is now (docker may re-publish a port on network connect)."""
    container = engine.call("inspect db", engine.client.containers.get, server.container_id,
                            retry=True)
    bindings = container.attrs["NetworkSettings"]["Ports"].get(f"{PORT}/tcp") or []
    ports = [int(b["HostPort"]) for b in bindings if b.get("HostIp") == "127.0.0.1"]
    if not ports:
        raise DatabaseError(f"Postgres container {server.container_id[:12]} publishes no port "
                            "on 127.0.0.1", hint="run `bakeoff-sandbox gc`, then `up` again")
    return DbServer(server.container_id, ports[0], server.admin_password)


def _remove_quietly(container: object) -> None:
    wrapped = getattr(container, "_container", None)
    if wrapped is not None:
        try:
            wrapped.remove(force=True, v=True)
        except Exception:  # cleanup after a failed start; `gc` catches anything left
            return


Conn = psycopg.Connection[tuple[object, ...]]


@contextmanager
def admin(server: DbServer) -> Iterator[Conn]:
    try:
        with psycopg.connect(server.admin_dsn(), autocommit=True) as conn:
            yield conn
    except psycopg.OperationalError as error:
        raise DatabaseError(
            f"cannot reach the experiment's Postgres on 127.0.0.1:{server.host_port}: {error}",
            hint="run `bakeoff-sandbox status`; `up` again if it is gone") from error
    except psycopg.Error as error:  # a refused statement is the rig's problem, one message
        raise DatabaseError(f"Postgres refused an administrative statement: {error}",
                            hint="run the command again; if it persists, `bakeoff-sandbox gc` "
                                 "and `up`") from error


@contextmanager
def _ddl(server: DbServer) -> Iterator[Conn]:
    """An admin session holding ADMIN_LOCK: one creator or dropper at a time, server-wide."""
    with admin(server) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (ADMIN_LOCK,))
        yield conn  # closing the session releases the lock


def lock_down(server: DbServer) -> None:
    """Once per server: no role but an explicit grantee connects to any database, and
    nobody creates in the admin database's public schema."""
    with admin(server) as conn:
        for database in SERVER_DATABASES:
            conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(
                sql.Identifier(database)))
        conn.execute("REVOKE ALL ON SCHEMA public FROM PUBLIC")


def role_name(experiment: str, owner: str) -> str:
    """Roles and databases are cluster-wide: prefix them with the experiment.
    Lower case, [a-z0-9_], at most 63 characters."""
    raw = f"bk_{experiment}_{owner}".lower()
    return "".join(ch if ch.isalnum() else "_" for ch in raw)[:63]


def create_schema(server: DbServer, name: str, *,
                  strategy: Strategy = STRATEGY) -> DbSchema:
    """A login role `name` and a database `name` it owns, that only it may connect to,
    under the server's policy. Refused (nothing left behind) when the server has no room
    for another role at its full CONNECTION LIMIT."""
    schema = DbSchema(name, secrets.token_urlsafe(18))
    with _ddl(server) as conn:
        policy = _make_room(conn, server)
        taken = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s UNION ALL "
                             "SELECT 1 FROM pg_database WHERE datname = %s",
                             (name, name)).fetchone()
        if taken:  # checked under ADMIN_LOCK: no other creator can race us to it
            raise DatabaseError(f"a role or database {name!r} already exists on the "
                                "experiment's Postgres", hint="`down`, then `up` again")
        try:
            _create(conn, schema, policy, strategy)
        except psycopg.Error:
            _drop(conn, name)  # ours alone: the name was free under the lock
            raise
    return schema


def _make_room(conn: Conn, server: DbServer) -> DbPolicy:
    """The server's policy, after checking one more role fits in `max_connections`."""
    keys = list(DbPolicy().settings())
    row = conn.execute(
        "SELECT " + ", ".join(f"current_setting('{key}', true)" for key in keys) + ","
        " current_setting('max_connections')::int"
        " - current_setting('superuser_reserved_connections')::int,"
        " (SELECT coalesce(sum(greatest(rolconnlimit, 0)), 0) FROM pg_roles"
        "  WHERE rolcanlogin AND NOT rolsuper)").fetchone()
    assert row is not None
    policy = _policy_of(row[:3])
    room, used = int(str(row[3])), int(str(row[4]))
    if used + policy.connection_limit > room:
        raise DatabaseError(
            f"the experiment's Postgres on 127.0.0.1:{server.host_port} is full: its roles "
            f"hold {used} of {room} connection slots and another needs "
            f"{policy.connection_limit}",
            hint="wait for running samples to finish (another `score` or `oracle` shares "
                 "the server), or `down` and `up` again")
    return policy


def _policy_of(values: tuple[object, ...]) -> DbPolicy:
    """The policy a server was started with (defaults for a server without one)."""
    limit, timeout_ms, temp_kb = (None if v is None or v == "" else int(str(v))
                                  for v in values)
    default = DbPolicy()
    return DbPolicy(
        connection_limit=default.connection_limit if limit is None else limit,
        statement_timeout_s=default.statement_timeout_s if timeout_ms is None
        else timeout_ms / 1000,
        temp_file_limit_mb=default.temp_file_limit_mb if temp_kb is None else temp_kb // 1024)


def _create(conn: Conn, schema: DbSchema, policy: DbPolicy, strategy: Strategy) -> None:
    ident = sql.Identifier(schema.name)
    conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} CONNECTION LIMIT {}").format(
        ident, sql.Literal(schema.password), sql.Literal(policy.connection_limit)))
    # temp_file_limit is superuser-only: set here by the admin, the role cannot lift it.
    for setting, value in (("statement_timeout", f"{int(policy.statement_timeout_s * 1000)}ms"),
                           ("temp_file_limit", f"{policy.temp_file_limit_mb * 1024}kB")):
        conn.execute(sql.SQL("ALTER ROLE {} SET {} = {}").format(
            ident, sql.Identifier(setting), sql.Literal(value)))
    conn.execute(sql.SQL("CREATE DATABASE {} OWNER {} STRATEGY = {}").format(
        ident, ident, sql.SQL(strategy)))
    conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(ident))
    conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(ident, ident))


def drop_schema(server: DbServer, name: str) -> None:
    """Terminate the role's sessions, DROP DATABASE, then DROP ROLE (no 2BP01 left)."""
    with _ddl(server) as conn:
        _drop(conn, name)


def _drop(conn: Conn, name: str) -> None:
    ident = sql.Identifier(name)
    exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone()
    if exists:
        conn.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(ident))  # no new sessions
        _terminate(conn, name)
    # FORCE ends any session still in the database (one not of the role, too).
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
    if exists:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(ident))  # grants on shared objects
        conn.execute(sql.SQL("DROP ROLE {}").format(ident))


def _terminate(conn: Conn, role: str, wait_s: float = 5.0) -> None:
    """End every session of `role` (in any database) and wait, bounded, until they are gone."""
    deadline = time.monotonic() + wait_s
    query = ("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
             " WHERE usename = %s AND pid <> pg_backend_pid()")
    while True:
        row = conn.execute(query, (role,)).fetchone()
        if row is None or int(str(row[0])) == 0 or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def list_owned(server: DbServer, prefix: str) -> tuple[list[str], list[str]]:
    """(databases, roles) whose names start with `prefix`: what `down` must leave empty."""
    pattern = prefix.replace("_", r"\_") + "%"
    with admin(server) as conn:
        databases = [r[0] for r in conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s ORDER BY 1", (pattern,))]
        roles = [r[0] for r in conn.execute(
            "SELECT rolname FROM pg_roles WHERE rolname LIKE %s ORDER BY 1", (pattern,))]
    return [str(d) for d in databases], [str(r) for r in roles]


def attach(engine: Engine, server: str, network: str) -> None:
    """Put the Postgres container `server` on `network`, reachable there as `db`. The port
    it publishes may change (`refresh_port` reads it again)."""
    net = engine.call("find network", engine.client.networks.get, network, retry=True)
    engine.call("connect db", net.connect, server, aliases=[DB_ALIAS])
