"""The contract: the grading, frozen at ``up`` with a hash, verified by every later command.

DESIGN.md principle 1. `build_contract` turns a loaded manifest (plus what only the
runner can see: the base commit, the image identity, files at the base, resolved refs)
into a `Contract`; `contract_sha256` hashes its `canonical_json`. `freeze` records it as
a version of ``contract.lock.json`` in the experiment directory; `verify` refuses a
current contract that differs from the latest frozen version, naming the changed fields
(`diff`). A refreeze appends a version; no version is ever overwritten or dropped.

No git and no docker here: the runner passes `read_at_base` and `resolve_reference`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rig.errors import ContractMismatchError, RigError
from rig.persist import write_text_atomic
from runner.manifest import Change, Check, LoadedManifest

LOCK_FILE: Final = "contract.lock.json"
LOCK_SCHEMA: Final = "bakeoff-contract/v1"
ABSENT: Final = "absent"  # the hash of a protected path that does not exist at the base

ReadAtBase = Callable[[str], bytes | None]  # repo-relative path -> bytes at the base, or None
ResolveReference = Callable[[str], str | None]  # a ref -> its commit id, or None


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ContractWeights(_Part):
    """The rubric weights."""

    success: int
    checks: int
    diagnosis: int
    plan: int
    code_quality: int
    intent: int


class ContractCheck(_Part):
    """One objective check, every key that changes what it measures."""

    name: str
    run: str
    parser: str | None
    kind: str
    metric: str | None
    better: str | None
    tolerance: float
    junit: str | None


class ContractServer(_Part):
    """The server started fresh for every sample of a success criterion."""

    run: str
    health: str
    port_env: str
    startup_timeout_s: float


class ContractSuccess(_Part):
    """A change's success criterion."""

    run: str
    parser: str
    server: ContractServer | None


class ContractChange(_Part):
    """One change: its success criterion and the hashes of what defines it."""

    id: str
    success: ContractSuccess
    brief_sha256: str  # of the brief file's bytes
    protected: dict[str, str]  # repo path -> sha256 of its content at the base, or "absent"
    reference: str  # as the manifest names it ("" when unset)
    reference_sha256: str  # of the patch file's bytes, or the resolved commit id; "" when unset


class ContractToolchain(_Part):
    """The image every container runs, by name and by identity."""

    image: str
    image_identity: str
    setup: list[str]
    requires: list[str]


class ContractLimits(_Part):
    """Per-container limits, the same for every arm."""

    cpus: float
    memory_mb: int
    pids: int
    dispatch_timeout_s: float
    check_timeout_s: float


class Contract(_Part):
    """The canonical grading content; its `contract_sha256` is what `verify` compares."""

    metric: str
    threshold: float
    samples: int
    allow_fewer_samples: bool
    weights: ContractWeights
    judge: str
    checks: list[ContractCheck]
    changes: list[ContractChange]
    toolchain: ContractToolchain
    limits: ContractLimits
    base_commit: str
    ratchet_baselines: dict[str, float] = Field(default_factory=dict)  # check -> base value


class LockVersion(_Part):
    """One frozen version of the contract."""

    version: int
    sha256: str
    frozen_at: str  # ISO 8601, UTC
    reason: Literal["up", "refreeze"]
    contract: Contract


class Lock(_Part):
    """``contract.lock.json``: every version ever frozen, oldest first."""

    model_config = ConfigDict(populate_by_name=True)
    schema_name: Literal["bakeoff-contract/v1"] = Field(default=LOCK_SCHEMA, alias="schema")
    versions: list[LockVersion]

    @property
    def latest(self) -> LockVersion:
        """The version every later command verifies against."""
        return self.versions[-1]


# --- building and hashing ------------------------------------------------------------


def build_contract(
    loaded: LoadedManifest,
    *,
    base_commit: str,
    image_identity: str,
    read_at_base: ReadAtBase,
    resolve_reference: ResolveReference,
) -> Contract:
    """The contract of `loaded` at `base_commit`, with `image_identity` for its toolchain."""
    manifest = loaded.manifest
    terms = manifest.contract
    toolchain = manifest.toolchain
    return Contract(
        metric=terms.metric, threshold=terms.threshold, samples=terms.samples,
        allow_fewer_samples=terms.allow_fewer_samples,
        weights=ContractWeights(**terms.weights.model_dump()),
        judge=terms.judge,
        checks=[_check(check) for check in manifest.checks],
        changes=[
            _change(loaded, change, read_at_base, resolve_reference)
            for change in manifest.changes
        ],
        toolchain=ContractToolchain(
            image=toolchain.image, image_identity=image_identity,
            setup=list(toolchain.setup), requires=list(toolchain.requires),
        ),
        limits=ContractLimits(**manifest.limits.model_dump()),
        base_commit=base_commit,
    )


def canonical_json(contract: Contract) -> str:
    """Sorted keys, no whitespace, floats as repr: equal contracts give equal text."""
    return json.dumps(contract.model_dump(mode="json"), sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False)


def contract_sha256(contract: Contract) -> str:
    """The sha256 (hex) of `canonical_json`."""
    return _sha256(canonical_json(contract).encode("utf-8"))


def reference_file(loaded: LoadedManifest, reference: str) -> Path | None:
    """The patch file a reference names (relative to the manifest, then the repository).

    A file wins over a ref of the same name; None when no such file exists.
    """
    if not reference:
        return None
    for base in (loaded.root, loaded.repo_path):
        path = (base / Path(reference).expanduser()).resolve()
        if path.is_file():
            return path
    return None


def _check(check: Check) -> ContractCheck:
    return ContractCheck(
        name=check.name, run=check.run, parser=check.parser, kind=check.kind,
        metric=check.metric, better=check.better, tolerance=check.tolerance, junit=check.junit,
    )


def _change(
    loaded: LoadedManifest, change: Change, read_at_base: ReadAtBase,
    resolve_reference: ResolveReference,
) -> ContractChange:
    success = change.success
    server = None if success.server is None else ContractServer(**success.server.model_dump())
    return ContractChange(
        id=change.id,
        success=ContractSuccess(run=success.run, parser=success.parser, server=server),
        brief_sha256=_brief_sha256(loaded, change),
        protected={path: _sha256_or_absent(read_at_base(path)) for path in change.protected},
        reference=change.reference,
        reference_sha256=_reference_sha256(loaded, change, resolve_reference),
    )


def _brief_sha256(loaded: LoadedManifest, change: Change) -> str:
    path = loaded.brief_path(change)
    try:
        return _sha256(path.read_bytes())
    except OSError as exc:
        raise RigError(
            f"{loaded.path}: cannot read the brief of change {change.id!r} ({path}): "
            f"{exc.strerror or exc}",
            hint="write the brief at that path, or correct changes[].brief",
        ) from None


def _reference_sha256(
    loaded: LoadedManifest, change: Change, resolve_reference: ResolveReference
) -> str:
    if not change.reference:
        return ""
    patch = reference_file(loaded, change.reference)
    if patch is not None:
        return _sha256(patch.read_bytes())
    commit = resolve_reference(change.reference)
    if commit is None:
        raise RigError(
            f"{loaded.path}: changes[{change.id}].reference {change.reference!r} is neither "
            "a patch file nor a commit of the repository",
            hint='name a commit, or a patch file relative to the manifest, or set reference = ""',
        )
    return commit


def _sha256_or_absent(content: bytes | None) -> str:
    return ABSENT if content is None else _sha256(content)


def _sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


# --- what changed ----------------------------------------------------------------------

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


# --- the lock file ---------------------------------------------------------------------


def lock_path(directory: Path) -> Path:
    """Where the lock of the experiment directory `directory` lives."""
    return Path(directory) / LOCK_FILE


def load_lock(directory: Path) -> Lock | None:
    """The lock in `directory`, or None when there is none.

    A lock that does not parse, or whose hashes do not match their content, is a
    `RigError` naming the file: it is never overwritten.
    """
    path = lock_path(directory)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        lock = Lock.model_validate(data)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise _corrupt(path, _reason(exc)) from None
    _check_versions(path, lock)
    return lock


def freeze(directory: Path, contract: Contract, *, refreeze: bool) -> LockVersion:
    """Record `contract` in the lock of `directory` and return its version.

    The first freeze writes version 1. The same contract again changes nothing. A
    different one raises `ContractMismatchError` unless `refreeze`, which appends the
    next version (the old ones stay, untouched).
    """
    path = lock_path(directory)
    lock = load_lock(directory)
    sha = contract_sha256(contract)
    if lock is not None and lock.latest.sha256 == sha:
        return lock.latest
    if lock is not None and not refreeze:
        raise ContractMismatchError(str(path), _changed(lock.latest.contract, contract))
    versions = [] if lock is None else list(lock.versions)
    version = LockVersion(
        version=len(versions) + 1, sha256=sha, frozen_at=_now(),
        reason="up" if lock is None else "refreeze", contract=contract,
    )
    _write(path, Lock(versions=[*versions, version]))
    return version


def verify(directory: Path, current: Contract) -> LockVersion:
    """The latest frozen version, when `current` equals it.

    No lock: `RigError` (run ``up`` first). A different contract: `ContractMismatchError`
    (exit 4) listing the changed fields.
    """
    path = lock_path(directory)
    lock = load_lock(directory)
    if lock is None:
        raise RigError(
            f"no frozen contract: {path} does not exist",
            hint="run `bakeoff-sandbox up` first (it freezes the contract before anything runs)",
        )
    if lock.latest.sha256 != contract_sha256(current):
        raise ContractMismatchError(str(path), _changed(lock.latest.contract, current))
    return lock.latest


def _changed(old: Contract, new: Contract) -> list[str]:
    return diff(old, new) or ["(the contract's canonical content)"]


def _check_versions(path: Path, lock: Lock) -> None:
    if not lock.versions:
        raise _corrupt(path, "it holds no contract version")
    for index, version in enumerate(lock.versions, start=1):
        if version.version != index:
            raise _corrupt(path, f"versions[{index - 1}] is numbered {version.version}, "
                                 f"expected {index}")
        if contract_sha256(version.contract) != version.sha256:
            raise _corrupt(path, f"version {index}: sha256 does not match its contract "
                                 "(edited by hand?)")


def _corrupt(path: Path, reason: str) -> RigError:
    return RigError(
        f"the contract lock {path} is not a valid {LOCK_SCHEMA} lock: {reason}",
        hint="it is never overwritten automatically: restore it (from a backup or the run "
             "directory's history), or move it away and run `bakeoff-sandbox up` to freeze "
             "a new contract (results recorded under the old one will no longer verify)",
    )


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "top level"
        return f"{where}: {first['msg']}"
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    return str(exc)


def _write(path: Path, lock: Lock) -> None:
    data = lock.model_dump(mode="json", by_alias=True)
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
