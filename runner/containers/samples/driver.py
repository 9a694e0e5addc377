"""The program every sample container runs: it lays out the tree, runs the command as the
sandbox user, and writes what the rig reads back where only it can write.

It starts as root with no capability but CHOWN, SETUID, SETGID and KILL (and no-new-
privileges); everything of the tree's runs as the sandbox user with none at all
(`setpriv`). The deadline is root's: `timeout` runs as root around the sandbox user's
command, so nothing the command does (a signal to every process it may signal, a stopped
process) can keep it from firing; KILL is what lets it reach the sandbox user's
processes. The layout:

- /work, /tmp, /var/tmp, /run/lock, HOME: size-limited tmpfs (`[limits].disk_mb`):
  filling them fails the sample, never the host. The rest of the root filesystem is not
  writable by the sandbox user (checked once per image by the executor).
- /bakeoff/in (tmpfs, root's, read-only to the sandbox user): the rig's inputs, which
  reach the container on its stdin, never through a path of the host
  (docs/scale-out.md): a line with the size of a tar of the small inputs, that tar
  (extracted by `BOOT`, which then runs this driver), then the sample's tree as a tar
  (built from git objects by the rig), which the driver extracts into /work itself. The
  inputs: `root-owned` / `root-dirs` (NUL-separated paths the code under test must not
  change: protected and pinned files, the canaries, and every directory above them,
  which become root-owned and sticky so nothing in them can be renamed or removed),
  `collect` (files to read back, one per line), `plugin/` (pytest: the rig's observer
  hook `bakeoff_hook.py`, the `sitecustomize.py` that imports it, its pytest plugin; also
  copied into the user site, whose `usercustomize` imports the hook too), `observe/` (its
  config and the root reader).
- /bakeoff/obs (tmpfs, root's, 0755): a pytest sample's observer socket, bound by the
  root reader (`rig/guards/insample/observer_reader.py`) before the command starts; every
  datagram is kept with its sender's pid and uid, and the reader stops at the driver's
  own stop datagram, sent once the sandbox user's processes are gone.
- /bakeoff/run (tmpfs, root only): the command's output file. The command's stdout and
  stderr are that one file, in order; the rig keeps its head and tail.
- A server per sample runs in a container of its own (`serve`), with its own copy of the
  tree, HOME and /tmp: the criterion's container joins only its network namespace (the
  criterion reaches it on 127.0.0.1), so the server, the arm's code running before the
  criterion starts, cannot write a conftest or anything else the criterion reads. The
  criterion's driver health-checks it; its state is the driver's, never the server's.
- /var/lib/bakeoff/out (tmpfs, root only: never the engine's disk): `ready` (the layout
  is done), `log` (+ `log.truncated`), `server`, `server.log`, `observer.jsonl`,
  `files/N` (+ `files/N.path`),
  `cgroup` (the container's own cgroup counters and limits, `rig.headroom.CGROUP_FILES`,
  read as the driver ends: cgroup files are a read-only mount inside, so the code under
  test can write none of them; `rig.headroom.usage` reads either version).
  The code under test can never write here. At the end the driver writes it, as a
  base64 tar on one line after `bakeoff-out:`, to its own stdout: the container's log,
  which only the driver and the init hold (the command's output is a file), read back
  with one cheap `logs` call (a `get_archive` of a stopped container costs ~60 ms).

Before anything is read back, every process of the sandbox user is killed: nothing the
command left behind can write once it is over. A file read back is opened as the sandbox
user, non-blocking, never through a symlink, only when it is a regular file, and under a
root `timeout` (a FIFO or a device where a report was expected reads as nothing, never as
a hang), and kept only when it was read whole (`COLLECT`). The container's exit status is
the command's.
"""

from __future__ import annotations

import base64
import tarfile
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO

from rig.headroom import CGROUP_FILES

OUT = "/var/lib/bakeoff/out"
IN_MB = 64  # the tmpfs of the rig's small inputs (the tree goes straight into /work)
# The container's command: the small inputs from stdin (a size line, then a tar of that
# many bytes: `head -c` reads no further), then the driver, whose stdin is the rest (the
# tree). Anything off is the rig's (exit 125: a layout that never happened).
BOOT = ('read n && head -c "$n" | tar -x --no-same-owner -f - -C /bakeoff/in '
        '&& exec sh /bakeoff/in/driver.sh "$@"; exit 125')
OBS = "/bakeoff/obs"  # the observer's socket directory (tmpfs, root's)
MARK = b"bakeoff-out:"  # the one stdout line of the driver: a base64 tar of OUT
BUILT = b"bakeoff-built:"  # a server's driver: its build ended, with this status
HELD = b"bakeoff-held"  # a `hold` driver: the tree is laid out, a terminal may join
IN = "/bakeoff/in"
RUN = "/bakeoff/run"
HEAD_BYTES = 1024 * 1024
TAIL_BYTES = 1024 * 1024
FILE_LIMIT = 32 * 1024 * 1024  # a file read back (coverage JSON); larger ones are left out
COLLECTED_LIMIT = 32 * 1024 * 1024  # every file read back, together; past it one is left out
OBSERVER_LIMIT = 16 * 1024 * 1024  # of the observer's records kept (rig.guards.observer.LIMIT)
TRUNCATED = "[bakeoff: output truncated: {} bytes omitted]"

# The container's own cgroup, dumped for `rig.headroom.usage` (read-only inside: nothing
# of the tree's writes it): v1 controllers under /sys/fs/cgroup, v2 files in the container's
# own cgroup (its namespace's root, else the path /proc/self/cgroup names).
USAGE = r'''
usage() {
  cg=/sys/fs/cgroup; d=$cg
  if [ -f "$cg/cgroup.controllers" ]; then
    p=$(sed -n 's/^0:://p' /proc/self/cgroup)
    case "$p" in /|*..*|"") ;; *) d="$cg$p" ;; esac
  fi
  for f in $CGROUP_FILES; do
    case "$f" in */*) r="$cg/$f" ;; *) r="$d/$f" ;; esac
    if [ -f "$r" ]; then printf '== %s\n' "$f"; head -c 4096 "$r"; fi
  done
}
'''

# The files a check reads back (a coverage report), one path under $1 per line of stdin,
# once every process of the sandbox user is gone: `files/N` and `files/N.path` in $out.
# Each is read as that user, only a regular file, never through a link, non-blocking,
# under a root deadline, at most LIMIT (FILE_LIMIT + 1) bytes; it is kept only when what
# was read is the whole file, as large as its own size says (not a read cut short by the
# deadline or a refused write), no larger than FILE_LIMIT, and only while the files
# kept, together, fit COLLECTED.
COLLECT = r'''
collect() {
  n=0; left=$COLLECTED
  while IFS= read -r p; do
    n=$(( n + 1 ))
    f="$1/$p"
    if as test -f "$f" && ! as test -L "$f"; then
      timeout -k 1 5 $AS dd if="$f" iflag=nonblock,nofollow bs=65536 \
        count="$(( LIMIT / 65536 + 1 ))" status=none 2>/dev/null | head -c "$LIMIT" \
        > "$out/files/$n"
      size=$(wc -c < "$out/files/$n")
      whole=$(as stat -c %s -- "$f" 2>/dev/null) || whole=-1
      if [ "$size" != "$whole" ] || [ "$size" -ge "$LIMIT" ] || [ "$size" -gt "$left" ]; then
        rm -f "$out/files/$n"; continue
      fi
      left=$(( left - size ))
      printf '%s\n' "$p" > "$out/files/$n.path"
    fi
  done
}
'''

# $1 mode: run | hold (laid out, then waiting for `docker exec` of a terminal or a command:
#   reproduce) | serve (the server of `[changes.success].server`, in a container of its
#   own, until it is stopped)
# $2 uid:gid  $3 timeout  $4 command  $5 "observe": start the observer's reader, else ""
# then, with a server: $6 server command  $7 health path  $8 port variable  $9 port
# ${10} startup seconds
SCRIPT = r'''
mode="$1"; ug="$2"; t="$3"; c="$4"; observe="$5"
uid="${ug%%:*}"; gid="${ug#*:}"
AS="setpriv --reuid=$uid --regid=$gid --clear-groups --"
as() { $AS "$@"; }
out=/var/lib/bakeoff/out; in=/bakeoff/in; run=/bakeoff/run; obs=/bakeoff/obs
finish() {
  usage > "$out/cgroup" 2>/dev/null
  printf 'bakeoff-out:'; (cd "$out" 2>/dev/null && tar -cf - .) | base64 -w 0; printf '\n'
  exit "$1"
}
mkdir -p "$out/files" && chmod 0700 "$out" "$run" || finish 125
# The tree: what a prepared image's setup installed first (skel/: links to its dependency
# directories, shared read-only; copy/: what a tool writes in, e.g. cargo's target/; work/:
# an image of an earlier layout, whole), then the commit's files over it, each newer than
# anything setup built (-m: a build tool sees the arm's sources as changed).
p=/opt/bakeoff/prepared
for d in work skel copy; do if [ -d "$p/$d" ]; then cp -a "$p/$d/." /work/ || finish 125; fi; done
if [ -d "$p/home" ]; then cp -a "$p/home/." "$HOME"/ || finish 125; fi
tar -x -m --no-same-owner -f - -C /work || finish 125  # the tree: the rest of stdin
chown -R -h "$ug" /work "$HOME" || finish 125
# Installed packages are not the sandbox user's to rewrite for the next process (a test
# file's process patching a module another's imports): every node_modules is root's, but
# for the caches tools write there.
find /work -xdev -name node_modules -type d -prune -exec sh -c 'ug="$1"; shift; for m do
  chown -R -h 0:0 "$m" || exit 1
  for c in .vite .cache; do rm -rf "$m/$c" && mkdir "$m/$c" && chown "$ug" "$m/$c" || exit 1
  done
done' sh "$ug" {} + || finish 125
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
if [ "$mode" = hold ]; then  # reproduce --shell / -- CMD: a terminal joins by `exec`
  if [ -s "$in/build.sh" ]; then  # as the sample had it: the build first
    timeout -k 5 "$t" $AS sh "$in/build.sh" || echo "bakeoff: the build failed (exit $?)" >&2
  fi
  echo bakeoff-held
  while :; do sleep 3600 & wait; done
fi
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
build() {  # [toolchain] build on the arm's tree, before the command or the server; its
  # output apart (never parsed), its status in $out/build; nothing it started outlives it
  [ -s "$in/build.sh" ] || return 0
  timeout -k 5 "$t" $AS sh "$in/build.sh" > "$run/build.log" 2>&1 < /dev/null
  b=$?
  as sh -c 'kill -9 -1' 2>/dev/null
  keep "$run/build.log" "$out/build.log"
  echo "$b" > "$out/build"
  return "$b"
}
if [ "$mode" = serve ]; then  # the server's own container: its own tree, nothing shared
  s="$6"; pv="$8"; port="$9"
  export "$pv=$port"
  if [ -s "$in/build.sh" ]; then  # the executor starts the criterion once this says 0
    build; b=$?
    echo "bakeoff-built:$b"
    if [ "$b" != 0 ]; then trap 'finish 0' TERM INT; while :; do sleep 1 & wait; done; fi
  fi
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
if [ -z "${6:-}" ] && ! build; then : > "$out/log"; finish 0; fi  # a server's ran there
reader=""
if [ "$observe" = observe ]; then  # root's end of the observer, before anything of the tree runs
  python3 -I -S "$in/observe/reader.py" "$obs/sock" "$out/observer.jsonl" "$OBSERVED" \
    2>"$run/observer.err" &
  reader=$!
  tries=250
  while [ ! -S "$obs/sock" ] && [ "$tries" -gt 0 ]; do sleep 0.02; tries=$(( tries - 1 )); done
  if [ ! -S "$obs/sock" ]; then echo "bakeoff-rig: the observer did not start" >&2; finish 125; fi
fi
timeout -k 5 "$t" $AS sh -c "$c" > "$run/log" 2>&1 < /dev/null
code=$?
as sh -c 'kill -9 -1' 2>/dev/null
keep "$run/log" "$out/log"
if [ -n "$reader" ]; then
  python3 -I -S -c 'import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(b"bakeoff-stop", sys.argv[1])' "$obs/sock" 2>/dev/null || kill "$reader" 2>/dev/null
  wait "$reader"
fi
if [ -s "$in/collect" ]; then collect /work < "$in/collect"; fi
finish "$code"
'''


USERCUSTOMIZE = '''"""bakeoff-sandbox: the rig's observer hook (when a command set its own
PYTHONPATH, its sitecustomize is not the rig's), and the tree's own modules import,
after everything installed."""
import sys

try:
    import bakeoff_hook  # noqa: F401 - a pytest sample's observer
except ImportError:
    pass
if "/work" not in sys.path:
    sys.path.append("/work")
'''


def usage_script() -> str:
    """`usage`, the shell function that dumps the container's cgroup, with its files."""
    return f"CGROUP_FILES='{' '.join(CGROUP_FILES)}'\n" + USAGE


def script() -> str:
    """The driver with its limits filled in."""
    return (f"HEAD={HEAD_BYTES}; TAIL={TAIL_BYTES}; LIMIT={FILE_LIMIT + 1}; "
            f"OBSERVED={OBSERVER_LIMIT}; COLLECTED={COLLECTED_LIMIT}\n" + usage_script()
            + COLLECT + SCRIPT)


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


# What the driver's output directory can hold, as a tar (its files are bounded by the
# driver: the log's and the server log's head and tail, the observer's records, the files
# read back together, small markers); a line that decodes to more is not the driver's.
OUTPUTS_LIMIT = (2 * (HEAD_BYTES + TAIL_BYTES) + OBSERVER_LIMIT + COLLECTED_LIMIT
                 + 4 * 1024 * 1024)


def parse_outputs(log: bytes) -> Outputs:
    """`read_outputs` of a log held whole (tests, small logs)."""
    return read_outputs([log])


def read_outputs(chunks: Iterable[bytes], limit: int = OUTPUTS_LIMIT) -> Outputs:
    """The driver's output directory, from the last line of its stdout that starts with
    MARK, read as it streams (`chunks`: the container's log): the base64 is decoded into
    a temporary file as it comes, never held as text, and a line that decodes to more
    than `limit` bytes is dropped (empty Outputs, as for no line or one that does not
    decode). Every file in the tar is bounded by the driver."""
    with tempfile.TemporaryFile() as tar_file:
        if not _last_mark(chunks, tar_file, limit):
            return Outputs()
        tar_file.seek(0)
        try:
            with tarfile.open(fileobj=tar_file) as tar:
                return Outputs({member.name.removeprefix("./"): handle.read()
                                for member in tar if member.isfile()
                                and (handle := tar.extractfile(member)) is not None})
        except (ValueError, tarfile.TarError):
            return Outputs()


def _last_mark(chunks: Iterable[bytes], out: IO[bytes], limit: int) -> bool:
    """Decode the base64 of the last MARK line of `chunks` into `out` (a later one replaces
    an earlier one); whether that line decoded whole, within `limit` bytes."""
    state, head, rest, found = "start", b"", b"", False
    for piece, ends in _pieces(chunks):
        if state == "start":
            need = len(MARK) - len(head)
            head, piece = head + piece[:need], piece[need:]
            if len(head) == len(MARK):
                state = "mark" if head == MARK else "skip"
            if state == "mark":
                out.seek(0)
                out.truncate()
                rest, found = b"", False
        if state == "mark":
            data = rest + piece
            whole = len(data) // 4 * 4
            try:
                out.write(base64.b64decode(data[:whole], validate=True))
            except ValueError:
                state = "skip"
            rest = data[whole:]
            if out.tell() > limit:
                state = "skip"
            if ends or state == "skip":
                found = state == "mark" and not rest
        if ends:
            state, head = "start", b""
    if state == "mark":  # the stream ended inside the line
        found = not rest
    return found


def _pieces(chunks: Iterable[bytes]) -> Iterator[tuple[bytes, bool]]:
    """The stream as (piece of a line, whether the line ends there)."""
    for chunk in chunks:
        while chunk:
            piece, newline, chunk = chunk.partition(b"\n")
            yield piece, bool(newline)
