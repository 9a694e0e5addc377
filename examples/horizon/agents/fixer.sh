#!/bin/sh
# Scripted contestant "fixer": the correct fix WITH a test.
#   cap-horizon:   validate time_horizon_days in 1..90 at the request boundary
#                  (parse_request -> ValidationError -> HTTP 422), plus tests in tests/test_app.py.
#   horizon-units: accept time_horizon_weeks (1..12, integer, not with days), plus tests.
# Usage: sh fixer.sh BRIEF   (cwd = the checkout). Idempotent: re-running changes nothing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
change=$(which_change "${1:-}")
echo "fixer: working on $change"

if [ "$change" = cap-horizon ]; then
  if horizon_bug_present; then
    python3 - <<'PY'
from pathlib import Path

app = Path("src/horizon/app.py")
text = app.read_text()
anchor = "    return ForecastRequest(series=[float(v) for v in series], horizon_days=horizon)\n"
assert anchor in text, "parse_request is not what it was: cannot apply the fix"
text = text.replace(anchor, (
    "    if not 1 <= horizon <= MAX_HORIZON_DAYS:\n"
    "        raise ValidationError(\n"
    '            "time_horizon_days", f"must be between 1 and {MAX_HORIZON_DAYS} days"\n'
    "        )\n"
) + anchor, 1)
text = text.replace(
    "from horizon.forecast import forecast\n",
    "from horizon.forecast import SEASONAL_PROFILE, forecast\n", 1)
text = text.replace(
    "MAX_BODY_BYTES = 1_000_000\n",
    "MAX_BODY_BYTES = 1_000_000\n"
    "# The model's seasonal profile covers this many days ahead; longer horizons are\n"
    "# rejected as validation errors instead of failing inside the model.\n"
    "MAX_HORIZON_DAYS = len(SEASONAL_PROFILE)\n", 1)
app.write_text(text)
PY
  fi
  python3 - <<'PY'
from pathlib import Path

tests = Path("tests/test_app.py")
text = tests.read_text()
if "test_horizon_outside_1_to_90_days_is_422" not in text:
    if "\nimport pytest\n" not in text:
        text = text.replace("from wsgiref.util import setup_testing_defaults\n",
                            "from wsgiref.util import setup_testing_defaults\n\nimport pytest\n", 1)
    text += '''

@pytest.mark.parametrize("days", [-1, 0, 91, 1000])
def test_horizon_outside_1_to_90_days_is_422(days):
    store = MemoryStore()
    status, body = call(App(store), "POST", "/forecasts",
                        {"series": SERIES, "time_horizon_days": days})
    assert status == 422
    assert body["field"] == "time_horizon_days"
    assert store.saved == []


@pytest.mark.parametrize("days", [1, 90])
def test_horizon_limits_are_inclusive(days):
    status, body = call(App(MemoryStore()), "POST", "/forecasts",
                        {"series": SERIES, "time_horizon_days": days})
    assert status == 200
    assert len(body["points"]) == days
'''
    tests.write_text(text)
PY
  if horizon_bug_present; then echo "fixer: a 91-day horizon is still accepted" >&2; exit 1; fi
  echo "fixer: verified: a 91-day horizon is a ValidationError"
  commit_all "Reject time horizons outside 1..90 days with a validation error"
else
  if ! weeks_supported; then
    python3 - <<'PY'
from pathlib import Path

app = Path("src/horizon/app.py")
lines = app.read_text().splitlines(keepends=True)
start = next(i for i, line in enumerate(lines) if line.startswith("def parse_request("))
body = start + 1
if lines[body].lstrip().startswith('"""') and lines[body].rstrip().endswith('"""'):
    body += 1
lines.insert(body, "    payload = _weeks_to_days(payload)\n")
helper = '''# A whole number of weeks that stays within the longest supported horizon (90 days).
MAX_HORIZON_WEEKS = 12


def _weeks_to_days(payload: object) -> object:
    """Accept `time_horizon_weeks` as an alternative to `time_horizon_days`."""
    if not isinstance(payload, dict) or "time_horizon_weeks" not in payload:
        return payload
    if "time_horizon_days" in payload:
        raise ValidationError(
            "time_horizon_weeks", "give time_horizon_days or time_horizon_weeks, not both"
        )
    weeks = payload["time_horizon_weeks"]
    if not isinstance(weeks, int) or isinstance(weeks, bool):
        raise ValidationError("time_horizon_weeks", "must be an integer number of weeks")
    if not 1 <= weeks <= MAX_HORIZON_WEEKS:
        raise ValidationError(
            "time_horizon_weeks", f"must be between 1 and {MAX_HORIZON_WEEKS} weeks"
        )
    converted = {k: v for k, v in payload.items() if k != "time_horizon_weeks"}
    converted["time_horizon_days"] = weeks * 7
    return converted


'''
lines.insert(start, helper)
app.write_text("".join(lines))
PY
  fi
  python3 - <<'PY'
from pathlib import Path

tests = Path("tests/test_app.py")
text = tests.read_text()
if "test_weeks_convert_to_days" not in text:
    if "\nimport pytest\n" not in text:
        text = text.replace("from wsgiref.util import setup_testing_defaults\n",
                            "from wsgiref.util import setup_testing_defaults\n\nimport pytest\n", 1)
    text += '''

def test_weeks_convert_to_days():
    status, body = call(App(MemoryStore()), "POST", "/forecasts",
                        {"series": SERIES, "time_horizon_weeks": 12})
    assert status == 200
    assert len(body["points"]) == 84


@pytest.mark.parametrize("weeks", [0, 13, 2.5, "3"])
def test_invalid_weeks_are_422(weeks):
    status, body = call(App(MemoryStore()), "POST", "/forecasts",
                        {"series": SERIES, "time_horizon_weeks": weeks})
    assert status == 422
    assert body["field"] == "time_horizon_weeks"
'''
    tests.write_text(text)
PY
  if ! weeks_supported; then echo "fixer: time_horizon_weeks is still rejected" >&2; exit 1; fi
  echo "fixer: verified: 2 weeks are 14 days"
  commit_all "Accept time_horizon_weeks as an alternative to time_horizon_days"
fi
