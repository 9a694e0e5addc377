"""Issue 11, item 6: a database of its own per arm. Each test is an attack seen in the shared
Postgres (one database, a schema per arm) and asserts what the attacker gets now.

Two arms A and B are up once for the module, with `connection_limit = 3` and
`statement_timeout_s = 1`. The attacker runs inside A's sandbox (through the `db` alias,
as an agent would); B's side is held by the test from a container of its own on B's
network with B's own credentials (`tests/integration/db_peer.py`: the server publishes no
port), so it can stay connected (LISTEN, a lock, a session) while A attacks. The test's
administration goes where the runner's does: psql inside the server's container.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from runner.commands import down as down_mod
from runner.commands import up as up_mod
from runner.containers import database, sandbox
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.errors import DatabaseError
from runner.manifest import LoadedManifest, load_manifest
from runner.store.state import ExperimentState
from tests.integration.db_peer import Peer, PeerError, Session, peer
from tests.integration.helpers import CORE, cleanup, git, make_target

LIMIT = 3


@dataclass(frozen=True)
class Up:
    loaded: LoadedManifest
    state: ExperimentState
    server: database.DbServer
    admin: database.Admin
    peers: dict[str, Peer]

    def name(self, arm: str) -> str:
        found = self.state.arm(arm)
        assert found is not None and found.schema_name is not None
        return found.schema_name

    def connect(self, arm: str) -> Session:
        """A session of `arm`'s role in its own database, from the test's own container
        on the arm's network."""
        found = self.state.arm(arm)
        assert found is not None and found.schema_name and found.schema_password
        schema = database.DbSchema(found.schema_name, found.schema_password)
        return self.peers[arm].connect(schema.url())

    def db_log(self, engine: Engine) -> str:
        container = engine.client.containers.get(self.server.container_id)
        return bytes(container.logs()).decode(errors="replace")


def limited_target(root: Path) -> LoadedManifest:
    manifest = make_target(root, ["A", "B"])
    text = manifest.read_text().replace(
        'url_env = "DATABASE_URL"',
        f'url_env = "DATABASE_URL"\nconnection_limit = {LIMIT}\nstatement_timeout_s = 1')
    manifest.write_text(text)
    git(root, "commit", "-qam", "a small connection limit and a 1 s statement timeout")
    return load_manifest(manifest)


@pytest.fixture(scope="module")
def up(engine: Engine, built_images: dict[str, BuiltImage],
       tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    loaded = limited_target(tmp_path_factory.mktemp("dbiso") / "repo")
    try:
        state = up_mod.up(engine, loaded, options=CORE)
        assert state.db is not None
        server = database.find_server(engine, state.db.container_id, state.db.admin_password)
        with contextlib.ExitStack() as stack:
            peers = {arm.arm: stack.enter_context(peer(
                engine, state.image_id, arm.network, state.experiment, arm.arm))
                for arm in state.arms}
            yield Up(loaded, state, server, database.Admin(engine, server), peers)
    finally:
        cleanup(engine, loaded)


def in_arm(engine: Engine, up: Up, arm: str, code: str) -> list[str]:
    """Run a Python program inside `arm`'s sandbox; its stdout lines."""
    found = up.state.arm(arm)
    assert found is not None
    ran = sandbox.exec_in(engine, found.container_id, f"python3 - <<'PY'\n{code}\nPY\n",
                          timeout_s=60)
    assert ran.exit_code == 0, ran.stderr
    return ran.stdout.splitlines()


PRELUDE = """import os, time, psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
URL = os.environ["DATABASE_URL"]
def to(dbname):
    return make_conninfo(**{**conninfo_to_dict(URL), "dbname": dbname})
def refusal(error):
    text = str(error)
    return " ".join(text[text.index("FATAL:"):].split()) if "FATAL:" in text else text
"""

CATALOG = [
    "SELECT proname FROM pg_proc WHERE prosrc LIKE '%b-secret-source%'",
    "SELECT viewname FROM pg_views WHERE definition LIKE '%4242%'",
    "SELECT conname FROM pg_constraint WHERE conname = 'b_secret_check'",
]


def test_rival_function_source_views_and_constraints_are_not_in_the_catalog(
        engine: Engine, up: Up) -> None:
    """Seen: in the shared database A read B's function source, view definition and
    constraint from pg_proc / pg_views / pg_constraint. Now those catalogs are B's
    database's alone: A's queries return nothing, B's own return B's objects."""
    with up.connect("B") as b:
        b.execute("CREATE FUNCTION b_secret_fn() RETURNS text LANGUAGE sql"
                  " AS $$ SELECT 'b-secret-source' $$")
        b.execute("CREATE TABLE b_orders (qty int CONSTRAINT b_secret_check CHECK (qty > 41))")
        b.execute("CREATE VIEW b_secret_view AS SELECT qty FROM b_orders WHERE qty = 4242")
        assert [b.execute(q) for q in CATALOG] == [
            [("b_secret_fn",)], [("b_secret_view",)], [("b_secret_check",)]]
    probe = PRELUDE + (
        "c = psycopg.connect(URL, autocommit=True)\n"
        f"for q in {CATALOG!r}:\n"
        "    print(c.execute(q).fetchall())\n")
    assert in_arm(engine, up, "A", probe) == ["[]", "[]", "[]"]


def test_notify_on_a_channel_the_rival_listens_to_never_reaches_it(
        engine: Engine, up: Up) -> None:
    """Seen: A sent NOTIFY to a channel B LISTENed on, and B received it. Now NOTIFY is
    per database: B gets only its own notification, never A's."""
    with up.connect("B") as listener, up.connect("B") as sender:
        listener.execute("LISTEN bk_events")
        sent = in_arm(engine, up, "A", PRELUDE + (
            "c = psycopg.connect(URL, autocommit=True)\n"
            "c.execute(\"NOTIFY bk_events, 'from-a'\")\n"
            "print('sent')\n"))
        assert sent == ["sent"]
        sender.execute("NOTIFY bk_events, 'from-b'")
        got = [(n.channel, n.payload) for n in listener.notifies(timeout=3, stop_after=2)]
    assert got == [("bk_events", "from-b")]


def test_rival_and_attacker_take_the_same_advisory_lock_key_at_once(
        engine: Engine, up: Up) -> None:
    """Seen: A took B's advisory lock key, so B's `pg_advisory_lock` blocked (the horizon
    app serialises its schema creation with one). Now locks are per database: both hold
    the key at once; a second session of B's is still refused it (the lock is real)."""
    with up.connect("B") as holder, up.connect("B") as rival_of_holder:
        holder.execute("SELECT pg_advisory_lock(7311902)")
        taken = in_arm(engine, up, "A", PRELUDE + (
            "c = psycopg.connect(URL, autocommit=True)\n"
            "print(c.execute('SELECT pg_try_advisory_lock(7311902)').fetchone()[0])\n"))
        again = rival_of_holder.fetchone("SELECT pg_try_advisory_lock(7311902)")
    assert taken == ["True"]
    assert again == (False,)


def test_connection_flood_stops_at_the_limit_and_the_rival_still_connects(
        engine: Engine, up: Up) -> None:
    """Seen: A opened 97 connections and B got "remaining connection slots are reserved".
    Now A's role gets exactly its CONNECTION LIMIT (53300 past it), B connects while A
    holds them all, and max_connections has room for every role's limit plus the admin."""
    a = up.name("A")
    held: list[Session] = []
    refused = ""
    try:
        for _ in range(50):  # bounded: far more than any limit
            try:
                held.append(up.connect("A"))
            except PeerError as error:
                refused = " ".join(str(error)[str(error).index("FATAL:"):].split())
                break
        assert len(held) == LIMIT
        assert refused == f'FATAL: too many connections for role "{a}"'
        b_side = in_arm(engine, up, "B", PRELUDE + (
            "c = psycopg.connect(URL)\n"
            "print(c.execute('SELECT current_user = current_database()').fetchone()[0])\n"
            "print(c.execute('SHOW max_connections').fetchone()[0])\n"))
    finally:
        for conn in held:
            conn.close()
    rooms = 2 + database.sample_databases(engine)
    assert b_side == ["True", str(rooms * LIMIT + database.ADMIN_CONNECTIONS)]
    assert f'53300 {a}@{a} FATAL:  too many connections for role "{a}"' in up.db_log(engine)


def test_attacker_cannot_connect_to_the_rival_or_the_server_databases(
        engine: Engine, up: Up) -> None:
    """Before, every arm was in the one database. Now A's role may connect to its own
    database only: B's and the server's own (postgres, template1, the admin database)
    refuse it with 42501 (the SQLSTATE read from the server's log)."""
    a, b = up.name("A"), up.name("B")
    targets = [b, "postgres", "template1", database.DB_NAME]
    seen = in_arm(engine, up, "A", PRELUDE + (
        f"for db in {targets!r}:\n"
        "    try:\n"
        "        psycopg.connect(to(db), connect_timeout=5)\n"
        "        print('CONNECTED', db)\n"
        "    except psycopg.OperationalError as e:\n"
        "        print(refusal(e))\n"))
    assert seen == [f'FATAL: permission denied for database "{db}" DETAIL: User does not '
                    "have CONNECT privilege." for db in targets]
    log = up.db_log(engine)
    for db in targets:
        assert f'42501 {a}@{db} FATAL:  permission denied for database "{db}"' in log


def test_attacker_can_neither_end_nor_read_the_rival_sessions(engine: Engine, up: Up) -> None:
    """pg_stat_activity is cluster-wide: A sees that B has a session, but not its query,
    and cannot terminate it (42501); B's session survives."""
    b = up.name("B")
    with up.connect("B") as victim:
        victim.execute("SELECT 'b-query-text'")
        seen = in_arm(engine, up, "A", PRELUDE + (
            "c = psycopg.connect(URL, autocommit=True)\n"
            f"print(c.execute(\"SELECT query FROM pg_stat_activity WHERE usename = '{b}'\")"
            ".fetchall())\n"
            "try:\n"
            "    c.execute(\"SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            f" WHERE usename = '{b}'\")\n"
            "    print('TERMINATED')\n"
            "except psycopg.Error as e:\n"
            "    print(e.sqlstate, str(e).splitlines()[0])\n"))
        assert victim.fetchone("SELECT 1") == (1,)
    assert seen == ["[('<insufficient privilege>',)]",
                    "42501 must be a member of the role whose process is being terminated or "
                    "member of pg_signal_backend"]


def test_statement_timeout_ends_a_long_pg_sleep_with_57014(engine: Engine, up: Up) -> None:
    """A runaway statement of one arm ends at the role's statement_timeout (1 s here)."""
    seen = in_arm(engine, up, "A", PRELUDE + (
        "c = psycopg.connect(URL, autocommit=True)\n"
        "print(c.execute('SHOW statement_timeout').fetchone()[0])\n"
        "started = time.monotonic()\n"
        "try:\n"
        "    c.execute('SELECT pg_sleep(30)')\n"
        "    print('SLEPT')\n"
        "except psycopg.Error as e:\n"
        "    print(e.sqlstate, str(e).strip(), time.monotonic() - started < 10)\n"))
    assert seen == ["1s", "57014 canceling statement due to statement timeout True"]


def test_role_cannot_lift_its_temp_file_limit(engine: Engine, up: Up) -> None:
    """temp_file_limit is superuser-only: set by the admin on the role, the role keeps it."""
    seen = in_arm(engine, up, "A", PRELUDE + (
        "c = psycopg.connect(URL, autocommit=True)\n"
        "print(c.execute('SHOW temp_file_limit').fetchone()[0])\n"
        "try:\n"
        "    c.execute('SET temp_file_limit = -1')\n"
        "    print('LIFTED')\n"
        "except psycopg.Error as e:\n"
        "    print(e.sqlstate, str(e).strip())\n"))
    assert seen == ["1GB", '42501 permission denied to set parameter "temp_file_limit"']


def test_the_server_publishes_no_port_binds_nothing_and_sits_on_internal_networks_only(
        engine: Engine, up: Up) -> None:
    """Issue 24: the server is administered by psql inside its container, so it publishes
    no port, mounts no path of this machine, and every network it is on (its own, each
    arm's) is internal; it runs as the image's postgres user with no capability added."""
    attrs = engine.client.containers.get(up.server.container_id).attrs
    host = attrs["HostConfig"]
    assert not host["PortBindings"] and not host["PublishAllPorts"]
    assert all(not bound for bound in (attrs["NetworkSettings"]["Ports"] or {}).values())
    assert attrs["Mounts"] == [] and not host["Binds"]
    assert (attrs["Config"]["User"], host["CapAdd"], host["CapDrop"]) == (
        "postgres", None, ["ALL"])
    networks = sorted(attrs["NetworkSettings"]["Networks"])
    assert networks == sorted([up.state.db.network if up.state.db else "",
                               *(arm.network for arm in up.state.arms)])
    assert all(engine.client.networks.get(name).attrs["Internal"] for name in networks)
    assert (host["Memory"], host["PidsLimit"]) == (
        (database.DATA_MB + database.HEADROOM_MB) * 1024 * 1024,
        (2 + database.sample_databases(engine)) * LIMIT + database.ADMIN_CONNECTIONS + 64)


def test_two_executors_create_and_drop_databases_at_once_without_error(up: Up) -> None:
    """Two sample executors share the experiment's server, each with a lock of its own:
    their CREATE/DROP DATABASE run at once. Every one succeeds and nothing is left."""
    errors: list[str] = []

    def executor(tag: str) -> None:
        for n in range(4):
            name = database.role_name(up.state.experiment, f"s{tag}{n}")
            try:
                database.create_schema(up.admin, name)
                database.drop_schema(up.admin, name)
            except DatabaseError as error:
                errors.append(error.message)

    threads = [threading.Thread(target=executor, args=(tag,)) for tag in ("x", "y")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    arms = sorted([up.name("A"), up.name("B")])
    assert database.list_owned(up.admin, database.role_name(up.state.experiment, "")) == (
        arms, arms)


def test_a_database_past_the_server_room_is_refused_and_leaves_nothing(engine: Engine,
                                                                     up: Up) -> None:
    """The sum of every role's CONNECTION LIMIT stays below max_connections: when the
    server has room for no more roles, create_schema refuses (a clear DatabaseError)."""
    prefix = database.role_name(up.state.experiment, "")
    made = [database.role_name(up.state.experiment, f"fill{n}")
            for n in range(database.sample_databases(engine))]
    try:
        for name in made:
            database.create_schema(up.admin, name)
        with pytest.raises(DatabaseError) as refused:
            database.create_schema(up.admin, f"{prefix}onemore")
    finally:
        for name in made:
            database.drop_schema(up.admin, name)
    room = (2 + database.sample_databases(engine)) * LIMIT
    assert refused.value.message == (
        f"the experiment's Postgres in container {up.server.container_id[:12]} is full: "
        "its roles "
        f"hold {room} of {room} connection slots and another needs {LIMIT}")
    arms = sorted([up.name("A"), up.name("B")])
    assert database.list_owned(up.admin, prefix) == (arms, arms)


def test_down_drops_every_database_and_role_of_the_experiment_orphans_included(
        engine: Engine, target: LoadedManifest) -> None:
    """A `score` killed mid-sample leaves its sample's database on the live server; `down`
    drops it with the arms' (a session still open in it is terminated), and lists none."""
    state = up_mod.up(engine, target, options=CORE)
    assert state.db is not None
    server = database.find_server(engine, state.db.container_id)
    prefix = database.role_name(target.manifest.experiment.name, "")
    orphan = database.create_schema(database.Admin(engine, server), f"{prefix}sdeadbeef")
    arm = state.arms[0]
    with peer(engine, state.image_id, arm.network, state.experiment) as killed_sample:
        session = killed_sample.connect(orphan.url())
        assert session.fetchone("SELECT current_user") == (orphan.name,)
        report = down_mod.down(engine, target)
    assert report.dropped == [f"{prefix}a", f"{prefix}b", f"{prefix}sdeadbeef"]
    assert (report.databases_left, report.roles_left) == ([], [])
