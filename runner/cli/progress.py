"""Progress for long work: a live rich display on a terminal, plain lines otherwise."""

from __future__ import annotations

import time
from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.table import Table

from runner.containers.images import BuiltImage


class ImageBuildView:
    """Reports image builds: one live row per image on a terminal, else one line per event."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.rows: dict[str, list[str]] = {}
        self.started: dict[str, float] = {}
        self.live: Live | None = None

    def __enter__(self) -> ImageBuildView:
        if self.console.is_terminal:
            self.live = Live(self._table(), console=self.console, refresh_per_second=8,
                             transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.live is not None:
            self.live.update(self._table())
            self.live.__exit__(kind, error, tb)

    def _table(self) -> Table:
        table = Table("image", "state", "elapsed", "last line", box=None)
        for name, (state, last) in ((n, (r[0], r[1])) for n, r in self.rows.items()):
            elapsed = f"{time.monotonic() - self.started[name]:.0f}s"
            table.add_row(name, state, elapsed, last[-70:])
        return table

    def _refresh(self) -> None:
        if self.live is not None:
            self.live.update(self._table())

    def _plain(self, text: str) -> None:
        """One line through the console (the command line's redacts secrets)."""
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def start(self, name: str) -> None:
        self.started[name] = time.monotonic()
        self.rows[name] = ["building", ""]
        if self.live is None:
            self._plain(f"[{name}] building")
        self._refresh()

    def line(self, name: str, text: str) -> None:
        self.rows.setdefault(name, ["building", ""])[1] = text
        if self.live is None:
            self._plain(f"[{name}] {text}")
        self._refresh()

    def done(self, image: BuiltImage) -> None:
        state = "cached" if image.cached else "built"
        self.rows[image.name] = [state, image.image_id[:19]]
        if self.live is None:
            self._plain(f"[{image.name}] {state}")
        self._refresh()
