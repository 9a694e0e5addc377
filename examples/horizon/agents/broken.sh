#!/bin/sh
# Scripted contestant "broken": starts a fix but leaves a syntax error in
# src/horizon/app.py (a missing colon), and commits it. Same for both changes.
# Usage: sh broken.sh BRIEF   (cwd = the checkout). Idempotent.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
change=$(which_change "${1:-}")
echo "broken: working on $change"
python3 - <<'PY'
from pathlib import Path

app = Path("src/horizon/app.py")
text = app.read_text()
try:
    compile(text, str(app), "exec")
except SyntaxError:
    pass  # already broken: nothing more to do
else:
    anchor = "    return ForecastRequest(series=[float(v) for v in series], horizon_days=horizon)\n"
    assert anchor in text, "parse_request is not what it was"
    text = text.replace(anchor, (
        "    if horizon > 90\n"
        '        raise ValidationError("time_horizon_days", "must be at most 90 days")\n'
    ) + anchor, 1)
    app.write_text(text)
PY
commit_all "Cap the forecast horizon"
