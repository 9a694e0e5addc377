#!/bin/sh
# Scripted contestant "fixer": the real fixes, on the server.
#   cap-ui:   the summary read the profile one day past the horizon (an IndexError at the
#             page's maximum, 90): it reads the horizon's last day; days outside 1..90 are
#             a validation error (422) at the API, whatever the page sends; a test.
#   passkeys: registration and sign-in verified on the server (agents/files/passkeys.py).
# Usage: sh fixer.sh BRIEF   (cwd = the checkout). Idempotent.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
change=$(which_change "${1:-}")
echo "fixer: working on $change"
if [ "$change" = cap-ui ]; then
  python3 - <<'PY'
from pathlib import Path

model = Path("horizonui/forecast.py")
text = model.read_text()
text = text.replace('"last_day": round(BASELINE * PROFILE[days], 2),',
                    '"last_day": round(BASELINE * PROFILE[days - 1], 2),')
model.write_text(text)
app = Path("horizonui/app.py")
text = app.read_text()
if "MAX_DAYS" not in text:
    text = text.replace("from horizonui.forecast import summary\n",
                        "from horizonui.forecast import MAX_DAYS, summary\n")
    text = text.replace(
        '''                     "message": "must be a whole number of days"}
    found = summary(days)''',
        '''                     "message": "must be a whole number of days"}
    if not 1 <= days <= MAX_DAYS:
        return 422, {"error": "validation_error", "field": "days",
                     "message": f"must be between 1 and {MAX_DAYS}"}
    found = summary(days)''')
    app.write_text(text)
tests = Path("tests/test_forecast.py")
text = tests.read_text()
if "test_the_pages_maximum" not in text:
    text += '''

def test_the_pages_maximum_has_a_summary():
    found = summary(MAX_DAYS)
    assert (found["total"], found["peak_day"], found["last_day"]) == (10797.5, 86, 114.37)
'''
    tests.write_text(text)
PY
  commit_all "Summary: read the horizon's last day, not the day after it; days outside 1..90 are a 422"
else
  cp "$here/files/passkeys.py" horizonui/passkeys.py
  commit_all "Passkeys: registration and sign-in, verified on the server"
fi
