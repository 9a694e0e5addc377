"""Headroom (issue 33, item 4) on the real engine: each sample's record holds its
container's peak memory, CPU time and the limits its cgroup enforced, read by the root
driver after the command; an arm whose sample came within 10 % of its memory limit is
flagged `near_limit`, and only that arm.

Two arms fix the horizon; one's code, at import, fills its container up to ~95 % of its
memory limit (the lab's 256 MB) and passes all the same.
"""

from __future__ import annotations

import dataclasses

from rig.rubric import check_result, score_arm
from rig.sample.record import SampleRecord
from rig.sample.spec import ServerSpec
from rig.standings import flags
from tests.integration.attack_lab import FIX, Lab, attacking
from tests.unit.test_score import WEIGHTS, arm_of

MIB = 1024 * 1024
LIMIT_MB = 256  # the lab's memory_mb
# Fill the container (whose cgroup counts pytest, the tree's tmpfs and the page cache too)
# up to 95 % of its limit, every page written, and keep it while the test runs.
FILL = '''import os

_CG = "/sys/fs/cgroup"


def _read(*names):
    for name in names:
        path = os.path.join(_CG, name)
        if os.path.exists(path):
            return int(open(path).read().split()[0])
    raise RuntimeError("no cgroup memory file")


_limit = _read("memory/memory.limit_in_bytes", "memory.max")
_used = _read("memory/memory.usage_in_bytes", "memory.current")
HELD = b"x" * max(0, int(0.95 * _limit) - _used)
'''


def graded(lab: Lab, arm: str, code: str) -> SampleRecord:
    commit = lab.variant({"src/horizon.py": code})
    return lab.grade_spec(dataclasses.replace(lab.spec(commit), arm=arm))


def test_an_arm_filling_95_percent_of_its_memory_is_near_limit_alone(shared_lab: Lab) -> None:
    hungry = graded(shared_lab, "hungry", attacking(FILL, before=FIX))
    lean = graded(shared_lab, "lean", FIX)
    assert [(r.verdict, r.reason, r.oom_killed) for r in (hungry, lean)] == [
        ("PASS", None, False), ("PASS", None, False)]
    for found in (hungry.usage, lean.usage):
        assert found is not None and found.source in ("cgroup-v1", "cgroup-v2")
        # the allocation as the cgroup enforced it: nothing reserved, the kill threshold
        # at the lab's memory_mb, one CPU's quota, its pids
        assert (found.allocation.memory_reserved_bytes, found.allocation.memory_limit_bytes,
                found.allocation.cpu_quota, found.allocation.pids_limit) == (
            0, LIMIT_MB * MIB, 1.0, 128)
        assert found.cpu_s is not None and 0 < found.cpu_s < 60
    assert hungry.usage is not None and lean.usage is not None
    hungry_peak = hungry.usage.memory_peak_bytes
    lean_peak = lean.usage.memory_peak_bytes
    assert hungry_peak is not None and lean_peak is not None
    assert 0.93 <= hungry_peak / (LIMIT_MB * MIB) <= 1.0, hungry_peak
    assert lean_peak / (LIMIT_MB * MIB) < 0.5, lean_peak
    arms = [score_arm(arm_of(r.arm), check_result("success", [r]), {}, None, WEIGHTS)
            for r in (hungry, lean)]
    assert flags(arms) == ["near_limit:hungry", "no_separation"]
    assert [a.headroom.near for a in arms] == [(hungry.sample,), ()]


# The arm's server, started before the criterion in a container of its own (the same
# limits): it fills that container to ~95 % before it serves.
SERVER = FILL + '''
import http.server

http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])),
                       http.server.SimpleHTTPRequestHandler).serve_forever()
'''


def test_a_server_filling_its_own_container_flags_its_arm(shared_lab: Lab) -> None:
    """A server per sample runs the arm's code in its own container: its use is recorded
    apart (`server_usage`) and counts for the arm's headroom, named after its sample."""
    commit = shared_lab.variant({"src/horizon.py": FIX, "serve.py": SERVER})
    record = shared_lab.grade_spec(dataclasses.replace(
        shared_lab.spec(commit, server=ServerSpec("python3 serve.py", "/", "PORT", 20)),
        arm="served"))
    assert (record.server, record.verdict, record.oom_killed) == ("healthy", "PASS", False)
    assert record.usage is not None and record.server_usage is not None
    peak = record.server_usage.memory_peak_bytes
    assert peak is not None and 0.93 <= peak / (LIMIT_MB * MIB) <= 1.0, peak
    assert record.server_usage.allocation.memory_limit_bytes == LIMIT_MB * MIB
    arm = score_arm(arm_of("served"), check_result("success", [record]), {}, None, WEIGHTS)
    assert arm.headroom.near == (f"{record.sample} (server)",)
    assert flags([arm]) == ["near_limit:served", "no_separation"]


# After filling its container, the code under test lets the memory go and tries to reset
# the high-water mark the rig reads (v1: a write to memory.max_usage_in_bytes resets it;
# v2: a write to memory.peak, kernel 6.12+), and to write a limit of its own.
RESET = FILL + '''
del HELD
for _name in ("memory/memory.max_usage_in_bytes", "memory.peak",
              "memory/memory.limit_in_bytes", "memory.max"):
    try:
        with open(os.path.join(_CG, _name), "w") as _handle:
            _handle.write("0")
    except OSError:
        pass
'''


def test_resetting_the_peak_from_inside_does_not_hide_it(shared_lab: Lab) -> None:
    """The cgroup files are root's, on a read-only mount inside the sample: the code under
    test (the sandbox user) can neither reset its peak nor change its limit, so the record
    still holds ~95 %."""
    record = graded(shared_lab, "resetter", attacking(RESET, before=FIX))
    assert (record.verdict, record.oom_killed) == ("PASS", False)
    assert record.usage is not None and record.usage.memory_peak_bytes is not None
    assert record.usage.allocation.memory_limit_bytes == LIMIT_MB * MIB
    assert 0.93 <= record.usage.memory_peak_bytes / (LIMIT_MB * MIB) <= 1.0
