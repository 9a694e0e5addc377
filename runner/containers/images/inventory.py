"""Our images on the engine, and which of them may go (`down`, `gc --images`).

`read` lists every image (the classic builder's intermediate ones too, with their
parents) and the containers of ours using each; the rest is pure: `experiment_plan`
(`down`: the prepared images an experiment's records name, the images built on them,
the build stages their builds left dangling) and `gc_plan` (every image of ours no
container uses and that is not what this version builds) say what goes and, for each
image of ours kept, why. Only an image carrying our image label is ever removed; one a
container uses (or an image built on it uses) is kept and the container named.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.containers.backend import (
    LABEL_BUILD_OF,
    LABEL_EXPERIMENT,
    LABEL_IDENTITY,
    LABEL_IMAGE,
    ContainerEngine,
)
from runner.containers.engine import docker_engine
from runner.errors import EngineError, NotFoundError

PREPARED = "prepared"  # the image label of a prepared image (`prepared.PREPARED`)
LAYERS = ("agent", "arm-browser")  # images built FROM an arm's image: its layers


@dataclass(frozen=True)
class Image:
    id: str
    tags: tuple[str, ...]
    labels: Mapping[str, str]
    size: int  # bytes, with its parents'
    parent: str  # "" for none

    @property
    def kind(self) -> str | None:
        """Our image label (python, prepared, agent, gateway...), None when not ours."""
        return self.labels.get(LABEL_IMAGE)

    @property
    def identity(self) -> str:
        return self.labels.get(LABEL_IDENTITY, "")

    @property
    def shown(self) -> str:
        return self.tags[0] if self.tags else "<none>"


@dataclass(frozen=True)
class Inventory:
    images: dict[str, Image]
    users: dict[str, tuple[str, ...]] = field(default_factory=dict)  # image id -> containers

    def children(self, image_id: str) -> list[Image]:
        return [i for i in self.images.values() if i.parent == image_id]

    def ancestors(self, image: Image) -> Iterator[Image]:
        seen = {image.id}
        parent = self.images.get(image.parent)
        while parent is not None and parent.id not in seen:
            seen.add(parent.id)
            yield parent
            parent = self.images.get(parent.parent)

    def descendants(self, image: Image) -> list[Image]:
        found: list[Image] = []
        todo = [image.id]
        while todo:
            for child in self.children(todo.pop()):
                found.append(child)
                todo.append(child.id)
        return found

    def dangling(self) -> list[Image]:
        """Images of ours with no tag that no other image is built on: left by builds."""
        parents = {i.parent for i in self.images.values()}
        return [i for i in self.images.values()
                if i.kind is not None and not i.tags and i.id not in parents]

    def used_by(self, image: Image) -> tuple[str, ...]:
        """The containers using `image` or an image built on it."""
        found = list(self.users.get(image.id, ()))
        for child in self.descendants(image):
            found.extend(self.users.get(child.id, ()))
        return tuple(dict.fromkeys(found))

    def own_size(self, image: Image) -> int:
        """What removing `image` frees: its size less that of the first ancestor that
        stays (tagged, or with another image on it)."""
        for ancestor in self.ancestors(image):
            if ancestor.tags or len(self.children(ancestor.id)) > 1:
                return max(0, image.size - ancestor.size)
        return image.size

    def base_of(self, image: Image) -> Image | None:
        """The image of ours `image` was built FROM: the first ancestor of another
        identity (the builder's step images carry their base's labels), its tagged one
        when that identity has a tag on the way, else None (nothing of ours below)."""
        run: list[Image] = []
        for ancestor in self.ancestors(image):
            if ancestor.kind is None or ancestor.identity == image.identity:
                continue
            if run and ancestor.identity != run[0].identity:
                break
            run.append(ancestor)
        return next((a for a in run if a.tags), run[0] if run else None)


@dataclass(frozen=True)
class Plan:
    remove: list[Image]
    kept: list[tuple[Image, str]]  # an image of ours kept, and why


def _tags(entry: dict[str, Any]) -> tuple[str, ...]:
    return tuple(t for t in entry.get("RepoTags") or () if t != "<none>:<none>")


def read(engine: ContainerEngine) -> Inventory:
    """Every image on the engine and the containers of ours using them."""
    engine = docker_engine(engine)
    listed: list[dict[str, Any]] = engine.call("list images", engine.client.api.images,
                                               all=True, retry=True)
    found = {e["Id"]: Image(e["Id"], _tags(e), e.get("Labels") or {}, int(e.get("Size") or 0),
                            e.get("ParentId") or "") for e in listed}
    containers: list[dict[str, Any]] = engine.call(
        "list containers", engine.client.api.containers, all=True, retry=True,
        filters={"label": LABEL_EXPERIMENT})
    users: dict[str, list[str]] = {}
    for c in containers:
        name = (c.get("Names") or ["?"])[0].lstrip("/")
        experiment = (c.get("Labels") or {}).get(LABEL_EXPERIMENT, "?")
        users.setdefault(c.get("ImageID", ""), []).append(
            f"{name} (experiment {experiment})")
    return Inventory(found, {k: tuple(v) for k, v in users.items()})


def remove(engine: ContainerEngine, image: Image) -> str | None:
    """Remove one image of ours (each tag, or the id of an untagged one); None when
    removed (or already gone), else the engine's refusal in one line."""
    engine = docker_engine(engine)
    if image.kind is None:
        raise ValueError(f"refusing to remove image {image.id}: it is not ours")
    try:
        for ref in image.tags or (image.id,):
            engine.call(f"remove image {ref}", engine.client.images.remove, ref)
    except NotFoundError:
        return None
    except EngineError as error:
        return str(error).splitlines()[0]
    return None


def _ordered(inventory: Inventory, chosen: dict[str, Image]) -> list[Image]:
    """Images built on others first (the engine removes a base only once they are gone)."""
    def depth(image: Image) -> int:
        return sum(1 for _ in inventory.ancestors(image))
    return sorted(chosen.values(), key=lambda i: (-depth(i), i.shown, i.id))


def _split(inventory: Inventory, wanted: dict[str, Image],
           kept: list[tuple[Image, str]]) -> Plan:
    """`wanted` less what a container uses (kept, the containers named)."""
    going: dict[str, Image] = {}
    for image in wanted.values():
        users = inventory.used_by(image)
        if users:
            kept.append((image, f"in use by {', '.join(users)}"))
        else:
            going[image.id] = image
    return Plan(_ordered(inventory, going), sorted(kept, key=lambda k: (k[0].shown, k[0].id)))


def experiment_plan(inventory: Inventory, recorded: set[str]) -> Plan:
    """`down`: the prepared images `recorded` names (by tag or id), the images of ours
    built on them (an arm's agent or browser layer: made for this dependency set), and
    the build stages their builds left dangling (`LABEL_BUILD_OF`)."""
    roots = [i for i in inventory.images.values() if i.kind == PREPARED
             and (i.id in recorded or any(t in recorded for t in i.tags))]
    wanted: dict[str, Image] = {}
    for root in roots:
        wanted[root.id] = root
        wanted.update((d.id, d) for d in inventory.descendants(root)
                      if d.kind is not None and d.tags)
    tags = {t for root in roots for t in root.tags} | set(recorded)
    wanted.update((i.id, i) for i in inventory.dangling() if i.labels.get(LABEL_BUILD_OF) in tags)
    return _split(inventory, wanted, [])


Current = Callable[[Image], bool | None]  # True: what this version builds; None: not known


def gc_plan(inventory: Inventory, current: Current) -> Plan:
    """`gc --images`: every image of ours no container uses that this version would not
    build as it is: dangling ones, prepared images, an older identity of a shared image,
    and layers built on any of these. A shared image of the current identity is kept;
    one of a kind this version does not know is left alone."""
    wanted: dict[str, Image] = {i.id: i for i in inventory.dangling()}
    kept: list[tuple[Image, str]] = []
    for image in (i for i in inventory.images.values() if i.kind is not None and i.tags):
        verdict = _gc_verdict(inventory, image, current, wanted)
        if verdict is None:
            wanted[image.id] = image
        else:
            kept.append((image, verdict))
    return _split(inventory, wanted, kept)


def _gc_verdict(inventory: Inventory, image: Image, current: Current,
                wanted: dict[str, Image]) -> str | None:
    """None when `image` goes, else why it stays."""
    if image.kind == PREPARED:
        return None
    if image.kind in LAYERS:
        base = inventory.base_of(image)
        if base is None or not base.tags or base.kind == PREPARED or current(base) is False:
            return None
        return f"built on {base.shown}, which stays"
    answer = current(image)
    if answer is None:
        return "not an image this version builds; left as it is"
    return "what this version builds" if answer else None
