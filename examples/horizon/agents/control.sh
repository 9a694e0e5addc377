#!/bin/sh
# Scripted contestant "control": the no-intervention baseline. It makes a superficial
# change that does NOT address the brief (a log line / a docstring) and commits it.
# Usage: sh control.sh BRIEF   (cwd = the checkout). Idempotent.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
change=$(which_change "${1:-}")
echo "control: working on $change"

if [ "$change" = cap-horizon ]; then
  python3 - <<'PY'
from pathlib import Path

app = Path("src/horizon/app.py")
text = app.read_text()
line = '        log.info("forecast requested: %d days ahead", request.horizon_days)\n'
anchor = "        result = forecast(request.series, request.horizon_days)\n"
if line not in text and anchor in text:
    app.write_text(text.replace(anchor, line + anchor, 1))
PY
  commit_all "Log the requested horizon"
else
  python3 - <<'PY'
from pathlib import Path

app = Path("src/horizon/app.py")
text = app.read_text()
old = '    """Validate the decoded JSON body of `POST /forecasts`."""\n'
new = ('    """Validate the decoded JSON body of `POST /forecasts`.\n\n'
       "    The horizon is given in days (`time_horizon_days`).\n"
       '    """\n')
if old in text:
    app.write_text(text.replace(old, new, 1))
PY
  commit_all "Document the horizon unit"
fi
