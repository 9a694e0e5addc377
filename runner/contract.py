"""The contract of a stage, as runner builds it from git and the prepared image, and the
check every later command makes against the frozen one (principle 1; exit 4)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rig import contract as contract_mod
from rig import preflight
from rig.contract import LockVersion
from rig.sample import metric
from runner import workspace
from runner.containers.images import BuiltImage
from runner.containers.images.prepared import ResolvedImages, node_for
from runner.errors import BadInputError
from runner.manifest import LoadedManifest, protected
from runner.store import records
from runner.store.layout import experiment_dir, stage_dir


def build_contract(loaded: LoadedManifest, change: str, base: str, image: BuiltImage,
                   stack_images: Mapping[str, str] | None = None,
                   arm_stack_images: Mapping[str, str] | None = None,
                   browser: Mapping[str, str] | None = None) -> contract_mod.Contract:
    """The grading of this stage; only this change's criterion is part of it, with its
    `protected` entries frozen as the files they name at `base`, and its stack's service
    images by identity (`stack_images`, from `ResolvedImages.stack_images`; the arms' own
    stack's: `arm_stack_images`, from `ResolvedImages.arm_stack_images`), and a browser
    criterion's browser (`browser`: its image's identity and versions, from
    `ResolvedImages.browser`)."""
    node = node_for(loaded)
    full = contract_mod.build_contract(
        loaded, base_commit=base, image_identity=image.identity,
        node=None if node is None else node.described(),
        read_at_base=functools.partial(workspace.file_at, loaded.repo_path, base),
        resolve_reference=functools.partial(workspace.commit_of, loaded.repo_path),
        # Other changes are dropped below; their globs may name files only later bases have.
        protected_files=lambda c: expand_protected(loaded, c.id, base) if c.id == change else ())
    stage = full.model_copy(update={"changes": [
        _with_images(c, stack_images, browser) for c in full.changes if c.id == change],
        "toolchain": _toolchain_with_images(full.toolchain, arm_stack_images)})
    known = known_baselines(loaded, change, stage)
    return stage.model_copy(update={"ratchet_baselines": {k: b.value for k, b in known.items()}})


def _with_images(change: contract_mod.ContractChange,
                 stack_images: Mapping[str, str] | None,
                 browser: Mapping[str, str] | None) -> contract_mod.ContractChange:
    stack = _stack_with_images(change.success.stack, stack_images)
    found = change.success.browser
    if found is not None and browser is not None:
        found = found.model_copy(update={"image": dict(sorted(browser.items()))})
    return change.model_copy(update={"success": change.success.model_copy(
        update={"stack": stack, "browser": found})})


def _toolchain_with_images(toolchain: contract_mod.ContractToolchain,
                           images: Mapping[str, str] | None) -> contract_mod.ContractToolchain:
    return toolchain.model_copy(update={"stack": _stack_with_images(toolchain.stack, images)})


def _stack_with_images(stack: contract_mod.ContractStack | None,
                       images: Mapping[str, str] | None) -> contract_mod.ContractStack | None:
    """A frozen stack with its service images' identities (none known: as it was)."""
    if stack is None or images is None:
        return stack
    return stack.model_copy(update={"images": dict(sorted(images.items()))})


def protected_paths(loaded: LoadedManifest, change: str, base: str) -> tuple[str, ...]:
    """The files `change` pins at `base`: every consumer (samples, the judge, grafts) reads
    them here. Equal to the file list the stage's contract froze whenever that contract
    verifies (the base's tree never changes; a changed `protected` is refused, exit 4).
    Expanded rather than read back from the lock: `up --refreeze` proves the NEW list
    before freezing it, and the lock then still holds the old one."""
    return expand_protected(loaded, change, base)


def expand_protected(loaded: LoadedManifest, change: str, base: str) -> tuple[str, ...]:
    """`protected`'s globs and directories expanded against the base commit's tree (git
    ls-tree, never the working tree); `ManifestError` (exit 2) for one that names nothing."""
    entries = loaded.change(change).protected
    if not entries:
        return ()
    return protected.expand(entries, set(workspace.files_at(loaded.repo_path, base)),
                            manifest=str(loaded.path), change=change, base=base)


def unprotected_named(loaded: LoadedManifest, change: str, base: str) -> list[str]:
    """`up`'s warnings: each file of the base a check's or the success criterion's command
    names that a sample takes from the arm's tree (`rig.preflight.unprotected_named`: not
    protected, not harness, not a test file the runner is pointed at, not a directory),
    one line per (command, file), saying how to protect it. Not an error: most such files
    are what the check measures (`grep -c TODO app.py`, `python3 app.py --selftest`)."""
    commands = [(f"checks[{c.name}].run", c.run) for c in loaded.manifest.checks]
    run = loaded.change(change).success.run
    if run is not None:  # a browser criterion's file is the manifest's, never the tree's
        commands.insert(0, (f"changes[{change}].success.run", run))
    paths = set(workspace.files_at(loaded.repo_path, base))
    kept = set(protected_paths(loaded, change, base))
    return [f"{where} names {path}, a file of the base that is not protected: every sample "
            f"runs or reads the ARM's {path}, which the arm may change. If it is the "
            f"grader's own script (not code under test), protect it: add \"{path}\" to "
            f"`protected` of [[changes]] id = \"{change}\" (changes[{change}].protected) "
            f"in {loaded.path.name}"
            for where, command in commands
            for path in preflight.unprotected_named(command, paths, kept)]


@dataclass(frozen=True)
class RatchetBaseline:
    """A ratchet's frozen base value and where it came from."""

    value: float
    source: str


def known_baselines(loaded: LoadedManifest, change: str,
                    current: contract_mod.Contract) -> dict[str, RatchetBaseline]:
    """The ratchet base values a stage needs no measurement for, per ratchet defined the
    same way: the stage's own frozen value (same base commit and toolchain), else, for a
    later change, the previous change's: as its merge moved it, else as it was frozen.
    Never lowered: a recorded movement in the worse direction is ignored. The others
    are measured on the base at `up` (`runner.commands.up.prove`)."""
    directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    ids = [c.id for c in loaded.manifest.changes]
    found: dict[str, RatchetBaseline] = {}
    if ids.index(change) > 0:
        found = _carried(directory, ids[ids.index(change) - 1], current)
    own = contract_mod.load_lock(stage_dir(directory, change))
    if own is not None and (own.latest.contract.base_commit, own.latest.contract.toolchain) == (
            current.base_commit, current.toolchain):
        found.update({name: RatchetBaseline(own.latest.contract.ratchet_baselines[name],
                                     "frozen in this stage's contract")
                      for name in _same_ratchets(own.latest.contract, current)})
    return found


def _same_ratchets(frozen: contract_mod.Contract, current: contract_mod.Contract) -> list[str]:
    """Ratchets `frozen` holds a value for, defined in `current` exactly as in `frozen`."""
    before = {c.name: c for c in frozen.checks}
    return [c.name for c in current.checks if c.kind == "ratchet"
            and c.name in frozen.ratchet_baselines and before.get(c.name) == c]


def _carried(directory: Path, previous: str,
             current: contract_mod.Contract) -> dict[str, RatchetBaseline]:
    lock = contract_mod.load_lock(stage_dir(directory, previous))
    if lock is None:
        return {}
    frozen = lock.latest.contract
    merged = records.load_merge(stage_dir(directory, previous))  # `merge` wrote it
    moves = {} if merged is None else merged.ratchets
    better = {c.name: c.better for c in current.checks}
    found = {}
    for name in _same_ratchets(frozen, current):
        value = frozen.ratchet_baselines[name]
        move = moves.get(name)
        to = None if move is None else _moved_to(move, value, better[name])
        if move is None or to is None:
            why = (move.why if move is not None else "") or "its merge recorded no move"
            found[name] = RatchetBaseline(value, f"as frozen for {previous} ({why})")
        else:
            found[name] = RatchetBaseline(to, f"moved by {previous}'s merge: {move.why}")
    return found


def _moved_to(move: records.RatchetMove, frozen: float, better: str | None) -> float | None:
    """The value a merge record moved `frozen` to, if it is a move in the better direction."""
    if move.before != frozen or better not in ("higher", "lower"):
        return None
    direction: metric.Better = "higher" if better == "higher" else "lower"
    return move.after if metric.worse_by(move.after, frozen, direction) < 0 else None


def verify(toolchain: ResolvedImages, change: str) -> LockVersion | None:
    """A later command's check: the stage's frozen contract must still match (exit 4).
    The base's image identity is part of it: `toolchain` knows (or makes) that image."""
    loaded = toolchain.loaded
    stage = stage_dir(experiment_dir(loaded.repo_path, loaded.manifest.experiment.name), change)
    lock = contract_mod.load_lock(stage)
    if lock is None:
        return None
    base = lock.latest.contract.base_commit
    return contract_mod.verify(stage, build_contract(loaded, change, base,
                                                     toolchain.for_commit(base),
                                                     toolchain.stack_images(change),
                                                     toolchain.arm_stack_images(),
                                                     toolchain.browser(change)))


def require(toolchain: ResolvedImages, change: str) -> LockVersion:
    """`verify`, for commands that cannot work without a frozen contract."""
    frozen = verify(toolchain, change)
    if frozen is None:
        raise BadInputError(f"change {change!r} has no frozen contract",
                            hint="run `bakeoff-sandbox up` first")
    return frozen
