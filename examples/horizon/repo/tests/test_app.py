"""The HTTP layer, with an in-memory store."""

import io
import json
from wsgiref.util import setup_testing_defaults

from horizon.app import App, parse_request

SERIES = [12, 14, 13, 15, 18, 17, 16]


class MemoryStore:
    def __init__(self):
        self.saved = []

    def save(self, request, points):
        self.saved.append((request, points))
        return len(self.saved)


def call(app, method, path, body=None):
    raw = b"" if body is None else json.dumps(body).encode()
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "CONTENT_LENGTH": str(len(raw))}
    setup_testing_defaults(environ)
    environ["wsgi.input"] = io.BytesIO(raw)
    status = []
    data = b"".join(app(environ, lambda s, headers: status.append(s)))
    return int(status[0].split()[0]), json.loads(data)


def test_healthz():
    assert call(App(MemoryStore()), "GET", "/healthz") == (200, {"status": "ok"})


def test_forecast_is_returned_and_stored():
    store = MemoryStore()
    status, body = call(App(store), "POST", "/forecasts",
                        {"series": SERIES, "time_horizon_days": 30})
    assert status == 200
    assert body["id"] == 1
    assert len(body["points"]) == 30
    assert store.saved[0][0].horizon_days == 30


def test_missing_series_is_422():
    status, body = call(App(MemoryStore()), "POST", "/forecasts", {"time_horizon_days": 5})
    assert status == 422
    assert body["field"] == "series"


def test_non_integer_horizon_is_422():
    status, body = call(App(MemoryStore()), "POST", "/forecasts",
                        {"series": SERIES, "time_horizon_days": "30"})
    assert status == 422
    assert body["field"] == "time_horizon_days"


def test_parse_request_converts_numbers():
    request = parse_request({"series": [1, 2.5], "time_horizon_days": 3})
    assert request.series == [1.0, 2.5]
    assert request.horizon_days == 3
