#!/bin/sh
# Scripted contestant "fixer": the cache key names the currency too, plus a unit test.
# Usage: sh fixer.sh BRIEF   (cwd = the checkout). Idempotent.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
edit cachey/server.py 'return f"price:{item}"' 'return f"price:{item}:{currency}"'
if [ ! -f tests/test_cache_key.py ]; then
  cat > tests/test_cache_key.py <<'PY'
from cachey.server import cache_key


def test_each_currency_has_its_own_cache_key():
    assert cache_key("apple", "USD") != cache_key("apple", "EUR")
PY
fi
python3 -c 'from cachey.server import cache_key as k; raise SystemExit(k("a", "USD") == k("a", "EUR"))'
echo "fixer: verified: USD and EUR prices are cached apart"
commit_all "Cache prices per item and currency"
