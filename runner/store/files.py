"""Atomic JSON records and the experiment lock of the run directory (its paths:
`runner.store.layout`).

Records are written atomically (`rig.persist`): a reader (or a killed writer) never
sees half a record.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from rig.persist import write_text_atomic
from runner.errors import ExperimentBusyError
from runner.store.layout import STATE_ROOT, lock_file

M = TypeVar("M", bound=BaseModel)


def write_json(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def write_model(path: Path, model: BaseModel) -> None:
    """The model's JSON, by its field aliases (a record's keys as on disk)."""
    write_text_atomic(path, model.model_dump_json(indent=2, by_alias=True) + "\n")


def read_model(path: Path, model: type[M]) -> M | None:
    if not path.exists():
        return None
    return model.model_validate_json(path.read_text(encoding="utf-8"))


def ensure_excluded(repo: Path) -> None:
    """List `.bakeoff/` in `.git/info/exclude` so the state never dirties the tree."""
    exclude = repo / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    current = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
    if f"/{STATE_ROOT}/" in current.splitlines():
        return
    separator = "" if current.endswith("\n") or not current else "\n"
    exclude.write_text(f"{current}{separator}/{STATE_ROOT}/\n", encoding="utf-8")


@contextmanager
def experiment_lock(directory: Path, experiment: str, action: str) -> Iterator[None]:
    """An exclusive, non-blocking lock; the kernel releases it if we are killed."""
    directory.mkdir(parents=True, exist_ok=True)
    path = lock_file(directory)
    with path.open("a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as error:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise ExperimentBusyError(
                f"experiment {experiment!r} is busy: {holder} holds {path}",
                hint="wait for it to finish; if it was killed, the lock is already free — "
                     "run `bakeoff-sandbox gc` to remove its leftovers",
            ) from error
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} ({action})\n")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
