#!/bin/sh
# Scripted contestant "breaker": fixes the cache key, but "tidies the configuration" by
# reading CACHE_HOST instead of REDIS_HOST (default localhost). In the stack the service
# then never reaches its Redis, /healthz answers 503, and the stack never gets healthy:
# FAIL server_unhealthy, the arm's own doing (the base's stack is healthy).
# Usage: sh breaker.sh BRIEF   (cwd = the checkout). Idempotent.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
edit cachey/server.py 'return f"price:{item}"' 'return f"price:{item}:{currency}"'
edit cachey/store.py 'os.environ.get("REDIS_HOST", "redis")' 'os.environ.get("CACHE_HOST", "localhost")'
commit_all "Cache prices per currency; read the cache's address from CACHE_HOST"
