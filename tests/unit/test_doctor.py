"""`doctor`'s lines from facts (no docker): every check's ok and not-ok line, exactly, and
the command that fixes what is not ok (issue 34)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from runner.commands import doctor
from runner.commands.doctor import DoctorCheck, Report
from runner.containers.backend import EngineFacts
from runner.containers.dockerspec import facts_of
from runner.containers.engine import Engine
from runner.containers.images.present import ImageState
from runner.install import compose

FIX = "bakeoff-sandbox doctor --fix"
LOCAL = "unix:///var/run/docker.sock"
# What this machine's engine answered (docker.io 20.10, cgroup v1, overlay2 on ext4).
INFO = {"ServerVersion": "20.10.24+dfsg1", "CgroupVersion": "1", "CgroupDriver": "cgroupfs",
        "MemoryLimit": True, "SwapLimit": True, "PidsLimit": True, "CpuCfsQuota": True,
        "Driver": "overlay2", "DriverStatus": [["Backing Filesystem", "extfs"],
                                               ["Supports d_type", "true"]]}
VERSION = {"Version": "20.10.24+dfsg1", "ApiVersion": "1.41", "MinAPIVersion": "1.12"}
FACTS = facts_of(INFO, VERSION)


def lines(check: DoctorCheck) -> list[str]:
    return check.lines()


def test_facts_are_read_from_docker_info_and_version() -> None:
    assert facts_of(INFO, VERSION) == EngineFacts(
        server_version="20.10.24+dfsg1", api_version="1.41", cgroup_version="1",
        cgroup_driver="cgroupfs",
        limits={"memory": True, "swap": True, "pids": True, "cpu": True},
        storage_driver="overlay2", backing_filesystem="extfs")


def test_engine_lines() -> None:
    assert lines(doctor.engine_check(LOCAL, FACTS)) == [
        "engine          ok      Docker 20.10.24+dfsg1 answers at unix:///var/run/docker.sock"]
    assert lines(doctor.engine_check(LOCAL, None, "no Docker engine answers at ...")) == [
        "engine          missing no Docker engine answers at unix:///var/run/docker.sock",
        "  fix: bakeoff-sandbox doctor --fix (as root on Debian it installs and starts "
        "dockerd)"]


def test_an_engine_doctor_does_not_start_is_named_with_its_address() -> None:
    """DOCKER_HOST elsewhere: starting this machine's dockerd would not make it answer."""
    assert lines(doctor.engine_check("tcp://10.0.0.9:2375", None, "refused")) == [
        "engine          missing no Docker engine answers at tcp://10.0.0.9:2375",
        "  fix: start the engine at tcp://10.0.0.9:2375, or: unset DOCKER_HOST && "
        "bakeoff-sandbox doctor --fix"]


def test_a_socket_that_refuses_this_user_is_wrong_not_missing() -> None:
    error = ("no Docker engine answers at unix:///var/run/docker.sock (('Connection "
             "aborted.', PermissionError(13, 'Permission denied')))")
    assert lines(doctor.engine_check(LOCAL, None, error)) == [
        "engine          wrong   the engine at unix:///var/run/docker.sock refuses this user "
        "(permission denied)",
        "  fix: usermod -aG docker $USER, then log in again"]


def test_api_lines() -> None:
    assert lines(doctor.api_check(FACTS)) == [
        "api             ok      API 1.41 (needs 1.41 or later)"]
    assert lines(doctor.api_check(replace(FACTS, api_version="1.40"))) == [
        "api             wrong   API 1.40, older than the 1.41 bakeoff-sandbox needs",
        "  fix: apt-get install -y docker.io (Debian 12's Docker 20.10 speaks API 1.41), "
        "then restart the engine"]
    assert doctor.api_check(replace(FACTS, api_version="1.9")).status == "wrong"
    assert doctor.api_check(replace(FACTS, api_version="1.45")).status == "ok"


def test_cgroup_lines() -> None:
    assert lines(doctor.cgroup_check(FACTS)) == [
        "cgroup          ok      cgroup v1 (cgroupfs): memory, swap, pids and CPU limits "
        "enforced"]
    v2 = replace(FACTS, cgroup_version="2", cgroup_driver="systemd")
    assert lines(doctor.cgroup_check(v2)) == [
        "cgroup          ok      cgroup v2 (systemd): memory, swap, pids and CPU limits "
        "enforced"]
    no_swap = replace(v2, limits={**FACTS.limits, "swap": False, "pids": False})
    assert lines(doctor.cgroup_check(no_swap)) == [
        "cgroup          wrong   cgroup v2: the engine cannot enforce swap, pids limits, "
        "which every sample's container gets",
        "  fix: boot with the memory, pids and cpu controllers (on cgroup v1 add "
        "`cgroup_enable=memory swapaccount=1` to the kernel command line), then restart "
        "the engine"]
    assert lines(doctor.cgroup_check(replace(FACTS, cgroup_version=""))) == [
        "cgroup          wrong   the engine reports no cgroup version (''): no limit can be "
        "enforced",
        "  fix: run the engine on Linux with cgroups (v2 preferred)"]


def test_storage_lines() -> None:
    assert lines(doctor.storage_check(FACTS)) == ["storage         ok      overlay2 on extfs"]
    fix = ('  fix: set "storage-driver": "overlay2" in /etc/docker/daemon.json, restart the '
           "engine, then bakeoff-sandbox doctor --fix (images are rebuilt)")
    assert lines(doctor.storage_check(replace(FACTS, storage_driver="vfs"))) == [
        "storage         wrong   vfs: no copy-on-write: every container is a full copy of "
        "its image, so each sample's fresh container copies the whole toolchain image "
        "(slow, disk-hungry)", fix]
    assert lines(doctor.storage_check(replace(FACTS, storage_driver="btrfs"))) == [
        "storage         wrong   btrfs: not measured with bakeoff-sandbox: sample times, disk "
        "use and the full-disk detection are unverified", fix]


def test_compose_lines() -> None:
    at = Path("/c/compose/2.40.3/docker-compose")
    assert lines(doctor.compose_check(compose.Found(at, "ok"))) == [
        "compose         ok      Docker Compose v2.40.3 at /c/compose/2.40.3/docker-compose"]
    assert lines(doctor.compose_check(compose.Found(at, "missing"))) == [
        "compose         missing no Docker Compose 2.40.3 at "
        "/c/compose/2.40.3/docker-compose", f"  fix: {FIX}"]
    other = compose.Found(at, "wrong", "Docker Compose version v2.39.0")
    assert lines(doctor.compose_check(other)) == [
        "compose         wrong   /c/compose/2.40.3/docker-compose prints 'Docker Compose "
        "version v2.39.0', not 'Docker Compose version v2.40.3'", f"  fix: {FIX}"]


def test_image_lines() -> None:
    ok = ImageState("python", "bakeoff/python:latest", "ok", "sha256:" + "a" * 64,
                    "sha256:" + "b" * 64, "sha256:" + "b" * 64)
    assert lines(doctor.image_check(ok)) == [
        "image python    ok      bakeoff/python:latest sha256:aaaaaaaaaaaa identity "
        "sha256:bbbbbbbbbbbb"]
    missing = ImageState("go", "bakeoff/go:latest", "missing", wanted="sha256:" + "c" * 64)
    assert lines(doctor.image_check(missing)) == [
        "image go        missing bakeoff/go:latest is not built",
        "  fix: bakeoff-sandbox images build go"]
    stale = replace(ok, status="wrong", wanted="sha256:" + "d" * 64)
    assert lines(doctor.image_check(stale)) == [
        "image python    wrong   bakeoff/python:latest is identity sha256:bbbbbbbbbbbb, "
        "images/python now makes sha256:dddddddddddd",
        "  fix: bakeoff-sandbox images build python"]
    orphan = replace(ok, status="wrong", wanted="")
    assert lines(doctor.image_check(orphan)) == [
        "image python    wrong   bakeoff/python:latest is built FROM a base that is missing",
        "  fix: bakeoff-sandbox images build python"]
    assert lines(doctor.no_manifest_check()) == [
        "images          ok      no manifest here: -f FILE checks the images one needs"]


def test_network_lines() -> None:
    assert lines(doctor.network_check(LOCAL, None)) == [
        "networks        ok      made and removed an internal network with our labels"]
    exhausted = ("the engine at unix:///var/run/docker.sock refused to create network x "
                 "(400): could not find an available, non-overlapping IPv4 address pool "
                 "among the defaults to assign to the network")
    assert lines(doctor.network_check(LOCAL, exhausted)) == [
        f"networks        wrong   the engine cannot make an internal network: {exhausted}",
        "  fix: bakeoff-sandbox gc --all (our leftovers; else `docker network prune`, or "
        "more default-address-pools in /etc/docker/daemon.json)"]
    assert lines(doctor.network_check(LOCAL, "plugin not found")) == [
        "networks        wrong   the engine cannot make an internal network: plugin not "
        "found",
        "  fix: docker network create --internal probe (on the engine at "
        "unix:///var/run/docker.sock), and fix what it says"]


def test_git_lines() -> None:
    assert lines(doctor.git_check("/usr/bin/git", "git version 2.39.5")) == [
        "git             ok      git version 2.39.5 at /usr/bin/git"]
    assert lines(doctor.git_check(None, "")) == [
        "git             missing git is not on PATH", "  fix: apt-get install -y git"]


def test_a_check_that_needs_the_engine_says_so_when_none_answers() -> None:
    assert lines(doctor.unchecked("networks")) == [
        "networks        missing not checked: no engine answers (fix the engine first)"]


def test_the_report_is_ok_only_when_every_check_is() -> None:
    good = Report((doctor.git_check("/usr/bin/git", "git version 2"),
                   doctor.storage_check(FACTS)))
    bad = Report((doctor.git_check(None, ""), doctor.storage_check(FACTS)))
    assert good.ok and not bad.ok
    assert (bad.status("git"), bad.status("storage")) == ("missing", "ok")


def test_manifest_defaults_to_the_one_here(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert doctor.manifest_path(None) is None
    assert doctor.manifest_path(Path("x.toml")) == Path("x.toml")
    (tmp_path / "bakeoff.toml").write_text("", encoding="utf-8")
    assert doctor.manifest_path(None) == Path("bakeoff.toml")


@pytest.mark.parametrize(("engine_status", "host", "absent", "runs", "said"), [
    ("ok", None, [], False, []),
    ("missing", None, [], True, ["doctor: running the engine script (no engine answers; "
                                 "state in /s)"]),
    ("ok", None, ["mmdebstrap"], True, ["doctor: running the engine script (mmdebstrap "
                                        "missing; state in /s)"]),
    ("missing", "tcp://10.0.0.9:2375", [], False, [
        "doctor: no engine answers at tcp://10.0.0.9:2375 (DOCKER_HOST): start it there; "
        "doctor starts only this machine's"]),
    ("wrong", None, ["ssh"], False, []),
])
def test_fix_runs_the_engine_script_only_when_no_engine_answers_here_or_a_tool_is_missing(
        monkeypatch: pytest.MonkeyPatch, engine_status: str, host: str | None,
        absent: list[str], runs: bool, said: list[str]) -> None:
    """The script touches nothing of an engine that answers, but installs mmdebstrap (the
    base image's bootstrap) and ssh; it can start only this machine's engine."""
    if host is None:
        monkeypatch.delenv("DOCKER_HOST", raising=False)
    else:
        monkeypatch.setenv("DOCKER_HOST", host)
    monkeypatch.setenv("BAKEOFF_STATE_DIR", "/s")
    monkeypatch.setattr(doctor.shutil, "which",
                        lambda tool: None if tool in absent else f"/usr/bin/{tool}")
    ran: list[bool] = []
    monkeypatch.setattr(doctor.engine_install, "ensure", lambda: ran.append(True))
    report = Report((DoctorCheck("engine", engine_status, "", ""),))  # type: ignore[arg-type]
    progress: list[str] = []
    doctor._engine(Engine(), report, progress.append)
    assert (ran == [True], progress) == (runs, said)
