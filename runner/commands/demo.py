"""`bakeoff-sandbox demo [--example NAME]`: a bundled example (examples/NAME, horizon by
default), end to end.

The example is copied to a fresh directory, its `repo/` becomes a real git repository
(one commit on `main`), and `run` takes it through every change: up, dispatch (the
scripted contestants), score (with the scripted judge, when it has one), merge; then the
report.
"""

from __future__ import annotations

import shutil
import stat
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
                                hint=resources.HINT)
        raise BadInputError(f"no bundled example {example!r}",
                            hint=f"use one of: {', '.join(names())}")
    root = dest or Path(tempfile.mkdtemp(prefix="bakeoff-demo-"))
    if root.exists() and any(root.iterdir()):
        raise BadInputError(f"--keep directory {root} is not empty",
                            hint="name a new or empty directory")
    shutil.copytree(source, root, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc"))
    set_modes(root)
    repo = root / "repo"
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=bakeoff demo", "-c", "user.email=demo@bakeoff.invalid",
                  "commit", "-q", "-m", f"{example}: base"]):
        workspace.run_git(repo, *args)
    return root / "bakeoff.toml"


def set_modes(root: Path) -> None:
    """The copy's modes, whatever the installed files kept (a wheel keeps an executable
    bit only when the source had it; a system install may be read-only): every file the
    user's to edit (u+w), the agent scripts executable, so a command may name one
    directly (`/agents/fixer.sh {brief}`) as well as through `sh`."""
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
    for script in (root / "agents").glob("*.sh"):
        script.chmod(script.stat().st_mode | 0o755)

