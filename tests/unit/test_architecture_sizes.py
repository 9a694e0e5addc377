"""No product file over 500 lines (issue 35: "files over 500 lines", the measure a reviewer
takes): every Python file of runner/, rig/ and gateway/, the in-sample programs of
rig/guards/insample/ included, counted as `wc -l` counts it. A file that grows past the limit is
split along its seam (a command keeps the command, its library gets a module of its own).

There is no list of exceptions: the last three (the docker wing's sample executor and
image builder, the in-sample browser plugin) were split, and the list went with them.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("runner", "rig", "gateway")
MAX_LINES = 500
def product_files() -> list[Path]:
    """The product's Python files (a symlinked folder, such as the wheel's bundle, is not
    the product's code and is not followed)."""
    return sorted(path for folder in PRODUCT for path in (ROOT / folder).rglob("*.py")
                  if "__pycache__" not in path.parts and not path.is_symlink())


def lines(path: Path) -> int:
    return path.read_bytes().count(b"\n")


def over(limit: int = MAX_LINES) -> dict[str, int]:
    """Each product file over `limit` lines, by its path from the repository's root."""
    return {path.relative_to(ROOT).as_posix(): count for path in product_files()
            if (count := lines(path)) > limit}


def test_no_product_file_is_over_500_lines() -> None:
    found = over()
    assert not found, (f"over {MAX_LINES} lines: " + ", ".join(
        f"{path} ({count})" for path, count in sorted(found.items()))
        + ": split each along its seam into modules of their own")


def test_the_count_sees_every_product_folder_and_the_in_sample_programs() -> None:
    """The scan is not blind: it reaches each folder, rig/guards/insample/ among them, and
    counts lines as `wc -l` does."""
    found = {path.relative_to(ROOT).parts[0] for path in product_files()}
    assert found == set(PRODUCT)
    assert any(path.parent.name == "insample" for path in product_files())
    assert lines(ROOT / "runner" / "manifest" / "criteria.py") == len(
        (ROOT / "runner" / "manifest" / "criteria.py").read_text(encoding="utf-8").splitlines())
    assert "runner/commands/score.py" in over(limit=100)
