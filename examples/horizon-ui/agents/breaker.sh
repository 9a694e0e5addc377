#!/bin/sh
# Scripted contestant "breaker": breaks the page it was asked to fix (a script that no
# longer parses: the form submits to the page itself, nothing is shown).
# Usage: sh breaker.sh BRIEF   (cwd = the checkout). Idempotent.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
change=$(which_change "${1:-}")
script=horizonui/static/app.js
if [ "$change" = passkeys ]; then script=horizonui/static/passkeys.js; fi
grep -q '^// tidied by breaker' "$script" || sed -i '1i // tidied by breaker\nconst = ;' "$script"
commit_all "Tidy $script"
