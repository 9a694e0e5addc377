"""Postgres storage of forecast requests (psycopg 3).

The table lives in the connection's default search_path: names are never
schema-qualified, so each deployment (or test database user) gets its own copy.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol

import psycopg
from psycopg.types.json import Jsonb

URL_ENV = "DATABASE_URL"

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS forecasts (
    id           bigserial   PRIMARY KEY,
    created_at   timestamptz NOT NULL DEFAULT now(),
    client_id    text        NOT NULL DEFAULT 'anonymous',
    horizon_days integer     NOT NULL,
    series       jsonb       NOT NULL,
    points       jsonb       NOT NULL
)
"""

# Serialises concurrent schema creation (CREATE TABLE IF NOT EXISTS can race).
_SCHEMA_LOCK = 7_311_902


class StoredRequest(Protocol):
    """What `PostgresStore.save` needs of a request."""

    series: list[float]
    horizon_days: int


def database_url() -> str:
    """The connection URL from the environment."""
    url = os.environ.get(URL_ENV, "")
    if not url:
        raise RuntimeError(f"{URL_ENV} is not set: export it to the Postgres URL to use")
    return url


def connect(url: str | None = None) -> psycopg.Connection[Any]:
    """A new connection (autocommit) to `url`, or to $DATABASE_URL."""
    return psycopg.connect(url or database_url(), autocommit=True)


def ensure_schema(conn: psycopg.Connection[Any]) -> None:
    """Create the tables if they do not exist yet (idempotent, safe concurrently)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        conn.execute(SCHEMA_SQL)


def insert_forecast(
    conn: psycopg.Connection[Any],
    *,
    horizon_days: int,
    series: Sequence[float],
    points: Sequence[float],
    client_id: str = "anonymous",
) -> int:
    """Store one request and its forecast; returns the new row's id."""
    row = conn.execute(
        "INSERT INTO forecasts (client_id, horizon_days, series, points)"
        " VALUES (%s, %s, %s, %s) RETURNING id",
        (client_id, horizon_days, Jsonb(list(series)), Jsonb(list(points))),
    ).fetchone()
    assert row is not None
    return int(row[0])


def get_forecast(conn: psycopg.Connection[Any], forecast_id: int) -> dict[str, Any] | None:
    """One stored request by id, or None."""
    row = conn.execute(
        "SELECT id, client_id, horizon_days, series, points FROM forecasts WHERE id = %s",
        (forecast_id,),
    ).fetchone()
    if row is None:
        return None
    keys = ("id", "client_id", "horizon_days", "series", "points")
    return dict(zip(keys, row, strict=True))


def delete_by_client(conn: psycopg.Connection[Any], client_id: str) -> int:
    """Delete every row of one client; returns how many."""
    return conn.execute("DELETE FROM forecasts WHERE client_id = %s", (client_id,)).rowcount


class PostgresStore:
    """The production store of the HTTP app: one short connection per request."""

    def __init__(self, url: str | None = None, client_id: str = "anonymous") -> None:
        self.url = url
        self.client_id = client_id

    def save(self, request: StoredRequest, points: Sequence[float]) -> int:
        """Store `request` and its forecast `points`; returns the row id."""
        with connect(self.url) as conn:
            ensure_schema(conn)
            return insert_forecast(
                conn,
                horizon_days=request.horizon_days,
                series=request.series,
                points=points,
                client_id=self.client_id,
            )
