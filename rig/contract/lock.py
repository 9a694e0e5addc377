"""``contract.lock.json``: every frozen version of the contract, oldest first.

`freeze` records a contract (version 1 at the first ``up``; a new version only on
refreeze, never overwriting an old one); `verify` refuses a contract that differs from
the latest version, naming the changed fields. Written atomically; a lock that does not
parse is an error naming it, never silently replaced.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rig.contract.comparison import diff
from rig.contract.content import Contract, contract_sha256
from rig.errors import ContractMismatchError, RigError
from rig.persist import write_text_atomic

LOCK_FILE: Final = "contract.lock.json"
LOCK_SCHEMA: Final = "bakeoff-contract/v1"


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


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

