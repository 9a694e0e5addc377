"""Progress for long work: a live rich display on a terminal, plain lines otherwise."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from rich.console import Console
from rich.errors import LiveError
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from runner.containers.images import BuiltImage

# The legacy builder announces each Dockerfile instruction so; the rest is the step's output.
STEP = re.compile(r"Step \d+/\d+ : ")
STEP_WIDTH = 100  # at most; less on a narrow terminal, so the line never wraps
OTHER_COLUMNS = 24  # the spinner, the image's name, the elapsed time and the gaps


@dataclass
class _Build:
    """One image being built, as the view knows it."""

    started: float
    step: str = ""
    stepped: bool = False  # a Dockerfile `Step N/M` line was seen
    log: Path | None = None
    task: TaskID | None = None
    shown: bool = False


class ImageBuildView:
    """Reports image builds (a `reporters.LogReporter`).

    On a terminal: one live line per image being built (a spinner, its name, the current
    build step, the elapsed time), replaced by one `built ...` line when it is done. Else
    (CI, a pipe): one line when a build starts and one when it ends. Never the build's own
    output (apt's, say): that is in the build's log, whose path both lines name. A cache
    hit shows nothing here (the command's result says so); a failed build's error carries
    the log's last lines and its path."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.builds: dict[str, _Build] = {}
        self.progress: Progress | None = None  # on a terminal, while a build runs

    def __enter__(self) -> ImageBuildView:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop()

    def start(self, name: str) -> None:
        self.builds[name] = _Build(time.monotonic())

    def log_opened(self, name: str, path: Path) -> None:
        build = self._build(name)
        build.log = path
        self._show(name, build)

    def line(self, name: str, text: str) -> None:
        build = self._build(name)
        is_step = STEP.match(text) is not None
        if is_step or not build.stepped:  # before the first Step: our own lines (base)
            build.step, build.stepped = text, build.stepped or is_step
        self._show(name, build)
        if self.progress is not None and build.task is not None:
            self.progress.update(build.task, description=self._step(build))

    def done(self, image: BuiltImage) -> None:
        build = self.builds.pop(image.name, None)
        if build is None or not build.shown:
            return  # a cache hit
        if self.progress is not None and build.task is not None:
            self.progress.remove_task(build.task)
        elapsed = time.monotonic() - build.started
        self._plain(f"built {image.name} in {elapsed:.1f}s: {image.image_id[:19]}, "
                    f"log {build.log or '-'}")
        if self.progress is not None and not self.progress.tasks:
            self._stop()

    def _build(self, name: str) -> _Build:
        return self.builds.setdefault(name, _Build(time.monotonic()))

    def _show(self, name: str, build: _Build) -> None:
        """The first sign of real work: a live line on a terminal, else one plain line."""
        if build.shown:
            return
        build.shown = True
        if not self.console.is_terminal:
            self._plain(f"building {name}, log {build.log or '-'}")
            return
        if self.progress is None:
            progress = Progress(
                SpinnerColumn(), TextColumn("{task.fields[image]:<10}", markup=False),
                TextColumn("{task.description}", markup=False), TimeElapsedColumn(),
                console=self.console, transient=True, refresh_per_second=8)
            try:
                progress.start()  # inside another live display (dispatch's) on rich >= 14
            except LiveError:  # rich 13 has one live display at a time: plain lines
                self._plain(f"building {name}, log {build.log or '-'}")
                return
            self.progress = progress
        build.task = self.progress.add_task(self._step(build), image=name, total=None)

    def _step(self, build: _Build) -> str:
        step = build.step or "starting"
        width = max(20, min(STEP_WIDTH, self.console.width - OTHER_COLUMNS))
        return step if len(step) <= width else step[:width - 1] + "…"

    def _stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    def _plain(self, text: str) -> None:
        """One line through the console (the command line's redacts secrets)."""
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)
