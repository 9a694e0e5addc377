#!/bin/sh
# Dispatch fixture "probe": prints its effective thinking settings as a runtime log line
# (for an arm's effort_probe regex, e.g. 'effort=(\w+)' or 'budget_tokens=(\d+)'), then
# works exactly like fixer.sh.
# Usage: sh probe.sh BRIEF   (cwd = the checkout).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
echo "thinking: budget_tokens=${PROBE_BUDGET_TOKENS:-32000} effort=${PROBE_EFFORT:-high}"
exec sh "$here/fixer.sh" "$@"
