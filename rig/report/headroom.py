"""Headroom in the reports (issue 33): each arm's sample closest to its memory limit, in
SCORECARD.md (from `ArmScore`s), RESULTS.md (from the `Observation`) and REPORT.html's
table (`templates/report.html.j2` reads `Headroom` itself). Pure: text out.
"""

from __future__ import annotations

from collections.abc import Sequence

from rig.headroom import NEAR
from rig.report.observation import Headroom, Observation, headroom_of
from rig.rubric import ArmScore

MEANING = (f"Each arm's sample closest to its memory limit (the kill threshold; the peak "
           "counts what the limit does: processes, page cache and the tree's tmpfs), read "
           "from the sample container's own cgroup after the command; within "
           f"{NEAR * 100:.0f} % of the limit, or OOM-killed, is near it (`near_limit`).")


def worst_text(found: Headroom) -> str:
    """``cap/A/success/2: 243.6 / 256 MiB, 4.9 % left``; an OOM kill or unknown said so."""
    if found.worst_sample is None:
        return "no sample's peak against a limit"
    if found.peak_mib is None or found.limit_mib is None:
        return f"{found.worst_sample}: OOM-killed"
    left = "" if found.headroom is None else f", {100 * found.headroom:.1f} % left"
    return (f"{found.worst_sample}: {found.peak_mib:.1f} / {found.limit_mib:g} MiB{left}"
            + (" (OOM-killed)" if found.headroom == 0 else ""))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _near(found: Headroom) -> str:
    return ", ".join(found.near_limit) or "none"


def _cpu(found: Headroom) -> str:
    return "—" if found.cpu_s_max is None else f"{found.cpu_s_max:.2f} s"


def scorecard_lines(arms: Sequence[ArmScore]) -> list[str]:
    """SCORECARD.md's "Headroom" section: one line per arm ([] when no arm's use was
    read: records from before headroom)."""
    found = [(arm.arm, headroom_of(arm)) for arm in arms]
    if all(entry is None for _, entry in found):
        return []
    lines = ["## Headroom", "", MEANING, ""]
    for arm, entry in found:
        lines.append(f"- **{arm}**: " + ("no sample's use was read" if entry is None else
                                         f"{worst_text(entry)}; near the limit: "
                                         f"{_near(entry)}; most CPU in one sample: "
                                         f"{_cpu(entry)} ({entry.measured}/{entry.samples} "
                                         "samples read)"))
    return [*lines, ""]


def results_lines(obs: Observation) -> list[str]:
    """RESULTS.md's headroom table, per round and arm ([] when no arm's use was read)."""
    rows = [(r.change, e.arm, e.headroom) for r in obs.rounds for e in r.arms
            if e.headroom is not None]
    if not rows:
        return []
    lines = [MEANING, "", "| round | arm | worst sample | near the limit | most CPU | read |",
             "|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(_cell(t) for t in (
        change, arm, worst_text(entry), _near(entry), _cpu(entry),
        f"{entry.measured}/{entry.samples}")) + " |" for change, arm, entry in rows]
    return lines
