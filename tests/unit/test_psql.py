"""The database's administration as psql scripts (runner/containers/psql.py) and psql's
answers read back; the held exec that carries them (runner/containers/held_exec.py).

No engine here: scripts are text, answers are text, the exec's socket is a fake that
hands its bytes out in awkward pieces."""

from __future__ import annotations

import pytest

from runner.containers import database, psql
from runner.containers.backend import ExecOutput, ExecState
from runner.containers.held_exec import HeldExec
from runner.containers.hijack import Hijacked
from runner.errors import DatabaseError, SandboxUnavailableError
from runner.store.state import DbState

DEFAULTS = psql.Defaults(20, 120000, 1048576)


# -- what psql says back ---------------------------------------------------------------

def test_the_sqlstate_is_read_from_a_verbose_error_of_a_script_on_stdin() -> None:
    """psql on stdin with VERBOSITY verbose prints `psql:<stdin>:LINE: ERROR:  CODE: ...`
    then LOCATION: the code and the message only, the first error wins."""
    stderr = ('psql:<stdin>:7: ERROR:  42501: permission denied for database "bk_x_b"\n'
              "LOCATION:  aclcheck_error, aclchk.c:3650\n"
              "psql:<stdin>:9: ERROR:  42P04: database \"y\" already exists\n")
    error = psql.statement_error(stderr)
    assert error is not None
    assert (error.sqlstate, error.refusal) == ("42501",
                                               'permission denied for database "bk_x_b"')
    assert error.message == ("Postgres refused an administrative statement: 42501: "
                             'permission denied for database "bk_x_b"')
    assert isinstance(error, DatabaseError)


def test_a_fatal_error_carries_its_sqlstate_and_a_notice_is_no_error() -> None:
    fatal = psql.statement_error("psql: FATAL:  53300: too many connections for role \"r\"")
    assert fatal is not None and fatal.sqlstate == "53300"
    assert psql.statement_error("NOTICE:  00000: database \"x\" does not exist, skipping\n"
                                "psql:<stdin>:3: WARNING:  01000: careful\n") is None
    assert psql.statement_error("") is None


def test_the_creation_s_decision_is_read_from_its_own_lines() -> None:
    assert psql.created("\nbakeoff-created\n") == psql.Created("created")
    assert psql.created("bakeoff-taken\n") == psql.Created("taken")
    assert psql.created("bakeoff-full 80 80 20\n") == psql.Created("full", 80, 80, 20)
    with pytest.raises(DatabaseError, match="psql gave no answer to a database creation"):
        psql.created("")


def test_owned_names_come_back_by_kind_in_order() -> None:
    out = "database bk_e_a\ndatabase bk_e_b\nrole bk_e_a\nrole bk_e_b\nrole bk_e_s1\n"
    assert psql.owned(out) == (["bk_e_a", "bk_e_b"], ["bk_e_a", "bk_e_b", "bk_e_s1"])
    assert psql.owned("") == ([], [])


# -- the scripts ------------------------------------------------------------------------

def test_the_creation_checks_room_and_name_under_the_lock_before_it_creates() -> None:
    script = psql.create("bk_e_a", "pw-1", "WAL_LOG", DEFAULTS)
    lock = script.index(f"pg_advisory_lock({psql.ADMIN_LOCK})")
    check = script.index("\\gset\n\\if :full")
    made = script.index('CREATE ROLE "bk_e_a" LOGIN PASSWORD')
    unlock = script.index(f"pg_advisory_unlock({psql.ADMIN_LOCK})")
    assert lock < check < made < unlock
    assert script.startswith(psql.PRELUDE)
    assert "CONNECTION LIMIT :conn_limit;" in script
    assert "'pw-1'" in script
    assert "current_setting('bakeoff.connection_limit', true), ''), '20')::int" in script
    assert 'CREATE DATABASE "bk_e_a" OWNER "bk_e_a" STRATEGY = WAL_LOG;' in script
    assert 'REVOKE ALL ON DATABASE "bk_e_a" FROM PUBLIC;' in script
    assert 'GRANT CONNECT ON DATABASE "bk_e_a" TO "bk_e_a";' in script
    assert script.index("\\echo bakeoff-full") < script.index("\\elif :taken") < made
    assert script.rstrip().endswith("AS unlocked \\gset")


def test_a_hostile_name_and_password_stay_quoted_in_the_script() -> None:
    """Names are sanitized upstream (`role_name`); the script quotes them anyway: an
    identifier's double quote is doubled, a literal's single quote too, and nothing of
    either can start a psql meta-command outside its quotes."""
    script = psql.create('x"; DROP ROLE bakeoff; --', "p'w\\q", "WAL_LOG", DEFAULTS)
    assert 'CREATE ROLE "x""; DROP ROLE bakeoff; --" LOGIN' in script
    assert "E'p''w\\\\q'" in script
    assert "\nDROP ROLE bakeoff" not in script


def test_the_drop_names_its_role_through_a_session_setting_not_its_loop_text() -> None:
    script = psql.drop("bk_e_s1")
    assert psql.TERMINATE in script
    assert "bk_e_s1" not in psql.TERMINATE
    assert f"current_setting('{psql.DROPPING}')" in psql.TERMINATE
    assert "pg_stat_clear_snapshot()" in psql.TERMINATE  # a fresh view on every turn
    assert f"set_config('{psql.DROPPING}', 'bk_e_s1', false)" in script
    order = [script.index(s) for s in (
        f"pg_advisory_lock({psql.ADMIN_LOCK})", 'ALTER ROLE "bk_e_s1" NOLOGIN;', "DO $$",
        'DROP DATABASE IF EXISTS "bk_e_s1" WITH (FORCE);', 'DROP OWNED BY "bk_e_s1";',
        'DROP ROLE "bk_e_s1";', f"pg_advisory_unlock({psql.ADMIN_LOCK})")]
    assert order == sorted(order)


def test_the_lock_down_revokes_connect_on_every_server_database_and_public_schema() -> None:
    script = psql.lock_down()
    for name in ("postgres", "template1", "bakeoff"):
        assert f'REVOKE ALL ON DATABASE "{name}" FROM PUBLIC;' in script
    assert "REVOKE ALL ON SCHEMA public FROM PUBLIC;" in script


def test_the_listing_escapes_the_prefix_s_underscores() -> None:
    script = psql.list_owned("bk_e_")
    assert "E'bk\\\\_e\\\\_%'" in script
    assert psql.ARGV[:7] == ("psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1")


# -- the server's policy, carried by its settings ------------------------------------------

def test_the_policy_is_read_back_from_the_server_s_command_line() -> None:
    policy = database.DbPolicy(connection_limit=3, statement_timeout_s=1.5,
                               temp_file_limit_mb=64)
    command = database.server_command(policy, 6)
    assert database.settings_of(command)["max_connections"] == str(6 * 3 + 10)
    assert database.policy_from(command) == policy
    assert database.policy_from(["postgres"]) == database.DbPolicy()


def test_an_old_state_file_with_a_host_port_still_loads() -> None:
    """Written before the server stopped publishing a port: `host_port` is ignored."""
    old = ('{"container_id": "c0ffee", "host_port": 49153, "admin_password": "pw",'
           ' "network": "bakeoff-e-db-r1", "url_env": "DATABASE_URL"}')
    state = DbState.model_validate_json(old)
    assert (state.container_id, state.admin_password) == ("c0ffee", "pw")
    assert "host_port" not in state.model_dump()


# -- the held exec ----------------------------------------------------------------------

class FakeSocket:
    """Hands out its bytes a few at a time, as a socket may."""

    def __init__(self, data: bytes, piece: int = 3) -> None:
        self.data, self.piece, self.sent = data, piece, b""

    def settimeout(self, _: float) -> None:
        return None

    def read1(self, size: int) -> bytes:
        chunk, self.data = self.data[:min(size, self.piece)], self.data[min(size, self.piece):]
        return chunk

    def sendall(self, data: bytes) -> None:
        self.sent += data

    def close(self) -> None:
        return None


def frame(stream: int, data: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(data).to_bytes(4, "big") + data


class FakeEngine:
    def __init__(self, inspected: dict[str, object]) -> None:
        self.inspected = inspected
        self.client = type("C", (), {"api": type("A", (), {"exec_inspect": None})()})()

    def call(self, what: str, fn: object, *args: object, **kwargs: object) -> object:
        return self.inspected

    def exec_state(self, exec_id: str) -> ExecState:
        code = self.inspected.get("ExitCode")
        return ExecState(bool(self.inspected.get("Running")),
                         None if code is None else int(str(code)))


def test_a_held_exec_reads_each_answer_up_to_its_marker_across_split_frames() -> None:
    sock = FakeSocket(frame(1, b"one\nM") + frame(2, b"warn\n") + frame(1, b"\ntwo\nM\n")
                      + frame(2, b"ERROR:  42501: no\n"))
    held = HeldExec(FakeEngine({"Running": False, "ExitCode": 3}),  # type: ignore[arg-type]
                    "e1", Hijacked(None, sock, sock), "psql")  # type: ignore[arg-type]
    held.send(b"script")
    assert sock.sent == b"script"
    assert held.until(b"M", 5) == ExecOutput(None, b"one\n", b"warn\n")
    assert held.until(b"M", 5) == ExecOutput(None, b"two\n", b"")
    assert held.until(b"M", 5) == ExecOutput(3, b"", b"ERROR:  42501: no\n")
    assert held.ended


def test_a_held_exec_that_says_nothing_in_time_is_an_unavailable_sandbox() -> None:
    class Silent(FakeSocket):
        def read1(self, size: int) -> bytes:
            raise TimeoutError("timed out")

    silent = Silent(b"")
    held = HeldExec(FakeEngine({}), "e1", Hijacked(None, silent, silent),  # type: ignore[arg-type]
                    "psql")
    with pytest.raises(SandboxUnavailableError, match="psql: no answer in time"):
        held.until(b"M", 0.5)
