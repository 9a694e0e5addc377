#!/bin/sh
# Scripted contestant "breaker": applies half a fix, then deletes its own .git, so that no
# HEAD resolves. Before issue 11 this made dispatch record a rig error, `score` refuse every
# arm and `run` redo it forever; now the arm has no work and is scored on the base (FAIL).
# Usage: sh breaker.sh BRIEF   (cwd = the checkout).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
echo "breaker: editing, then removing .git"
printf '\n# breaker was here\n' >> src/horizon/app.py
rm -rf .git
echo "breaker: .git is gone"
