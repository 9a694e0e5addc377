"""Images without a registry: bootstrap the base rootfs locally, build toolchains FROM it.

Nothing here ever pulls. Every image is identified by its image ID *and* a stable content
identity (`identity`: the base's layers, the build directory, the build arguments); an
image at its tag carrying the identity it would be built with is a cache hit.

Only what is needed is built: `make setup` builds what the bundled example uses, and a
project image (a directory under images/, `catalog`) that a manifest names is built on
first use by `resolve`, with the same identity and cache rules. Every build's full output
goes to a log file of its own (`buildlog`); a failed build's error carries the last lines
and the path; who hears about a build is a reporter (`reporters`). The base's rootfs is
bootstrapped by mmdebstrap (`rootfs`).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rig.parsers.base import plain
from runner.containers.backend import LABEL_IDENTITY, LABEL_IMAGE, ContainerEngine
from runner.containers.dockerclient import iter_stream
from runner.containers.engine import Engine, docker_engine
from runner.containers.images import host_trust
from runner.containers.images.buildlog import BuildLog, cache_dir
from runner.containers.images.catalog import (
    BASE,
    BASE_TAG,
    BUILD_CMD,
    IMAGES_ENV,
    images_dir,
    known_names,
    name_of,
    ref_for,
    split_name,
    tag_for,
    variants_of,
)
from runner.containers.images.identity import (
    context_hash,
    directory_context,
    identity_of,
    layers_digest,
)
from runner.containers.images.reporters import BuildReporter, current_reporter, emit, open_log
from runner.containers.images.rootfs import bootstrap_rootfs
from runner.errors import ImageMissingError, InfraError, NotFoundError
from runner.install import compose


@dataclass(frozen=True)
class BuiltImage:
    name: str
    tag: str
    image_id: str
    identity: str
    cached: bool


def inspect(engine: ContainerEngine, ref: str) -> dict[str, Any] | None:
    engine = docker_engine(engine)
    try:
        image = engine.call(f"inspect image {ref}", engine.client.images.get, ref, retry=True)
    except NotFoundError:
        return None
    attrs: dict[str, Any] = image.attrs
    return attrs


def resolve(engine: ContainerEngine, name_or_ref: str, reporter: BuildReporter | None = None,
            variant: str | None = None) -> BuiltImage:
    """The local image for a toolchain name (or any reference), in `variant` when the
    image has variants (`node` 22). Never pulls.

    A missing project image (a directory under images/) is built here, on first use,
    exactly as `images build NAME[:VARIANT]` would (reported to `reporter`, else to the
    one `reporting` installed); any other missing image is an `ImageMissingError`."""
    engine = docker_engine(engine)
    ref = ref_for(name_or_ref, variant)
    attrs = inspect(engine, ref)
    if attrs is None:
        name = name_of(ref)
        if name is None:
            raise ImageMissingError(ref, _how_to_get(name_or_ref, ref))
        chosen = reporter or current_reporter()
        built = next(b for b in build(engine, [name], chosen) if b.name == name)
        return replace(built, name=name_or_ref)
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    identity = labels.get(LABEL_IDENTITY) or layers_digest(attrs)
    return BuiltImage(name_or_ref, ref, attrs["Id"], identity, cached=True)


def _how_to_get(name_or_ref: str, ref: str) -> str:
    """The fix for a missing image that is not one of images/ (nothing is ever pulled)."""
    known = ", ".join(known_names())
    if ref != name_or_ref and os.environ.get(IMAGES_ENV):  # the user's own folder
        return (f"{BUILD_CMD} {name_or_ref}, after adding {images_dir() / name_or_ref}"
                f"/Dockerfile (FROM {BASE_TAG}); the images/ there are: {known}")
    if ref != name_or_ref:  # never a folder of the installed package to edit
        return (f"name a local image in [toolchain] image (`docker build -t myorg/"
                f"{name_or_ref} DIR`, then image = \"myorg/{name_or_ref}\"), or put a build "
                f"context of your own in DIR/{name_or_ref}/ (a Dockerfile FROM {BASE_TAG}), "
                f"set {IMAGES_ENV}=DIR (it replaces the bundled images: copy the ones you "
                f"use there too) and run `{BUILD_CMD} {name_or_ref}`; the bundled images "
                f"are: {known}")
    return (f"`docker build -t {ref} DIR` or `docker load`: it is not one of images/ "
            f"({known}), so `{BUILD_CMD}` cannot make it")


@contextlib.contextmanager
def build_lock(tag: str) -> Iterator[None]:
    """One build of `tag` at a time on this host: a second command (or test worker) that
    needs the same missing image waits for the first, then finds it cached, instead of
    building it again beside it. The lock is the kernel's (flock): a killed builder
    releases it."""
    locks = cache_dir() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with compose.locked(locks / (re.sub(r"[^A-Za-z0-9._-]", "_", tag) + ".lock")):
        yield


def build_base(engine: Engine, reporter: BuildReporter, base_ref: str | None = None) -> BuiltImage:
    """The base image: an existing tag is reused; else a user's local ref or a bootstrap."""
    reporter.start(BASE)
    attrs = inspect(engine, BASE_TAG)
    source = inspect(engine, base_ref) if base_ref else None
    if base_ref and source is None:
        raise ImageMissingError(base_ref, "load it locally first (docker load); "
                                "nothing is ever pulled")
    cached = attrs is not None and (source is None or attrs["Id"] == source["Id"])
    if not cached:
        with open_log(BASE, reporter) as log:
            attrs = _make_base(engine, reporter, log, base_ref)
    if attrs is None:
        raise InfraError(f"{BASE_TAG} is still missing after import")
    built = BuiltImage(BASE, BASE_TAG, attrs["Id"], layers_digest(attrs), cached)
    reporter.done(built)
    return built


def _make_base(engine: Engine, reporter: BuildReporter, log: BuildLog,
               base_ref: str | None) -> dict[str, Any] | None:
    """Tag the user's local base image, or bootstrap and import one."""
    if base_ref:
        emit(log, reporter, BASE, f"using {base_ref} as the base")
        engine.call("tag base", engine.client.images.get(base_ref).tag, BASE_TAG)
        return inspect(engine, BASE_TAG)
    tarball = bootstrap_rootfs(reporter, log)
    emit(log, reporter, BASE, f"docker import {tarball.name} {BASE_TAG}")
    repository, tag = BASE_TAG.split(":")
    engine.call("import base", engine.client.api.import_image_from_file, str(tarball),
                repository=repository, tag=tag, changes=[f"LABEL {LABEL_IMAGE}={BASE}"])
    return inspect(engine, BASE_TAG)


def plan(name: str, base: BuiltImage, directory: Path | None = None
         ) -> tuple[Path, dict[str, str], str, str]:
    """What building images/<name> FROM `base` takes and makes: its context directory,
    build arguments, identity and tag (an image at the tag carrying that identity is
    up to date)."""
    folder, variant = split_name(name)
    context = (directory or images_dir()) / folder
    if not (context / "Dockerfile").is_file():
        raise InfraError(f"no Dockerfile for image {folder!r} in {context.parent}",
                         hint=f"known images: {', '.join(known_names(context.parent))}")
    args = {"BASE_IMAGE": base.tag, **variants_of(folder, context.parent).args(variant)}
    identity = identity_of(base.identity, context_hash(context), args)
    return context, args, identity, tag_for(name, context.parent)


def build_image(engine: Engine, name: str, base: BuiltImage, reporter: BuildReporter,
                *, nocache: bool = False, directory: Path | None = None) -> BuiltImage:
    """Build images/<name> FROM the base (`name` may be NAME:VARIANT: the variant's build
    argument is set). Unchanged inputs are a cache hit (no build)."""
    folder = split_name(name)[0]
    context, args, identity, tag = plan(name, base, directory)
    reporter.start(name)
    with build_lock(tag):
        existing = inspect(engine, tag)
        labels = ((existing or {}).get("Config") or {}).get("Labels") or {}
        if existing is not None and not nocache and labels.get(LABEL_IDENTITY) == identity:
            built = BuiltImage(name, tag, existing["Id"], identity, cached=True)
            reporter.done(built)
            return built
        with open_log(name, reporter) as log:
            stream = engine.call(
                f"build {name}", engine.client.api.build, fileobj=io.BytesIO(
                    directory_context(context)), custom_context=True, tag=tag, rm=True,
                forcerm=True, decode=True, pull=False, nocache=nocache,
                buildargs={**host_trust.proxy_args(), **args},
                labels={LABEL_IMAGE: folder, LABEL_IDENTITY: identity})
            image_id = read_build_stream(name, iter_stream(stream), reporter, log)
        if not image_id:
            attrs = inspect(engine, tag)
            if attrs is None:
                raise InfraError(f"building image {name} produced no image",
                                 hint=f"see the build log {log.path}")
            image_id = attrs["Id"]
        built = BuiltImage(name, tag, image_id, identity, cached=False)
        reporter.done(built)
        return built


def cached(engine: ContainerEngine, tag: str, identity: str) -> BuiltImage | None:
    """The image at `tag` when it was built with `identity` (our label), else None."""
    engine = docker_engine(engine)
    attrs = inspect(engine, tag)
    labels = ((attrs or {}).get("Config") or {}).get("Labels") or {}
    if attrs is None or labels.get(LABEL_IDENTITY) != identity:
        return None
    return BuiltImage(tag, tag, attrs["Id"], identity, cached=True)


def cached_or_built(engine: ContainerEngine, name: str, tag: str, identity: str,
                    context: Callable[[], bytes], reporter: BuildReporter,
                    hint: str) -> BuiltImage:
    """The image of `identity` at `tag`: found (`cached`), else built from `context()`
    (`build_context`), one build of the tag at a time on this host (`build_lock`)."""
    engine = docker_engine(engine)
    with build_lock(tag):
        found = cached(engine, tag, identity)
        if found is not None:
            return found
        return build_context(engine, name, tag, identity, context(), reporter, hint)


def build_context(engine: ContainerEngine, name: str, tag: str, identity: str, context: bytes,
                  reporter: BuildReporter, hint: str) -> BuiltImage:
    """A small image of ours (an agent CLI's dist or layer, an arm's browser layer) from
    a context in memory: the host's proxy as build arguments, its output to a log of its
    own, a failure raised with the log's tail and `hint`."""
    engine = docker_engine(engine)
    reporter.start(name)
    with open_log(name, reporter) as log:
        stream = engine.call(f"build {name}", engine.client.api.build,
                             fileobj=io.BytesIO(context), custom_context=True, tag=tag, rm=True,
                             forcerm=True, decode=True, pull=False,
                             buildargs=host_trust.proxy_args(),
                             labels={LABEL_IMAGE: tag.split(":")[0].removeprefix("bakeoff/"),
                                     LABEL_IDENTITY: identity})
        image_id = read_build_stream(name, iter_stream(stream), reporter, log,
                                     hint=lambda _tail: hint)
    attrs = inspect(engine, tag)
    if attrs is None:
        raise InfraError(f"building {name} produced no image", hint=f"see {log.path}")
    built = BuiltImage(tag, tag, image_id or attrs["Id"], identity, cached=False)
    reporter.done(built)
    return built


def read_build_stream(name: str, chunks: Iterable[dict[str, Any]], reporter: BuildReporter,
                      log: BuildLog, *, failed: str | None = None,
                      hint: Callable[[list[str]], str] | None = None) -> str:
    """Every line of a decoded build stream to the log and the reporter; the image ID
    (empty when the stream named none). A build error raises with the log's tail:
    `failed` says what failed (building image NAME), `hint` what to fix from the tail
    (images/NAME/Dockerfile)."""
    image_id = ""
    for chunk in chunks:
        if "error" in chunk:
            error = plain(str(chunk["error"])).strip()
            raise log.failure(f"{failed or f'building image {name} failed'}: {error}",
                              hint=hint(list(log.tail)) if hint else
                              f"fix images/{name}/Dockerfile, then {BUILD_CMD} {name}")
        emit(log, reporter, name, str(chunk.get("stream", "")))
        aux = chunk.get("aux")
        if isinstance(aux, dict) and "ID" in aux:
            image_id = str(aux["ID"])
    return image_id


def build(engine: ContainerEngine, names: list[str], reporter: BuildReporter, *,
          nocache: bool = False,
          base_ref: str | None = None) -> list[BuiltImage]:
    """Build the named images (all when empty), base first."""
    engine = docker_engine(engine)
    known = known_names()
    wanted = names or known
    unknown = [n for n in wanted if not _buildable(n, known)]
    if unknown:
        raise InfraError(f"unknown image(s): {', '.join(unknown)}",
                         hint=f"known images: {', '.join(known)}; variants: "
                              f"{_variants_text(known)}")
    base = build_base(engine, reporter, base_ref or os.environ.get("BAKEOFF_BASE_IMAGE"))
    results = [base] if BASE in wanted else []
    order = {name: index for index, name in enumerate(known)}
    for name in sorted((n for n in wanted if n != BASE),
                       key=lambda n: (order[split_name(n)[0]], n)):
        results.append(build_image(engine, name, base, reporter, nocache=nocache))
    return results


def _buildable(name: str, known: list[str]) -> bool:
    folder, variant = split_name(name)
    return folder in known and (variant is None or variant in variants_of(folder).values)


def _variants_text(known: list[str]) -> str:
    found = [f"{name}:{'|'.join(v.values)}" for name in known
             if (v := variants_of(name)).values]
    return ", ".join(found) or "none"


def remove_ours(engine: ContainerEngine, ref: str) -> bool:
    """Remove an image only when it carries our image label; False when it was absent."""
    engine = docker_engine(engine)
    attrs = inspect(engine, ref)
    if attrs is None:
        return False
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    if LABEL_IMAGE not in labels:
        raise InfraError(f"image {ref} does not carry the {LABEL_IMAGE} label: not ours, "
                         "so it is never removed", hint="remove it yourself if you mean to")
    try:
        engine.call(f"remove image {ref}", engine.client.images.remove, ref)
    except NotFoundError:
        return False
    return True
