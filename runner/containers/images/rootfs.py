"""The base's root filesystem, bootstrapped here once by mmdebstrap (nothing is pulled)
and cached as a tarball that later base imports reuse."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from rig.parsers.base import plain
from runner.containers.images.buildlog import BuildLog, cache_dir
from runner.containers.images.catalog import BASE
from runner.containers.images.reporters import BuildReporter, emit
from runner.errors import InfraError

SUITE = "bookworm"
# A fixed epoch makes the rootfs tarball reproducible for the same mirror state.
SOURCE_DATE_EPOCH = "1700000000"
MMDEBSTRAP_TIMEOUT_S = 900


def bootstrap_rootfs(reporter: BuildReporter, log: BuildLog) -> Path:
    """mmdebstrap a minbase rootfs tarball once; later builds reuse the cached tarball."""
    tarball = cache_dir() / f"base-{SUITE}.tar"
    if tarball.exists():
        emit(log, reporter, BASE, f"reusing rootfs {tarball}")
        return tarball
    if shutil.which("mmdebstrap") is None:
        raise InfraError("mmdebstrap is not installed, so the base image cannot be bootstrapped",
                         hint="apt-get install mmdebstrap (`bakeoff-sandbox doctor --fix` "
                              "does), or set BAKEOFF_BASE_IMAGE to a local image")
    tarball.parent.mkdir(parents=True, exist_ok=True)
    emit(log, reporter, BASE, f"mmdebstrap --variant=minbase {SUITE} (about 15 s)")
    # mmdebstrap picks the output format from the name: keep the partial file a `.tar`.
    partial = Path(tempfile.mkdtemp(dir=tarball.parent, prefix="partial-")) / "base.tar"
    env = {**os.environ, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}
    try:
        done = subprocess.run(
            ["mmdebstrap", "--variant=minbase", "--quiet", SUITE, str(partial)],
            env=env, capture_output=True, text=True, timeout=MMDEBSTRAP_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        shutil.rmtree(partial.parent, ignore_errors=True)
        raise log.failure(f"mmdebstrap took over {MMDEBSTRAP_TIMEOUT_S}s",
                          hint="check the Debian mirror is reachable") from error
    log.write(plain("\n".join((done.stdout, done.stderr))))
    if done.returncode != 0:
        shutil.rmtree(partial.parent, ignore_errors=True)
        raise log.failure(f"mmdebstrap failed (exit {done.returncode})",
                          hint="check the Debian mirror is reachable and we run as root")
    partial.replace(tarball)
    shutil.rmtree(partial.parent, ignore_errors=True)
    return tarball
