"""A fresh server per sample (`[changes.success].server`), inside the sample's container:
started on a port the sample chooses, health-checked over HTTP before the criterion runs,
stopped after. Its output is kept apart from the criterion's (never parsed as test
output: a server could print a fake summary), behind a per-sample marker.
"""

from __future__ import annotations

import random
import secrets

from rig.oracle import ServerSpec

# $1 timeout  $2 criterion  $3 server  $4 health path  $5 port variable  $6 port
# $7 startup seconds  $8 marker
DRIVER = r'''
t="$1"; c="$2"; s="$3"; h="$4"; pv="$5"; port="$6"; w="$7"; m="$8"
export "$pv=$port"
sh -c "$s" > /tmp/bakeoff-server.log 2>&1 &
spid=$!
url="http://127.0.0.1:$port$h"
probe() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$url"
  elif command -v node >/dev/null 2>&1; then
    node -e 'require("http").get(process.argv[1], r => process.exit(r.statusCode < 500 ? 0 : 1)).on("error", () => process.exit(1))' "$url"
  elif command -v wget >/dev/null 2>&1; then wget -q -O /dev/null "$url"
  elif command -v curl >/dev/null 2>&1; then curl -fsS -o /dev/null "$url"
  else return 2; fi
}
tries=$(( w * 5 )); ok=""
while [ "$tries" -gt 0 ]; do
  probe >/dev/null 2>&1; r=$?
  if [ "$r" = 2 ]; then echo "$m no-http-client"; kill "$spid" 2>/dev/null; exit 0; fi
  if [ "$r" = 0 ]; then ok=1; break; fi
  kill -0 "$spid" 2>/dev/null || break
  sleep 0.2; tries=$(( tries - 1 ))
done
if [ -z "$ok" ]; then
  echo "$m unhealthy"; kill "$spid" 2>/dev/null; cat /tmp/bakeoff-server.log; exit 0
fi
timeout -k 5 "$t" sh -c "$c" 2>&1; code=$?
kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
echo "$m log"; cat /tmp/bakeoff-server.log
exit "$code"
'''  # noqa: E501 (the node probe is one line of shell)
PORTS = (20000, 60000)


def argv(server: ServerSpec, command: str, timeout_s: float) -> tuple[list[str], str]:
    """The container command and the marker that separates the server's output."""
    mark = f"bakeoff-server-{secrets.token_hex(8)}"
    port = random.randint(*PORTS)  # the container has its own network namespace
    return (["sh", "-c", DRIVER, "bakeoff-server", str(max(1, int(timeout_s))), command,
             server.run, server.health, server.port_env, str(port),
             str(max(1, int(server.startup_timeout_s))), mark], mark)


def split(log: str, mark: str) -> tuple[str, str, str]:
    """(the criterion's output, server state, the server's output)."""
    for state, tag in (("no_http_client", f"{mark} no-http-client"),
                       ("unhealthy", f"{mark} unhealthy"), ("healthy", f"{mark} log")):
        head, found, tail = log.rpartition(tag + "\n")
        if found:
            return head, state, tail
    return log, "healthy", ""
