"""What `down` and `gc --images` clean up beyond the sandboxes: images, and the branches
an experiment leaves (listed; deleted only with `down --branches`).

`down` removes the prepared images the experiment's records name (the stage's image in
`sandboxes.json`, every sample's and arm's image under `.bakeoff/<experiment>/`), the
layers built on them and the build stages their builds left; `gc --images` every image
of ours no container uses that this version would not build as it is
(`runner.containers.images.inventory`). Each image removed is said with its size, each
kept with why. The branches stay: the records name their commits (`rescore`,
`reproduce`); `down` lists them and the commands that delete them, and `down --branches`
deletes them, never one checked out nor one holding a commit no record names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.commands import down as down_mod
from runner.containers import gateway, images
from runner.containers.backend import ContainerEngine
from runner.containers.images import catalog, inventory
from runner.containers.images.identity import context_hash, identity_of, layers_digest
from runner.containers.images.inventory import Image, Inventory, Plan
from runner.manifest import LoadedManifest
from runner.store import state as state_mod
from runner.store.layout import experiment_dir
from runner.store.state import ExperimentState
from runner.workspace import branches as git_branches

CLI = "bakeoff-sandbox"


@dataclass(frozen=True)
class ImageReport:
    removed: list[tuple[Image, int]]      # each image removed, and what it freed
    kept: list[tuple[Image, str]]         # an image of ours kept, and why
    dry_run: bool = False

    @property
    def freed(self) -> int:
        return sum(size for _, size in self.removed)


@dataclass(frozen=True)
class Cleaned:
    down: down_mod.DownReport
    images: ImageReport
    branches: list[Branch]


def down(engine: ContainerEngine, loaded: LoadedManifest, progress: down_mod.Progress, *,
         keep_images: bool) -> Cleaned:
    """The `down` command: the sandboxes (`runner.commands.down.down`), then the
    experiment's images (its records read first: `down` clears `sandboxes.json`), then
    the branches it leaves, listed."""
    directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    recorded = recorded_images(directory, state_mod.load(directory))
    report = down_mod.down(engine, loaded, progress)
    return Cleaned(report, down_images(engine, recorded, keep=keep_images),
                   branches_left(loaded))


def recorded_images(directory: Path, current: ExperimentState | None) -> set[str]:
    """Every image tag and id the experiment's records name: `sandboxes.json` (read
    before `down` clears it) and every JSON record under its directory."""
    found: set[str] = set()
    if current is not None:
        found |= {current.image, current.image_id}
        found |= {arm.image_id for arm in current.arms if arm.image_id}
    for path in sorted(directory.rglob("*.json")) if directory.is_dir() else ():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            found |= set(_values(data, ("image", "image_id")))
        except (OSError, UnicodeDecodeError, ValueError):
            continue  # not a record (a partial write is never read as one)
    return found


def _values(data: Any, keys: tuple[str, ...]) -> Iterator[str]:
    """Every non-empty string under one of `keys`, at any depth of a JSON document."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key in keys and isinstance(value, str) and value:
                yield value
            else:
                yield from _values(value, keys)
    elif isinstance(data, list):
        for item in data:
            yield from _values(item, keys)


def _carry_out(engine: ContainerEngine, found: Inventory, plan: Plan, dry_run: bool) -> ImageReport:
    removed: list[tuple[Image, int]] = []
    kept = list(plan.kept)
    for image in plan.remove:
        size = found.own_size(image)
        refused = None if dry_run else inventory.remove(engine, image)
        if refused is None:
            removed.append((image, size))
        else:
            kept.append((image, f"the engine refused: {refused}"))
    return ImageReport(removed, kept, dry_run)


def down_images(engine: ContainerEngine, recorded: set[str], *, keep: bool) -> ImageReport:
    """`down`: the experiment's prepared images and what was built on them, removed
    (kept, each said, with `--keep-images`)."""
    found = inventory.read(engine)
    plan = inventory.experiment_plan(found, recorded)
    if keep:
        kept = [(image, "--keep-images") for image in plan.remove] + plan.kept
        return ImageReport([], sorted(kept, key=lambda k: (k[0].shown, k[0].id)))
    return _carry_out(engine, found, plan, dry_run=False)


def gc_images(engine: ContainerEngine, *, dry_run: bool,
              within: Callable[[Image], bool] | None = None) -> ImageReport:
    """`gc --images`: every image of ours no container uses and this version would not
    build as it is. `within` narrows what is looked at (a test's own images)."""
    found = inventory.read(engine)
    plan = inventory.gc_plan(found, current_identities(engine))
    if within is not None:
        plan = Plan([i for i in plan.remove if within(i)],
                    [(i, why) for i, why in plan.kept if within(i)])
    return _carry_out(engine, found, plan, dry_run)


def current_identities(engine: ContainerEngine) -> inventory.Current:
    """Whether a shared image is what this version builds: the base's tag; a toolchain
    (images/) by the identity its Dockerfile and the base give; the gateway by its
    package and the python image; an agent CLI's dist by its version (kept). None for a
    kind this version does not build."""
    base = images.inspect(engine, catalog.BASE_TAG)
    base_identity = layers_digest(base) if base else ""
    python = images.inspect(engine, catalog.tag_for("python"))
    gateway_identity = (gateway.image_identity(python["Id"], gateway.package_files())
                        if python else "")
    known = set(catalog.known_names())

    def current(image: Image) -> bool | None:
        if image.kind == catalog.BASE:
            return catalog.BASE_TAG in image.tags
        if image.kind == "gateway":
            return image.identity == gateway_identity
        if image.kind == "agent-dist":
            return True
        if image.kind in known:
            return any(_toolchain_identity(tag, base_identity) == image.identity
                       for tag in image.tags)
        return None

    return current


def _toolchain_identity(tag: str, base_identity: str) -> str | None:
    name = catalog.name_of(tag)
    if name is None:
        return None
    folder, variant = catalog.split_name(name)
    context = catalog.images_dir() / folder
    args = {"BASE_IMAGE": catalog.BASE_TAG,
            **catalog.variants_of(folder).args(variant)}
    return identity_of(base_identity, context_hash(context), args)


def size_text(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def _named(image: Image) -> str:
    return f"{image.shown} ({image.id.removeprefix('sha256:')[:12]})"


def image_lines(report: ImageReport) -> list[str]:
    """What `down` / `gc --images` print of images: one line per image removed (its
    size), one per image kept (why), then the total freed."""
    verb = "would remove" if report.dry_run else "removed"
    lines = [f"{verb} image {_named(image)}, {size_text(size)}"
             for image, size in report.removed]
    lines += [f"kept image {_named(image)}: {why}" for image, why in report.kept]
    total = "would free" if report.dry_run else "freed"
    lines.append(f"images: {verb} {len(report.removed)}, {total} "
                 f"{size_text(report.freed)}")
    return lines


@dataclass(frozen=True)
class Branch:
    name: str
    tip: str
    why: str


def branches_left(loaded: LoadedManifest) -> list[Branch]:
    """The branches the experiment made in the user's repository, each with what it
    holds."""
    experiment = loaded.manifest.experiment
    found = git_branches.listed(loaded.repo_path, experiment.branch,
                                f"bakeoff-arms/{experiment.name}",
                                f"bakeoff-interrupted/{experiment.name}")
    return [Branch(name, tip, _why(name, experiment.branch)) for name, tip in found.items()]


def _why(name: str, experiment_branch: str) -> str:
    if name == experiment_branch:
        return "the experiment branch: the merged result of every change"
    parts = name.split("/")
    if parts[0] == "bakeoff-arms" and len(parts) == 4:
        return f"arm {parts[3]}'s commits for change {parts[2]}"
    if parts[0] == "bakeoff-interrupted" and len(parts) == 5:
        return f"arm {parts[3]}'s work when its dispatch was cut ({parts[4]}, change {parts[2]})"
    return "made by this experiment"


def branch_lines(loaded: LoadedManifest, found: list[Branch]) -> list[str]:
    """The branches `down` leaves, why, and the command that deletes them."""
    if not found:
        return []
    repo = loaded.repo_path
    return ([f"branches left in {repo} (their commits are what the records name: kept so "
             "the result can be audited, re-scored and reproduced):"]
            + [f"  {b.name}: {b.why}" for b in found]
            + [f"delete them when you are done: {CLI} down --branches, or git -C {repo} "
               "branch -D " + " ".join(b.name for b in found)])


_COMMIT = re.compile(r"[0-9a-f]{40}")
COMMIT_KEYS = ("commit", "base_commit", "head")


def recorded_commits(directory: Path) -> set[str]:
    """Every commit the experiment's records name (an arm's, a base, a merge's head)."""
    found: set[str] = set()
    for path in sorted(directory.rglob("*.json")) if directory.is_dir() else ():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        found |= {v for v in _values(data, COMMIT_KEYS) if _COMMIT.fullmatch(v)}
    return found


@dataclass(frozen=True)
class BranchReport:
    deleted: list[Branch]
    kept: list[tuple[Branch, str]]


def delete_branches(loaded: LoadedManifest, found: list[Branch]) -> BranchReport:
    """`down --branches`: each branch deleted, unless it is checked out in a worktree or
    holds a commit no record of the experiment names (the user's own work on it)."""
    repo = loaded.repo_path
    directory = experiment_dir(repo, loaded.manifest.experiment.name)
    recorded = recorded_commits(directory)
    checked_out = git_branches.checked_out(repo)
    deleted: list[Branch] = []
    kept: list[tuple[Branch, str]] = []
    for branch in found:
        extra = git_branches.unrecorded(repo, branch.tip, recorded)
        if branch.name in checked_out:
            kept.append((branch, f"checked out in {checked_out[branch.name]}"))
        elif extra:
            kept.append((branch, f"{extra} commit(s) on it are in no record of the "
                                 f"experiment: see `git -C {repo} log {branch.name}`, "
                                 f"then `git -C {repo} branch -D {branch.name}`"))
        else:
            git_branches.delete(repo, branch.name, branch.tip)
            deleted.append(branch)
    return BranchReport(deleted, kept)


def deleted_lines(loaded: LoadedManifest, report: BranchReport) -> list[str]:
    lines = [f"deleted branch {b.name} (was {b.tip[:12]})" for b in report.deleted]
    lines += [f"kept branch {b.name}: {why}" for b, why in report.kept]
    if report.deleted:
        directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
        lines.append(f"the records under {directory} still name those commits, now on no "
                     "branch: `git gc` prunes such commits after two weeks (gc.pruneExpire), "
                     "and then `reproduce` and `rescore` of this experiment cannot run")
    return lines
