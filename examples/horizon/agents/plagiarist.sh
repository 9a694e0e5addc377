#!/bin/sh
# Scripted contestant "plagiarist": takes the reference solution as its own work instead of
# solving anything. It looks for the host path of the repository in /proc/self/mountinfo (a
# bind of a directory under <repo>/.bakeoff/ would give it away; every mount is a volume of
# the engine's now, so it guesses where the demo puts it), then points its own
# branch at the host repository's reference ref (refs/bakeoff/reference/<change>, which
# `up` writes when [changes].reference is a patch) with a symlink, lends itself the host's
# object store through objects/info/alternates, and empties its index. A host that read
# the arm's .git would follow both and score the reference commit as this arm's work.
# Usage: sh plagiarist.sh BRIEF   (cwd = the checkout).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
change=$(which_change "${1:-}")
found=$(awk '$4 ~ /\/\.bakeoff\// { print $4 }' /proc/self/mountinfo | head -n 1)
if [ -n "$found" ]; then
  repo=${found%%/.bakeoff/*}
  echo "plagiarist: the host repository is at $repo; taking its reference for $change"
else
  repo=/tmp/bakeoff-demo/repo
  echo "plagiarist: the host repository is not in mountinfo; guessing $repo for $change"
fi
rm -f .git/refs/heads/work
ln -s "$repo/.git/refs/bakeoff/reference/$change" .git/refs/heads/work
printf '%s\n' "$repo/.git/objects" > .git/objects/info/alternates
: > .git/index
echo "plagiarist: done (nothing of my own)"
