"""Headroom (issue 33, item 4): the cgroup dump of both versions read into a sample's
`usage`, an arm's worst headroom, and the two flags it raises: `near_limit:<arm>` and
`infra_asymmetric` (pure)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from rig.headroom import NEAR, ArmHeadroom, SampleUse, arm_headroom, sections, usage
from rig.rubric import ArmScore
from rig.sample.record import Allocation, SampleRecord, Usage
from rig.standings import describe_flag, flags
from tests.unit.test_score import record, scored

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cgroup"
MIB = 1024 * 1024


def dump(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_cgroup_v1_of_a_sample_that_used_100_mib_of_256() -> None:
    """Captured on this machine's engine (docker 20.10, cgroup v1): the high-water mark,
    the limit as the kill threshold, no reservation (the soft limit is v1's 'unlimited'),
    CPU time in ns, the quota from quota / period, the shares, the pids limit."""
    assert usage(dump("v1-100mib-of-256.txt")) == Usage(
        source="cgroup-v1", memory_peak_bytes=108482560, memory_limit_hits=0, oom_kills=0,
        cpu_s=0.065990229, cpu_throttled_s=0.0, pids_peak=None,
        allocation=Allocation(memory_reserved_bytes=0, memory_limit_bytes=256 * MIB,
                              cpu_quota=1.0, cpu_weight=1024, pids_limit=128))


def test_cgroup_v1_of_a_sample_the_oom_killer_ended() -> None:
    """The reservation (docker's --memory-reservation: v1's soft limit) apart from the
    limit it was killed at; half a CPU; the OOM kill counted."""
    found = usage(dump("v1-oom-killed.txt"))
    assert found is not None
    assert found.allocation == Allocation(memory_reserved_bytes=64 * MIB,
                                          memory_limit_bytes=128 * MIB, cpu_quota=0.5,
                                          cpu_weight=1024, pids_limit=64)
    assert (found.memory_peak_bytes, found.oom_kills, found.memory_limit_hits) == (
        128 * MIB, 1, 0)


def test_cgroup_v2_peak_events_and_cpu_stat() -> None:
    """v2's files (the kernel's documented formats): memory.peak, memory.events' `max`
    and `oom_kill`, cpu.stat in microseconds, cpu.max "quota period", memory.low as the
    reservation, pids.peak."""
    assert usage(dump("v2-peak.txt")) == Usage(
        source="cgroup-v2", memory_peak_bytes=241172480, memory_limit_hits=12, oom_kills=0,
        cpu_s=1.53211, cpu_throttled_s=0.180522, pids_peak=9,
        allocation=Allocation(memory_reserved_bytes=64 * MIB, memory_limit_bytes=256 * MIB,
                              cpu_quota=1.0, cpu_weight=100, pids_limit=128))


def test_cgroup_v2_without_memory_peak_and_without_limits() -> None:
    """A kernel before 5.19 has no memory.peak: the peak is unknown (None), never 0; "max"
    is no limit at all."""
    found = usage("== memory.max\nmax\n== cpu.stat\nusage_usec 2000000\n"
                  "== cpu.max\nmax 100000\n== pids.max\nmax\n")
    assert found == Usage(source="cgroup-v2", memory_peak_bytes=None, memory_limit_hits=None,
                          oom_kills=None, cpu_s=2.0, cpu_throttled_s=None, pids_peak=None,
                          allocation=Allocation())


def test_no_cgroup_read_is_no_usage() -> None:
    """A driver that found no cgroup file (or never ended) gives no usage, not zeros; a
    file name the rig does not ask for is not read as one."""
    assert usage("") is None
    assert usage("== memory.current\n5\n") is None
    assert sections("noise\n== cpu.stat\nusage_usec 1\n== other\nx\n") == {
        "cpu.stat": "usage_usec 1\n== other\nx"}


def used(sample: str, peak_mb: float | None, limit_mb: int = 256, *,
         oom: bool = False) -> SampleRecord:
    """A PASS record of `sample` (arm/check/n) whose container peaked at `peak_mb`."""
    arm, check, n = sample.split("/")
    base = record(arm, check, int(n), "P")
    found = None if peak_mb is None else Usage(
        source="cgroup-v1", memory_peak_bytes=int(peak_mb * MIB), cpu_s=1.5,
        allocation=Allocation(memory_limit_bytes=limit_mb * MIB))
    return base.model_copy(update={"usage": found, "oom_killed": oom})


def test_near_means_within_ten_percent_of_the_limit() -> None:
    """At 90 % of the limit a sample is near it, just under is not; OOM-killed is near
    whatever its counters say; no counters and no kill: unknown, never near."""
    assert NEAR == 0.10
    at_90 = math.ceil(0.9 * 256 * MIB)  # 241591911 bytes
    assert SampleUse("s", at_90, 256 * MIB, False, None).near
    assert not SampleUse("s", at_90 - 1, 256 * MIB, False, None).near
    assert SampleUse("s", None, None, True, None).near
    assert not SampleUse("s", None, None, False, None).near
    assert SampleUse("s", 10, None, False, None).used is None  # no limit: no headroom


def test_an_arms_worst_headroom_is_its_closest_sample() -> None:
    records = [used("A/success/1", 64), used("A/success/2", 243.2), used("A/tests/1", 128),
               used("A/tests/2", None)]
    found = arm_headroom(records)
    assert found == ArmHeadroom(samples=4, measured=3, worst=SampleUse(
        "cap/A/success/2", int(243.2 * MIB), 256 * MIB, False, 1.5), near=("cap/A/success/2",),
        cpu_s=1.5)
    assert found.near_limit and found.headroom == pytest.approx(0.05)


def test_an_oom_killed_sample_has_no_headroom_even_without_counters() -> None:
    """The OOM killer ended the driver too (no dump came back): the record's oom_killed
    still makes it the worst, at 0 headroom."""
    found = arm_headroom([used("A/success/1", 40), used("A/success/2", None, oom=True)])
    assert found.worst == SampleUse("cap/A/success/2", None, None, True, None)
    assert (found.headroom, found.near, found.measured) == (0.0, ("cap/A/success/2",), 2)


def with_records(arm_id: str, success: list[SampleRecord], retried: int = 0) -> ArmScore:
    arm = scored(arm_id, "PP", {})
    checked = dataclasses.replace(arm.success, records=tuple(success))
    return dataclasses.replace(arm, success=checked, retried=retried)


def test_near_limit_flags_that_arm_only() -> None:
    """One arm at 95 % of its limit, the other at 25 %: near_limit on the first alone,
    and nothing else (the flags are exact)."""
    hungry = with_records("hungry", [used("hungry/success/1", 243.2),
                                     used("hungry/success/2", 60)])
    lean = with_records("lean", [used("lean/success/1", 64), used("lean/success/2", 64)])
    assert flags([hungry, lean]) == ["near_limit:hungry", "no_separation"]
    assert describe_flag("near_limit:hungry") == (
        "near_limit:hungry: a sample of the arm came within 10 % of its memory limit, or the "
        "OOM killer ended it: the limit, not only the code, may have decided its result")


def test_an_oom_killed_sample_flags_its_arm_near_limit() -> None:
    killed = with_records("killed", [used("killed/success/1", None, oom=True)])
    lean = with_records("lean", [used("lean/success/1", 64)])
    assert flags([killed, lean]) == ["near_limit:killed", "no_separation"]


def test_infra_retries_that_hit_one_arm_flag_infra_asymmetric() -> None:
    """Two attempts of one arm were cut by an outage and ran again (`retried`): every
    sample stands and both arms are valid (no rig_asymmetric), but the arms did not run
    under the same conditions."""
    hit = with_records("hit", [used("hit/success/1", 64)], retried=2)
    spared = with_records("spared", [used("spared/success/1", 64)])
    assert flags([hit, spared]) == ["infra_asymmetric", "no_separation"]
    assert flags([dataclasses.replace(spared, retried=2), hit]) == [
        "no_separation"]  # equal trouble: no flag


def test_rig_errors_and_retries_are_summed_per_arm() -> None:
    """One arm's rig error stands (rig_asymmetric: not a valid comparison), the other's
    attempt was retried away: each arm was hit once, so the conditions were even."""
    errored = scored("errored", "PR", {})
    retried = dataclasses.replace(scored("retried", "PP", {}), retried=1)
    assert flags([errored, retried]) == ["no_separation", "rig_asymmetric"]
    assert (errored.infra_events, retried.infra_events) == (1, 1)


def test_a_samples_server_counts_apart_named_after_its_sample() -> None:
    """A server per sample is the arm's code in a container of its own: its use is read
    apart (`server_usage`), and it can be the arm's worst even when the criterion's
    container was lean."""
    lean = used("A/success/1", 64)
    server = Usage(source="cgroup-v1", memory_peak_bytes=250 * MIB, cpu_s=3.0,
                   allocation=Allocation(memory_limit_bytes=256 * MIB))
    found = arm_headroom([lean.model_copy(update={"server_usage": server})])
    assert found.worst == SampleUse("cap/A/success/1 (server)", 250 * MIB, 256 * MIB, False,
                                    3.0)
    assert (found.samples, found.measured, found.near, found.cpu_s) == (
        1, 1, ("cap/A/success/1 (server)",), 3.0)
