"""A sample's database cost: CREATE/DROP DATABASE (WAL_LOG, FILE_COPY) vs the old schema.

    .venv/bin/python bench/database_cost.py [--repeat N] [--threads T] [--dirty-mb M]

On one throwaway server (the project's `bakeoff/postgres`, tmpfs data directory, started
by `runner.containers.database.start_server`) it times, alternating, N times each (default 20):
- `schema`: the per-sample cost before issue 11 (CREATE ROLE + CREATE SCHEMA + GRANT +
  ALTER ROLE ... SET search_path; DROP SCHEMA CASCADE + DROP OWNED + DROP ROLE);
- `WAL_LOG` and `FILE_COPY`: `create_schema` / `drop_schema` (role + database) with that
  CREATE DATABASE strategy;
each one create, one connect as the new role with a first query (what a test does
first), one drop. With `--dirty-mb M`, a background session rewrites an M MiB table in a
database of its own, over and over, while the rounds run: a busy server (arms and samples
writing) has dirty buffers that every checkpoint must flush. Then T threads (default 4)
create and drop 10 databases each at once through `create_schema` / `drop_schema`: the
count of errors must be 0. Prints medians.
Everything it made carries the label of a random `bench-<hex>` experiment and is removed.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runner.containers import database, images, sandbox
from runner.containers.engine import LABEL_EXPERIMENT, Engine, Labels
from runner.errors import DatabaseError

Timing = tuple[float, float, float]  # create, connect + first query, drop


def schema_round(server: database.DbServer, name: str) -> Timing:
    """The old per-sample schema, statement for statement."""
    ident, password = sql.Identifier(name), secrets.token_urlsafe(18)
    started = time.perf_counter()
    with database.admin(server) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
            ident, sql.Literal(password)))
        conn.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(ident, ident))
        conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
            sql.Identifier(database.DB_NAME), ident))
        conn.execute(sql.SQL("ALTER ROLE {} IN DATABASE {} SET search_path = {}").format(
            ident, sql.Identifier(database.DB_NAME), ident))
    created = time.perf_counter()
    first_query(server, name, password, database.DB_NAME)
    connected = time.perf_counter()
    with database.admin(server) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(ident))
        conn.execute(sql.SQL("DROP OWNED BY {}").format(ident))
        conn.execute(sql.SQL("DROP ROLE {}").format(ident))
    return created - started, connected - created, time.perf_counter() - connected


def database_round(strategy: database.Strategy) -> Callable[[database.DbServer, str], Timing]:
    def one(server: database.DbServer, name: str) -> Timing:
        started = time.perf_counter()
        made = database.create_schema(server, name, strategy=strategy)
        created = time.perf_counter()
        first_query(server, name, made.password, name)
        connected = time.perf_counter()
        database.drop_schema(server, name)
        return created - started, connected - created, time.perf_counter() - connected
    return one


def first_query(server: database.DbServer, role: str, password: str, dbname: str) -> None:
    with psycopg.connect(host="127.0.0.1", port=server.host_port, user=role,
                         password=password, dbname=dbname) as conn:
        conn.execute("CREATE TABLE t (x int PRIMARY KEY)")
        conn.commit()


@contextmanager
def writer(server: database.DbServer, experiment: str, mb: int) -> Iterator[None]:
    """While the block runs, a session of its own keeps rewriting `mb` MiB of a table."""
    if mb <= 0:
        yield
        return
    owner = database.create_schema(server, database.role_name(experiment, "ballast"))
    stop = threading.Event()

    def loop() -> None:
        with psycopg.connect(host="127.0.0.1", port=server.host_port, user=owner.name,
                             password=owner.password, dbname=owner.name,
                             autocommit=True) as conn:
            conn.execute("SET statement_timeout = 0")
            conn.execute("CREATE TABLE ballast (x int, pad text)")
            conn.execute("INSERT INTO ballast SELECT g, repeat('x', 900)"
                         " FROM generate_series(1, %s) g", (mb * 1024,))  # ~1 KiB a row
            started.set()
            while not stop.is_set():
                conn.execute("UPDATE ballast SET x = x + 1")

    started = threading.Event()
    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    started.wait(timeout=120)
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=120)
        database.drop_schema(server, owner.name)


def concurrent_errors(server: database.DbServer, experiment: str, threads: int) -> list[str]:
    def worker(t: int) -> list[str]:
        errors = []
        for i in range(10):
            name = database.role_name(experiment, f"c{t}x{i}")
            try:
                database.create_schema(server, name)
                database.drop_schema(server, name)
            except DatabaseError as error:
                errors.append(error.message)
        return errors

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return [e for found in pool.map(worker, range(threads)) for e in found]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--dirty-mb", type=int, default=0)
    args = parser.parse_args()
    engine = Engine()
    image = images.resolve(engine, "postgres")
    experiment = f"bench-{secrets.token_hex(3)}"
    network = sandbox.network_name(experiment, "db", "bench")
    try:
        sandbox.create_network(engine, network, Labels(experiment, "database-network"),
                               egress=True)
        server = database.start_server(engine, image.image_id, Labels(experiment, "database"),
                                       network, f"bakeoff-{experiment}-db", databases=64)
        database.lock_down(server)
        kinds: dict[str, Callable[[database.DbServer, str], Timing]] = {
            "schema": schema_round, "WAL_LOG": database_round("WAL_LOG"),
            "FILE_COPY": database_round("FILE_COPY")}
        timings: dict[str, list[Timing]] = {kind: [] for kind in kinds}
        with writer(server, experiment, args.dirty_mb):
            for n in range(args.repeat):
                for kind, one in kinds.items():
                    name = database.role_name(experiment, f"{kind[0]}{n}")
                    timings[kind].append(one(server, name))
        report(args.repeat, args.dirty_mb, timings)
        errors = concurrent_errors(server, experiment, args.threads)
        print(f"concurrent: {args.threads} threads x 10 create+drop, {len(errors)} errors"
              + "".join(f"\n  {e}" for e in errors[:5]))
        print(f"left behind: {database.list_owned(server, database.role_name(experiment, ''))}")
    finally:
        engine.remove_labelled({LABEL_EXPERIMENT: experiment})


def report(repeat: int, dirty_mb: int, timings: dict[str, list[Timing]]) -> None:
    busy = f", a writer rewriting {dirty_mb} MiB meanwhile" if dirty_mb > 0 else ""
    print(f"rounds: {repeat} each, alternating{busy}; medians in ms")
    print(f"{'kind':<10} {'create':>8} {'connect':>8} {'drop':>8} {'total':>8}")
    for kind, rows in timings.items():
        medians = [statistics.median(row[i] for row in rows) * 1000 for i in range(3)]
        total = statistics.median(sum(row) for row in rows) * 1000
        print(f"{kind:<10} {medians[0]:>8.1f} {medians[1]:>8.1f} {medians[2]:>8.1f} "
              f"{total:>8.1f}")


if __name__ == "__main__":
    main()
