"""The web app (WSGI): the pages, `POST /api/horizon` and the passkey endpoints."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from horizonui import db, passkeys
from horizonui.forecast import summary

log = logging.getLogger("horizonui")
STATIC = Path(__file__).parent / "static"
PAGES = {"/": "index.html", "/index.html": "index.html", "/app.js": "app.js",
         "/passkeys.html": "passkeys.html", "/passkeys.js": "passkeys.js"}
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
           405: "Method Not Allowed", 422: "Unprocessable Entity",
           500: "Internal Server Error", 501: "Not Implemented"}
MAX_BODY_BYTES = 100_000

StartResponse = Callable[..., Any]


class BadRequest(Exception):
    """A body that is not a JSON object (400)."""


def read_json(environ: dict[str, Any]) -> dict[str, Any]:
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise BadRequest("invalid Content-Length") from None
    if length > MAX_BODY_BYTES:
        raise BadRequest("body too large")
    try:
        body = json.loads(environ["wsgi.input"].read(length) or b"null")
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BadRequest("body is not JSON") from None
    if not isinstance(body, dict):
        raise BadRequest("body is not a JSON object")
    return body


def horizon(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    days = body.get("days")
    if not isinstance(days, int) or isinstance(days, bool):
        return 422, {"error": "validation_error", "field": "days",
                     "message": "must be a whole number of days"}
    found = summary(days)
    return 200, {"id": db.save_summary(days, float(found["total"])), **found}


API: dict[str, Callable[[dict[str, Any], str], tuple[int, dict[str, Any]]]] = {
    "/api/horizon": lambda body, _host: horizon(body),
    "/api/passkeys/register/begin": passkeys.register_begin,
    "/api/passkeys/register/finish": passkeys.register_finish,
    "/api/passkeys/login/begin": passkeys.login_begin,
    "/api/passkeys/login/finish": passkeys.login_finish,
}


def route(method: str, path: str, environ: dict[str, Any]) -> tuple[int, str, bytes]:
    if path == "/healthz":
        return 200, "application/json", b'{"status": "ok"}'
    if path in PAGES and method == "GET":
        page = STATIC / PAGES[path]
        return 200, TYPES[page.suffix], page.read_bytes()
    handler = API.get(path)
    if handler is None:
        return 404, "application/json", b'{"error": "not_found"}'
    if method != "POST":
        return 405, "application/json", b'{"error": "method_not_allowed"}'
    try:
        status, answer = handler(read_json(environ), environ.get("HTTP_HOST", "localhost"))
    except BadRequest as error:
        status, answer = 400, {"error": "bad_request", "message": str(error)}
    except NotImplementedError:
        status, answer = 501, {"error": "not_implemented"}
    return status, "application/json", json.dumps(answer).encode()


def application(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "/")
    try:
        status, kind, data = route(method, path, environ)
    except Exception:
        log.exception("unhandled error on %s %s", method, path)
        status, kind, data = 500, "application/json", b'{"error": "internal_error"}'
    start_response(f"{status} {REASONS[status]}",
                   [("Content-Type", kind), ("Content-Length", str(len(data))),
                    ("Cache-Control", "no-store")])
    return [data]
