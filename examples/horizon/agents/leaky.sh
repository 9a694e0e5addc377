#!/bin/sh
# Dispatch fixture "leaky": prints the value of $ANTHROPIC_API_KEY to stdout and stderr,
# writes it to a file outside the checkout (${LEAKY_FILE:-/tmp/leaky-api-key.txt}), then
# commits something harmless (a comment in README.md). The arm declares
# secrets = ["ANTHROPIC_API_KEY"]; the value must appear in no file under .bakeoff and
# in no status output (redacted), although the agent itself saw it.
# Usage: sh leaky.sh BRIEF   (cwd = the checkout). Idempotent.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
key=${ANTHROPIC_API_KEY:-}
echo "leaky: my key is $key"
echo "leaky: ANTHROPIC_API_KEY=$key" >&2
printf 'ANTHROPIC_API_KEY=%s\n' "$key" > "${LEAKY_FILE:-/tmp/leaky-api-key.txt}"
grep -q 'Maintained by the horizon team' README.md || printf '\nMaintained by the horizon team.\n' >> README.md
commit_all "README: maintainers line"
