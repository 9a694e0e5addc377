"""The tool as a user installs it (issue 34): the repository's files as a commit would
hold them (`git ls-files`: never the working tree's ignored caches, which a wheel built in
place would carry; edits not yet committed are in, so a test run checks the code being
written) built into an sdist, the sdist into a wheel (`python -m build`, the path a
registry's users take), the wheel installed into a fresh virtualenv outside the source
tree; its `bakeoff-sandbox` run from a new directory with no PYTHONPATH and no BAKEOFF_*
variable, so nothing of the checkout can be found.

Built once per run (tests/integration/conftest.py `installed_tool`: `install_once`, the
workers of `pytest -n N` share it); a failed build or install fails the tests that need it
(never a skip).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


def source_files(dest: Path) -> Path:
    """The files a commit of the working tree would hold (`git ls-files`: tracked, and
    untracked but not ignored; symlinks kept), copied to `dest`: HEAD plus the edits not
    yet committed, never an ignored cache (__pycache__, .pytest_cache, build/)."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], capture_output=True, text=True,
                            check=True, timeout=120).stdout
    for name in sorted(set(filter(None, listed.split("\0")))):
        source, target = ROOT / name, dest / name
        if not source.is_symlink() and not source.is_file():
            continue  # tracked, deleted in the working tree
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        else:
            shutil.copy2(source, target)
    return dest


def install(root: Path) -> Installed:
    """Copy the source (`source_files`), build its sdist and the wheel from that sdist,
    install the wheel into a fresh venv; every step timed. One venv builds and installs
    (`build` beside the tool: a second venv cost seconds for nothing); `--no-compile`
    halves the install (the tool's first run compiles what it imports)."""
    seconds: dict[str, float] = {}
    source = source_files(root / "source")
    venv, dist = root / "venv", root / "dist"
    _step(seconds, "venv", [sys.executable, "-m", "venv", str(venv)], root)
    _step(seconds, "build tool", [str(venv / "bin" / "pip"), "install", "-q", "build"], root)
    _step(seconds, "sdist and wheel", [str(venv / "bin" / "python"), "-m", "build",
                                       "--outdir", str(dist), str(source)], root)
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    _step(seconds, "install", [str(venv / "bin" / "pip"), "install", "-q", "--no-compile",
                               str(wheel)], root)
    return Installed(root, source, wheel, sdist, venv, seconds)


def install_once(folder: Path) -> Installed:
    """`install` made once for every process that asks with the same `folder` (the
    workers of one `pytest -n N` run): the first builds it under a lock, the others wait
    for it and take what it made (`made.json`). A failed build is not recorded: the next
    process to ask tries again, in a folder of its own."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        made = folder / "made.json"
        if made.exists():
            return _read(json.loads(made.read_text()))
        found = install(Path(tempfile.mkdtemp(prefix="tool-", dir=folder)))
        made.write_text(json.dumps({"paths": [str(p) for p in (
            found.root, found.source, found.wheel, found.sdist, found.venv)],
            "seconds": found.seconds}))
        return found


def _read(made: dict[str, Any]) -> Installed:
    root, source, wheel, sdist, venv = map(Path, made["paths"])
    return Installed(root, source, wheel, sdist, venv, made["seconds"])
