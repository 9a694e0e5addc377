"""How the manifest models report a broken cross-field rule.

A validator that finds one or more rule violations raises ONE `PydanticCustomError` of
type ``manifest_rule`` whose context carries every `RuleViolation` (with its location
relative to the model that raised it). Pydantic prefixes the model's own location, and
`runner.manifest.issues` expands the violations into one line each. Code that validates
a manifest directly still gets a readable ``msg``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic_core import PydanticCustomError

RULE_ERROR_TYPE = "manifest_rule"

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class RuleViolation:
    """One broken rule: where (relative to the validated model), what, and the fix."""

    at: Loc
    problem: str
    fix: str
    found: object = None


def format_loc(loc: Loc) -> str:
    """``("arms", 2, "effort_normalized")`` -> ``arms[2].effort_normalized``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


def rule_error(violations: Sequence[RuleViolation]) -> PydanticCustomError:
    """The single error a validator raises for all the violations it found."""
    summary = "; ".join(
        f"{format_loc(v.at) or 'here'}: {v.problem}" for v in violations
    )
    return PydanticCustomError(
        RULE_ERROR_TYPE, "{summary}", {"summary": summary, "violations": tuple(violations)}
    )


def raise_if_any(violations: Sequence[RuleViolation]) -> None:
    """Raise `rule_error` when there is at least one violation."""
    if violations:
        raise rule_error(violations)
