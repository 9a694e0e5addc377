"""Acceptance test of change `horizon-units` (protected: restored before every sample).

`time_horizon_weeks` is accepted instead of `time_horizon_days` (1 week = 7 days),
validated like days: 1..12 weeks (a horizon of at most 90 days), a JSON integer, never
both units at once. Errors are HTTP 422 naming `time_horizon_weeks`.
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


def test_weeks_are_accepted():
    store = RecordingStore()
    status, body = post(App(store), {"series": SERIES, "time_horizon_weeks": 4})
    assert status == 200, body
    assert body["time_horizon_days"] == 28
    assert len(body["points"]) == 28
    assert store.saved[0].horizon_days == 28


def test_weeks_and_days_give_the_same_forecast():
    _, by_weeks = post(App(RecordingStore()), {"series": SERIES, "time_horizon_weeks": 2})
    _, by_days = post(App(RecordingStore()), {"series": SERIES, "time_horizon_days": 14})
    assert by_weeks["points"] == by_days["points"]


def test_parse_request_converts_weeks_to_days():
    assert parse_request({"series": SERIES, "time_horizon_weeks": 3}).horizon_days == 21


@pytest.mark.parametrize("weeks", [13, 52, 0, -1, 1.5, "2"])
def test_invalid_weeks_are_a_validation_error(weeks):
    store = RecordingStore()
    status, body = post(App(store), {"series": SERIES, "time_horizon_weeks": weeks})
    assert status == 422, body
    assert "time_horizon_weeks" in json.dumps(body)
    assert store.saved == []


def test_both_units_at_once_is_a_validation_error():
    status, body = post(App(RecordingStore()),
                        {"series": SERIES, "time_horizon_days": 14, "time_horizon_weeks": 2})
    assert status == 422, body
    assert "time_horizon_weeks" in json.dumps(body)
    with pytest.raises(ValidationError):
        parse_request({"series": SERIES, "time_horizon_days": 14, "time_horizon_weeks": 2})


def test_days_still_work():
    status, body = post(App(RecordingStore()), {"series": SERIES, "time_horizon_days": 14})
    assert status == 200, body
    assert len(body["points"]) == 14
