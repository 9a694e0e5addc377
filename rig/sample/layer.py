"""What the rig lays over a sample's tree: the one place that policy is written.

Over the arm's checked tree (`rig.sample.tree`), in place and in this order: its
symlinks laid out as what they lead to (`rig.sample.links`; the base's too), committed
bytecode out, the base's harness when the check asks for it (`rig.guards.harness.pin`),
the base's protected files as regular files (or gone where the base has none), the
canaries (`rig.guards.plant`), an exit-code check's tripwire files (`rig.guards.tripwire`).
What the rig put there is root-owned in the sample (`Layer.owned`, and every directory
above it): the code under test cannot change or remove it.

Pure: trees and a spec in, the tree changed and a `Layer` out. The docker wing writes the
result as the tar a sample extracts (`runner.containers.samples.tree.build`); the only
bytes read beyond the trees are the heads of files too large to hold that a canary plan
reads, through the `heads` callable it passes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from rig.guards import harness, inprocess, plant
from rig.guards.canary import CANARY_RUNNERS, Canary
from rig.guards.harness import Pinned
from rig.sample import links
from rig.sample import tree as tree_mod
from rig.sample.spec import SampleSpec
from rig.sample.tree import Tree

# The text of files the tree does not hold, by path (each file's head, up to `INLINE`).
Heads = Callable[[Sequence[str]], Mapping[str, str]]


@dataclass(frozen=True)
class Layer:
    """What the rig laid over a sample's tree."""

    pinned: Pinned
    canary: Canary | None
    owned: tuple[str, ...]  # files the code under test must not change or remove
    dirs: tuple[str, ...]  # every directory above them ("" is /work itself)


def lay(spec: SampleSpec, tree: Tree, base: Tree | None, token: str, heads: Heads,
        canaries: bool = True, importable: Iterable[str] = (),
        caps: links.LayoutCaps = links.DEFAULT_CAPS) -> Layer:
    """The rig's layer over the arm's `tree` (changed in place): `UnsafeTreeError` when
    its symlinks (or the base's) cannot be laid out within `caps`. `importable`: the
    image python's top-level module names, which no module of the tree may shadow."""
    laid = links.lay_out(tree, base, caps)
    if base is not None:
        committed, base = base, tree_mod.Indexed(base)
        links.lay_out(base, committed, caps)
    pinned = Pinned(bytecode=harness.drop_bytecode(tree), materialized=laid.materialized)
    fixed: list[str] = []
    if spec.harness == "base" and base is not None:
        restored = harness.pin(tree, base, importable)
        pinned = Pinned(restored.restored, restored.removed, pinned.bytecode,
                        laid.materialized)
        fixed += [p for p in tree if harness.is_harness(p)]
    _restore(tree, base or {}, spec.protected)
    fixed += [p for p in spec.protected if p in tree]
    canary = _canary(spec, tree, token, heads) if canaries else None
    fixed += _plant(tree, canary)
    if spec.tripwire is not None:  # the sandbox user's, like the files around it
        for path in spec.tripwire.paths:
            tree_mod.place(tree, path, spec.tripwire.content)
    owned = tuple(sorted(set(fixed)))
    return Layer(pinned, canary, owned, tuple(sorted(tree_mod.ancestors(owned))))


def reads(path: str) -> bool:
    """Whether laying the layer reads the file's bytes (`rig.guards.harness`: runner
    configurations, conftests, Go test files; `rig.guards.plant`: Go sources,
    Cargo.toml): the wing holds these first."""
    return harness.is_harness(path) or path.endswith(".go")


def _restore(tree: Tree, base: Mapping[str, tree_mod.Entry], protected: Iterable[str]) -> None:
    for path in sorted(protected):
        entry = base.get(path)
        if entry is None:
            tree_mod.remove(tree, path)
        else:
            harness.put(tree, path, entry)


def _canary(spec: SampleSpec, tree: Tree, token: str, heads: Heads) -> Canary | None:
    if (spec.ratchet is not None or spec.parser not in CANARY_RUNNERS
            or spec.browser is not None):  # the browser's canaries are in its own container
        return None
    paths = sorted(tree)
    wanted = set() if spec.parser == "pytest" else set(
        inprocess.sources_needed(spec.parser, paths, spec.protected))
    text_of = {p: tree[p].data.decode(errors="replace") for p in wanted
               if p in tree and tree[p].held}
    unheld = sorted(p for p in wanted if p in tree and not tree[p].held)
    if unheld:
        text_of.update(heads(unheld))
    return plant.plan(spec.parser, token, paths, spec.command, spec.protected, text_of)


def _plant(tree: Tree, canary: Canary | None) -> list[str]:
    """The canary's files placed in the tree (none: the command does not run it)."""
    if canary is None:
        return []
    planted = ((canary.path, canary.content),) if canary.path else ()
    for path, content in (*planted, *canary.files):
        tree_mod.place(tree, path, content)
    return [path for path, _ in (*planted, *canary.files)]
