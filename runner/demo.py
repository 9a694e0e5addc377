"""`bakeoff-sandbox demo`: the bundled example (examples/horizon), end to end.

The example is copied to a fresh directory, its `repo/` becomes a real git repository
(one commit on `main`), and the experiment runs against it. So far the demo shows the
sandbox core: `up`, `status`, a command in every arm with `exec`, then `down`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from runner import lifecycle
from runner.engine import Engine
from runner.errors import BadInputError
from runner.manifest import LoadedManifest, load_manifest

EXAMPLE = "horizon"
DB_PROBE = ("python3 -c \"import os, psycopg; c = psycopg.connect(os.environ['DATABASE_URL']); "
            "print('schema', c.execute('select current_schema()').fetchone()[0])\"")


def examples_dir() -> Path:
    configured = os.environ.get("BAKEOFF_EXAMPLES_DIR")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parent.parent / "examples"


def prepare(dest: Path | None) -> Path:
    """Copy the example to `dest` (or a temp dir), git-init its repo; return the manifest."""
    source = examples_dir() / EXAMPLE
    if not (source / "bakeoff.toml").is_file():
        raise BadInputError(f"the bundled example is missing at {source}",
                            hint="run the demo from a checkout of bakeoff-sandbox")
    root = dest or Path(tempfile.mkdtemp(prefix="bakeoff-demo-"))
    if root.exists() and any(root.iterdir()):
        raise BadInputError(f"--keep directory {root} is not empty",
                            hint="name a new or empty directory")
    shutil.copytree(source, root, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    repo = root / "repo"
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=bakeoff demo", "-c", "user.email=demo@bakeoff.invalid",
                  "commit", "-q", "-m", "horizon service: base"]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, timeout=60)
    return root / "bakeoff.toml"


def run(engine: Engine, keep: Path | None, say: Callable[[str], None],
        show_status: Callable[[LoadedManifest], None]) -> Path:
    """up → status → exec in every arm → down. Returns the demo directory."""
    manifest = prepare(keep)
    say(f"demo: example copied to {manifest.parent}")
    loaded = load_manifest(manifest)
    try:
        made = lifecycle.up(engine, loaded, progress=say)
        say(f"demo: {len(made.arms)} sandboxes up (run {made.run})")
        show_status(loaded)
        for arm in made.arms:
            result = lifecycle.exec_arm(engine, loaded, arm.arm, [
                "sh", "-c", f"echo \"$BAKEOFF_ARM: $(git log --oneline | wc -l) commit(s), "
                f"$(ls | wc -l) entries in /work\"; {DB_PROBE}"])
            say(result.stdout.strip() + (f"\n{result.stderr.strip()}" if result.exit_code else ""))
    finally:
        lifecycle.down(engine, loaded, progress=say)
    if keep is None:
        shutil.rmtree(manifest.parent, ignore_errors=True)
    return manifest.parent
