#!/bin/sh
# Scripted contestant "control": the no-intervention baseline. It documents the cache
# (a docstring) without touching the bug, and commits it.
# Usage: sh control.sh BRIEF   (cwd = the checkout). Idempotent.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
edit cachey/server.py 'def cache_key(item: str, currency: str) -> str:
    return' 'def cache_key(item: str, currency: str) -> str:
    """The Redis key a computed price is cached under."""
    return'
commit_all "Document the cache key"
