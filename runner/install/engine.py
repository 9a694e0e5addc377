"""A Docker engine when none answers: the bundled engine script (`resources.engine_script()`,
`ensure-engine.sh`), run by `doctor --fix`. It touches nothing when an engine answers but
installs what the base image's bootstrap needs (mmdebstrap); otherwise, as root on Debian,
it installs docker.io and starts dockerd, whose pid and log go to the state directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from runner.errors import InfraError
from runner.install import resources

SCRIPT_TIMEOUT_S = 1200  # apt-get update and install are bounded inside (300 + 600 s)


def state_dir() -> Path:
    """Where the engine script keeps dockerd's pid and log: BAKEOFF_STATE_DIR, else
    $XDG_STATE_HOME/bakeoff-sandbox, else ~/.local/state/bakeoff-sandbox."""
    configured = os.environ.get("BAKEOFF_STATE_DIR")
    if configured:
        return Path(configured)
    root = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(root) / "bakeoff-sandbox"


def ensure() -> None:
    """Run the engine script (its output on stderr); `InfraError` when it fails."""
    script = resources.engine_script()
    env = {**os.environ, "BAKEOFF_STATE_DIR": str(state_dir())}
    try:
        ran = subprocess.run(["bash", str(script)], env=env, stdout=sys.stderr,
                             stderr=sys.stderr, timeout=SCRIPT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise InfraError(f"{script} did not end within {SCRIPT_TIMEOUT_S} s",
                         hint="start a Docker engine yourself (`dockerd`), or point "
                              "DOCKER_HOST at one") from None
    if ran.returncode != 0:
        raise InfraError(f"{script} failed (exit {ran.returncode}): no engine was started",
                         hint="as root on Debian it installs and starts one; elsewhere start "
                              "a Docker engine yourself, or point DOCKER_HOST at one")
