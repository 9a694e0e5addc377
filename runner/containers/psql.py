"""The administration of the experiment's Postgres as `psql` scripts, and psql's answers.

Pure: SQL in, text out (no docker here; `database` sends the scripts to `psql` inside the
server's container through the engine's exec API, on whatever engine runs it). The SQL is
built with psycopg.sql (`Identifier`, `Literal`) and rendered to text without a
connection; what must be decided under the admin lock (is there room for another role,
is the name free) is decided by psql itself (`\\gset`, `\\if`) in the session that then
creates, so no other creator can slip in between. psql runs with `ON_ERROR_STOP` and
verbose errors: a refused statement ends the script with its SQLSTATE on stderr
(`ERROR:  42501: permission denied ...`), read back as a `StatementError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from psycopg import sql

from runner.errors import DatabaseError

ADMIN_USER = "bakeoff"
DB_NAME = "bakeoff"  # the admin database: no arm role may connect to it
SERVER_DATABASES = ("postgres", "template1", DB_NAME)
# Serialises the admin's DDL across executors and processes (advisory locks are per
# database: every admin session is in DB_NAME). Released at the end of each script, and
# by the session's end when a statement fails (psql stops there).
ADMIN_LOCK = 0x6261_6B65  # "bake"
GUC = "bakeoff."  # a custom settings prefix: how the server carries its own policy
DROPPING = f"{GUC}dropping"  # the session setting that names the role being dropped
Strategy = Literal["WAL_LOG", "FILE_COPY"]
# The admin's psql: no ~/.psqlrc, quiet, one unaligned value per line, stop at an error.
ARGV = ("psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-U", ADMIN_USER,
        "-d", DB_NAME)
PRELUDE = "\\set VERBOSITY verbose\nSET client_min_messages = warning;\n"
# What the scripts print on stdout to say what they decided.
FULL, TAKEN, CREATED = "bakeoff-full", "bakeoff-taken", "bakeoff-created"
ERROR_LINE = re.compile(r"(?:ERROR|FATAL|PANIC):\s+([0-9A-Z]{5}): (.*)")


class StatementError(DatabaseError):
    """Postgres refused a statement of the admin's: its SQLSTATE and its message."""

    def __init__(self, sqlstate: str, message: str) -> None:
        self.sqlstate, self.refusal = sqlstate, message
        super().__init__(f"Postgres refused an administrative statement: {sqlstate}: "
                         f"{message}",
                         hint="run the command again; if it persists, `bakeoff-sandbox gc` "
                              "and `up`")


@dataclass(frozen=True)
class Defaults:
    """The policy a server without `bakeoff.*` settings applies (DbPolicy's defaults)."""

    connection_limit: int
    statement_timeout_ms: int
    temp_file_limit_kb: int


def text(statement: sql.Composable) -> str:
    """A statement rendered without a connection (identifiers and literals quoted)."""
    return statement.as_string(None)


def statement_error(stderr: str) -> StatementError | None:
    """The first `ERROR:  SQLSTATE: message` psql printed (verbose errors), if any."""
    for line in stderr.splitlines():
        found = ERROR_LINE.search(line)
        if found:
            return StatementError(found.group(1), found.group(2).strip())
    return None


def locked(body: str) -> str:
    """`body` under ADMIN_LOCK: taken first, released last (a failure ends the session,
    which releases it too)."""
    return (f"{PRELUDE}SELECT pg_advisory_lock({ADMIN_LOCK}) AS locked \\gset\n{body}"
            f"SELECT pg_advisory_unlock({ADMIN_LOCK}) AS unlocked \\gset\n")


def lock_down() -> str:
    """No role but an explicit grantee connects to any database; nobody creates in the
    admin database's public schema."""
    lines = [text(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC;").format(
        sql.Identifier(database))) for database in SERVER_DATABASES]
    return PRELUDE + "\n".join([*lines, "REVOKE ALL ON SCHEMA public FROM PUBLIC;"]) + "\n"


def _setting(key: str, default: int) -> str:
    return text(sql.SQL("coalesce(nullif(current_setting({}, true), ''), {})::int").format(
        sql.Literal(f"{GUC}{key}"), sql.Literal(str(default))))


def _room_query(name: str, defaults: Defaults) -> str:
    """One row, `\\gset`: the server's policy, its room and what its roles hold, and
    whether another role fits (`full`) and `name` is free (`taken`)."""
    literal = text(sql.Literal(name))
    return (
        "SELECT p.conn_limit, p.timeout_ms || 'ms' AS timeout, p.temp_kb || 'kB' AS temp,"
        " p.room, p.used, p.used + p.conn_limit > p.room AS full,"
        f" EXISTS (SELECT 1 FROM pg_roles WHERE rolname = {literal})"
        f" OR EXISTS (SELECT 1 FROM pg_database WHERE datname = {literal}) AS taken"
        f" FROM (SELECT {_setting('connection_limit', defaults.connection_limit)} AS conn_limit,"
        f" {_setting('statement_timeout_ms', defaults.statement_timeout_ms)} AS timeout_ms,"
        f" {_setting('temp_file_limit_kb', defaults.temp_file_limit_kb)} AS temp_kb,"
        " current_setting('max_connections')::int"
        " - current_setting('superuser_reserved_connections')::int AS room,"
        " (SELECT coalesce(sum(greatest(rolconnlimit, 0)), 0) FROM pg_roles"
        "  WHERE rolcanlogin AND NOT rolsuper)::int AS used) p \\gset\n")


def create(name: str, password: str, strategy: Strategy, defaults: Defaults) -> str:
    """A login role `name` and a database `name` it owns, that only it may connect to,
    under the server's policy; nothing made when the server is full or the name taken
    (the script prints FULL used room limit, TAKEN, or CREATED)."""
    ident = sql.Identifier(name)
    statements = [
        sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} CONNECTION LIMIT :conn_limit;").format(
            ident, sql.Literal(password)),
        # temp_file_limit is superuser-only: set here by the admin, the role cannot lift it.
        sql.SQL("ALTER ROLE {} SET statement_timeout = :'timeout';").format(ident),
        sql.SQL("ALTER ROLE {} SET temp_file_limit = :'temp';").format(ident),
        sql.SQL("CREATE DATABASE {} OWNER {} STRATEGY = {};").format(ident, ident,
                                                                      sql.SQL(strategy)),
        sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC;").format(ident),
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {};").format(ident, ident)]
    return locked(
        _room_query(name, defaults)
        + f"\\if :full\n\\echo {FULL} :used :room :conn_limit\n"
        + f"\\elif :taken\n\\echo {TAKEN}\n\\else\n"
        + "".join(text(s) + "\n" for s in statements)
        + f"\\echo {CREATED}\n\\endif\n")


# Ends every session of the role named by the session setting DROPPING (in any database)
# and waits, bounded, until none is left; the name is never part of this text.
TERMINATE = f"""DO $$
DECLARE deadline timestamptz := clock_timestamp() + interval '5 seconds';
BEGIN
  LOOP
    PERFORM pg_stat_clear_snapshot();
    EXIT WHEN (SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
               WHERE usename = current_setting('{DROPPING}')
                 AND pid <> pg_backend_pid()) = 0
           OR clock_timestamp() > deadline;
    PERFORM pg_sleep(0.05);
  END LOOP;
END $$;
"""


def drop(name: str) -> str:
    """Terminate the role's sessions, DROP DATABASE, then DROP ROLE (no 2BP01 left);
    what does not exist is skipped."""
    ident, literal = sql.Identifier(name), sql.Literal(name)
    return locked(
        text(sql.SQL("SELECT set_config({}, {}, false) AS dropping,"
                     " EXISTS (SELECT 1 FROM pg_roles WHERE rolname = {}) AS role_exists"
                     ).format(sql.Literal(DROPPING), literal, literal)) + " \\gset\n"
        + "\\if :role_exists\n"
        + text(sql.SQL("ALTER ROLE {} NOLOGIN;").format(ident)) + "\n"  # no new sessions
        + TERMINATE + "\\endif\n"
        # FORCE ends any session still in the database (one not of the role, too).
        + text(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE);").format(ident)) + "\n"
        + "\\if :role_exists\n"
        + text(sql.SQL("DROP OWNED BY {};").format(ident)) + "\n"  # grants on shared objects
        + text(sql.SQL("DROP ROLE {};").format(ident)) + "\n\\endif\n")


def list_owned(prefix: str) -> str:
    """`database NAME` and `role NAME` lines for every name starting with `prefix`."""
    pattern = sql.Literal(prefix.replace("_", r"\_") + "%")
    return PRELUDE + text(sql.SQL(
        "SELECT 'database ' || datname FROM (SELECT datname FROM pg_database"
        " WHERE datname LIKE {} ORDER BY 1) d;\n"
        "SELECT 'role ' || rolname FROM (SELECT rolname FROM pg_roles"
        " WHERE rolname LIKE {} ORDER BY 1) r;\n").format(pattern, pattern))


def owned(stdout: str) -> tuple[list[str], list[str]]:
    """(databases, roles) from `list_owned`'s output."""
    found: dict[str, list[str]] = {"database": [], "role": []}
    for line in stdout.splitlines():
        kind, _, name = line.partition(" ")
        if kind in found and name:
            found[kind].append(name)
    return found["database"], found["role"]


@dataclass(frozen=True)
class Created:
    """What `create`'s script decided: made, or refused (full: slots used and room)."""

    outcome: Literal["created", "full", "taken"]
    used: int = 0
    room: int = 0
    needed: int = 0


def created(stdout: str) -> Created:
    """`create`'s decision from its output; DatabaseError when it printed none."""
    for line in stdout.splitlines():
        words = line.split()
        if words[:1] == [CREATED]:
            return Created("created")
        if words[:1] == [TAKEN]:
            return Created("taken")
        if words[:1] == [FULL] and len(words) == 4:
            return Created("full", int(words[1]), int(words[2]), int(words[3]))
    raise DatabaseError(f"psql gave no answer to a database creation: {stdout!r}",
                        hint="run the command again; if it persists, `bakeoff-sandbox gc` "
                             "and `up`")
