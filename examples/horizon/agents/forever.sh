#!/bin/sh
# Dispatch fixture "forever": commits a PARTIAL fix (rejects > 90 days, not <= 0), leaves
# one more edit uncommitted (RESULT.md and a comment in app.py), then never returns:
# `while :; do sleep 1; done`. The orchestrator must stop it at dispatch_timeout_s, keep
# its work (the commit + the stranded edit) and record the state timed_out.
# SIGTERM/SIGINT end it promptly (exit 143) so a stop does not wait out docker's grace
# period; FOREVER_IGNORE_TERM=1 makes it ignore SIGTERM instead (a stubborn agent).
# Usage: sh forever.sh BRIEF   (cwd = the checkout).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
echo "forever: partial fix first"
python3 - <<'PY'
from pathlib import Path

app = Path("src/horizon/app.py")
text = app.read_text()
anchor = "    return ForecastRequest(series=[float(v) for v in series], horizon_days=horizon)\n"
check = "    if horizon > 90:\n"
if check not in text:
    text = text.replace(anchor, check + (
        '        raise ValidationError("time_horizon_days", "must be at most 90 days")\n'
    ) + anchor, 1)
    app.write_text(text)
PY
commit_all "WIP: reject horizons over 90 days"
python3 - <<'PY'
from pathlib import Path

app = Path("src/horizon/app.py")
text = app.read_text()
note = "# TODO(forever): also reject horizons <= 0\n"
if note not in text:
    app.write_text(text.replace("class App:\n", note + "class App:\n", 1))
PY
printf '# RESULT\n\nStill working on non-positive horizons...\n' > RESULT.md
echo "forever: thinking..."
if [ "${FOREVER_IGNORE_TERM:-0}" = 1 ]; then trap '' TERM; else trap 'exit 143' TERM INT; fi
while :; do sleep 1; done
