"""The experiment's Postgres on an engine that shares nothing with this machine (issue 24,
"Postgres administration goes through the database container (exec), not a host port"),
proved on the second engine of tests/integration/remote_engine.py.

Before, the server published 5432 on 127.0.0.1 of the engine's host and psycopg
administered it there: on another engine there is no such port to reach, and
testcontainers started the server on its own environment's engine whatever Engine it was
handed. Here every step goes through the second engine's API only: the server started
there, locked down and given a database per arm by psql inside its container, an arm's
role refused the rival's database (42501), and a sample's database made and dropped
through the executor's held psql. The clients are containers of the test's own on the
arms' networks (`db_peer`: psycopg in bakeoff/python, loaded there too), as an arm's code
would connect.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import docker.errors
import pytest

from runner.containers import database, images, sandbox
from runner.containers.backend import LABEL_EXPERIMENT, Labels
from runner.containers.engine import Engine
from runner.containers.samples.network import SampleNetworks
from tests.integration.db_peer import PeerError, peer
from tests.integration.remote_engine import RemoteEngine, copy_image


@dataclass(frozen=True)
class Remote:
    engine: Engine
    experiment: str
    image_id: str
    client_image: str
    server: database.DbServer
    schemas: dict[str, database.DbSchema]
    networks: dict[str, str]


@pytest.fixture(scope="module")
def remote(engine: Engine, remote_engine: RemoteEngine) -> Iterator[Remote]:
    """The postgres image loaded into the second engine; the server started there on an
    internal network of its own, attached to two arms' networks, locked down, a database
    per arm made through one held psql; all removed by label after the module."""
    other = remote_engine.engine
    experiment = f"rdb{secrets.token_hex(3)}"
    image_id = copy_image(engine, other, images.resolve(engine, "postgres").tag)
    client_image = copy_image(engine, other, images.resolve(engine, "python").tag)
    try:
        own = sandbox.network_name(experiment, "db", "r1")
        other.create_network(own, Labels(experiment, "database-network"), egress=False)
        server = database.start_server(other, image_id, Labels(experiment, "database"), own,
                                       f"bakeoff-{experiment}-db", databases=4)
        networks = {arm: sandbox.network_name(experiment, arm, "r1") for arm in ("a", "b")}
        for name in networks.values():
            other.create_network(name, Labels(experiment, "arm-network"), egress=False)
            database.attach(other, server.container_id, name)
        with database.HeldAdmin(other, server) as admin:
            database.lock_down(admin)
            schemas = {arm: database.create_schema(admin, database.role_name(experiment, arm))
                       for arm in networks}
        yield Remote(other, experiment, image_id, client_image, server, schemas, networks)
    finally:
        other.remove_labelled({LABEL_EXPERIMENT: experiment})


def test_the_server_runs_on_the_second_engine_with_no_port_and_only_internal_networks(
        engine: Engine, remote: Remote) -> None:
    """It exists there only (this machine's engine has no such container), publishes no
    port, binds nothing, and each of its networks is internal."""
    with pytest.raises(docker.errors.NotFound):
        engine.client.containers.get(remote.server.container_id)
    attrs = remote.engine.client.containers.get(remote.server.container_id).attrs
    assert not attrs["HostConfig"]["PortBindings"] and attrs["Mounts"] == []
    networks = attrs["NetworkSettings"]["Networks"]
    assert set(remote.networks.values()) < set(networks)
    assert all(remote.engine.client.networks.get(name).attrs["Internal"] for name in networks)
    found = database.find_server(remote.engine, remote.server.container_id)
    assert found.policy == database.DbPolicy()


def test_an_arm_s_role_reaches_its_own_database_and_not_the_rival_s(remote: Remote) -> None:
    """A's role logs in to A's database (as the database's owner) from A's network; to
    B's it is refused with 42501 (a refused login carries no SQLSTATE to the client: it
    is read from the server's log, as the isolation tests on this engine do)."""
    a, b = remote.schemas["a"], remote.schemas["b"]
    rival_url = a.url().rsplit("/", 1)[0] + f"/{b.name}"
    with peer(remote.engine, remote.client_image, remote.networks["a"], remote.experiment,
              "a") as arm:
        with arm.connect(a.url()) as own:
            assert own.fetchone("SELECT current_user = current_database()") == (True,)
        with pytest.raises(PeerError) as refused:
            arm.connect(rival_url)
    assert " ".join(str(refused.value).split()) == (
        f'connection failed: FATAL: permission denied for database "{b.name}" '
        "DETAIL: User does not have CONNECT privilege.")
    log = bytes(remote.engine.client.containers.get(remote.server.container_id).logs())
    assert (f'42501 {a.name}@{b.name} FATAL:  permission denied for database "{b.name}"'
            in log.decode(errors="replace"))


def test_a_sample_s_database_is_made_and_dropped_through_the_held_psql(
        remote: Remote) -> None:
    """The sample executor's networks and fresh database on the second engine's server:
    the sample's role reaches its database on the sample network; at the block's end the
    database and role are gone (dropped by the same held psql), and it was the held one."""
    networks = SampleNetworks(remote.engine, remote.experiment, "s1",
                              shared_db=remote.server)
    try:
        net = networks.network("a")
        with (networks.fresh_database() as schema,
              peer(remote.engine, remote.client_image, net, remote.experiment) as sample):
            assert schema is not None
            with sample.connect(schema.url()) as session:
                seen = session.fetchone("SELECT current_user = current_database()")
        assert seen == (True,)
        assert networks.admin().started == 1  # one psql held open made it and dropped it
        prefix = database.role_name(remote.experiment, "")
        left = database.list_owned(database.Admin(remote.engine, remote.server), prefix)
        assert schema.name not in left[0] + left[1]
        assert left == (sorted(s.name for s in remote.schemas.values()),) * 2
    finally:
        networks.detach()
