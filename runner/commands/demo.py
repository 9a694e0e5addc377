"""`bakeoff-sandbox demo [--example NAME]`: a bundled example (examples/NAME, horizon by
default), end to end.

The example is copied to a fresh directory, its `repo/` becomes a real git repository
(one commit on `main`), and `run` takes it through every change: up, dispatch (the
scripted contestants), score (with the scripted judge, when it has one), merge; then the
report.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from runner import workspace
from runner.errors import BadInputError
from runner.install import resources

EXAMPLE = "horizon"


def examples_dir() -> Path:
    """The bundled examples the tool ships."""
    return resources.examples_dir()


def names() -> list[str]:
    """The bundled examples: the folders of examples/ that hold a bakeoff.toml."""
    return sorted(p.parent.name for p in examples_dir().glob("*/bakeoff.toml"))


def prepare(dest: Path | None, example: str = EXAMPLE) -> Path:
    """Copy the example to `dest` (or a temp dir), git-init its repo; return the manifest."""
    source = examples_dir() / example
    if example not in names():
        if example == EXAMPLE:
            raise BadInputError(f"the bundled example is missing at {source}",
                                hint="run the demo from a checkout of bakeoff-sandbox")
        raise BadInputError(f"no bundled example {example!r}",
                            hint=f"use one of: {', '.join(names())}")
    root = dest or Path(tempfile.mkdtemp(prefix="bakeoff-demo-"))
    if root.exists() and any(root.iterdir()):
        raise BadInputError(f"--keep directory {root} is not empty",
                            hint="name a new or empty directory")
    shutil.copytree(source, root, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    repo = root / "repo"
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=bakeoff demo", "-c", "user.email=demo@bakeoff.invalid",
                  "commit", "-q", "-m", f"{example}: base"]):
        workspace.run_git(repo, *args)
    return root / "bakeoff.toml"
