"""A stored run read back: the base's run of a sample's check in the same image (`Base`),
from its record (`base_run`) or asked of the base (`BaseReference`), for the
differential rule of `rig.sample.verdict`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from rig.guards import observer as observer_mod
from rig.guards.observer import Test
from rig.sample.outcome import Verdict
from rig.sample.record import SampleRecord
from rig.sample.spec import SampleSpec


@dataclass(frozen=True)
class Base:
    """What the base's run of the same check in the same image gave."""

    sample: str
    verdict: Verdict
    reason: str | None
    canaries: tuple[str, str, bool] | None = None  # `CanaryReading.signature()`
    stack: str = "none"
    outlived: bool = False
    observed: bool = False  # an observer session was seen
    sessions: int = 0
    anomalies: frozenset[str] = frozenset()
    plugins: tuple[str, ...] = ()
    inipath: str | None = None
    tests: tuple[Test, ...] = ()  # by id, canaries left out
    duplicates: bool = False  # its per-test lines named one test twice
    build_failed: bool = False  # its `[toolchain] build` failed

    def against(self) -> str:
        return (f"the base in the same image gives {self.verdict}"
                + (f" {self.reason}" if self.reason else "") + f" ({self.sample})")


class BaseReference(Protocol):
    """The base's run of a sample's check in the same image (the differential rule)."""

    def __call__(self, spec: SampleSpec) -> Base: ...


def base_run(record: SampleRecord) -> Base:
    """What a base's sample record says, for the differential rule."""
    seen = (record.canaries or {}).get("seen")
    signature = None
    if isinstance(seen, dict):
        signature = (str(seen.get("pass")), str(seen.get("fail")),
                     bool(seen.get("exit_agrees", True)))
    observed = record.observer or {}
    anomalies = observed.get("anomalies")
    kinds = frozenset(str(a.get("kind")) for a in anomalies if isinstance(a, dict)) \
        if isinstance(anomalies, list) else frozenset()
    if observed.get("overflow"):
        kinds |= {"overflow"}
    plugins = observed.get("plugins")
    inipath = observed.get("inipath")
    sessions = observed.get("sessions")
    return Base(record.sample, record.verdict, record.reason, signature,
                stack="none" if record.stack is None else record.stack.health,
                outlived=record.outlived, observed=bool(observed.get("present")),
                sessions=sessions if isinstance(sessions, int) else 0, anomalies=kinds,
                plugins=tuple(str(p) for p in plugins) if isinstance(plugins, list) else (),
                inipath=inipath if isinstance(inipath, str) else None,
                tests=observer_mod.tests_of(record.tests), duplicates=record.duplicated,
                build_failed=record.build_exit not in (None, 0))
