"""Turn validation failures into one `ManifestError` a user can act on.

Each problem becomes an `Issue` (key path, what is wrong, what was found, the fix). One
issue is one `ManifestError`; several are ONE `ManifestError` whose first line is the
first issue and whose following lines are the others, each with its own fix.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from runner.errors import ManifestError
from runner.manifest.document import Manifest
from runner.manifest.models import PATTERN_HELP
from runner.manifest.rules import RULE_ERROR_TYPE, Loc, RuleViolation, format_loc

SCHEMA_HINT = (
    "`bakeoff-sandbox schema` prints every key; "
    "`bakeoff-sandbox init` writes a commented example"
)

_TYPE_NAMES = {
    "string_type": "a string", "int_type": "an integer", "int_from_float": "an integer",
    "float_type": "a number", "bool_type": "true or false", "list_type": "an array",
    "model_type": "a table", "dict_type": "a table", "model_attributes_type": "a table",
}


@dataclass(frozen=True)
class Issue:
    """One problem in a manifest, ready to print."""

    key_path: str
    problem: str
    fix: str
    found: object = None

    def render(self, file: str) -> str:
        """``FILE: KEY: problem (found X)`` and an indented fix line."""
        where = f"{file}: {self.key_path}" if self.key_path else file
        found = "" if self.found is None else f" (found {self.found!r})"
        return f"{where}: {self.problem}{found}\n  fix: {self.fix}"


def manifest_error(file: str, issues: Sequence[Issue]) -> ManifestError:
    """One error for every issue; its key path, found value and first line are the first's."""
    first, rest = issues[0], issues[1:]
    tail = "".join(f"\n{issue.render(file)}" for issue in rest)
    return ManifestError(file, first.key_path, first.problem, found=first.found,
                         fix=first.fix + tail)


def validation_issues(error: ValidationError) -> list[Issue]:
    """Every problem pydantic found, in the order of the models' fields, as issues."""
    issues: list[Issue] = []
    for detail in error.errors():
        if detail["type"] == RULE_ERROR_TYPE:
            issues.extend(_rule_issues(detail))
        else:
            issues.append(_field_issue(detail))
    return issues


def _rule_issues(detail: ErrorDetails) -> list[Issue]:
    violations: tuple[RuleViolation, ...] = detail.get("ctx", {}).get("violations", ())
    return [
        Issue(format_loc((*detail["loc"], *v.at)), v.problem, v.fix, v.found)
        for v in violations
    ]


def _field_issue(detail: ErrorDetails) -> Issue:
    loc: Loc = tuple(detail["loc"])
    describe = _DESCRIBERS.get(detail["type"], _describe_other)
    problem, fix = describe(detail, loc)
    return Issue(format_loc(loc), problem, fix, _found(detail))


def _found(detail: ErrorDetails) -> object:
    """The offending value, unless it is a whole table (too long to be useful)."""
    value = detail["input"]
    if detail["type"] == "missing" or isinstance(value, dict):
        return None
    if isinstance(value, list) and any(isinstance(item, dict) for item in value):
        return None
    return value


Describer = Callable[[ErrorDetails, Loc], tuple[str, str]]


def _describe_missing(detail: ErrorDetails, loc: Loc) -> tuple[str, str]:
    name = str(loc[-1])
    field = _field_at(loc)
    target = None if field is None else _unwrap(field.annotation)
    if _is_model(target):
        header = f"[[{_dotted(loc)}]]" if _is_list(field) else f"[{_dotted(loc)}]"
        return (f"the required section {header} is missing",
                f"add a {header} section; {SCHEMA_HINT}")
    what = "" if field is None or not field.description else f" ({field.description})"
    return (f"the required key '{name}' is missing",
            f"add {name} = ... {_under(loc[:-1])}{what}")


def _describe_extra(detail: ErrorDetails, loc: Loc) -> tuple[str, str]:
    name = str(loc[-1])
    allowed = _keys_at(loc[:-1])
    close = difflib.get_close_matches(name, allowed, n=1)
    guess = f"did you mean '{close[0]}'? " if close else ""
    what = "section" if isinstance(detail["input"], dict | list) else "key"
    return (f"unknown {what} '{name}' {_under(loc[:-1])}",
            f"{guess}remove or rename it; allowed keys here: {', '.join(allowed)}")


def _describe_choice(detail: ErrorDetails, loc: Loc) -> tuple[str, str]:
    allowed = _choices_at(loc)
    listing = ", ".join(allowed) if allowed else str(detail.get("ctx", {}).get("expected"))
    return (f"is not one of the allowed values: {listing}", f"use one of: {listing}")


def _describe_pattern(detail: ErrorDetails, loc: Loc) -> tuple[str, str]:
    pattern = str(detail.get("ctx", {}).get("pattern", ""))
    rule = PATTERN_HELP.get(pattern, f"the pattern {pattern}")
    if pattern == "^/":
        rule = "a path starting with '/'"
    return f"must be {rule}", f"change it to {rule}"


def _describe_bound(detail: ErrorDetails, loc: Loc) -> tuple[str, str]:
    ctx = detail.get("ctx", {})
    signs = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
    bounds = " and ".join(f"{signs[k]} {ctx[k]}" for k in signs if k in ctx)
    return f"must be {bounds}", f"set a value {bounds}"


def _describe_length(detail: ErrorDetails, loc: Loc) -> tuple[str, str]:
    least = detail.get("ctx", {}).get("min_length", 1)
    name = str(loc[-1]) if loc else "it"
    if isinstance(detail["input"], list):
        return (f"needs at least {least} [[{name}]] entr{'y' if least == 1 else 'ies'}",
                f"add a [[{name}]] table; {SCHEMA_HINT}")
    return f"must have at least {least} characters", f"give {name} a value"


def _describe_type(detail: ErrorDetails, loc: Loc) -> tuple[str, str]:
    expected = _TYPE_NAMES.get(detail["type"], "another type")
    got = _toml_type(detail["input"])
    return f"wrong type: expected {expected}, got {got}", f"write {expected} here"


def _describe_other(detail: ErrorDetails, loc: Loc) -> tuple[str, str]:
    return detail["msg"], SCHEMA_HINT


_DESCRIBERS: dict[str, Describer] = {
    "missing": _describe_missing,
    "extra_forbidden": _describe_extra,
    "literal_error": _describe_choice,
    "enum": _describe_choice,
    "string_pattern_mismatch": _describe_pattern,
    "greater_than": _describe_bound,
    "greater_than_equal": _describe_bound,
    "less_than": _describe_bound,
    "less_than_equal": _describe_bound,
    "too_short": _describe_length,
    **{kind: _describe_type for kind in _TYPE_NAMES},
}


def _toml_type(value: object) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
             list: "an array", dict: "a table"}
    return names.get(type(value), type(value).__name__)


def _dotted(loc: Loc) -> str:
    """The TOML table name of a location: ``("changes", 0, "success")`` -> ``changes.success``."""
    return ".".join(str(part) for part in loc if isinstance(part, str))


def _under(loc: Loc) -> str:
    """Where a key of the table at `loc` goes: ``under [[arms]] (arms[2])``."""
    if not loc:
        return "at the top level"
    header = f"[[{_dotted(loc)}]]" if isinstance(loc[-1], int) else f"[{_dotted(loc)}]"
    which = f" ({format_loc(loc)})" if any(isinstance(part, int) for part in loc) else ""
    return f"under {header}{which}"


def _field_at(loc: Loc) -> FieldInfo | None:
    """The model field a location names, walking Manifest through lists and optionals."""
    model: Any = Manifest
    field: FieldInfo | None = None
    for part in loc:
        if isinstance(part, int):
            continue
        if not _is_model(model) or part not in model.model_fields:
            return None
        field = model.model_fields[part]
        model = _unwrap(field.annotation)
    return field


def _keys_at(loc: Loc) -> list[str]:
    model = Manifest if not loc else _unwrap(getattr(_field_at(loc), "annotation", None))
    return list(model.model_fields) if _is_model(model) else []


def _choices_at(loc: Loc) -> list[str]:
    field = _field_at(loc)
    target = None if field is None else _unwrap(field.annotation)
    if isinstance(target, type) and issubclass(target, Enum):
        return [str(member.value) for member in target]
    if get_origin(target) is Literal:
        return [str(arg) for arg in get_args(target)]
    return []


def _unwrap(annotation: Any) -> Any:
    """``list[X]``, ``X | None`` and ``Annotated[X, ...]`` -> ``X``."""
    origin = get_origin(annotation)
    if origin in (list, Union, types.UnionType):
        args = [arg for arg in get_args(annotation) if arg is not type(None)]
        return _unwrap(args[0]) if len(args) == 1 else annotation
    return annotation


def _is_list(field: FieldInfo | None) -> bool:
    return field is not None and get_origin(field.annotation) is list


def _is_model(target: Any) -> bool:
    return isinstance(target, type) and issubclass(target, BaseModel)
