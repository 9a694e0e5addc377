"""What changed between two contracts, as dotted field paths a user can act on."""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel

from rig.contract.content import Contract, ContractChange, ContractCheck

# A hash field and what a reader should be told instead of its name.
_HASH_LABELS: Final = {
    "brief_sha256": "brief (brief file changed)",
    "reference_sha256": "reference (the patch or commit it names changed)",
}


def diff(old: Contract, new: Contract) -> list[str]:
    """The dotted paths of the fields that differ, e.g. ``changes[cap-horizon].success.run``.

    Checks and changes are named by their name and id; an entry only one side has is
    ``checks[lint] (added)`` or ``(removed)``. Empty exactly when the contracts are equal.
    """
    return _diff_models("", old, new)


def _diff_models(prefix: str, old: BaseModel, new: BaseModel) -> list[str]:
    changed: list[str] = []
    for name in type(old).model_fields:
        if name == "reference_sha256" and _reference_renamed(old, new):
            continue  # the reference itself changed: already named
        label = _HASH_LABELS.get(name, name)
        path = f"{prefix}.{label}" if prefix else label
        changed += _diff_values(path, getattr(old, name), getattr(new, name))
    return changed


def _reference_renamed(old: BaseModel, new: BaseModel) -> bool:
    return (isinstance(old, ContractChange) and isinstance(new, ContractChange)
            and old.reference != new.reference)


def _diff_values(path: str, old: Any, new: Any) -> list[str]:
    if old == new:
        return []
    if isinstance(old, BaseModel) and isinstance(new, BaseModel):
        return _diff_models(path, old, new)
    if isinstance(old, dict) and isinstance(new, dict):
        return _diff_keyed(path, old, new)
    if _keyed_list(old) and _keyed_list(new):
        return _diff_keyed(path, _by_key(old), _by_key(new), order_matters=True)
    return [path]


def _diff_keyed(
    path: str, old: dict[str, Any], new: dict[str, Any], *, order_matters: bool = False
) -> list[str]:
    changed: list[str] = []
    for key in [*old, *(key for key in new if key not in old)]:
        if key not in new:
            changed.append(f"{path}[{key}] (removed)")
        elif key not in old:
            changed.append(f"{path}[{key}] (added)")
        else:
            changed += _diff_values(f"{path}[{key}]", old[key], new[key])
    if not changed and order_matters and list(old) != list(new):
        changed.append(f"{path} (order changed)")
    return changed


def _keyed_list(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(item, ContractCheck | ContractChange) for item in value
    )


def _by_key(items: list[ContractCheck | ContractChange]) -> dict[str, Any]:
    return {item.name if isinstance(item, ContractCheck) else item.id: item for item in items}

