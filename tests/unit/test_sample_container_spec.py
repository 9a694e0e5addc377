"""A sample's container writes nothing on the engine's disk: every directory its driver or
its command writes is a tmpfs, the driver's outputs included (`driver.OUT`). On the
container's layer, an engine whose disk was full lost the observer's records while the
command ran, and an honest pass was judged `tampered` (test_engine_outage.py measured it:
"the observer heard nothing", the command's own log saying `2 passed, 1 xfailed`)."""

from __future__ import annotations

from types import SimpleNamespace

from runner.containers import browser, sandbox
from runner.containers.backend import Tmpfs
from runner.containers.images import BuiltImage
from runner.containers.samples import driver
from runner.containers.samples.container import OUT_TMPFS_MB, SampleContainers


def test_the_driver_s_outputs_are_in_memory_root_s_alone_and_hold_the_most_read_back(
        ) -> None:
    facts = SimpleNamespace(writable_dirs=lambda: ("/var/cache/app",))
    containers = SampleContainers(
        None, "horizon", "r1", BuiltImage("bakeoff/python", "bakeoff/python:x", "sha256:i",
                                          "sha256:d", cached=True),
        sandbox.SandboxLimits(disk_mb=512), facts, None)  # type: ignore[arg-type]
    made = containers.container_spec(
        SimpleNamespace(arm="fixer"),  # type: ignore[arg-type]
        SimpleNamespace(network="net", env={}), ["true"],  # type: ignore[arg-type]
        purpose="sample c/fixer/success/1")
    mounted = {t.target: t for t in made.tmpfs}
    assert mounted[driver.OUT] == Tmpfs(driver.OUT, OUT_TMPFS_MB, "0700", executable=False)
    assert max(driver.OUTPUTS_LIMIT, browser.OUTPUTS_LIMIT) < OUT_TMPFS_MB * 1024 * 1024
    # At its fullest: everything read back, and one more file written whole before it is
    # weighed against what is left (the driver's collect loop); a file cut short there
    # by a full tmpfs would be read back as if it were whole.
    assert driver.OUTPUTS_LIMIT + driver.FILE_LIMIT + 1 < OUT_TMPFS_MB * 1024 * 1024
    # Every directory the driver writes: its outputs, the run's output, the observer's
    # socket, its inputs; and the command's: /work, HOME, /tmp and the image's own.
    assert {driver.OUT, driver.RUN, driver.OBS, driver.IN, sandbox.WORKDIR, "/tmp",
            "/var/tmp", "/run/lock", "/var/cache/app"} <= set(mounted)
    assert made.read_only is False and made.mounts == ()
