"""Storage in Postgres: writes rows to the database at $DATABASE_URL."""

import os
import types
import uuid

import pytest

from horizon import db

pytestmark = pytest.mark.skipif(not os.environ.get("DATABASE_URL"),
                                reason="DATABASE_URL is not set")

CLIENT = f"test-db-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def conn():
    with db.connect() as connection:
        db.ensure_schema(connection)
        yield connection
        db.delete_by_client(connection, CLIENT)


def test_insert_and_read_back(conn):
    forecast_id = db.insert_forecast(conn, horizon_days=3, series=[1.0, 2.0],
                                     points=[2.5, 3.0, 3.5], client_id=CLIENT)
    row = db.get_forecast(conn, forecast_id)
    assert row == {"id": forecast_id, "client_id": CLIENT, "horizon_days": 3,
                   "series": [1.0, 2.0], "points": [2.5, 3.0, 3.5]}


def test_schema_creation_is_idempotent(conn):
    db.ensure_schema(conn)
    db.ensure_schema(conn)


def test_store_saves_a_request(conn):
    request = types.SimpleNamespace(series=[4.0, 5.0], horizon_days=2)
    forecast_id = db.PostgresStore(client_id=CLIENT).save(request, [5.5, 6.0])
    assert db.get_forecast(conn, forecast_id)["points"] == [5.5, 6.0]
