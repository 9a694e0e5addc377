#!/bin/sh
# Ratchet fixture "lint-noise": adds three unused imports to src/horizon/forecast.py
# (3 more findings for `python3 tools/lint.py`, a count ratchet with better = "lower");
# behaviour and tests are unchanged. Commits. Any change.
# Usage: sh lint-noise.sh BRIEF   (cwd = the checkout). Idempotent.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
python3 - <<'PY'
from pathlib import Path

path = Path("src/horizon/forecast.py")
text = path.read_text()
if "import json\n" not in text:
    text = text.replace("import math\n", "import json\nimport math\nimport os\nimport sys\n", 1)
    path.write_text(text)
PY
commit_all "Prepare forecast module for config loading"
