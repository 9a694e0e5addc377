"""The report: SCORECARD.md per change, RESULTS.md and OBSERVATION.json across changes.

All pure: scores and the observation in, text out (docs/design.md "Records").
"""

from rig.report.observation import (
    SCHEMA,
    ArmEntry,
    Baseline,
    Graft,
    Headroom,
    JudgeUsage,
    Observation,
    Rate,
    Results,
    Round,
    Scores,
    TieBreak,
    arm_entry,
    observation,
    read_observation,
    round_of,
    write_observation,
)
from rig.report.results import render_results
from rig.report.scorecard import render_scorecard

__all__ = [
    "SCHEMA",
    "ArmEntry",
    "Baseline",
    "Graft",
    "Headroom",
    "JudgeUsage",
    "Observation",
    "Rate",
    "Results",
    "Round",
    "Scores",
    "TieBreak",
    "arm_entry",
    "observation",
    "read_observation",
    "render_results",
    "render_scorecard",
    "round_of",
    "write_observation",
]
