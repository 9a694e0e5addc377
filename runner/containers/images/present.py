"""Which of the images a manifest needs the engine already holds, by tag and identity
(`doctor`): the same plan `images build` follows (`images.plan`), asked without building.

An image is `ok` when its tag carries the identity a build would give it now, `missing`
when the tag is absent (or the base it is built FROM is), `wrong` when the tag holds an
image of another identity (built from another Dockerfile or base: the next use rebuilds
it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from runner.containers import images
from runner.containers.backend import LABEL_IDENTITY, ContainerEngine
from runner.containers.engine import Engine, docker_engine
from runner.containers.images import catalog
from runner.containers.images.identity import layers_digest

Status = Literal["ok", "missing", "wrong"]


@dataclass(frozen=True)
class ImageState:
    """One needed image: its name and tag, what the engine holds at the tag (`image_id`,
    `identity`, empty when absent) and the identity a build gives it now (`wanted`, empty
    when the base is missing and so it cannot be known)."""

    name: str
    tag: str
    status: Status
    image_id: str = ""
    identity: str = ""
    wanted: str = ""


def states(engine: ContainerEngine, names: list[str]) -> list[ImageState]:
    """The state of each image of `names` (`catalog.needed`: base first)."""
    engine = docker_engine(engine)
    attrs = images.inspect(engine, catalog.BASE_TAG)
    base = None if attrs is None else images.BuiltImage(
        catalog.BASE, catalog.BASE_TAG, attrs["Id"], layers_digest(attrs), cached=True)
    found = []
    for name in names:
        if name == catalog.BASE:
            found.append(ImageState(name, catalog.BASE_TAG, "missing") if base is None else
                         ImageState(name, base.tag, "ok", base.image_id, base.identity,
                                    base.identity))
            continue
        found.append(_state(engine, name, base))
    return found


def _state(engine: Engine, name: str, base: images.BuiltImage | None) -> ImageState:
    tag = catalog.tag_for(name)
    wanted = "" if base is None else images.plan(name, base)[2]
    attrs = images.inspect(engine, tag)
    if attrs is None:
        return ImageState(name, tag, "missing", wanted=wanted)
    identity = str(((attrs.get("Config") or {}).get("Labels") or {}).get(LABEL_IDENTITY, ""))
    status: Status = "ok" if wanted and identity == wanted else "wrong"
    return ImageState(name, tag, status, str(attrs["Id"]), identity, wanted)
