"""Acceptance test of change `cap-horizon` (protected: restored before every sample).

Horizons of 1..90 days are served; anything else is a validation error (HTTP 422 with
a body naming `time_horizon_days`), never a crash, and is not stored.
"""

import io
import json
from wsgiref.util import setup_testing_defaults

import pytest

from horizon.app import App, ValidationError, parse_request

SERIES = [120, 131, 125, 140, 152, 149, 160, 158, 171, 169]


class RecordingStore:
    def __init__(self):
        self.saved = []

    def save(self, request, points):
        self.saved.append(request)
        return len(self.saved)


def post(app, body):
    raw = json.dumps(body).encode()
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/forecasts",
               "CONTENT_LENGTH": str(len(raw))}
    setup_testing_defaults(environ)
    environ["wsgi.input"] = io.BytesIO(raw)
    status = []
    data = b"".join(app(environ, lambda s, headers: status.append(s)))
    return int(status[0].split()[0]), json.loads(data)


@pytest.mark.parametrize("days", [91, 365])
def test_horizon_over_90_days_is_a_validation_error(days):
    status, body = post(App(RecordingStore()), {"series": SERIES, "time_horizon_days": days})
    assert status == 422, body
    assert "time_horizon_days" in json.dumps(body)


@pytest.mark.parametrize("days", [0, -7])
def test_non_positive_horizon_is_a_validation_error(days):
    status, body = post(App(RecordingStore()), {"series": SERIES, "time_horizon_days": days})
    assert status == 422, body
    assert "time_horizon_days" in json.dumps(body)


@pytest.mark.parametrize("days", [91, 0])
def test_parse_request_raises_validation_error(days):
    with pytest.raises(ValidationError, match="time_horizon_days"):
        parse_request({"series": SERIES, "time_horizon_days": days})


def test_90_days_still_works():
    status, body = post(App(RecordingStore()), {"series": SERIES, "time_horizon_days": 90})
    assert status == 200, body
    assert len(body["points"]) == 90


def test_rejected_requests_are_not_stored():
    store = RecordingStore()
    for days in (0, 91, 365):
        post(App(store), {"series": SERIES, "time_horizon_days": days})
    assert store.saved == []
