#!/bin/sh
# Ratchet fixture "more-tests": does what fixer.sh does (the correct fix with its tests),
# then adds tests of the HTTP error paths (400 bad JSON / bad Content-Length, 404, 405,
# 422 for a non-object body or a non-numeric series) in tests/test_http_errors.py, which
# raise the coverage of src/. Commits.
# Usage: sh more-tests.sh BRIEF   (cwd = the checkout). Idempotent.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
sh "$here/fixer.sh" "$@"
if [ ! -f tests/test_http_errors.py ]; then
  cat > tests/test_http_errors.py <<'EOF2'
"""The HTTP layer's error paths."""

import io
import json
from wsgiref.util import setup_testing_defaults

from horizon.app import App


class NoStore:
    def save(self, request, points):
        raise AssertionError("nothing must be stored")


def call(method, path, raw=b"", length=None):
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path,
               "CONTENT_LENGTH": str(len(raw)) if length is None else length}
    setup_testing_defaults(environ)
    environ["wsgi.input"] = io.BytesIO(raw)
    status = []
    data = b"".join(App(NoStore())(environ, lambda s, headers: status.append(s)))
    return int(status[0].split()[0]), json.loads(data)


def test_invalid_json_is_400():
    assert call("POST", "/forecasts", b"{not json")[0] == 400


def test_invalid_content_length_is_400():
    assert call("POST", "/forecasts", b"{}", length="ten")[0] == 400


def test_unknown_path_is_404():
    assert call("GET", "/nope") == (404, {"error": "not_found"})


def test_wrong_methods_are_405():
    assert call("GET", "/forecasts")[0] == 405
    assert call("POST", "/healthz")[0] == 405


def test_non_object_body_is_422():
    status, body = call("POST", "/forecasts", b"[1, 2, 3]")
    assert (status, body["field"]) == (422, "body")


def test_non_numeric_series_is_422():
    raw = json.dumps({"series": [1, "two"], "time_horizon_days": 3}).encode()
    status, body = call("POST", "/forecasts", raw)
    assert (status, body["field"]) == (422, "series")
EOF2
fi
commit_all "Test the HTTP error paths"
