"""A sample's fresh database and `up`'s database step, as the code of a given tree does them.

    .venv/bin/python bench/database_cost.py [--tree PATH] [--repeat N] [--arms A] [--threads T]

`--tree` names the checkout whose `runner` is measured (default: this one's), so the same
script times the code before a change and after it: run it on both, interleaved
(docs/benchmarks.md has the loop). It adapts to what it finds: with `database.HeldAdmin`
(issue 24: psql inside the server's container through the engine's exec API, no port) it
times the executor's held psql (`held`) and one exec per script (`exec`); without it,
psycopg over the published port on 127.0.0.1 (`host`, the code before).

- `sample`, N rounds per kind, alternating: `create_schema`, then the new role's first
  query (connect + CREATE TABLE) from a container on a sample network, as a sample's
  test does it, then `drop_schema`.
- `up`, N/4 rounds (at least 3): the database step of `up` for A arms (default 2): the
  server started on a network of its own, attached to A arm networks, locked down, one
  database and role per arm (`runner.commands.up._make`'s lines, in its order).
- then T threads (default 4) create and drop 10 databases each at once: 0 errors, and
  nothing left under the experiment's prefix.
Prints medians in ms. Everything it made carries the label of a random `bench-<hex>`
experiment and is removed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import secrets
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

PROGRAM = """
import sys, psycopg
for url in sys.stdin:
    try:
        with psycopg.connect(url.strip(), connect_timeout=10) as conn:
            conn.execute("CREATE TABLE t (x int PRIMARY KEY)")
            conn.commit()
        print("ok", flush=True)
    except psycopg.Error as error:
        print("error", str(error).replace("\\n", " "), flush=True)
"""


class Client:
    """A python in a container of ours on a sample network, its stdin held: one URL a
    line in, `ok` (or the error) a line out (docker's exec API, no host port)."""

    def __init__(self, engine: Any, image_id: str, network: str, experiment: str) -> None:
        from docker.utils.socket import frames_iter

        from runner.containers.backend import ContainerSpec, Labels, Resources
        self.container = engine.client.containers.get(engine.create(ContainerSpec(
            image=image_id, command=("sleep", "infinity"),
            labels=Labels(experiment, "bench-client"), resources=Resources(1.0, 256, 64),
            user="1000:1000", purpose="bench client", network=network)))
        self.container.start()
        api = engine.client.api
        exec_id = api.exec_create(self.container.id, ["python3", "-u", "-c", PROGRAM],
                                  stdin=True, user="1000:1000")["Id"]
        sock = api.exec_start(exec_id, socket=True)
        self.raw = getattr(sock, "_sock", sock)
        self.frames = frames_iter(self.raw, tty=False)

    def first_query(self, url: str) -> None:
        self.raw.sendall(url.encode() + b"\n")
        line = b""
        for stream, data in self.frames:
            if stream == 2:
                raise RuntimeError(data.decode(errors="replace"))
            line += data
            if line.endswith(b"\n"):
                break
        if line.strip() != b"ok":
            raise RuntimeError(line.decode(errors="replace"))


class Code:
    """The measured tree's database API, before or after issue 24."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.db = importlib.import_module("runner.containers.database")
        self.sandbox = importlib.import_module("runner.containers.sandbox")
        self.after = hasattr(self.db, "HeldAdmin")

    def kinds(self) -> list[str]:
        return ["held", "exec"] if self.after else ["host"]

    @contextlib.contextmanager
    def session(self, server: Any, kind: str) -> Iterator[Any]:
        """What create_schema / drop_schema / lock_down take first."""
        if kind == "held":
            with self.db.HeldAdmin(self.engine, server) as admin:
                yield admin
        elif kind == "exec":
            yield self.db.Admin(self.engine, server)
        else:
            yield self.db.refresh_port(self.engine, server)  # attach may re-publish

    def start(self, image_id: str, experiment: str, run: str, databases: int) -> Any:
        from runner.containers.backend import Labels
        network = self.sandbox.network_name(experiment, "db", run)
        self.engine.create_network(network,
                                    Labels(experiment, "database-network", run=run),
                                    egress=not self.after)  # a published port needs it
        return self.db.start_server(self.engine, image_id,
                                    Labels(experiment, "database", run=run), network,
                                    f"bakeoff-{experiment}-db-{run}", databases=databases)

    def network(self, experiment: str, name: str) -> str:
        from runner.containers.backend import Labels
        network = self.sandbox.network_name(experiment, name, "bench")
        self.engine.create_network(network, Labels(experiment, "bench-network"),
                                    egress=False)
        return network


def sample_round(code: Code, admin: Any, client: Client, name: str) -> tuple[float, ...]:
    started = time.perf_counter()
    made = code.db.create_schema(admin, name)
    created = time.perf_counter()
    client.first_query(made.url())
    queried = time.perf_counter()
    code.db.drop_schema(admin, name)
    return created - started, queried - created, time.perf_counter() - queried


def up_step(code: Code, image_id: str, experiment: str, arms: int) -> float:
    """`up`'s database lines for `arms` arms whose networks exist; the server removed
    after (not timed)."""
    from runner.containers.backend import LABEL_EXPERIMENT, LABEL_RUN
    networks = [code.network(experiment, f"arm{i}-{secrets.token_hex(2)}") for i in range(arms)]
    run = secrets.token_hex(3)
    started = time.perf_counter()
    server = code.start(image_id, experiment, run, arms + code.db.SAMPLE_DATABASES)
    for network in networks:
        code.db.attach(code.engine, server.container_id, network)
    with code.session(server, "held" if code.after else "host") as admin:
        code.db.lock_down(admin)
        for i in range(arms):
            code.db.create_schema(admin, code.db.role_name(experiment, f"arm{i}"))
    took = time.perf_counter() - started
    code.engine.remove_labelled({LABEL_EXPERIMENT: experiment, LABEL_RUN: run})
    for network in networks:
        code.engine.client.networks.get(network).remove()
    return took


def concurrent_errors(code: Code, server: Any, experiment: str, threads: int) -> list[str]:
    def worker(t: int) -> list[str]:
        errors = []
        with code.session(server, code.kinds()[0]) as admin:
            for i in range(10):
                name = code.db.role_name(experiment, f"c{t}x{i}")
                try:
                    code.db.create_schema(admin, name)
                    code.db.drop_schema(admin, name)
                except Exception as error:  # counted: the bench's one check
                    errors.append(str(error))
        return errors

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return [e for found in pool.map(worker, range(threads)) for e in found]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--arms", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    from runner.containers import images
    from runner.containers.backend import LABEL_EXPERIMENT
    from runner.containers.engine import Engine

    engine = Engine()
    code = Code(engine)
    postgres, python = images.resolve(engine, "postgres"), images.resolve(engine, "python")
    experiment = f"bench-{secrets.token_hex(3)}"
    try:
        server = code.start(postgres.image_id, experiment, "main", 16)
        samples = code.network(experiment, "samples")
        code.db.attach(engine, server.container_id, samples)
        with code.session(server, code.kinds()[0]) as admin:
            code.db.lock_down(admin)
        client = Client(engine, python.image_id, samples, experiment)
        timings: dict[str, list[tuple[float, ...]]] = {kind: [] for kind in code.kinds()}
        with contextlib.ExitStack() as stack:
            admins = {kind: stack.enter_context(code.session(server, kind))
                      for kind in code.kinds()}
            for n in range(args.repeat):
                for kind, admin in admins.items():
                    name = code.db.role_name(experiment, f"{kind}{n}")
                    timings[kind].append(sample_round(code, admin, client, name))
        ups = [up_step(code, postgres.image_id, experiment, args.arms)
               for _ in range(max(3, args.repeat // 4))]
        report(args, code, timings, ups)
        errors = concurrent_errors(code, server, experiment, args.threads)
        print(f"concurrent: {args.threads} threads x 10 create+drop, {len(errors)} errors"
              + "".join(f"\n  {e}" for e in errors[:5]))
        with code.session(server, code.kinds()[0]) as admin:
            print("left behind:", code.db.list_owned(admin, code.db.role_name(experiment, "")))
    finally:
        engine.remove_labelled({LABEL_EXPERIMENT: experiment})


def report(args: argparse.Namespace, code: Code, timings: dict[str, list[tuple[float, ...]]],
           ups: list[float]) -> None:
    print(f"tree {args.tree} ({'after' if code.after else 'before'}): {args.repeat} rounds "
          "each, alternating; medians in ms")
    print(f"{'sample':<8} {'create':>8} {'query':>8} {'drop':>8} {'total':>8}")
    median: Callable[[list[float]], float] = statistics.median
    for kind, rows in timings.items():
        parts = [median([row[i] for row in rows]) * 1000 for i in range(3)]
        total = median([sum(row) for row in rows]) * 1000
        print(f"{kind:<8} {parts[0]:>8.1f} {parts[1]:>8.1f} {parts[2]:>8.1f} {total:>8.1f}")
    print(f"up's database step, {args.arms} arms, {len(ups)} rounds: median "
          f"{median(ups) * 1000:.0f} ms (range {min(ups) * 1000:.0f}-{max(ups) * 1000:.0f})")


if __name__ == "__main__":
    main()
