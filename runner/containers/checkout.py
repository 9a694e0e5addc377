"""An arm's checkout: made, reset and taken out inside containers, never read on the host.

The checkout lives on the arm's tmpfs volume, mounted at /work in its sandbox. The host
writes a bundle of the base commit's history (`workspace.base_bundle`) and a one-shot rig
container turns it into the checkout as the sandbox user: `git init -b work`, fetch the
bundle, `reset --hard` the base; no remote, no tag, no FETCH_HEAD, no reflog (docs/design.md
principle 6). The same container copies the image's HOME into the arm's HOME volume.

The work leaves the same way (`take`): a fresh rig container with the checkout mounted
READ-ONLY commits stranded edits and writes a bundle in a fresh repository of its own
whose objects borrow the arm's (`objects/info/alternates`): the arm's config, hooks,
index, fsmonitor and filters are never used. It reports what it found as small files in
a directory only it mounts, never as text the arm could print; `runner.workspace.bundle` imports
the bundle with every object checked.
"""

from __future__ import annotations

import io
import os
import re
import secrets
import shutil
import stat
import tarfile
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from runner.containers import sandbox
from runner.containers.backend import Bind, ContainerEngine, Labels, Volume
from runner.errors import InfraError

GIT_STEP_TIMEOUT_S = 300
ARM_BRANCH = "work"
BASE_BUNDLE = "/tmp/base.bundle"  # the init job's copy of the bundle, from its stdin
NEW_HOME = "/bakeoff/home"
OUT_VOLUME = "/bakeoff/vol"  # where the bundler mounts the volume of what it leaves
OUT = f"{OUT_VOLUME}/out"  # the sandbox user's directory in it (the filler's tar made it)
STATUS_MAX_BYTES = 256
INIT_ROLE = "arm-checkout-init"   # the role label of the one-shot rig containers
BUNDLER_ROLE = "arm-bundler"
ORCHESTRATOR = {"GIT_AUTHOR_NAME": "bakeoff-sandbox orchestrator",
                "GIT_AUTHOR_EMAIL": "orchestrator@bakeoff.invalid",
                "GIT_COMMITTER_NAME": "bakeoff-sandbox orchestrator",
                "GIT_COMMITTER_EMAIL": "orchestrator@bakeoff.invalid"}
# No system or global config, no HOME of the arm's: git runs with its defaults only.
RIG_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "HOME": "/tmp",
           "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0",
           "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
# HEAD probe inside a sandbox (as the sandbox user): no fsmonitor, no hooks of the arm's.
HEAD_PROBE = ["git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
              "rev-parse", "--verify", "-q", "HEAD^{commit}"]

PREPARED = "/opt/bakeoff/prepared"  # `runner.containers.images.prepared.PREPARED_DIR`
# The paths setup's dependencies occupy, as excludes (appended to a file named after it):
# the bundler's fresh repository never adds them, whatever the arm's .gitignore says.
EXCLUDE_KEPT = (f"[ ! -f {PREPARED}/kept.txt ] || cut -f2 {PREPARED}/kept.txt | "
                "sed 's|^|/|' >>")

# $1 = the base commit, $2 = the bundle's ref. Empties /work (and the new HOME) first, so
# a redo starts from exactly what `up` made.
INIT_SCRIPT = f"""
set -eu
base="$1"; ref="$2"
cat > {BASE_BUNDLE}  # the bundle, on stdin: through the engine, never a path of the host
command -v git >/dev/null || {{ echo "the image has no git" >&2; exit 10; }}
wipe() {{ chmod -R u+rwX "$1" 2>/dev/null || true
         find "$1" -mindepth 1 -maxdepth 1 -exec rm -rf -- {{}} + ; }}
# $1's entries into $2, preserving $3: never $2's own mode or times (a cluster's volume
# root is root's, writable through the Pod's fsGroup: not ours to change).
into() {{ find "$1" -mindepth 1 -maxdepth 1 -exec cp -R --preserve="$3" -t "$2" -- {{}} + ; }}
wipe /work
home=/home/agent; [ ! -d {PREPARED}/home ] || home={PREPARED}/home
if [ -d {NEW_HOME} ]; then
  wipe {NEW_HOME}
  [ ! -d "$home" ] || into "$home" {NEW_HOME} mode,timestamps,links
fi
cd /work
git init -q -b {ARM_BRANCH}
git -c core.logAllRefUpdates=false fetch -q --no-tags {BASE_BUNDLE} "$ref"
git -c core.logAllRefUpdates=false reset -q --hard "$base"
rm -rf .git/FETCH_HEAD .git/logs
test "$(git rev-parse HEAD)" = "$base"
# The dependencies setup installed, as a sample has them (links to the image's, copies of
# what a tool writes in), never part of the arm's work.
for d in skel copy; do
  [ ! -d {PREPARED}/$d ] || into {PREPARED}/$d /work mode,links
done
{EXCLUDE_KEPT} .git/info/exclude
"""

# $1 = base, $2 = the stranded-work message, $3 = the bundle cap in bytes, then the
# ignored paths to force-add. Every outcome is a file in {OUT}; exit 0 once `why` is written.
BUNDLE_SCRIPT = f"""
set -u
base="$1"; msg="$2"; cap="$3"; shift 3
say() {{ printf '%s\\n' "$2" > {OUT}/"$1"; }}
stop() {{ say why "$1"; exit 0; }}
arm=/work/.git; fresh=/tmp/fresh.git
[ -d $arm ] && [ ! -L $arm ] || stop no-git-dir
[ -d $arm/objects ] && [ ! -L $arm/objects ] || stop no-objects
head=$(git --git-dir=$arm -c core.fsmonitor=false -c core.hooksPath=/dev/null \\
       rev-parse --verify -q 'HEAD^{{commit}}') || stop head-unresolved
say head "$head"
git init -q --bare $fresh || exit 3
echo $arm/objects > $fresh/objects/info/alternates
{EXCLUDE_KEPT} $fresh/info/exclude
export GIT_DIR=$fresh GIT_WORK_TREE=/work GIT_INDEX_FILE=/tmp/index
git cat-file -e "$base^{{commit}}" 2>/dev/null || stop base-missing
cd /work
tip=$head
# A HEAD whose tree git cannot read back keeps no stranded work; its commits still go to
# the host, whose object checks decide about them.
if git read-tree "$head" && git add -A; then
  for p in "$@"; do
    if [ -e "$p" ] || [ -L "$p" ]; then git add -f -- "$p" || say add failed; fi
  done
  tree=$(git write-tree) || stop tree-unwritable
  if [ "$tree" != "$(git rev-parse "$head^{{tree}}")" ]; then
    tip=$(printf '%s\\n' "$msg" | git commit-tree "$tree" -p "$head") || stop commit-failed
    say commit "$tip"
  fi
else
  say add failed
fi
say tip "$tip"
count=$(git rev-list --count "$tip" "^$base") || stop history-unreadable
[ "$count" -gt 0 ] || stop no-new-commit
git update-ref refs/heads/{ARM_BRANCH} "$tip" || exit 3
if ! git bundle create -q /tmp/work.bundle refs/heads/{ARM_BRANCH} "^$base"; then
  free=$(df -Pk /tmp | awk 'NR == 2 {{ print $4 }}')
  [ "$free" -lt 1024 ] && stop too-big
  stop bundle-failed
fi
size=$(wc -c < /tmp/work.bundle)
say size "$size"
[ "$size" -le "$cap" ] || stop too-big
cp /tmp/work.bundle {OUT}/work.bundle || exit 3
say why ok
"""

# What a `why` file means, for the record (`no_work: ...`); `ok`, `no-new-commit` and
# `too-big` are outcomes of their own.
NO_WORK = {
    "no-git-dir": "the checkout has no .git directory",
    "no-objects": "the checkout's .git has no objects directory",
    "head-unresolved": "the checkout's HEAD does not resolve to a commit",
    "base-missing": "the base commit is missing from the checkout's objects",
    "tree-unwritable": "the checkout's files could not be written as a tree",
    "commit-failed": "the stranded work could not be committed",
    "history-unreadable": "the history from the base to HEAD cannot be read",
    "bundle-failed": "git bundle create failed on the checkout's history",
}
SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


class CheckoutError(InfraError):
    """Making or taking out an arm's checkout failed for a reason of the rig's (exit 3)."""


@dataclass(frozen=True)
class ArmBox:
    """What the rig needs to reach one arm's checkout (from the experiment's state)."""

    experiment: str
    arm: str
    run: str
    image_id: str
    volume: str         # the checkout, at /work in the sandbox
    home: str | None    # HOME, at /home/agent in the sandbox
    disk_mb: int
    memory_mb: int

    def labels(self, role: str) -> Labels:
        return Labels(self.experiment, role, self.arm, self.run)

    def job_name(self, role: str) -> str:
        name = f"bakeoff-{self.experiment}-{self.arm}-{self.run}-{role}-{secrets.token_hex(3)}"
        return name.lower()

    @property
    def cap_bytes(self) -> int:
        """The largest bundle we take: an honest one never outgrows the checkout."""
        return self.disk_mb * 1024 * 1024

    def job(self, role: str, command: list[str], mounts: list[Bind | Volume],
            env: dict[str, str] | None = None) -> sandbox.RigJob:
        # The checkout and HOME copies (init) or the fresh objects (bundle) are tmpfs
        # pages charged to the job's memory: room for them, on top of git's own needs.
        return sandbox.RigJob(
            name=self.job_name(role), image_id=self.image_id, labels=self.labels(role),
            command=command, mounts=mounts, env={**RIG_ENV, **(env or {})},
            tmp_mb=2 * self.disk_mb, memory_mb=2 * self.disk_mb + 512,
            timeout_s=GIT_STEP_TIMEOUT_S)


@dataclass(frozen=True)
class Taken:
    """What the bundler found in an arm's checkout."""

    head: str | None = None                 # the arm's HEAD, when it resolved
    tip: str | None = None                  # HEAD, or the orchestrator's commit on top
    orchestrator_commit: str | None = None
    bundle: Path | None = None              # None: nothing to import
    no_work: str | None = None              # why nothing could be taken at all
    refused: str | None = None              # why the work is refused unseen (size)
    caveats: list[str] = field(default_factory=list)


def make(engine: ContainerEngine, box: ArmBox, bundle: Path, base: str, ref: str) -> None:
    """Make (or re-make) the arm's checkout at the base, inside its volume."""
    mounts: list[Bind | Volume] = [Volume(box.volume, sandbox.WORKDIR)]
    if box.home is not None:
        mounts.append(Volume(box.home, NEW_HOME))
    job = replace(box.job(INIT_ROLE, ["sh", "-c", INIT_SCRIPT, "init", base, ref], mounts),
                  stdin=bundle)
    result = sandbox.run_job(engine, job)
    if result.exit_code != 0:
        raise CheckoutError(f"arm {box.arm}: could not make its checkout at {base[:12]} "
                            f"(exit {result.exit_code}): {result.stderr_tail}",
                            hint="check the image has git and sh, and that its HOME fits "
                                 "in [limits].disk_mb; then run `up` again")


def head_in_sandbox(engine: ContainerEngine, container_id: str) -> str | None:
    """The checkout's HEAD as the sandbox user sees it (never read on the host)."""
    probed = sandbox.exec_in(engine, container_id, HEAD_PROBE, timeout_s=60)
    head = probed.stdout.strip()
    return head if probed.exit_code == 0 and SHA.fullmatch(head) else None


def take(engine: ContainerEngine, box: ArmBox, base: str, message: str, force_add: list[str],
         scratch: Path) -> Taken:
    """Bundle the arm's work (stranded edits committed) in a fresh rig container."""
    out = _fresh_out(scratch)
    command = ["sh", "-c", BUNDLE_SCRIPT, "bundle", base, message, str(box.cap_bytes),
               *force_add]
    volume = _out_volume(engine, box)
    try:
        mounts: list[Bind | Volume] = [Volume(box.volume, sandbox.WORKDIR, read_only=True),
                                       Volume(volume, OUT_VOLUME)]
        result = sandbox.run_job(engine, box.job(BUNDLER_ROLE, command, mounts, ORCHESTRATOR))
        _take_out(engine, box, volume, out)
    finally:
        engine.remove_volume(volume)
    status = read_status(out)
    if "why" not in status:
        if result.timed_out or result.exit_code == 137:
            stopped = "ran out of time" if result.timed_out else "was killed (out of memory)"
            return Taken(no_work=f"the bundler {stopped} on the checkout")
        raise CheckoutError(f"arm {box.arm}: the bundler failed (exit {result.exit_code}): "
                            f"{result.stderr_tail}", hint="check the image has git and sh")
    return _taken(status, out, box)


def _taken(status: dict[str, str], out: Path, box: ArmBox) -> Taken:
    why = status["why"]
    caveats = []
    if status.get("add") == "failed":
        caveats.append("stranded_work_lost: `git add` failed on the checkout's files; only "
                       "the arm's own commits were kept")
    shas = {key: status[key] for key in ("head", "tip", "commit")
            if SHA.fullmatch(status.get(key, ""))}
    found = Taken(shas.get("head"), shas.get("tip"), shas.get("commit"), caveats=caveats)
    if why == "ok" and found.tip is not None:
        return replace(found, bundle=out / "work.bundle")
    if why == "no-new-commit":
        return found
    if why == "too-big":
        return replace(found, refused=f"bundle over {box.disk_mb} MiB")
    return replace(found, no_work=NO_WORK.get(why, f"the bundler stopped ({why[:40]!r})"))


def _fresh_out(scratch: Path) -> Path:
    """An empty directory of this machine's for what the bundler left."""
    out = scratch / "out"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    return out


def _out_volume(engine: ContainerEngine, box: ArmBox) -> str:
    """A volume on the engine's disk that only the bundler mounts, its root the sandbox
    user's (a directory entry of the filler's tar), for what the bundler leaves. Filled
    beside the checkout: on a cluster it is made on the checkout's node, where the
    bundler must run."""
    name = box.job_name(BUNDLER_ROLE) + "-out"
    made = engine.create_volume(name, box.labels(BUNDLER_ROLE), size_mb=None,
                         owner=sandbox.SANDBOX_UID)
    owned = io.BytesIO()
    with tarfile.open(fileobj=owned, mode="w") as tar:
        info = tarfile.TarInfo(OUT.rsplit("/", 1)[1])
        info.type, info.mode = tarfile.DIRTYPE, 0o700
        info.uid = info.gid = sandbox.SANDBOX_UID
        tar.addfile(info)
    sandbox.fill(engine, made, box.image_id, box.labels(BUNDLER_ROLE), owned.getvalue(),
                 beside=box.volume)
    return made


OUT_NAMES = ("why", "head", "tip", "commit", "add", "size", "work.bundle")


def _take_out(engine: ContainerEngine, box: ArmBox, volume: str, out: Path) -> None:
    """What the bundler left in its volume, read through the engine into `out`: only the
    regular files it writes, each at most the bundle cap."""
    with tempfile.TemporaryFile() as archive:
        sandbox.read_volume(engine, volume, box.image_id, box.labels(BUNDLER_ROLE), archive,
                            beside=box.volume)
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            for member in tar:
                folder, _, name = member.name.rpartition("/")
                if (member.isfile() and folder.endswith("/out") and name in OUT_NAMES
                        and member.size <= box.cap_bytes + STATUS_MAX_BYTES):
                    handle = tar.extractfile(member)
                    if handle is not None:
                        with (out / name).open("wb") as target:
                            shutil.copyfileobj(handle, target)


def read_status(out: Path) -> dict[str, str]:
    """The bundler's status files: regular files only, a few bytes each, one line."""
    status: dict[str, str] = {}
    for name in ("why", "head", "tip", "commit", "add", "size"):
        try:
            fd = os.open(out / name, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                continue
            text = handle.read(STATUS_MAX_BYTES).decode("ascii", errors="replace")
        status[name] = text.strip()
    return status
