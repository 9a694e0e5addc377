"""The program every sample container runs: it lays out the tree, runs the command as the
sandbox user, and writes what the rig reads back where only it can write.

It starts as root with no capability but CHOWN, SETUID and SETGID (and no-new-
privileges); everything of the tree's runs as the sandbox user with none at all
(`setpriv`). The layout:

- /work, /tmp, /var/tmp, /run/lock, HOME: size-limited tmpfs (`[limits].disk_mb`):
  filling them fails the sample, never the host. The rest of the root filesystem is not
  writable by the sandbox user (checked once per image by the executor).
- /bakeoff/in (read-only): `tree.tar` (the sample's tree, built from git objects by the
  rig), `root-owned` / `root-dirs` (NUL-separated paths the code under test must not
  change: protected and pinned files, the canaries, and every directory above them,
  which become root-owned and sticky so nothing in them can be renamed or removed),
  `collect` (files to read back, one per line), `plugin/` (pytest's canary plugin).
- /bakeoff/run (tmpfs, root only): the command's output file. The command's stdout and
  stderr are that one file, in order; the rig keeps its head and tail.
- A server per sample runs in a container of its own (`serve`), with its own copy of the
  tree, HOME and /tmp: the criterion's container joins only its network namespace (the
  criterion reaches it on 127.0.0.1), so the server, the arm's code running before the
  criterion starts, cannot write a conftest or anything else the criterion reads. The
  criterion's driver health-checks it; its state is the driver's, never the server's.
- /var/lib/bakeoff/out (root only): `ready` (the layout is done), `log` (+
  `log.truncated`), `server`, `server.log`, `canary.jsonl`, `files/N` (+ `files/N.path`).
  The code under test can never write here. At the end the driver writes it, as a
  base64 tar on one line after `bakeoff-out:`, to its own stdout: the container's log,
  which only the driver and the init hold (the command's output is a file), read back
  with one cheap `logs` call (a `get_archive` of a stopped container costs ~60 ms).

Before anything is read back, every process of the sandbox user is killed: nothing the
command left behind can write once it is over. The container's exit status is the
command's.
"""

from __future__ import annotations

import base64
import io
import tarfile
from dataclasses import dataclass, field

OUT = "/var/lib/bakeoff/out"
MARK = b"bakeoff-out:"  # the one stdout line of the driver: a base64 tar of OUT
IN = "/bakeoff/in"
RUN = "/bakeoff/run"
HEAD_BYTES = 1024 * 1024
TAIL_BYTES = 1024 * 1024
FILE_LIMIT = 32 * 1024 * 1024  # a file read back (coverage JSON); larger ones are left out
CANARY_LIMIT = 8 * 1024 * 1024
TRUNCATED = "[bakeoff: output truncated: {} bytes omitted]"

# $1 mode: run | shell | exec (the command on the terminal, nothing captured) | serve (the
#   server of `[changes.success].server`, in a container of its own, until it is stopped)
# $2 uid:gid  $3 timeout  $4 command  $5 the canary plugin's results file, or ""
# then, with a server: $6 server command  $7 health path  $8 port variable  $9 port
# ${10} startup seconds
SCRIPT = r'''
mode="$1"; ug="$2"; t="$3"; c="$4"; results="$5"
uid="${ug%%:*}"; gid="${ug#*:}"
AS="setpriv --reuid=$uid --regid=$gid --clear-groups --"
as() { $AS "$@"; }
out=/var/lib/bakeoff/out; in=/bakeoff/in; run=/bakeoff/run
finish() {
  printf 'bakeoff-out:'; (cd "$out" 2>/dev/null && tar -cf - .) | base64 -w 0; printf '\n'
  exit "$1"
}
mkdir -p "$out/files" && chmod 0700 "$out" "$run" || finish 125
# The tree: a prepared image's setup output first, then the commit's files over it.
if [ -d /opt/bakeoff/prepared/work ]; then cp -a /opt/bakeoff/prepared/work/. /work/; fi
if [ -d /opt/bakeoff/prepared/home ]; then cp -a /opt/bakeoff/prepared/home/. "$HOME"/; fi
tar -x --no-same-owner -f "$in/tree.tar" -C /work || finish 125
chown -R -h "$ug" /work "$HOME" || finish 125
if [ -s "$in/root-owned" ]; then xargs -0 chown -h 0:0 -- < "$in/root-owned" || finish 125; fi
if [ -s "$in/root-dirs" ]; then
  xargs -0 chown 0:0 -- < "$in/root-dirs" && xargs -0 chmod 1777 -- < "$in/root-dirs" ||
    finish 125
fi
# Python runs with PYTHONSAFEPATH (no cwd first on sys.path: a committed compileall.py
# or pytest.py cannot shadow the real one); /work goes LAST instead, appended by a
# usercustomize in the sandbox user's site (it runs after every site directory is on the
# path, a .pth would land before the system's), so a flat layout's modules still import.
# The user site is the rig's: root-owned, in a HOME that is root-owned and sticky (the
# sandbox user creates what it likes there, but cannot rename, replace or add to ~/.local:
# no .pth or customize module of the code under test runs in a later interpreter).
if [ -s "$in/user-site" ]; then  # the image's python, asked once per image by the rig
  site=$(cat "$in/user-site")
  case "$site" in "$HOME"/.local/*) ;; *) finish 125 ;; esac
  chown 0:"$gid" "$HOME" && chmod 1775 "$HOME" || finish 125
  if [ -e "$HOME/.local" ]; then chown -R -h 0:0 "$HOME/.local" || finish 125; fi
  mkdir -p "$site" && cp "$in/usercustomize.py" "$site/" || finish 125
  if [ -d "$in/plugin" ]; then cp "$in"/plugin/*.py "$site"/ || finish 125; fi
  chmod -R go-w,a+rX "$HOME/.local" || finish 125
fi
cd /work || finish 125
: > "$out/ready"
if [ "$mode" = shell ]; then
  if command -v bash >/dev/null 2>&1; then exec $AS bash; fi
  exec $AS sh
fi
if [ "$mode" = exec ]; then exec $AS timeout -k 5 "$t" sh -c "$c"; fi
keep() {  # $1 file, $2 destination: its head and tail, and how much was left out
  size=$(wc -c < "$1")
  keep_n=$(( HEAD + TAIL ))
  if [ "$size" -gt "$keep_n" ]; then
    { head -c "$HEAD" "$1"; printf '\n[bakeoff: output truncated: %s bytes omitted]\n' \
        $(( size - keep_n )); tail -c "$TAIL" "$1"; } > "$2"
    echo $(( size - keep_n )) > "$2.truncated"
  else
    cat "$1" > "$2"
  fi
}
if [ "$mode" = serve ]; then  # the server's own container: its own tree, nothing shared
  s="$6"; pv="$8"; port="$9"
  export "$pv=$port"
  as sh -c "$s" > "$run/server.log" 2>&1 < /dev/null &
  trap 'as sh -c "kill -9 -1" 2>/dev/null; keep "$run/server.log" "$out/server.log"; finish 0' \
    TERM INT
  wait
  while :; do sleep 1 & wait; done  # the server ended: its log waits for the stop
fi
if [ -n "${6:-}" ]; then  # the criterion's container, in the server's network namespace
  h="$7"; pv="$8"; port="$9"; w="${10}"
  export "$pv=$port"
  url="http://127.0.0.1:$port$h"
  py='import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)'
  js='require("http").get(process.argv[1], r => process.exit(r.statusCode < 500 ? 0 : 1))'
  js="$js"'.on("error", () => process.exit(1))'
  probe() {
    if command -v python3 >/dev/null 2>&1; then as python3 -I -c "$py" "$url"
    elif command -v node >/dev/null 2>&1; then as node -e "$js" "$url"
    elif command -v wget >/dev/null 2>&1; then as wget -q -O /dev/null "$url"
    elif command -v curl >/dev/null 2>&1; then as curl -fsS -o /dev/null "$url"
    else return 2; fi
  }
  tries=$(( w * 5 )); state=unhealthy
  while [ "$tries" -gt 0 ]; do
    probe >/dev/null 2>&1; r=$?
    if [ "$r" = 2 ]; then state=no_http_client; break; fi
    if [ "$r" = 0 ]; then state=healthy; break; fi
    sleep 0.2; tries=$(( tries - 1 ))
  done
  echo "$state" > "$out/server"
  if [ "$state" != healthy ]; then : > "$out/log"; finish 0; fi
fi
as timeout -k 5 "$t" sh -c "$c" > "$run/log" 2>&1 < /dev/null
code=$?
as sh -c 'kill -9 -1' 2>/dev/null
keep "$run/log" "$out/log"
if [ -n "$results" ]; then as head -c "$CANARY" "$results" > "$out/canary.jsonl" 2>/dev/null; fi
if [ -s "$in/collect" ]; then
  n=0
  while IFS= read -r p; do
    n=$(( n + 1 ))
    if as test -f "/work/$p" && ! as test -L "/work/$p"; then
      as head -c "$LIMIT" "/work/$p" > "$out/files/$n" 2>/dev/null
      printf '%s\n' "$p" > "$out/files/$n.path"
    fi
  done < "$in/collect"
fi
finish "$code"
'''


USERCUSTOMIZE = '''"""bakeoff-sandbox: the tree's own modules import, after everything installed."""
import sys

if "/work" not in sys.path:
    sys.path.append("/work")
'''


def script() -> str:
    """The driver with its limits filled in."""
    return (f"HEAD={HEAD_BYTES}; TAIL={TAIL_BYTES}; LIMIT={FILE_LIMIT + 1}; "
            f"CANARY={CANARY_LIMIT}\n" + SCRIPT)


@dataclass
class Outputs:
    """What the driver left in OUT, as read back from its one stdout line."""

    files: dict[str, bytes] = field(default_factory=dict)

    def text(self, name: str) -> str:
        return self.files.get(name, b"").decode(errors="replace")

    def collected(self) -> dict[str, str]:
        found = {}
        for name, data in self.files.items():
            if name.startswith("files/") and name.endswith(".path"):
                content = self.files.get(name.removesuffix(".path"))
                if content is not None and len(content) <= FILE_LIMIT:
                    found[data.decode(errors="replace").rstrip("\n")] = content.decode(
                        errors="replace")
        return found


def parse_outputs(log: bytes) -> Outputs:
    """The driver's output directory, from the last line of its stdout that starts with
    MARK (empty when there is none or it does not decode). Every file in it is bounded by
    the driver, so reading it whole is bounded too."""
    line = next((line for line in reversed(log.splitlines()) if line.startswith(MARK)), None)
    if line is None:
        return Outputs()
    try:
        data = base64.b64decode(line[len(MARK):], validate=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            return Outputs({member.name.removeprefix("./"): handle.read()
                            for member in tar.getmembers() if member.isfile()
                            and (handle := tar.extractfile(member)) is not None})
    except (ValueError, tarfile.TarError):
        return Outputs()
