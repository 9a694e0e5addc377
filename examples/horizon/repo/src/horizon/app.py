"""The HTTP API (WSGI): `POST /forecasts` and `GET /healthz`.

`application` is the WSGI entry point; `horizon.__main__` serves it with wsgiref.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from horizon.forecast import forecast

log = logging.getLogger("horizon")

MAX_BODY_BYTES = 1_000_000
JSON_HEADERS = [("Content-Type", "application/json")]
REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    422: "Unprocessable Entity",
    500: "Internal Server Error",
}

StartResponse = Callable[..., Any]


class ValidationError(Exception):
    """A request the API rejects with HTTP 422; names the offending field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class BadRequest(Exception):
    """A body that is not JSON at all (HTTP 400)."""


@dataclass(frozen=True)
class ForecastRequest:
    """A validated `POST /forecasts` body."""

    series: list[float]
    horizon_days: int


class Store(Protocol):
    """Where accepted requests are recorded."""

    def save(self, request: ForecastRequest, points: list[float]) -> int: ...


def parse_request(payload: object) -> ForecastRequest:
    """Validate the decoded JSON body of `POST /forecasts`."""
    if not isinstance(payload, dict):
        raise ValidationError("body", "must be a JSON object")
    series = payload.get("series")
    if not isinstance(series, list) or not series:
        raise ValidationError("series", "must be a non-empty list of numbers")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in series):
        raise ValidationError("series", "must contain only numbers")
    if "time_horizon_days" not in payload:
        raise ValidationError("time_horizon_days", "is required")
    horizon = payload["time_horizon_days"]
    if not isinstance(horizon, int) or isinstance(horizon, bool):
        raise ValidationError("time_horizon_days", "must be an integer number of days")
    return ForecastRequest(series=[float(v) for v in series], horizon_days=horizon)


class App:
    """The WSGI application. `store` defaults to Postgres at $DATABASE_URL."""

    def __init__(self, store: Store | None = None) -> None:
        self._store = store

    @property
    def store(self) -> Store:
        if self._store is None:
            from horizon.db import PostgresStore

            self._store = PostgresStore()
        return self._store

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "/")
        try:
            status, body = self.route(method, path, environ)
        except Exception:
            log.exception("unhandled error on %s %s", method, path)
            status, body = 500, {"error": "internal_error"}
        data = json.dumps(body).encode()
        headers = [*JSON_HEADERS, ("Content-Length", str(len(data)))]
        start_response(f"{status} {REASONS[status]}", headers)
        return [data]

    def route(self, method: str, path: str, environ: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if path == "/healthz":
            if method != "GET":
                return 405, {"error": "method_not_allowed"}
            return 200, {"status": "ok"}
        if path == "/forecasts":
            if method != "POST":
                return 405, {"error": "method_not_allowed"}
            return self.create_forecast(environ)
        return 404, {"error": "not_found"}

    def create_forecast(self, environ: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        try:
            payload = read_json(environ)
        except BadRequest as exc:
            return 400, {"error": "bad_request", "message": str(exc)}
        try:
            request = parse_request(payload)
        except ValidationError as exc:
            return 422, {"error": "validation_error", "field": exc.field, "message": exc.message}
        result = forecast(request.series, request.horizon_days)
        forecast_id = self.store.save(request, result.points)
        return 200, {
            "id": forecast_id,
            "time_horizon_days": request.horizon_days,
            "points": result.points,
        }


def read_json(environ: dict[str, Any]) -> object:
    """The request body, decoded as JSON; `BadRequest` when it is not."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise BadRequest("invalid Content-Length") from None
    if length > MAX_BODY_BYTES:
        raise BadRequest(f"body larger than {MAX_BODY_BYTES} bytes")
    raw = environ["wsgi.input"].read(length) if length else b""
    try:
        return json.loads(raw or b"null")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"body is not valid JSON ({exc})") from None


application = App()
