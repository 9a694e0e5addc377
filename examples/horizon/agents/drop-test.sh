#!/bin/sh
# Ratchet fixture "drop-test": deletes test_single_point_series from
# tests/test_forecast.py (the only test covering smooth()'s one-point branch), so
# coverage drops while every remaining test still passes. Commits. Any change.
# Usage: sh drop-test.sh BRIEF   (cwd = the checkout). Idempotent.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
python3 - <<'PY'
import re
from pathlib import Path

path = Path("tests/test_forecast.py")
text = path.read_text()
text = re.sub(r"\n\n\ndef test_single_point_series\(\):\n(?:    .*\n)*", "", text)
path.write_text(text)
PY
commit_all "Remove a redundant test"
