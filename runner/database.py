"""One Postgres per experiment (testcontainers), one schema + login role per arm.

Isolation is in the privileges, not the search_path (a client can change that):
PUBLIC loses CONNECT/CREATE on the database and on schema `public`; each role owns only
its own schema and is granted CONNECT explicitly (FIELD-NOTES, "Postgres isolation").
"""

from __future__ import annotations

import os
import secrets
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
from psycopg import sql

from runner.engine import Engine, Labels
from runner.errors import DatabaseError

ADMIN_USER = "bakeoff"
DB_NAME = "bakeoff"
DB_ALIAS = "db"
PORT = 5432
CONNECT_TIMEOUT_S = 10


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
    """One arm's (or one sample's) schema and the role that owns it."""

    name: str
    password: str

    def url(self, host: str = DB_ALIAS, port: int = PORT) -> str:
        options = urllib.parse.quote(f"-csearch_path={self.name}")
        return (f"postgresql://{self.name}:{self.password}@{host}:{port}/{DB_NAME}"
                f"?options={options}")


def _configure_testcontainers() -> None:
    # Ryuk cannot be pulled (no registry); cleanup is ours, by label. These machines have
    # an empty /.dockerenv: without docker_host mode testcontainers hands out bridge IPs.
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    os.environ.setdefault("TESTCONTAINERS_CONNECTION_MODE", "docker_host")


def start_server(engine: Engine, image_id: str, labels: Labels, network: str,
                 name: str) -> DbServer:
    """Start Postgres on `network`, published on 127.0.0.1 only, and wait until it answers."""
    _configure_testcontainers()
    from testcontainers.community.postgres import PostgresContainer  # after the env is set

    password = secrets.token_urlsafe(18)
    container = PostgresContainer(image=image_id, username=ADMIN_USER, password=password,
                                  dbname=DB_NAME, driver=None, name=name)
    container.ports = {f"{PORT}/tcp": ("127.0.0.1",)}  # type: ignore[dict-item]
    container.tmpfs = {"/var/lib/postgresql/data": "rw"}  # a throwaway cluster: fast, no volume
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


@contextmanager
def admin(server: DbServer) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
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


def lock_down(server: DbServer) -> None:
    """Once per database: nobody but an explicit grantee connects or creates in public."""
    with admin(server) as conn:
        conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(
            sql.Identifier(DB_NAME)))
        conn.execute("REVOKE ALL ON SCHEMA public FROM PUBLIC")


def role_name(experiment: str, owner: str) -> str:
    """Roles are cluster-wide: prefix them with the experiment. Lower case, [a-z0-9_]."""
    raw = f"bk_{experiment}_{owner}".lower()
    return "".join(ch if ch.isalnum() else "_" for ch in raw)[:63]


def create_schema(server: DbServer, name: str) -> DbSchema:
    """A login role and a schema it owns; its default search_path is that schema."""
    schema = DbSchema(name, secrets.token_urlsafe(18))
    ident = sql.Identifier(name)
    with admin(server) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
            ident, sql.Literal(schema.password)))
        conn.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(ident, ident))
        conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
            sql.Identifier(DB_NAME), ident))
        conn.execute(sql.SQL("ALTER ROLE {} IN DATABASE {} SET search_path = {}").format(
            ident, sql.Identifier(DB_NAME), ident))
    return schema


def drop_schema(server: DbServer, name: str) -> None:
    """DROP SCHEMA ... CASCADE, DROP OWNED BY, then DROP ROLE (else 2BP01)."""
    ident = sql.Identifier(name)
    with admin(server) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(ident))
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone()
        if exists:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(ident))
            conn.execute(sql.SQL("DROP ROLE {}").format(ident))


def list_owned(server: DbServer, prefix: str) -> tuple[list[str], list[str]]:
    """(schemas, roles) whose names start with `prefix`: what `down` must leave empty."""
    pattern = prefix.replace("_", r"\_") + "%"
    with admin(server) as conn:
        schemas = [r[0] for r in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s ORDER BY 1", (pattern,))]
        roles = [r[0] for r in conn.execute(
            "SELECT rolname FROM pg_roles WHERE rolname LIKE %s ORDER BY 1", (pattern,))]
    return [str(s) for s in schemas], [str(r) for r in roles]
