"""runner.containers.database's policy, without a server: how the server is sized and how
the policy it carries reads back (issue 11: a database of its own per arm and per sample)."""

from __future__ import annotations

from runner.containers import database
from runner.containers.database import DbPolicy


def test_max_connections_holds_every_role_at_its_full_limit_plus_the_admin() -> None:
    command = database.server_command(DbPolicy(connection_limit=7), databases=5)
    options = dict(command[i + 1].split("=", 1) for i in range(1, len(command), 2))
    assert command[0] == "postgres" and command[1::2] == ["-c"] * (len(command) // 2)
    assert options["max_connections"] == str(5 * 7 + database.ADMIN_CONNECTIONS)
    assert options["superuser_reserved_connections"] == str(database.ADMIN_CONNECTIONS)
    assert options["bakeoff.connection_limit"] == "7"


def test_the_policy_a_server_carries_reads_back_as_set() -> None:
    policy = DbPolicy(connection_limit=3, statement_timeout_s=1.5, temp_file_limit_mb=64)
    values = tuple(policy.settings().values())
    assert values == ("3", "1500", "65536")
    assert database.policy_from(database.server_command(policy, databases=4)) == policy


def test_a_server_without_a_policy_gets_the_defaults() -> None:
    assert database.policy_from(["postgres"]) == DbPolicy()
    assert database.policy_from(["postgres", "-c", "bakeoff.connection_limit="]) == DbPolicy()


def test_the_url_names_the_role_s_own_database() -> None:
    made = database.DbSchema("bk_exp_a", "pw")
    assert made.url() == "postgresql://bk_exp_a:pw@db:5432/bk_exp_a"
    assert made.url("127.0.0.1", 32768) == "postgresql://bk_exp_a:pw@127.0.0.1:32768/bk_exp_a"
