"""The HTTP layer, without a database."""

import io
import json

from horizonui.app import application


def call(method, path, body=None):
    raw = b"" if body is None else json.dumps(body).encode()
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "CONTENT_LENGTH": str(len(raw)),
               "wsgi.input": io.BytesIO(raw), "HTTP_HOST": "localhost:8000"}
    status = []
    data = b"".join(application(environ, lambda s, headers: status.append(s)))
    return int(status[0].split()[0]), data


def test_the_pages_are_served():
    for path in ("/", "/app.js", "/passkeys.html", "/passkeys.js"):
        assert call("GET", path)[0] == 200
    assert b'max="90"' in call("GET", "/")[1]


def test_days_that_are_not_a_whole_number_are_a_validation_error():
    for days in ("45", 4.5, None, True):
        status, data = call("POST", "/api/horizon", {"days": days})
        assert status == 422 and json.loads(data)["field"] == "days"


def test_a_body_that_is_not_an_object_is_a_bad_request():
    assert call("POST", "/api/horizon", [1])[0] == 400


def test_unknown_paths_and_methods():
    assert call("GET", "/nope")[0] == 404
    assert call("GET", "/api/horizon")[0] == 405
