#!/bin/sh
# Scripted contestant "fixer-graft": a correct fix WITHOUT a test, plus a distinct useful
# improvement in a file the "fixer" arm does not touch (a graft candidate).
#   cap-horizon:   the 1..90 days check in parse_request (worded differently from fixer),
#                  and src/horizon/db.py: a connect timeout + an index on created_at.
#   horizon-units: time_horizon_weeks handled inline in parse_request, and README.md
#                  documents the horizon limits and both units.
# Usage: sh fixer-graft.sh BRIEF   (cwd = the checkout). Idempotent.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
change=$(which_change "${1:-}")
echo "fixer-graft: working on $change"

if [ "$change" = cap-horizon ]; then
  if horizon_bug_present; then
    python3 - <<'PY'
from pathlib import Path

app = Path("src/horizon/app.py")
text = app.read_text()
anchor = (
    '        raise ValidationError("time_horizon_days", "must be an integer number of days")\n'
)
assert anchor in text, "parse_request is not what it was: cannot apply the fix"
text = text.replace(anchor, anchor + (
    "    if horizon < 1 or horizon > HORIZON_LIMIT_DAYS:\n"
    "        raise ValidationError(\n"
    "            \"time_horizon_days\",\n"
    "            f\"must be between 1 and {HORIZON_LIMIT_DAYS} days (got {horizon})\",\n"
    "        )\n"
), 1)
text = text.replace(
    "from horizon.forecast import forecast\n",
    "from horizon.forecast import SEASONAL_PROFILE, forecast\n", 1)
text = text.replace(
    "StartResponse = Callable[..., Any]\n",
    "StartResponse = Callable[..., Any]\n\n"
    "HORIZON_LIMIT_DAYS = len(SEASONAL_PROFILE)  # one seasonal factor per day ahead\n", 1)
app.write_text(text)
PY
  fi
  python3 - <<'PY'
from pathlib import Path

db = Path("src/horizon/db.py")
text = db.read_text()
if "CONNECT_TIMEOUT_S" not in text:
    text = text.replace(
        'URL_ENV = "DATABASE_URL"\n',
        'URL_ENV = "DATABASE_URL"\n'
        "CONNECT_TIMEOUT_S = 5  # fail fast instead of hanging a request on an unreachable DB\n", 1)
    text = text.replace(
        "    return psycopg.connect(url or database_url(), autocommit=True)\n",
        "    return psycopg.connect(\n"
        "        url or database_url(), autocommit=True, connect_timeout=CONNECT_TIMEOUT_S\n"
        "    )\n", 1)
if "forecasts_created_at_idx" not in text:
    text = text.replace(
        "        conn.execute(SCHEMA_SQL)\n",
        "        conn.execute(SCHEMA_SQL)\n"
        "        conn.execute(INDEX_SQL)\n", 1)
    text = text.replace(
        "# Serialises concurrent schema creation",
        "# Recent requests are listed by time: keep that a range scan, not a table scan.\n"
        'INDEX_SQL = "CREATE INDEX IF NOT EXISTS forecasts_created_at_idx ON forecasts (created_at)"\n'
        "\n# Serialises concurrent schema creation", 1)
db.write_text(text)
PY
  commit_all "Validate time_horizon_days (1..90); DB connect timeout and created_at index"
else
  if ! weeks_supported; then
    python3 - <<'PY'
from pathlib import Path

app = Path("src/horizon/app.py")
text = app.read_text()
anchor = '    if "time_horizon_days" not in payload:\n'
assert anchor in text, "parse_request is not what it was: cannot add weeks"
text = text.replace(anchor, (
    '    if "time_horizon_weeks" in payload:\n'
    "        payload = _with_days_from_weeks(payload)\n"
) + anchor, 1)
helper = '''def _with_days_from_weeks(payload: dict[str, Any]) -> dict[str, Any]:
    """`payload` with `time_horizon_weeks` (1..12) replaced by the same horizon in days."""
    weeks = payload["time_horizon_weeks"]
    if "time_horizon_days" in payload:
        raise ValidationError("time_horizon_weeks", "cannot be combined with time_horizon_days")
    if not isinstance(weeks, int) or isinstance(weeks, bool) or not 1 <= weeks <= 12:
        raise ValidationError("time_horizon_weeks", "must be an integer from 1 to 12 weeks")
    days = {key: value for key, value in payload.items() if key != "time_horizon_weeks"}
    days["time_horizon_days"] = 7 * weeks
    return days


def parse_request('''
text = text.replace("def parse_request(", helper, 1)
app.write_text(text)
PY
  fi
  python3 - <<'PY'
from pathlib import Path

readme = Path("README.md")
text = readme.read_text()
if "## Horizon limits" not in text:
    text = text.replace("## Tests\n", '''## Horizon limits

The model has a seasonal factor for each of the next 90 days, so a forecast covers
1 to 90 days ahead. Give the horizon in days or in weeks (not both):

| field                | allowed values | example |
|----------------------|----------------|---------|
| `time_horizon_days`  | integer 1..90  | `30`    |
| `time_horizon_weeks` | integer 1..12  | `4` (= 28 days) |

Anything else is a `422` naming the field; nothing is stored for a rejected request.

## Tests
''', 1)
    readme.write_text(text)
PY
  commit_all "Accept time_horizon_weeks; document the horizon limits"
fi
