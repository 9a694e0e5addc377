"""Where an executor's samples reach their database, and nothing else.

With no database a sample has no network at all. With one, each arm's samples share a
network of their own: `internal`, its bridge without a host address, the Postgres
attached under the alias `db`; each sample gets a fresh database (and the role that owns
it) on that Postgres, dropped when the sample ends, both through one `psql` the executor
holds open in the server's container (`database.HeldAdmin`). The Postgres is the
experiment's own when it is up (`shared`: saves a start per executor; only attached to
our networks and detached again), else one the executor starts for itself on an internal
network of its own.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Iterator

from runner.containers import database, sandbox
from runner.containers.backend import NO_NETWORK, ContainerEngine, Labels
from runner.containers.images import BuiltImage
from runner.errors import DatabaseError, EngineError

DOWN_POLL_S = 0.5


class SampleNetworks:
    """One executor's sample networks and its database server (if any)."""

    def __init__(self, engine: ContainerEngine, experiment: str, run: str,
                 db_image: BuiltImage | None = None,
                 shared_db: database.DbServer | None = None,
                 db_policy: database.DbPolicy | None = None) -> None:
        self.engine, self.experiment, self.run = engine, experiment, run
        self.db_image, self.db_policy = db_image, db_policy or database.DbPolicy()
        self.server: database.DbServer | None = shared_db
        self.shared = shared_db is not None
        self.networks: dict[str, str] = {}  # arm -> its sample network
        self.lock = threading.Lock()
        self._admin: database.HeldAdmin | None = None

    def labels(self, role: str, arm: str = "") -> Labels:
        return Labels(self.experiment, role, arm, self.run)

    def start(self) -> None:
        """The executor's own Postgres, when it has a database image and none is shared."""
        if self.db_image is None or self.shared:
            return
        net = sandbox.network_name(self.experiment, "scoredb", self.run)
        self.engine.create_network(net, self.labels("score-network"), egress=False)
        self.server = database.start_server(
            self.engine, self.db_image.image_id, self.labels("score-database"), net,
            f"bakeoff-{self.experiment}-scoredb-{self.run}", policy=self.db_policy)
        database.lock_down(self.admin())

    def network(self, arm: str) -> str:
        """The arm's sample network, made on first use with the database attached;
        `none` when the samples have no database."""
        if self.server is None:
            return NO_NETWORK
        with self.lock:
            if arm in self.networks:
                return self.networks[arm]
            name = sandbox.network_name(self.experiment, f"{arm}-samples", self.run)
            self.engine.create_network(name, self.labels("sample-network", arm), egress=False)
            database.attach(self.engine, self.server.container_id, name)
            self.networks[arm] = name
            return name

    @contextlib.contextmanager
    def own_network(self, arm: str) -> Iterator[str]:
        """A network of one sample's own (a stack's: its services and the sample reach each
        other by name, and no other sample's), `internal` like the others, the database
        attached when there is one; removed when the block ends."""
        name = sandbox.network_name(self.experiment, f"{arm}-stack-{secrets.token_hex(3)}",
                                    self.run)
        network_id = self.engine.create_network(name, self.labels("stack-network", arm),
                                    egress=False)
        try:
            if self.server is not None:
                with self.lock:
                    database.attach(self.engine, self.server.container_id, name)
            yield name
        finally:
            self.engine.remove_network(network_id)

    @contextlib.contextmanager
    def fresh_database(self) -> Iterator[database.DbSchema | None]:
        """A fresh database (and its owner role) for one sample, dropped at the end of the
        block; None without a server."""
        if self.server is None:
            yield None
            return
        # Under one lock for create and drop: one held psql (the database module
        # serializes admin DDL across executors and processes too).
        with self.lock:
            owner = f"s{secrets.token_hex(4)}"
            schema = database.create_schema(self.admin(),
                                            database.role_name(self.experiment, owner))
        try:
            yield schema
        finally:
            with self.lock:
                database.drop_schema(self.admin(), schema.name)

    def server_down(self, within_s: float = 0.0) -> str | None:
        """Why the samples' database server is not up (gone, stopped), or None (it is, or
        there is none): asked after a sample failed, to tell an outage from a result.
        `within_s`: asked again until then, for a server being stopped under the call (a
        dockerd going down stops its containers one by one while it still answers: the
        admin's psql is killed, exit 137, before the server's container is `exited`)."""
        deadline = time.monotonic() + within_s
        while True:
            why = self._server_down()
            if why is not None or time.monotonic() >= deadline:
                return why
            time.sleep(DOWN_POLL_S)

    def _server_down(self) -> str | None:
        if self.server is None:
            return None
        try:
            database.find_server(self.engine, self.server.container_id)
        except (DatabaseError, EngineError) as error:
            return str(error).splitlines()[0]
        return None

    def admin(self) -> database.HeldAdmin:
        """The executor's psql in the server's container, opened on first use."""
        assert self.server is not None  # only asked for once a server is known
        if self._admin is None:
            self._admin = database.HeldAdmin(self.engine, self.server)
        return self._admin

    def detach(self) -> None:
        """Close the held psql; take a shared Postgres off our networks (they are removed
        with the run's labels; the experiment's Postgres goes on)."""
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        if not self.shared or self.server is None:
            return
        for name in self.networks.values():
            with contextlib.suppress(EngineError):
                self.engine.disconnect(name, self.server.container_id,
                                       what="take Postgres off a sample network")
