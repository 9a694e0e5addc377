"""The tool as a user installs it (issue 34): the repository at HEAD (`git archive`, never
the working tree with its caches) built into an sdist, the sdist into a wheel (`python -m
build`, the path a registry's users take), the wheel installed into a fresh virtualenv
outside the source tree; its `bakeoff-sandbox` run from a new directory with no
PYTHONPATH and no BAKEOFF_* variable, so nothing of the checkout can be found.

Built once per session (tests/integration/conftest.py `installed_tool`); a failed build or
install fails the tests that need it (never a skip). Uncommitted changes are not in it:
commit before running the tests that use it.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = "bakeoff-sandbox"
BUILD_TIMEOUT_S = 600


class InstallError(Exception):
    """A step of building or installing the wheel failed (the test fails, never skips)."""


@dataclass(frozen=True)
class Installed:
    """The installed tool: its virtualenv, the wheel it came from, the source archive
    that wheel was built from, and what each step cost."""

    root: Path
    source: Path           # `git archive HEAD`, extracted
    wheel: Path            # the wheel built from the sdist
    sdist: Path
    venv: Path
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def tool(self) -> Path:
        return self.venv / "bin" / TOOL

    def site_packages(self) -> Path:
        (found,) = self.venv.glob("lib/python3*/site-packages")
        return found

    def wheel_files(self) -> dict[str, zipfile.ZipInfo]:
        with zipfile.ZipFile(self.wheel) as archive:
            return {info.filename: info for info in archive.infolist()}

    def wheel_bytes(self, prefix: str) -> dict[str, bytes]:
        """Every file under `prefix` in the wheel, by its path relative to `prefix`."""
        with zipfile.ZipFile(self.wheel) as archive:
            return {name.removeprefix(prefix): archive.read(name)
                    for name in archive.namelist() if name.startswith(prefix)}

    def run(self, *args: str, cwd: Path, timeout: float = 300,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """`bakeoff-sandbox ARGS` as a user runs it: from `cwd`, in a clean environment."""
        return subprocess.run([str(self.tool), *args], cwd=cwd, env=clean_env(env),
                              capture_output=True, text=True, timeout=timeout, check=False)


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without PYTHONPATH, a virtualenv or any BAKEOFF_*
    variable (BAKEOFF_IMAGES_DIR, BAKEOFF_EXAMPLES_DIR ... would point at the checkout)."""
    kept = {k: v for k, v in os.environ.items()
            if not k.startswith("BAKEOFF_") and k not in ("PYTHONPATH", "VIRTUAL_ENV",
                                                          "PYTHONHOME")}
    return {**kept, **(extra or {})}


def _step(seconds: dict[str, float], name: str, argv: list[str], cwd: Path) -> None:
    started = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=cwd, env=clean_env(), capture_output=True, text=True,
                              timeout=BUILD_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        raise InstallError(f"{name}: {' '.join(argv)} took over {BUILD_TIMEOUT_S}s") from error
    seconds[name] = round(seconds.get(name, 0.0) + time.monotonic() - started, 1)
    if done.returncode != 0:
        raise InstallError(f"{name}: {' '.join(argv)} exited {done.returncode}:\n"
                           f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}")


def archive_head(dest: Path) -> Path:
    """The repository's HEAD as files (`git archive`: tracked files only, symlinks kept)."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "HEAD"],
                          capture_output=True, check=True, timeout=120).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="tar")
    return dest


def install(root: Path) -> Installed:
    """Archive HEAD, build its sdist and the wheel from that sdist (in a builder venv),
    install the wheel into a fresh venv; every step timed."""
    seconds: dict[str, float] = {}
    source = archive_head(root / "source")
    builder, venv, dist = root / "builder", root / "venv", root / "dist"
    _step(seconds, "venvs", [sys.executable, "-m", "venv", str(builder)], root)
    _step(seconds, "venvs", [sys.executable, "-m", "venv", str(venv)], root)
    _step(seconds, "build tool", [str(builder / "bin" / "pip"), "install", "-q", "build"],
          root)
    _step(seconds, "sdist and wheel", [str(builder / "bin" / "python"), "-m", "build",
                                       "--outdir", str(dist), str(source)], root)
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    _step(seconds, "install", [str(venv / "bin" / "pip"), "install", "-q", str(wheel)], root)
    return Installed(root, source, wheel, sdist, venv, seconds)
