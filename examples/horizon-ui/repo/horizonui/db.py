"""Postgres storage (psycopg 3): every summary the server makes, and passkeys.

Tables live in the connection's default search_path, created on first use under an
advisory lock (concurrent servers of one database cannot race)."""

from __future__ import annotations

import os
from typing import Any

import psycopg

URL_ENV = "DATABASE_URL"
SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS summaries (
    id         bigserial   PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    days       integer     NOT NULL,
    total      double precision NOT NULL
);
CREATE TABLE IF NOT EXISTS passkeys (
    credential_id text    PRIMARY KEY,
    user_name     text    NOT NULL,
    x             text    NOT NULL,
    y             text    NOT NULL,
    sign_count    bigint  NOT NULL DEFAULT 0
);
"""
_SCHEMA_LOCK = 7_311_903


def connect() -> psycopg.Connection[Any]:
    url = os.environ.get(URL_ENV, "")
    if not url:
        raise RuntimeError(f"{URL_ENV} is not set: export it to the Postgres URL to use")
    conn = psycopg.connect(url, autocommit=True, connect_timeout=5)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        conn.execute(SCHEMA_SQL)
    return conn


def save_summary(days: int, total: float) -> int:
    with connect() as conn:
        row = conn.execute("INSERT INTO summaries (days, total) VALUES (%s, %s) RETURNING id",
                           (days, total)).fetchone()
    assert row is not None
    return int(row[0])


def save_passkey(credential_id: str, user_name: str, x: str, y: str, sign_count: int) -> None:
    with connect() as conn:
        conn.execute("INSERT INTO passkeys (credential_id, user_name, x, y, sign_count) "
                     "VALUES (%s, %s, %s, %s, %s)", (credential_id, user_name, x, y, sign_count))


def passkeys_of(user_name: str) -> list[dict[str, Any]]:
    with connect() as conn:
        rows = conn.execute("SELECT credential_id, x, y, sign_count FROM passkeys "
                            "WHERE user_name = %s ORDER BY credential_id", (user_name,)).fetchall()
    return [dict(zip(("credential_id", "x", "y", "sign_count"), row, strict=True))
            for row in rows]


def set_sign_count(credential_id: str, sign_count: int) -> None:
    with connect() as conn:
        conn.execute("UPDATE passkeys SET sign_count = %s WHERE credential_id = %s",
                     (sign_count, credential_id))
