"""`bakeoff-sandbox doctor` against this machine (issue 34): the real engine, the real
Compose download from PyPI (pip's cache keeps it fast), an engine that does not answer
(a unix socket nothing listens on, in a temporary directory), an image a manifest needs
that nobody built. Each runs the command line as a user does, in a process of its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from runner.containers import images
from runner.containers.engine import Engine
from runner.install import compose

ROOT = Path(__file__).resolve().parents[2]
HORIZON = ROOT / "examples" / "horizon" / "bakeoff.toml"
NAMES = ["engine", "api", "cgroup", "storage", "compose", "image base", "image postgres",
         "image python", "networks", "git"]


def doctor(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-m", "runner.cli", "doctor", *args], cwd=cwd,
                          env=environ, capture_output=True, text=True, timeout=600,
                          check=False)


def statuses(stdout: str) -> list[tuple[str, str]]:
    """(check, status) of each line of the report (a fix line belongs to the one above)."""
    found = []
    for line in stdout.splitlines():
        if not line.startswith("  fix: "):
            words = line.split()
            size = 2 if words[0] == "image" else 1  # `image NAME`
            found.append((" ".join(words[:size]), words[size]))
    return found


def git_line() -> str:
    where = shutil.which("git")
    version = subprocess.run(["git", "--version"], capture_output=True, text=True,
                             check=True).stdout.strip()
    return f"git             ok      {version} at {where}"


def compose_missing(cache: Path) -> list[str]:
    return [f"compose         missing no Docker Compose {compose.VERSION} at "
            f"{cache}/compose/{compose.VERSION}/docker-compose",
            "  fix: bakeoff-sandbox doctor --fix"]


def test_doctor_on_this_machine_is_all_ok_for_the_bundled_example(
        engine: Engine, built_images: object, tmp_path: Path) -> None:
    """What `make setup` ends with: every check ok, exit 0 (its Compose in the user's cache,
    where `make setup` put it, or a stack's first sample would)."""
    compose.binary()
    done = doctor("-f", str(HORIZON), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert statuses(done.stdout) == [(name, "ok") for name in NAMES]
    facts, lines = engine.facts(), done.stdout.splitlines()
    assert lines[0] == (f"engine          ok      Docker {facts.server_version} answers at "
                        f"{engine.address}")
    assert lines[1] == f"api             ok      API {facts.api_version} (needs 1.41 or later)"
    assert lines[4] == (f"compose         ok      Docker Compose v{compose.VERSION} at "
                        f"{compose.path()}")
    assert lines[8:] == ["networks        ok      made and removed an internal network with "
                         "our labels", git_line()]
    assert not engine.labelled("network", {"io.bakeoff.experiment": "doctor"})


def test_compose_missing_then_installed_from_pypi_by_doctor_fix(
        engine: Engine, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    before = doctor(cwd=tmp_path, BAKEOFF_CACHE_DIR=str(cache))
    assert before.returncode == 3, before.stdout + before.stderr
    lines = before.stdout.splitlines()
    assert lines[4:6] == compose_missing(cache)
    assert [s for s in statuses(before.stdout) if s[1] != "ok"] == [("compose", "missing")]

    fixed = doctor("--fix", cwd=tmp_path, BAKEOFF_CACHE_DIR=str(cache))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    ok = (f"compose         ok      Docker Compose v{compose.VERSION} at "
          f"{cache}/compose/{compose.VERSION}/docker-compose")
    assert fixed.stdout.splitlines()[4] == ok
    assert (f"doctor: installing Docker Compose {compose.VERSION} into "
            f"{cache}/compose/{compose.VERSION}") in fixed.stderr
    assert sorted(p.name for p in (cache / "compose").iterdir()) == [
        f".{compose.VERSION}.lock", compose.VERSION]

    after = doctor(cwd=tmp_path, BAKEOFF_CACHE_DIR=str(cache))
    assert after.returncode == 0, after.stdout + after.stderr
    assert after.stdout.splitlines()[4] == ok


def test_an_engine_that_does_not_answer(tmp_path: Path) -> None:
    """DOCKER_HOST names a unix socket nothing listens on: the engine's line and its fix,
    what needs the engine unchecked, the rest checked; exit 3."""
    socket = f"unix://{tmp_path}/docker.sock"
    cache = tmp_path / "cache"
    done = doctor("-f", str(HORIZON), cwd=tmp_path, DOCKER_HOST=socket,
                  BAKEOFF_CACHE_DIR=str(cache))
    assert done.returncode == 3, done.stdout + done.stderr
    unchecked = "missing not checked: no engine answers (fix the engine first)"
    assert done.stdout.splitlines() == [
        f"engine          missing no Docker engine answers at {socket}",
        f"  fix: start the engine at {socket}, or: unset DOCKER_HOST && "
        "bakeoff-sandbox doctor --fix",
        f"api             {unchecked}",
        f"cgroup          {unchecked}",
        f"storage         {unchecked}",
        *compose_missing(cache),
        f"images          {unchecked}",
        f"networks        {unchecked}",
        git_line()]


def test_an_image_the_manifest_needs_that_is_not_built_then_built_by_doctor_fix(
        engine: Engine, built_images: object, tmp_path: Path) -> None:
    """A manifest whose toolchain is an image folder of BAKEOFF_IMAGES_DIR nobody built:
    its line and the command that builds it (doctor itself builds nothing); `--fix`
    builds it as `images build` does, and the report is then all ok."""
    folder = tmp_path / "images" / "doctorprobe"
    folder.mkdir(parents=True)
    (folder / "Dockerfile").write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n",
                                       encoding="utf-8")
    manifest = tmp_path / "bakeoff.toml"
    text = HORIZON.read_text(encoding="utf-8")
    manifest.write_text(text.replace('image = "python"', 'image = "doctorprobe"', 1),
                        encoding="utf-8")
    own = {"BAKEOFF_IMAGES_DIR": str(tmp_path / "images")}
    try:
        done = doctor(cwd=tmp_path, **own)
        assert done.returncode == 3, done.stdout + done.stderr
        assert [line for line in done.stdout.splitlines() if "doctorprobe" in line] == [
            "image doctorprobe missing bakeoff/doctorprobe:latest is not built",
            "  fix: bakeoff-sandbox images build doctorprobe"]
        assert [s for s in statuses(done.stdout) if s[1] != "ok"] == [
            ("image doctorprobe", "missing")]
        assert images.inspect(engine, "bakeoff/doctorprobe:latest") is None

        fixed = doctor("--fix", cwd=tmp_path, **own)
        assert fixed.returncode == 0, fixed.stdout + fixed.stderr
        attrs = images.inspect(engine, "bakeoff/doctorprobe:latest")
        assert attrs is not None
        identity = attrs["Config"]["Labels"]["io.bakeoff.identity"]
        assert [line for line in fixed.stdout.splitlines() if "doctorprobe" in line] == [
            f"image doctorprobe ok      bakeoff/doctorprobe:latest {attrs['Id'][:19]} "
            f"identity {identity[:19]}"]
        assert "doctor: building doctorprobe" in fixed.stderr
    finally:
        images.remove_ours(engine, "bakeoff/doctorprobe:latest")
