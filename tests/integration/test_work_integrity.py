"""The host never reads an arm's `.git` (issue 11, item 4) and the sandbox's limits hold
against what an agent leaves behind (item 5). Real engine, real git, scripted agents.

Each test is one attack seen on the old design, with the exact outcome it must get now:
the arm's work leaves as a bundle made in a fresh rig container and is imported with
every object checked; an arm that breaks its own `.git` stands on the base; nothing the
agent left running works after the time limit; `down` removes everything.
"""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.commands import run as run_mod
from runner.commands import up as up_mod
from runner.commands.dispatch.record import ArmRecord, ArmState, load_record, record_dir
from runner.commands.dispatch.run import dispatch
from runner.containers import sandbox
from runner.containers.backend import LABEL_EXPERIMENT
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.manifest import LoadedManifest, load_manifest
from runner.store import state as state_mod
from runner.store.layout import experiment_dir
from tests.integration.helpers import CORE, cleanup, cli, git, make_target

HONEST = "echo 'VALUE = 2' > app.py && git add app.py && git commit -qm 'honest fix'"


def agent(script: str) -> str:
    """A scripted agent as one `command`: its shell script, base64-encoded (no template
    placeholder or TOML quoting can touch it)."""
    encoded = base64.b64encode(script.encode()).decode()
    return f"echo {encoded} | base64 -d > /tmp/agent.sh && sh /tmp/agent.sh"


def experiment(root: Path, agents: dict[str, str], *, timeout_s: float = 30,
               disk_mb: int | None = None) -> LoadedManifest:
    """make_target's repo with these arms' scripts, dispatch limit and disk limit."""
    manifest = make_target(root, list(agents), database=False)
    text = manifest.read_text()
    limits = f"check_timeout_s = 60\ndispatch_timeout_s = {timeout_s}\n"
    if disk_mb is not None:
        limits += f"disk_mb = {disk_mb}\n"
    text = text.replace("check_timeout_s = 60\n", limits)
    blocks = text.split("[[arms]]")
    for index, (arm, script) in enumerate(agents.items(), start=1):
        assert f'id = "{arm}"' in blocks[index]
        blocks[index] = blocks[index].replace('command = "true"', f'command = "{agent(script)}"')
    manifest.write_text("[[arms]]".join(blocks))
    git(root, "commit", "-qam", "the arms' scripted agents")
    return load_manifest(manifest)


@pytest.fixture
def made(engine: Engine, built_images: dict[str, BuiltImage]) -> Iterator[list[LoadedManifest]]:
    """Experiments a test makes, each taken down (and removed by label) afterwards."""
    experiments: list[LoadedManifest] = []
    yield experiments
    for loaded in experiments:
        cleanup(engine, loaded)


def up(engine: Engine, made: list[LoadedManifest], loaded: LoadedManifest) -> LoadedManifest:
    made.append(loaded)
    up_mod.up(engine, loaded, options=CORE)
    return loaded


def record(loaded: LoadedManifest, arm: str) -> ArmRecord:
    directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    found = load_record(record_dir(directory, "first", arm) / "arm.json")
    assert found is not None
    return found


def branch_head(loaded: LoadedManifest, arm: str) -> str:
    name = loaded.manifest.experiment.name
    return git(loaded.repo_path, "rev-parse", f"bakeoff-arms/{name}/first/{arm}")


def in_sandbox(engine: Engine, loaded: LoadedManifest, arm: str, script: str) -> str:
    found = state_mod.require_up(loaded)[1].arm(arm)
    assert found is not None
    return sandbox.exec_in(engine, found.container_id, script, timeout_s=60).stdout


def base_of(loaded: LoadedManifest) -> str:
    return git(loaded.repo_path, "rev-parse", "main")


# --- the arm's .git is the arm's: the host never follows it -------------------------------

# The host path of the repository, known to the agent (it was in /proc/self/mountinfo
# while the brief was a bind of <repo>/.bakeoff/...; now every mount is a volume, but a
# guess does as well): REPO is replaced by the test's own repository path.
SYMLINKED_REF = """
rm -f .git/refs/heads/work
ln -s "REPO/.git/refs/bakeoff/reference/first" .git/refs/heads/work
: > .git/index
"""


def test_symlinked_branch_ref_to_the_host_reference_is_not_the_arms_work(
        engine: Engine, made: list[LoadedManifest], tmp_path: Path) -> None:
    """Pins: the agent replaced `.git/refs/heads/work` by a symlink to the host repo's
    reference ref (the host path is in /proc/self/mountinfo) and emptied its index; the
    host's git followed it and the arm was scored on the reference commit and won. Now
    the ref is resolved inside a rig container, where that path does not exist: the arm
    has no work and stands on the base."""
    repo = tmp_path / "repo"
    loaded = experiment(repo, {"plagiarist": SYMLINKED_REF.replace("REPO", str(repo))})
    base = base_of(loaded)
    (repo / "app.py").write_text("VALUE = 2\n")
    git(repo, "add", "app.py")
    tree = git(repo, "write-tree")
    reference = git(repo, "commit-tree", tree, "-p", base, "-m", "reference for first")
    git(repo, "reset", "-q", "--hard", base)
    git(repo, "update-ref", "refs/bakeoff/reference/first", reference)
    up(engine, made, loaded)

    dispatch(engine, loaded, environ={})
    link = in_sandbox(engine, loaded, "plagiarist", "readlink .git/refs/heads/work")
    assert link.strip() == f"{repo}/.git/refs/bakeoff/reference/first"  # the attack was made
    # and the sandbox itself no longer tells where the host's repository is
    assert str(repo) not in in_sandbox(engine, loaded, "plagiarist", "cat /proc/self/mountinfo")
    kept = record(loaded, "plagiarist")
    assert branch_head(loaded, "plagiarist") == base != reference
    assert (kept.state, kept.commit, kept.commits, kept.work_refused) == (
        ArmState.FINISHED, base, 0, None)
    assert "no_work: the checkout's HEAD does not resolve to a commit; the arm stands on " \
           "the base commit" in kept.caveats


DUPLICATE_TREE = """
blob=$(echo stolen | git hash-object -w --stdin)
tree=$(python3 -c "
import binascii, subprocess, sys
entry = b'100644 app.py\\0' + binascii.unhexlify(sys.argv[1])
print(subprocess.run(['git', 'hash-object', '-t', 'tree', '-w', '--literally', '--stdin'],
                     input=entry + entry, capture_output=True, check=True).stdout.decode())
" "$blob")
commit=$(git commit-tree "$tree" -p HEAD -m 'two entries of one name')
git update-ref refs/heads/work "$commit"
"""


def test_duplicate_tree_entries_are_refused_as_unsafe_work(
        engine: Engine, made: list[LoadedManifest], tmp_path: Path) -> None:
    """Pins: a tree with two entries of one name went into the host repo unchecked (a
    bundle fetch does not fsck). Now index-pack --strict refuses it in quarantine: that
    arm's work is refused (its branch is the base), the other arm's work is kept."""
    loaded = up(engine, made, experiment(tmp_path / "repo",
                                         {"honest": HONEST, "forger": DUPLICATE_TREE}))
    base = base_of(loaded)
    dispatch(engine, loaded, environ={})

    forger = record(loaded, "forger")
    assert forger.work_refused == "fsck: duplicateEntries: contains duplicate file entries"
    assert (forger.state, forger.commit, branch_head(loaded, "forger")) == (
        ArmState.FINISHED, base, base)
    honest = record(loaded, "honest")
    assert honest.work_refused is None and honest.commits == 1
    assert branch_head(loaded, "honest") == honest.commit != base
    assert git(loaded.repo_path, "show", f"{honest.commit}:app.py") == "VALUE = 2"
    # The refused objects never reached the main repository.
    forged = in_sandbox(engine, loaded, "forger", "git rev-parse HEAD").strip()
    assert forged != base
    present = subprocess.run(["git", "cat-file", "-e", forged], cwd=loaded.repo_path,
                             check=False)
    assert present.returncode != 0


FSMONITOR = """
printf '#!/bin/sh\\necho ran > /tmp/fsmonitor-ran\\nsleep 8\\necho late > /work/late.txt\\n' \
  > /tmp/fsmonitor.sh
chmod +x /tmp/fsmonitor.sh
git config core.fsmonitor /tmp/fsmonitor.sh
echo stranded > stranded.txt
sleep 60
"""


def test_fsmonitor_cannot_extend_the_dispatch_time_limit(
        engine: Engine, made: list[LoadedManifest], tmp_path: Path) -> None:
    """Pins: `core.fsmonitor` in the arm's .git/config ran during the orchestrator's
    `git add -A` (inside the sandbox), so work done after the limit was committed. Now
    the stranded work is committed in a fresh repository: the hook never runs."""
    loaded = up(engine, made, experiment(tmp_path / "repo", {"stretcher": FSMONITOR},
                                         timeout_s=4))
    dispatch(engine, loaded, environ={})
    time.sleep(10)  # past the hook's own delay, had it run

    kept = record(loaded, "stretcher")
    assert (kept.state, kept.timed_out) == (ArmState.TIMED_OUT, True)
    assert in_sandbox(engine, loaded, "stretcher", "git config core.fsmonitor") == (
        "/tmp/fsmonitor.sh\n")  # the trap was set
    files = git(loaded.repo_path, "show", "--name-only", "--format=", kept.commit or "")
    assert files.split() == ["stranded.txt"]
    assert kept.orchestrator_commit == kept.commit
    # The hook never ran at all: neither its first line nor its late one.
    assert in_sandbox(engine, loaded, "stretcher", "ls /tmp/fsmonitor-ran /work/late.txt "
                      "2>/dev/null | wc -l").strip() == "0"


BACKGROUND = """
setsid sh -c 'sleep 6; echo late > /work/late.txt; echo late > /tmp/late.txt' \
  < /dev/null > /dev/null 2>&1 &
echo early > early.txt
sleep 60
"""


def test_background_process_cannot_work_after_the_time_limit(
        engine: Engine, made: list[LoadedManifest], tmp_path: Path) -> None:
    """Pins: a process the agent started in a session of its own outlives `timeout`'s
    kill of the agent's process group. The sweep kills every process of the sandbox
    user before the work is taken: the file it writes after the limit never exists."""
    loaded = up(engine, made, experiment(tmp_path / "repo", {"lingerer": BACKGROUND},
                                         timeout_s=3))
    dispatch(engine, loaded, environ={})
    time.sleep(8)  # past the background writer's own delay

    kept = record(loaded, "lingerer")
    assert kept.state == ArmState.TIMED_OUT
    files = git(loaded.repo_path, "show", "--name-only", "--format=", kept.commit or "")
    assert files.split() == ["early.txt"]
    assert "2 process(es) still running after the agent exited were killed before its " \
           "work was taken" in kept.caveats
    assert in_sandbox(engine, loaded, "lingerer",
                      "ls /work/late.txt /tmp/late.txt 2>/dev/null | wc -l").strip() == "0"
    assert in_sandbox(engine, loaded, "lingerer", "cat early.txt") == "early\n"


def test_agent_that_deletes_its_git_is_scored_on_the_base_and_run_goes_on(
        engine: Engine, made: list[LoadedManifest], tmp_path: Path) -> None:
    """Pins: an agent that deleted its own `.git` made dispatch record `rig_error`, so
    `score` refused every arm and `run` redid it forever. Now it has no work: its state
    is the agent's own, its branch the base, and the dispatch counts as done."""
    loaded = up(engine, made, experiment(tmp_path / "repo", {
        "honest": HONEST, "vandal": "rm -rf .git && echo 'VALUE = 3' > app.py"}))
    base = base_of(loaded)
    report = dispatch(engine, loaded, environ={})

    assert report.rig_errors == []
    vandal = record(loaded, "vandal")
    assert (vandal.state, vandal.exit_code, vandal.commit, vandal.work_refused) == (
        ArmState.FINISHED, 0, base, None)
    assert branch_head(loaded, "vandal") == base
    assert [c for c in vandal.caveats if c.startswith("no_work")] == [
        "no_work: the checkout has no .git directory; the arm stands on the base commit"]
    assert record(loaded, "honest").commits == 1
    assert run_mod.dispatched(loaded, "first")  # `run` goes on to scoring
    again = dispatch(engine, loaded, environ={})
    assert [o.skipped for o in again.outcomes] == [True, True]


def test_down_removes_everything_when_an_arms_head_does_not_resolve(
        engine: Engine, made: list[LoadedManifest], tmp_path: Path) -> None:
    """Pins: `down` ran `git rev-parse HEAD` on the host in every checkout; one whose HEAD
    did not resolve made it exit 1 and leave every container running. Now the arm's
    HEAD is read in a rig container; `down` says there is no work and removes it all,
    and keeps the other arm's work even from a sandbox left paused."""
    loaded = up(engine, made, experiment(tmp_path / "repo", {"A": "true", "B": "true"}))
    name = loaded.manifest.experiment.name
    broken = in_sandbox(engine, loaded, "A", "echo 'ref: refs/heads/nowhere' > .git/HEAD && "
                        "git rev-parse HEAD 2>&1; echo changed > app.py")
    assert "unknown revision" in broken or "ambiguous argument 'HEAD'" in broken
    in_sandbox(engine, loaded, "B", "echo kept > kept.txt && git add kept.txt && "
               "git commit -qm 'B, by hand'")
    # B as a killed orchestrator leaves it: paused while its work was being taken.
    sandbox.pause(engine, state_mod.require_up(loaded)[1].arms[1].container_id)

    down = cli(loaded.repo_path, "down", timeout=300)
    assert down.returncode == 0, down.stderr
    assert "arm A: no work to keep (the checkout's HEAD does not resolve to a commit)" in (
        down.stdout + down.stderr)
    left = {kind: len(engine.labelled(kind, {LABEL_EXPERIMENT: name}))
            for kind in ("container", "network", "volume")}
    assert left == {"container": 0, "network": 0, "volume": 0}
    files = git(loaded.repo_path, "show", "--name-only", "--format=",
                f"bakeoff-arms/{name}/first/B")
    assert files.split() == ["kept.txt"]
    assert git(loaded.repo_path, "branch", "--list", f"bakeoff-arms/{name}/first/A") == ""


FILL = "dd if=/dev/zero of={path}/fill bs=1M count=256 2>&1 | grep -o 'No space left on device'"


def test_sandbox_disk_is_limited(engine: Engine, made: list[LoadedManifest],
                                 tmp_path: Path) -> None:
    """Pins: nothing bounded what an agent wrote: its checkout was a host directory and
    the container's root filesystem a host layer. Now every writable place is a
    size-limited tmpfs: writing past disk_mb is ENOSPC inside, the root filesystem is
    read-only, the host's disk does not move, and nothing appears outside the
    experiment's state directory."""
    loaded = up(engine, made, experiment(tmp_path / "repo", {"filler": "true"}, disk_mb=32))
    before_files = _files_outside_state(tmp_path)
    used_before = shutil.disk_usage("/var/lib/docker").used
    answers = {path: in_sandbox(engine, loaded, "filler", FILL.format(path=path)).strip()
               for path in ("/work", "/tmp", "/var/tmp", "/home/agent")}
    used_after = shutil.disk_usage("/var/lib/docker").used

    assert answers == dict.fromkeys(answers, "No space left on device")
    sizes = in_sandbox(engine, loaded, "filler",
                       "for p in /work /tmp /var/tmp /home/agent; do "
                       "du -sm $p/fill | cut -f1; done").split()
    assert all(31 <= int(size) <= 32 for size in sizes), sizes
    rootfs = in_sandbox(engine, loaded, "filler", "touch /fill 2>&1; touch /etc/fill 2>&1")
    assert rootfs.count("Read-only file system") == 2
    # 4 x 32 MiB went to tmpfs; had they gone to disk, 4 x 256 MiB would have (other
    # tests may write on this disk meanwhile: the bound is half of that).
    assert used_after - used_before < 512 * 1024 * 1024, (used_before, used_after)
    assert _files_outside_state(tmp_path) == before_files


def _files_outside_state(root: Path) -> list[str]:
    """Every path under `root` except the experiment's state (.bakeoff) and .git."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if not re.search(r"/(\.bakeoff|\.git)(/|$)", f"/{p.relative_to(root)}"))


def test_dispatch_resumes_an_arm_whose_sandbox_a_killed_dispatch_left_paused(
        engine: Engine, made: list[LoadedManifest], tmp_path: Path) -> None:
    """Pins: a dispatch killed while it took an arm's work leaves that sandbox paused;
    every exec in it failed, so the arm would be a rig error on every re-run. The next
    dispatch unpauses it first."""
    loaded = up(engine, made, experiment(tmp_path / "repo", {"A": HONEST}))
    container = state_mod.require_up(loaded)[1].arms[0].container_id
    sandbox.pause(engine, container)
    report = dispatch(engine, loaded, environ={})
    assert report.rig_errors == []
    assert (record(loaded, "A").state, record(loaded, "A").commits) == (ArmState.FINISHED, 1)
