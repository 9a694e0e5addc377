"""Headroom: what a sample's container used against the limits it ran under (pure).

The sample's root driver reads the container's own cgroup after the command
(`runner.containers.samples.driver`, `CGROUP_FILES`): the files are on a read-only mount
inside, so nothing of the tree's can write them, and they are the kernel's own counters.
`usage` parses that dump, whichever cgroup version the engine has:

- v1: `memory.max_usage_in_bytes` (the high-water mark), `memory.limit_in_bytes` (the
  OOM killer's threshold), `memory.soft_limit_in_bytes` (docker's reservation),
  `memory.failcnt`, `memory.oom_control`'s `oom_kill`, `cpuacct.usage` (ns), `cpu.stat`'s
  `throttled_time` (ns), `cpu.cfs_quota_us` / `cpu.cfs_period_us`, `cpu.shares`,
  `pids.max`;
- v2: `memory.peak` (kernel 5.19+; absent before: the peak is unknown), `memory.max`,
  `memory.min` / `memory.low`, `memory.events`' `max` and `oom_kill`, `cpu.stat`'s
  `usage_usec` and `throttled_usec`, `cpu.max`, `cpu.weight`, `pids.max`, `pids.peak`.

What the peak counts: everything the kernel charges the container's memory cgroup, the
same sum its limit is enforced on: the processes' memory, the page cache and every tmpfs
of the container (the sample's tree in /work, its output). The CPU time is the
container's (the rig's layout of the tree, a build, the command), to the moment it is
read.

Per arm (`arm_headroom`): the sample closest to its memory limit; a sample within
`NEAR` of it, or killed by it, is near the limit (the round's `near_limit:<arm>` flag).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rig.sample.record import Allocation, SampleRecord, Usage

NEAR = 0.10  # a sample within 10 % of its memory limit is near it
# The files the driver dumps: a name with a slash is a v1 controller's (under
# /sys/fs/cgroup), one without is v2's (in the container's own cgroup directory).
CGROUP_V1 = ("memory/memory.max_usage_in_bytes", "memory/memory.limit_in_bytes",
             "memory/memory.soft_limit_in_bytes", "memory/memory.failcnt",
             "memory/memory.oom_control", "cpuacct/cpuacct.usage", "cpu/cpu.stat",
             "cpu/cpu.cfs_quota_us", "cpu/cpu.cfs_period_us", "cpu/cpu.shares",
             "pids/pids.max")
CGROUP_V2 = ("memory.peak", "memory.max", "memory.min", "memory.low", "memory.events",
             "cpu.stat", "cpu.max", "cpu.weight", "pids.max", "pids.peak")
CGROUP_FILES = CGROUP_V1 + CGROUP_V2
MARK = "== "
# v1 says "no limit" with the largest page-aligned counter (2^63 - 4096 on 4 KiB pages):
# anything this large is no limit.
UNLIMITED_V1 = 1 << 62


def sections(dump: str) -> dict[str, str]:
    """The driver's dump as file -> its content (`== FILE` lines start each file)."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in dump.splitlines():
        if line.startswith(MARK) and line[len(MARK):].strip() in CGROUP_FILES:
            current = found.setdefault(line[len(MARK):].strip(), [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines).strip() for name, lines in found.items()}


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


def _keyed(text: str | None) -> dict[str, int]:
    """`key value` lines (cpu.stat, memory.events, memory.oom_control) as a mapping."""
    found: dict[str, int] = {}
    for line in (text or "").splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            found[key] = int(value)
    return found


def _v1_limit(text: str | None) -> int | None:
    value = _int(text)
    return None if value is None or value >= UNLIMITED_V1 else value


def _v2_limit(text: str | None) -> int | None:
    return None if text is None or text.split()[:1] == ["max"] else _int(text)


def usage(dump: str) -> Usage | None:
    """What the container used and the limits its cgroup enforced, from the driver's
    dump; None when it holds neither version's counters (no cgroup to read)."""
    found = sections(dump)
    if "memory/memory.max_usage_in_bytes" in found or "cpuacct/cpuacct.usage" in found:
        return _v1(found)
    if "cpu.stat" in found or "memory.max" in found:
        return _v2(found)
    return None


def _v1(found: Mapping[str, str]) -> Usage:
    quota = _int(found.get("cpu/cpu.cfs_quota_us"))
    period = _int(found.get("cpu/cpu.cfs_period_us"))
    cpu_ns = _int(found.get("cpuacct/cpuacct.usage"))
    throttled = _keyed(found.get("cpu/cpu.stat")).get("throttled_time")
    soft = _v1_limit(found.get("memory/memory.soft_limit_in_bytes"))
    return Usage(
        source="cgroup-v1",
        memory_peak_bytes=_int(found.get("memory/memory.max_usage_in_bytes")),
        memory_limit_hits=_int(found.get("memory/memory.failcnt")),
        oom_kills=_keyed(found.get("memory/memory.oom_control")).get("oom_kill"),
        cpu_s=None if cpu_ns is None else cpu_ns / 1e9,
        cpu_throttled_s=None if throttled is None else throttled / 1e9,
        pids_peak=None,
        allocation=Allocation(
            memory_reserved_bytes=soft or 0,
            memory_limit_bytes=_v1_limit(found.get("memory/memory.limit_in_bytes")),
            cpu_quota=(None if quota is None or quota < 0 or not period
                       else round(quota / period, 3)),
            cpu_weight=_int(found.get("cpu/cpu.shares")),
            pids_limit=_v2_limit(found.get("pids/pids.max"))))


def _v2(found: Mapping[str, str]) -> Usage:
    stat = _keyed(found.get("cpu.stat"))
    events = _keyed(found.get("memory.events"))
    quota, _, period = (found.get("cpu.max") or "max").partition(" ")
    usec, throttled = stat.get("usage_usec"), stat.get("throttled_usec")
    reserved = max(_v2_limit(found.get("memory.min")) or 0,
                   _v2_limit(found.get("memory.low")) or 0)
    return Usage(
        source="cgroup-v2",
        memory_peak_bytes=_int(found.get("memory.peak")),
        memory_limit_hits=events.get("max"), oom_kills=events.get("oom_kill"),
        cpu_s=None if usec is None else usec / 1e6,
        cpu_throttled_s=None if throttled is None else throttled / 1e6,
        pids_peak=_int(found.get("pids.peak")),
        allocation=Allocation(
            memory_reserved_bytes=reserved,
            memory_limit_bytes=_v2_limit(found.get("memory.max")),
            cpu_quota=(None if quota == "max" or not period.strip().isdigit()
                       or _int(quota) is None else round(int(quota) / int(period), 3)),
            cpu_weight=_int(found.get("cpu.weight")),
            pids_limit=_v2_limit(found.get("pids.max"))))


# -- per arm --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SampleUse:
    """One sample's memory against its limit, and its CPU time."""

    sample: str
    peak_bytes: int | None
    limit_bytes: int | None
    oom_killed: bool
    cpu_s: float | None

    @property
    def used(self) -> float | None:
        """The share of its memory limit it reached (1.0: killed by it); None: unknown."""
        if self.oom_killed:
            return 1.0
        if self.peak_bytes is None or not self.limit_bytes:
            return None
        return self.peak_bytes / self.limit_bytes

    @property
    def near(self) -> bool:
        used = self.used
        return used is not None and used >= 1 - NEAR


SERVER = " (server)"  # a sample's server's container, named after its sample


def sample_uses(record: SampleRecord) -> list[SampleUse]:
    """A sample's use (a browser criterion's: its browser's container), when it was read
    or the OOM killer ended it (none: a record from before headroom, a sample that never
    ran), and its server's container's, when it had one."""
    found = []
    if record.usage is not None or record.oom_killed:
        found.append(_use(record.sample, record.usage, record.oom_killed))
    if record.server_usage is not None:
        found.append(_use(record.sample + SERVER, record.server_usage, False))
    return found


def _use(sample: str, found: Usage | None, killed: bool) -> SampleUse:
    killed = killed or bool(found is not None and found.oom_kills)
    return SampleUse(
        sample, None if found is None else found.memory_peak_bytes,
        None if found is None else found.allocation.memory_limit_bytes, killed,
        None if found is None else found.cpu_s)


@dataclass(frozen=True)
class ArmHeadroom:
    """An arm's worst headroom over its samples (success criterion and every check)."""

    samples: int  # the arm's samples
    measured: int  # those whose use was read (or that the OOM killer ended)
    worst: SampleUse | None  # the closest to its memory limit
    near: tuple[str, ...] = ()  # within NEAR of its memory limit, or killed by it
    cpu_s: float | None = None  # the most CPU time one sample used

    @property
    def near_limit(self) -> bool:
        return bool(self.near)

    @property
    def headroom(self) -> float | None:
        """The share of the memory limit the worst sample left (0: killed by it)."""
        used = None if self.worst is None else self.worst.used
        return None if used is None else max(0.0, 1 - used)


def arm_headroom(records: Sequence[SampleRecord]) -> ArmHeadroom:
    """The worst headroom of an arm's samples (each one's container, and its server's)."""
    read = [sample_uses(record) for record in records]
    uses = [use for found in read for use in found]
    known = [use for use in uses if use.used is not None]
    worst = max(known, key=lambda use: (use.used or 0.0, use.sample), default=None)
    times = [use.cpu_s for use in uses if use.cpu_s is not None]
    return ArmHeadroom(len(records), sum(1 for found in read if found), worst,
                       tuple(use.sample for use in uses if use.near),
                       max(times) if times else None)


def asymmetric(events: Iterable[int]) -> bool:
    """Whether the infrastructure's trouble (per arm: its RIG_ERROR samples and its
    retried attempts) hit the arms unequally."""
    return len(set(events)) > 1
