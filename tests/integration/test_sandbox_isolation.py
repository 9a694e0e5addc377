"""Principle 6, proved with a real engine, real git and real Postgres: arms cannot see,
reach or starve each other, and the limits hold."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
from pathlib import Path

from runner.commands import up as up_mod
from runner.commands.dispatch import process
from runner.containers import sandbox
from runner.containers.engine import Engine
from runner.manifest import LoadedManifest, load_manifest
from runner.store import state as state_mod
from tests.integration.helpers import CORE, cleanup, git, make_target


def sh(engine: Engine, loaded: LoadedManifest, arm: str, script: str,
       timeout_s: float = 60) -> sandbox.ExecResult:
    _, current = state_mod.require_up(loaded)
    found = current.arm(arm)
    assert found is not None
    return sandbox.exec_in(engine, found.container_id, script, timeout_s=timeout_s)


def test_arm_sees_only_base_history_after_rival_commits_and_later_main_commits(
        engine: Engine, target: LoadedManifest) -> None:
    """A plain worktree would show rivals' branches and the future fix; a per-arm fetch
    of the base commit must show neither."""
    repo = target.repo_path
    base_log = git(repo, "log", "--oneline", "main")
    up_mod.up(engine, target, options=CORE)
    committed = sh(engine, target, "B", "echo fix > fix.txt && git add fix.txt && "
                   "git commit -qm 'B: the fix' && git log --oneline | head -1")
    assert committed.exit_code == 0, committed.stderr
    git(repo, "checkout", "-q", "-b", "later")
    (repo / "future.txt").write_text("the future fix\n")
    git(repo, "add", "future.txt")
    git(repo, "commit", "-q", "-m", "later: the future fix")
    git(repo, "tag", "v-later")
    git(repo, "checkout", "-q", "main")

    seen = sh(engine, target, "A", "git log --all --oneline; git tag; git remote")
    assert seen.exit_code == 0, seen.stderr
    assert seen.stdout.splitlines() == base_log.splitlines()
    leftovers = sh(engine, target, "A", "ls .git/FETCH_HEAD .git/logs 2>/dev/null; git reflog")
    assert (leftovers.exit_code, leftovers.stdout) == (0, "")  # no FETCH_HEAD, no reflog
    objects = sh(engine, target, "A", "git cat-file --batch-all-objects --batch-check | wc -l")
    base_objects = git(repo, "rev-list", "--objects", "main")
    assert int(objects.stdout.strip()) == len(base_objects.splitlines())


def test_arm_cannot_see_rival_checkout_on_the_filesystem(engine: Engine,
                                                         target: LoadedManifest) -> None:
    """B's checkout is a volume of its own: A finds its file nowhere, not even at the
    volume's host mountpoint, and has exactly one mount at /work."""
    up_mod.up(engine, target, options=CORE)
    wrote = sh(engine, target, "B", "echo secret > secret-of-B.txt")
    assert wrote.exit_code == 0
    _, current = state_mod.require_up(target)
    b_volume = current.arm("B").checkout  # type: ignore[union-attr]
    assert sh(engine, target, "B", "cat /work/secret-of-B.txt").stdout == "secret\n"
    b_host = engine.client.volumes.get(b_volume).attrs["Mountpoint"]
    search = sh(engine, target, "A",
                f"find / -xdev -name secret-of-B.txt 2>/dev/null; ls {b_host} 2>&1; "
                "ls /work; cat /proc/mounts | grep -c ' /work '")
    lines = search.stdout.splitlines()
    assert "secret-of-B.txt" not in search.stdout
    assert any("No such file or directory" in line for line in lines)
    assert lines[-1] == "1"  # exactly one mount at /work: its own checkout


def test_role_reads_only_its_own_database_and_owns_it(engine: Engine,
                                                     target: LoadedManifest) -> None:
    """Each arm has a database of its own (issue 11): B's tables are not in A's database
    at all, under any name or search_path, and A is at home in its own `public`."""
    up_mod.up(engine, target, options=CORE)
    created = sh(engine, target, "B", "python3 -c \"import os, psycopg; "
                 "c = psycopg.connect(os.environ['DATABASE_URL']); "
                 "c.execute('CREATE TABLE notes (t text)'); "
                 "c.execute(\\\"INSERT INTO notes VALUES ('b-only')\\\"); c.commit()\"")
    assert created.exit_code == 0, created.stderr
    probe = (
        "import os, psycopg\n"
        "c = psycopg.connect(os.environ['DATABASE_URL'], autocommit=True)\n"
        "for q in ('SELECT * FROM {b}.notes', 'SELECT * FROM public.notes',\n"
        "          'SET search_path = {b}; SELECT * FROM notes',\n"
        "          'CREATE TABLE public.mine (x int)'):\n"
        "    try:\n"
        "        c.execute(q)\n"
        "        print('ALLOWED', q)\n"
        "    except psycopg.Error as e:\n"
        "        print(e.sqlstate, str(e).splitlines()[0])\n"
    )
    b_db = state_mod.require_up(target)[1].arm("B").schema_name  # type: ignore[union-attr]
    result = sh(engine, target, "A", f"python3 -c \"{probe.format(b=b_db)}\"")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        f'42P01 relation "{b_db}.notes" does not exist',
        '42P01 relation "public.notes" does not exist',
        '42P01 relation "notes" does not exist',
        "ALLOWED CREATE TABLE public.mine (x int)",
    ]


SERVE = ("echo {arm} > /tmp/who && cd /tmp && "
         "nohup python3 -m http.server 8000 --bind 0.0.0.0 >/tmp/server.log 2>&1 &")
FETCH = ("for i in $(seq 1 50); do python3 -c \"import urllib.request;"
         "print(urllib.request.urlopen('http://127.0.0.1:8000/who').read().decode().strip())\" "
         "2>/dev/null && exit 0; sleep 0.1; done; exit 1")


def test_two_arms_listen_on_port_8000_at_once(engine: Engine, target: LoadedManifest) -> None:
    up_mod.up(engine, target, options=CORE)
    for arm in ("A", "B"):
        assert sh(engine, target, arm, SERVE.format(arm=arm)).exit_code == 0
    answers = {arm: sh(engine, target, arm, FETCH).stdout.strip() for arm in ("A", "B")}
    assert answers == {"A": "A", "B": "B"}


REACH = (
    "import socket\n"
    "for host, port in {targets}:\n"
    "    s = socket.socket(); s.settimeout(3)\n"
    "    try:\n"
    "        s.connect((host, port)); print('REACHED', host)\n"
    "    except OSError as e:\n"
    "        print('blocked', host)\n"
)


def _accept_some(listener: socket.socket) -> None:
    with contextlib.suppress(OSError):
        for _ in range(4):
            listener.accept()[0].close()


def test_arm_reaches_neither_the_outside_nor_rival(engine: Engine, tmp_path: Path) -> None:
    """The only address a test may try is one of this machine's: a listener on the
    docker0 gateway (a host address outside every arm network). An internal arm must
    not reach it nor B; an arm with network = "egress" reaches it (the probe can tell)."""
    loaded = load_manifest(make_target(tmp_path / "repo", ["A", "B", "E"], egress=("E",)))
    ipam = engine.client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    gateway = ipam.get("Gateway") or str(next(ipaddress.ip_network(ipam["Subnet"]).hosts()))
    listener = socket.create_server((gateway, 0))
    port = listener.getsockname()[1]
    listener.settimeout(60)
    threading.Thread(target=_accept_some, args=(listener,), daemon=True).start()
    try:
        up_mod.up(engine, loaded, options=CORE)
        assert sh(engine, loaded, "B", SERVE.format(arm="B")).exit_code == 0
        assert sh(engine, loaded, "B", FETCH).exit_code == 0  # B really listens
        _, current = state_mod.require_up(loaded)
        b = engine.client.containers.get(current.arm("B").container_id)  # type: ignore[union-attr]
        b_ip = next(iter(b.attrs["NetworkSettings"]["Networks"].values()))["IPAddress"]
        both = REACH.format(targets=((b_ip, 8000), (gateway, port)))
        assert sh(engine, loaded, "A", f'python3 -c "{both}"').stdout.splitlines() == [
            f"blocked {b_ip}", f"blocked {gateway}"]
        # The egress arm probes only the host listener: an egress route could carry a
        # probe of any other address off this machine.
        host_only = REACH.format(targets=((gateway, port),))
        assert sh(engine, loaded, "E", f'python3 -c "{host_only}"').stdout.splitlines() == [
            f"REACHED {gateway}"]
    finally:
        listener.close()
        cleanup(engine, loaded)


FORK_BOMB = (
    "import os, time\n"
    "n = 0\n"
    "while True:\n"
    "    try:\n"
    "        pid = os.fork()\n"
    "    except OSError as e:\n"
    "        print('blocked', n, e.errno); break\n"
    "    if pid == 0:\n"
    "        time.sleep(2); os._exit(0)\n"
    "    n += 1\n"
)


def test_fork_bomb_is_held_by_pids_limit_and_memory_hog_is_killed(
        engine: Engine, target: LoadedManifest) -> None:
    up_mod.up(engine, target, options=CORE)
    bomb = sh(engine, target, "A", f"python3 -c \"{FORK_BOMB}\"", timeout_s=60)
    verdict, forks, errno_value = bomb.stdout.split()
    assert verdict == "blocked" and errno_value == "11"  # EAGAIN from the pids cgroup
    assert 0 < int(forks) < target.manifest.limits.pids
    assert engine.client.ping()
    assert sh(engine, target, "B", "echo alive").stdout == "alive\n"

    hog = sh(engine, target, "A", "python3 -c \"b = bytearray(1024 * 1024 * 1024); "
             "print('survived')\"", timeout_s=60)
    assert hog.exit_code == 137 and not hog.timed_out
    assert "survived" not in hog.stdout
    assert sh(engine, target, "A", "echo still-here").stdout == "still-here\n"


def test_only_the_size_limited_tmpfs_mounts_are_writable(engine: Engine,
                                                        target: LoadedManifest) -> None:
    """The root filesystem is read-only: as the sandbox user, the only writable places
    are the checkout, HOME, /tmp and /var/tmp (each a size-limited tmpfs). The main
    process is root's but has no capability and cannot gain one."""
    up_mod.up(engine, target, options=CORE)
    writable = sh(engine, target, "A", "find / -xdev -writable 2>/dev/null | sort")
    assert writable.stdout.split() == ["/home/agent", "/tmp", "/var/tmp", "/work"]
    mounts = sh(engine, target, "A", "grep -E ' (/work|/home/agent|/tmp|/var/tmp) ' "
                "/proc/mounts | cut -d' ' -f2,3 | sort")
    assert mounts.stdout.splitlines() == ["/home/agent tmpfs", "/tmp tmpfs",
                                          "/var/tmp tmpfs", "/work tmpfs"]
    home = sh(engine, target, "A", "ls -A $HOME")  # a copy of the image's HOME
    assert home.stdout.split() == [".bash_logout", ".bashrc", ".profile"]
    keeper = sh(engine, target, "A", "for d in /proc/[0-9]*; do "
                "[ \"$(cat $d/comm)\" = sleep ] && grep -E '^(Uid|CapEff|NoNewPrivs)' $d/status;"
                " done")
    fields = [line.split()[:2] for line in keeper.stdout.splitlines()]
    assert fields == [["Uid:", "0"], ["CapEff:", "0000000000000000"], ["NoNewPrivs:", "1"]]


def test_sweep_kills_every_process_of_the_sandbox_user_and_the_checkout_survives(
        engine: Engine, target: LoadedManifest) -> None:
    """Pins: the sweep's `kill -KILL -1` as the sandbox user also killed the container's
    main process, so the container stopped (and restarted); with the checkout on a tmpfs
    volume that would lose it. The main process is root's now: the container keeps
    running, the agent's processes are gone, the checkout is intact."""
    up_mod.up(engine, target, options=CORE)
    _, current = state_mod.require_up(target)
    a = current.arm("A")
    assert a is not None
    started = sh(engine, target, "A", "echo mine > mine.txt; setsid sleep 300 "
                 "</dev/null >/dev/null 2>&1 & nohup sleep 301 >/dev/null 2>&1 & echo ok")
    assert started.stdout == "ok\n"
    container = engine.client.containers.get(a.container_id)
    started_at = container.attrs["State"]["StartedAt"]
    assert sorted(process.leftovers(engine, a.container_id)) == ["sleep", "sleep"]
    assert sorted(process.sweep(engine, a.container_id)) == ["sleep", "sleep"]
    container.reload()
    assert (container.status, container.attrs["State"]["StartedAt"]) == ("running", started_at)
    assert process.leftovers(engine, a.container_id) == []
    assert sh(engine, target, "A", "cat mine.txt; git status --porcelain").stdout == (
        "mine\n?? mine.txt\n")


def test_a_sandbox_churning_processes_is_listed_every_time_and_swept(
        engine: Engine, target: LoadedManifest) -> None:
    """Pins: a process that ended between the listing's glob of /proc and its read made
    the listing's exit status nonzero, read as "cannot list the sandbox's processes": 5 of
    60 listings under a loop of short-lived processes (measured; when it bites depends on
    the pids, so tests/unit/test_exec_exit.py pins the script itself), and the arm's
    dispatch stopped the round. Every listing succeeds and names the loop; the sweep ends
    it. And a process named with a newline is a leftover the sweep ends, not a crash."""
    up_mod.up(engine, target, options=CORE)
    _, current = state_mod.require_up(target)
    a = current.arm("A")
    assert a is not None
    started = sh(engine, target, "A", "setsid sh -c 'while :; do /bin/true; done' "
                 "</dev/null >/dev/null 2>&1 & echo ok")
    assert started.stdout == "ok\n"
    listed = [process.leftovers(engine, a.container_id) for _ in range(20)]
    assert all("sh" in found and set(found) <= {"sh", "true"} for found in listed)
    assert "sh" in process.sweep(engine, a.container_id)
    assert process.leftovers(engine, a.container_id) == []
    # The attack: a process that names itself with a newline (its stat line cut there)
    # made the listing crash; it is a leftover by the name the kernel escapes (one line,
    # never a forged second process), and the sweep ends it.
    renamed = sh(engine, target, "A", "setsid sh -c 'printf \"a\\n9 (b\" > /proc/$$/comm; "
                 "while :; do sleep 1; done' </dev/null >/dev/null 2>&1 & p=$!; sleep 0.5; echo $p")
    assert renamed.stdout.strip().isdigit()
    odd = "a\\n9 (b"
    found = process.leftovers(engine, a.container_id)
    assert odd in found and set(found) <= {odd, "sleep"}
    assert odd in process.sweep(engine, a.container_id)
    assert process.leftovers(engine, a.container_id) == []
