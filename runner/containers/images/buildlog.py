"""Where a build's files go on this host: the per-user cache, and one log file per build
(its full output, kept for the last LOGS_KEPT builds of an image; its last lines are a
failed build's error)."""

from __future__ import annotations

import os
import re
import time
from collections import deque
from pathlib import Path
from types import TracebackType
from typing import IO

from runner.errors import InfraError
from runner.install import compose

TAIL_LINES = 20  # of a failed build's output, in its error
LOGS_KEPT = 10  # per image: older build logs are removed


def cache_dir() -> Path:
    """The tool's per-user cache (the rootfs tarball, build logs), Compose's too."""
    return compose.cache_root()


def logs_dir() -> Path:
    return cache_dir() / "logs"


class BuildLog:
    """One image build's full output in a file of its own, and its last lines for an error."""

    def __init__(self, name: str, directory: Path | None = None) -> None:
        root = directory or logs_dir()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.name = name
        self.path = root / f"{file_name(name)}-{stamp}-{os.getpid()}.log"
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        try:
            root.mkdir(parents=True, exist_ok=True)
            self._file: IO[str] = self.path.open("w", encoding="utf-8")
        except OSError as error:
            raise InfraError(f"cannot write the build log of image {name}: {error}",
                             hint="make ~/.cache writable, or set XDG_CACHE_HOME") from error
        _prune(root, file_name(name), keep=self.path)

    def __enter__(self) -> BuildLog:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._file.close()

    def write(self, text: str) -> None:
        """Every line goes to the file as it comes (so `tail -f` follows a build); a chunk
        that is only a line break (the builder sends many) is not a line."""
        if not text.strip():
            return
        for line in text.splitlines():
            self.tail.append(line)
            self._file.write(line + "\n")
        self._file.flush()

    def failure(self, what: str, hint: str) -> InfraError:
        """`what` with the build's last lines and the log's path, as one error."""
        self._file.write(f"error: {what}\n")  # the log ends with why; the tail is the build's
        self._file.flush()
        shown = "\n".join(f"    {line}" for line in self.tail)
        return InfraError(f"{what}\n  last {len(self.tail)} lines of the build:\n{shown}\n"
                          f"  full log: {self.path}", hint=hint)


def file_name(name: str) -> str:
    """A build's name as a log file's (`node:22` -> node-22, `x on bakeoff/y` -> x-on-bakeoff-y)."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", name)


def _prune(root: Path, name: str, keep: Path) -> None:
    """Only the newest LOGS_KEPT logs of an image stay (another process may prune too)."""
    pattern = re.compile(rf"{re.escape(name)}-\d{{8}}-\d{{6}}-\d+\.log")
    logs = sorted((p for p in root.iterdir() if pattern.fullmatch(p.name) and p != keep),
                  key=_mtime)
    for old in logs[:max(0, len(logs) - (LOGS_KEPT - 1))]:
        old.unlink(missing_ok=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0
