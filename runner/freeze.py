"""The contract of a stage, as runner builds it from git and the prepared image, and the
check every later command makes against the frozen one (principle 1; exit 4)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from rig import contract as contract_mod
from rig.contract import LockVersion
from runner import images, prepared, workspace
from runner.engine import Engine
from runner.images import BuiltImage
from runner.manifest import LoadedManifest
from runner.store import experiment_dir, stage_dir


def read_at(repo: Path, commit: str) -> Callable[[str], bytes | None]:
    def read(path: str) -> bytes | None:
        done = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=repo,
                              capture_output=True, check=False, timeout=60)
        return done.stdout if done.returncode == 0 else None
    return read


def resolver(repo: Path) -> Callable[[str], str | None]:
    def resolve(ref: str) -> str | None:
        sha = workspace.run_git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}",
                                check=False)
        return sha or None
    return resolve


def build_contract(loaded: LoadedManifest, change: str, base: str,
                   image: BuiltImage) -> contract_mod.Contract:
    """The grading of this stage; only this change's criterion is part of it."""
    full = contract_mod.build_contract(
        loaded, base_commit=base, image_identity=image.identity,
        read_at_base=read_at(loaded.repo_path, base), resolve_reference=resolver(loaded.repo_path))
    return full.model_copy(update={"changes": [c for c in full.changes if c.id == change]})


def verify(engine: Engine, loaded: LoadedManifest, change: str) -> LockVersion | None:
    """A later command's check: the stage's frozen contract must still match (exit 4)."""
    stage = stage_dir(experiment_dir(loaded.repo_path, loaded.manifest.experiment.name), change)
    lock = contract_mod.load_lock(stage)
    if lock is None:
        return None
    base = lock.latest.contract.base_commit
    toolchain = images.resolve(engine, loaded.manifest.toolchain.image)
    image = prepared.prepare(engine, loaded.repo_path, base, toolchain,
                             list(loaded.manifest.toolchain.setup), lambda _: None)
    return contract_mod.verify(stage, build_contract(loaded, change, base, image))
