"""Laying files out in a test's work tree."""

from __future__ import annotations

from pathlib import Path


def write_files(root: Path, files: dict[str, str | None]) -> None:
    """Each file with its text, parents made; `None` removes the file."""
    for name, text in files.items():
        path = root / name
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
