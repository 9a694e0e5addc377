"""The live view of a dispatch: one row per arm (state, elapsed, last log line) on a
terminal; plain lines otherwise (state changes, and a log line at most every few seconds
per arm, so a chatty agent does not flood a CI log)."""

from __future__ import annotations

import threading
import time
from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.table import Table

FINAL = frozenset({"finished", "failed", "timed_out", "interrupted", "rig_error", "skipped"})
PLAIN_LINE_EVERY_S = 5.0
LINE_WIDTH = 80


class DispatchView:
    """A `DispatchReporter` that shows every arm at once."""

    def __init__(self, console: Console, arms: list[str]) -> None:
        self.console = console
        self.lock = threading.Lock()
        self.rows = {arm: {"state": "waiting", "line": "", "detail": ""} for arm in arms}
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        self.printed: dict[str, float] = {}
        self.live: Live | None = None

    def __enter__(self) -> DispatchView:
        if self.console.is_terminal:
            self.live = Live(console=self.console, get_renderable=self._table,
                             refresh_per_second=4, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.live is not None:
            self.live.refresh()
            self.live.__exit__(kind, error, tb)

    def state(self, arm: str, state: str, detail: str = "") -> None:
        with self.lock:
            row = self.rows.setdefault(arm, {"state": "", "line": "", "detail": ""})
            row["state"], row["detail"] = state, detail
            if state == "running":
                self.started[arm] = time.monotonic()
            if state in FINAL:
                self.ended[arm] = time.monotonic()
        if self.live is None:
            self._print(arm, f"{state}{': ' + detail if detail else ''}")

    def line(self, arm: str, text: str) -> None:
        with self.lock:
            self.rows.setdefault(arm, {"state": "", "line": "", "detail": ""})["line"] = text
            due = time.monotonic() - self.printed.get(arm, 0.0) >= PLAIN_LINE_EVERY_S
            if due:
                self.printed[arm] = time.monotonic()
        if self.live is None and due:
            self._print(arm, f"| {text[:200]}")

    def elapsed(self, arm: str) -> str:
        if arm not in self.started:
            return "-"
        end = self.ended.get(arm, time.monotonic())
        return f"{max(0.0, end - self.started[arm]):.0f}s"

    def _table(self) -> Table:
        table = Table("arm", "state", "elapsed", "last line", box=None)
        with self.lock:
            for arm, row in self.rows.items():
                last = row["detail"] if row["state"] in FINAL and row["detail"] else row["line"]
                table.add_row(arm, row["state"], self.elapsed(arm), last[-LINE_WIDTH:])
        return table

    def _print(self, arm: str, text: str) -> None:
        self.console.print(f"[{arm}] {text}", markup=False, highlight=False)
