#!/bin/sh
# Dispatch fixture "no-commit": applies the cap-horizon fix (no test), writes RESULT.md
# (which .gitignore lists), and NEVER commits: the orchestrator must commit the stranded
# work, force-adding RESULT.md (arm setting commit_ignored = ["RESULT.md"]).
# Usage: sh no-commit.sh BRIEF   (cwd = the checkout). Idempotent.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
echo "no-commit: editing, not committing"
if horizon_bug_present; then
  python3 - <<'PY'
from pathlib import Path

app = Path("src/horizon/app.py")
text = app.read_text()
anchor = "    return ForecastRequest(series=[float(v) for v in series], horizon_days=horizon)\n"
text = text.replace(anchor, (
    "    if not 1 <= horizon <= 90:\n"
    '        raise ValidationError("time_horizon_days", "must be between 1 and 90 days")\n'
) + anchor, 1)
app.write_text(text)
PY
fi
cat > RESULT.md <<'EOF2'
# RESULT

time_horizon_days is now validated in parse_request: 1..90 days, otherwise HTTP 422.
Not committed (left for the orchestrator).
EOF2
git status --short
