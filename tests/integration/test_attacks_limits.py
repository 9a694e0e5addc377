"""Adversarial grading, limits that hold (issue 11): output built to make the parser or
the orchestrator slow or huge, and a sample that fills its disk. Each is bounded in time,
in the orchestrator's CPU and memory, and in the host's disk; the verdict is the honest
one (the protected success test still fails, the arm's added test passes).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.containers import sandbox
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.containers.samples.driver import HEAD_BYTES, TAIL_BYTES
from tests.integration.attack_lab import HONEST, Lab, counts, lab_for, verdict

TREE = "pytest -q -s -p no:cacheprovider tests"


@pytest.fixture
def lab(engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path) -> Iterator[Lab]:
    limits = sandbox.SandboxLimits(cpus=1.0, memory_mb=512, pids=128, disk_mb=64)
    with lab_for(engine, built_images["python"], tmp_path, limits) as found:
        yield found


def test_one_megabyte_line_of_a_colons(lab: Lab) -> None:
    """A test prints one line of `a::` x 340,000 (1 MB; a quadratic verbose-line regex
    once took 23 s on a tenth of it): the sample's grading costs the orchestrator < 2 s
    of CPU (graded in a process of its own, stopped after 60 s), and the verdict is the
    honest one."""
    noise = {"tests/test_noise.py": "def test_noise():\n    print('a::' * 340000)\n"}
    record, used = lab.grade_apart(lab.attack(noise), 60, command=TREE)
    assert verdict(record) == HONEST, record.detail
    assert counts(record) == (1, 1)
    assert "a::" * 340000 in lab.log(record)
    assert used.cpu_s < 2.0, used


FLOOD = '''import sys


def test_flood():
    chunk = ("~" * 99 + "\\n") * 10000
    for _ in range(200):
        sys.stdout.write(chunk)
    sys.stdout.flush()
'''
FLOODED = 200 * 10000 * 100
def test_two_hundred_megabytes_of_output(lab: Lab) -> None:
    """A test writes 200 MB to stdout: the stored log is its head, the truncation
    marker and its tail; `truncated_bytes` is exact; pytest's summary is still read from
    the tail; the orchestrator's peak RSS (a fresh process) grows by < 100 MB."""
    record, used = lab.grade_apart(lab.attack({"tests/test_flood.py": FLOOD}), 300,
                                   command=TREE)
    assert used.grew_kb < 100 * 1024, used
    assert verdict(record) == HONEST, record.detail
    assert counts(record) == (1, 1)
    log = lab.log(record)
    omitted = record.truncated_bytes
    marker = f"\n[bakeoff: output truncated: {omitted} bytes omitted]\n"
    assert log[HEAD_BYTES:HEAD_BYTES + len(marker)] == marker
    assert len(log) == HEAD_BYTES + len(marker) + TAIL_BYTES
    tail = log[-TAIL_BYTES:]
    before, after = log.index("~"), TAIL_BYTES - tail.rindex("~\n") - 2
    assert omitted == before + FLOODED + after - HEAD_BYTES - TAIL_BYTES


FILL = '''import errno
import os


def _fill(directory):
    chunk = b"\\0" * (1 << 20)
    try:
        with open(os.path.join(directory, "fill.bin"), "wb") as handle:
            for _ in range(100):
                handle.write(chunk)
                handle.flush()
    except OSError as error:
        return errno.errorcode[error.errno]
    return "written"


def test_fill():
    seen = {d: _fill(d) for d in ("/work", "/tmp", os.environ["HOME"])}
    print("fill:", seen)
    assert set(seen.values()) == {"ENOSPC"}
'''


def test_filling_the_disk_in_work_tmp_and_home(lab: Lab) -> None:
    """A test writes 100 MB (past `[limits].disk_mb` = 64) into /work, /tmp and HOME,
    and leaves it there: every write ends in ENOSPC inside the sample, the verdict is
    the arm's FAIL, the host's free disk is unchanged (within 50 MB), nothing is left."""
    head = lab.attack({"tests/test_fill.py": FILL})
    disks = ("/var/lib/docker", str(lab.stage.parent))
    free = [shutil.disk_usage(d).free for d in disks]
    record = lab.grade(head, command=TREE)
    assert verdict(record) == HONEST, record.detail
    assert counts(record) == (1, 1)
    assert "fill: {'/work': 'ENOSPC', '/tmp': 'ENOSPC', '/home/agent': 'ENOSPC'}" in lab.log(
        record)
    for disk, was in zip(disks, free, strict=True):
        assert abs(shutil.disk_usage(disk).free - was) < 50 * 1024 * 1024, disk
    assert list(lab.executor.scratch.iterdir()) == []
