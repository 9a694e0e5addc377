"""Who hears about a build: a reporter gets each image's start, lines and result (the
command line's progress view is one); the build log gets everything regardless."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from rig.parsers.base import plain
from runner.containers.images.buildlog import BuildLog

if TYPE_CHECKING:
    from runner.containers.images import BuiltImage


class BuildReporter(Protocol):
    def start(self, name: str) -> None: ...
    def line(self, name: str, text: str) -> None: ...
    def done(self, image: BuiltImage) -> None: ...


@runtime_checkable
class LogReporter(BuildReporter, Protocol):
    """A reporter that also wants to know where an image's full build output goes."""

    def log_opened(self, name: str, path: Path) -> None: ...


class QuietBuildReporter:
    """Reports nothing (the build log still has everything)."""

    def start(self, name: str) -> None: ...
    def line(self, name: str, text: str) -> None: ...
    def done(self, image: BuiltImage) -> None: ...


# Who hears about a build that `resolve` starts on first use (the command line installs
# its progress view here with `reporting`); a caller may also pass one explicitly.
_FIRST_USE: ContextVar[BuildReporter | None] = ContextVar("first_use_reporter", default=None)


@contextlib.contextmanager
def reporting(reporter: BuildReporter) -> Iterator[BuildReporter]:
    """Builds started by `resolve` without a reporter are reported to `reporter` here."""
    token = _FIRST_USE.set(reporter)
    try:
        yield reporter
    finally:
        _FIRST_USE.reset(token)


def current_reporter() -> BuildReporter:
    """The reporter `reporting` installed (a build on first use shows there), else quiet."""
    return _FIRST_USE.get() or QuietBuildReporter()


def open_log(name: str, reporter: BuildReporter) -> BuildLog:
    log = BuildLog(name)
    if isinstance(reporter, LogReporter):
        reporter.log_opened(name, log.path)
    return log


def emit(log: BuildLog, reporter: BuildReporter, name: str, text: str) -> None:
    """`text` of a build, without terminal escapes (npm's colours), to the log and the
    reporter."""
    text = plain(text)
    log.write(text)
    for line in text.splitlines():
        if line.strip():
            reporter.line(name, line.rstrip())
