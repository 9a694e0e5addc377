#!/bin/sh
# Scripted contestant "control": no intervention. A comment line in app.py, committed.
# Usage: sh control.sh BRIEF   (cwd = the checkout). Idempotent.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
change=$(which_change "${1:-}")
grep -q '^# reviewed by control' horizonui/app.py || printf '\n# reviewed by control\n' >> horizonui/app.py
commit_all "control: review notes ($change)"
