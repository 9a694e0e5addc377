"""A Kubernetes engine's named volumes (issue 36): each a PersistentVolumeClaim of its name
(`objects.claim`), which any Pod of ours mounts by name, as docker's named volumes are.

What docker gives for free and a cluster does not, done here:
- **one node**: a claim is ReadWriteOnce, held by one node at a time; a Pod that mounts
  a claim some running Pod of ours holds is put on that node (`node`), so an arm's
  sandbox and the bundler that reads its checkout meet there; two claims held on two
  nodes cannot be mounted together (refused, never left pending);
- **its size is its cap**: a class that provisions more than asked (a cloud disk rounded
  up to whole GiB) would let a checkout outgrow its limit: refused once the claim is bound
  (`sized`), never run larger;
- **its owner**: the uid docker's volume is made for rides on the claim's label, read back
  by another process (the Pods that write to it run with it as their `fsGroup`).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from runner.containers.backend import (
    LABEL_EXPERIMENT,
    LABEL_OWNER,
    ContainerSpec,
    Labels,
    Volume,
)
from runner.containers.kube import objects
from runner.containers.kube.api import KubeApi
from runner.errors import ConflictError, EngineRefusedError

DEFAULT_VOLUME_MB = 1024  # a volume docker keeps on its disk uncapped: the manifest's size
HELD = ("Pending", "Running")  # a Pod in these phases, once on a node, holds its claims
QUANTITY = re.compile(r"([0-9]+)([KMGTPE]i?|k)?")
UNITS = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
         "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
         "Ei": 2**60}


def quantity_bytes(text: str) -> int | None:
    """A storage quantity as the API writes one (`1Gi`, `2000M`, `1073741824`); None for
    a form it does not use for storage (a fraction, an exponent)."""
    found = QUANTITY.fullmatch(text.strip())
    return None if found is None else int(found.group(1)) * UNITS[found.group(2) or ""]


class PodVolumes:
    """The claims of one engine: made, removed, their owners, the node each is held on,
    the size each was given. `refused(what, why)` the engine's refusal."""

    def __init__(self, api: KubeApi, refused: Callable[[str, str], EngineRefusedError], *,
                 volume_mb: int = DEFAULT_VOLUME_MB, storage_class: str | None = None) -> None:
        self.api, self._refused = api, refused
        self.volume_mb, self.storage_class = volume_mb, storage_class
        self._owners: dict[str, int] = {}
        self._sized: set[str] = set()  # claims whose bound size was checked
        self._lock = threading.Lock()

    def create(self, name: str, labels: Labels, *, size_mb: int | None, owner: int) -> str:
        """The claim `name` of `size_mb` (None: the manifest's `volume_mb`); one of ours of
        that name already there is the same volume (as docker's create is)."""
        obj = objects.claim(name, self.api.cluster.namespace, labels,
                            size_mb=self.volume_mb if size_mb is None else size_mb, uid=owner,
                            storage_class=self.storage_class)
        try:
            self.api.create(obj)
        except ConflictError:
            found = self.api.get("PersistentVolumeClaim", name)
            if (found["metadata"].get("labels") or {}).get(LABEL_EXPERIMENT) != \
                    labels.experiment:
                raise
            owner = int(found["metadata"]["labels"].get(LABEL_OWNER, owner))
        with self._lock:
            self._owners[name] = owner
        return name

    def remove(self, name: str) -> None:
        """The claim goes (one already gone is fine); its data with it."""
        self.api.delete("PersistentVolumeClaim", name)
        with self._lock:
            self._owners.pop(name, None)
            self._sized.discard(name)

    def forget(self, names: Iterable[str]) -> None:
        """Claims removed by label (`remove_labelled`)."""
        with self._lock:
            for name in names:
                self._owners.pop(name, None)
                self._sized.discard(name)

    def owners(self, names: Iterable[str]) -> dict[str, int]:
        """Each claim's owner uid: made here, else its label (a claim another process of
        the tool made); a claim that is not there is left out (the Pod is refused)."""
        found: dict[str, int] = {}
        for name in sorted(set(names)):
            with self._lock:
                known = self._owners.get(name)
            if known is None:
                labels = self.api.get("PersistentVolumeClaim", name)["metadata"].get(
                    "labels") or {}
                if LABEL_OWNER not in labels:
                    continue
                known = int(labels[LABEL_OWNER])
                with self._lock:
                    self._owners[name] = known
            found[name] = known
        return found

    def node(self, names: Iterable[str], experiment: str, what: str) -> str | None:
        """The node the claims `names` are held on by a Pod of ours (None: by none);
        refused when two of them are held on two nodes."""
        wanted = set(names)
        if not wanted:
            return None
        nodes: dict[str, str] = {}  # node -> a claim held there
        for pod in self.api.listed("Pod", {LABEL_EXPERIMENT: experiment}):
            node = (pod.get("spec") or {}).get("nodeName")
            if not node or (pod.get("status") or {}).get("phase") not in HELD:
                continue
            for volume in pod["spec"].get("volumes") or []:
                claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
                if claim in wanted:
                    nodes.setdefault(node, claim)
        if len(nodes) > 1:
            held = ", ".join(f"{claim} on {node}" for node, claim in sorted(nodes.items()))
            raise self._refused(what, f"its volumes are held on two nodes ({held}): a claim "
                                "is one node's at a time (ReadWriteOnce)")
        return next(iter(nodes), None)

    def sized(self, names: Iterable[str], what: str, undo: Callable[[], object]) -> None:
        """Each bound claim's size is the one asked, else `undo()` and refused: a larger
        one (or one that cannot be read) would not cap what is written to it (checked once
        per claim, once bound)."""
        for name in sorted(set(names)):
            with self._lock:
                if name in self._sized:
                    continue
            found = self.api.get("PersistentVolumeClaim", name)
            asked = found["spec"]["resources"]["requests"]["storage"]
            given = ((found.get("status") or {}).get("capacity") or {}).get("storage")
            if given is None:
                continue  # not bound yet: checked at the next Pod that mounts it
            bound = quantity_bytes(str(given))
            if bound is None or bound > (quantity_bytes(str(asked)) or 0):
                undo()
                raise self._refused(what, f"the volume {name} was given {given} for the "
                                    f"{asked} asked: its size would not cap it (ask what "
                                    "the storage class gives exactly, or name a class that "
                                    "does in [kubernetes] storage_class)")
            with self._lock:
                self._sized.add(name)


def claimed(containers: Sequence[tuple[str, ContainerSpec]]) -> list[str]:
    """The named volumes (claims) the containers mount, each once."""
    return sorted({m.name for _, spec in containers for m in spec.mounts
                   if isinstance(m, Volume)})


def holding(containers: Sequence[tuple[str, ContainerSpec]], owners: Mapping[str, int],
            deadline_s: float, *, putting: bool) -> list[tuple[str, ContainerSpec]]:
    """The containers of a Pod made only for an archive to go in or out (docker's container
    "created, never started"): each holds (`sleep`, its image's coreutils) and never runs
    its own command. To put one in, as root with `objects.FILLER_CAPS` alone: tar keeps
    the owners and modes the archive gives, as docker's daemon does (root's entries
    root's, the sandbox user's its own); to take one out, as the owner of the volume it
    writes to (`reader`), who reads what that user kept to itself, with no capability."""
    held = ("sleep", str(math.ceil(deadline_s)))
    caps = tuple(sorted(objects.FILLER_CAPS))
    return [(name, replace(spec, command=held, cap_add=caps, user="0:0") if putting
             else replace(spec, command=held, cap_add=(), user=reader(spec, owners)))
            for name, spec in containers]


def reader(spec: ContainerSpec, owners: Mapping[str, int]) -> str:
    """Who takes an archive out of a container holding for it: the owner of the volume it
    writes to, else its own user (it writes to none of ours)."""
    owner = next((owners[m.name] for m in spec.mounts if isinstance(m, Volume)
                  and not m.read_only and m.name in owners), None)
    return spec.user if owner is None else f"{owner}:{owner}"
