"""Database sessions the test holds from a container of its own, on an arm's network.

The experiment's Postgres publishes no port (issue 24: administered by psql inside its
container), so the test cannot connect from this machine to play arm B. It plays B (or
A, or a killed sample) from a container of its own instead: the arm's image (it has
psycopg), on that arm's network, reaching the server as `db` as an agent would. One
Python program runs there with its stdin held open (`held_exec.hold_exec`) and keeps named
sessions: connect, execute, wait for notifications, close; each request one JSON line,
each answer one JSON line and a marker. A refusal comes back as `PeerError`, its text
exactly psycopg's, so a test asserts what it asserted on the host.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Iterator
from typing import Any, NamedTuple

import docker.errors

from runner.containers.backend import ContainerSpec, Labels, Resources, Tmpfs
from runner.containers.engine import Engine
from runner.containers.held_exec import hold_exec
from tests.integration.helpers import created

ANSWER_S = 60.0
MARKER = "peer-answered"
PROGRAM = f"""
import json, sys, time, psycopg
sessions = {{}}
for line in sys.stdin:
    asked = json.loads(line)
    name, op = asked.get("name"), asked["op"]
    try:
        if op == "connect":
            sessions[name] = psycopg.connect(asked["url"], autocommit=True,
                                             connect_timeout=10)
            answer = {{}}
        elif op == "execute":
            cursor = sessions[name].execute(asked["sql"])
            answer = {{"rows": cursor.fetchall() if cursor.description else None}}
        elif op == "notifies":  # psycopg 3.1 (Debian's): handlers, pumped by a query
            conn, got = sessions[name], []
            conn.add_notify_handler(got.append)
            deadline = time.monotonic() + asked["timeout"]
            while len(got) < asked["stop_after"] and time.monotonic() < deadline:
                conn.execute("SELECT 1")
                time.sleep(0.05)
            conn.remove_notify_handler(got.append)
            answer = {{"rows": [[n.channel, n.payload] for n in got]}}
        else:
            sessions.pop(name).close()
            answer = {{}}
    except psycopg.Error as error:
        answer = {{"error": str(error), "sqlstate": error.sqlstate}}
    print(json.dumps(answer, default=str))
    print("{MARKER}", flush=True)
"""


class Notify(NamedTuple):
    channel: str
    payload: str


class PeerError(Exception):
    """psycopg refused what the peer asked; `str()` is psycopg's own message."""

    def __init__(self, text: str, sqlstate: str | None) -> None:
        super().__init__(text)
        self.sqlstate = sqlstate


class Peer:
    """The program's held stdin: one request at a time."""

    def __init__(self, held: Any) -> None:
        self.held = held

    def ask(self, **request: Any) -> Any:
        self.held.send((json.dumps(request) + "\n").encode())
        out = self.held.until(MARKER.encode(), ANSWER_S)
        assert not self.held.ended, out.stderr.decode(errors="replace")
        answer = json.loads(out.stdout.decode().strip().splitlines()[-1])
        if "error" in answer:
            raise PeerError(answer["error"], answer["sqlstate"])
        return answer.get("rows")

    def connect(self, url: str) -> Session:
        """A session of the URL's role (autocommit), held until closed."""
        name = secrets.token_hex(4)
        self.ask(op="connect", name=name, url=url)
        return Session(self, name)


class Session:
    def __init__(self, peer: Peer, name: str) -> None:
        self.peer, self.name = peer, name

    def execute(self, sql: str) -> list[tuple[Any, ...]] | None:
        rows = self.peer.ask(op="execute", name=self.name, sql=sql)
        return None if rows is None else [tuple(row) for row in rows]

    def fetchone(self, sql: str) -> tuple[Any, ...] | None:
        rows = self.execute(sql)
        return rows[0] if rows else None

    def notifies(self, timeout: float, stop_after: int) -> list[Notify]:
        """The notifications received within `timeout` (at most `stop_after`)."""
        rows = self.peer.ask(op="notifies", name=self.name, timeout=timeout,
                             stop_after=stop_after)
        return [Notify(channel, payload) for channel, payload in rows]

    def close(self) -> None:
        self.peer.ask(op="close", name=self.name)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


@contextlib.contextmanager
def peer(engine: Engine, image_id: str, network: str, experiment: str,
         arm: str = "") -> Iterator[Peer]:
    """A container of the test's own on `network` (labelled with the experiment, so its
    cleanup removes it too) and the session keeper running in it, for the block."""
    spec = ContainerSpec(
        image=image_id, command=("sleep", "infinity"),
        labels=Labels(experiment, "test-db-peer", arm, secrets.token_hex(3)),
        resources=Resources(1.0, 256, 128), user="1000:1000", purpose=f"db peer {arm}",
        tmpfs=(Tmpfs("/tmp", 16),), network=network, read_only=True)
    container = created(engine, spec)
    try:
        engine.call("start the db peer", container.start)
        with hold_exec(engine, container.id, ["python3", "-u", "-c", PROGRAM],
                       user="1000:1000", what="the db peer") as held:
            yield Peer(held)
    finally:  # `down` inside the block may have removed it already (its labels)
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True, v=True)
