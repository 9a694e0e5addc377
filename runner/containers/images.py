"""Images without a registry: bootstrap the base rootfs locally, build toolchains FROM it.

Nothing here ever pulls. Every image is identified by its image ID *and* a stable content
identity: importing the same rootfs twice gives two image IDs, so the identity is the
sha256 of the base's layer digests plus the hash of the image's build directory and build
arguments (FIELD-NOTES, "Engine and images").
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import docker.errors

from runner.containers.engine import LABEL_IDENTITY, LABEL_IMAGE, Engine, iter_stream
from runner.errors import ImageMissingError, InfraError

BASE = "base"
BASE_TAG = "bakeoff/base:bookworm"
SUITE = "bookworm"
# A fixed epoch makes the rootfs tarball reproducible for the same mirror state.
SOURCE_DATE_EPOCH = "1700000000"
MMDEBSTRAP_TIMEOUT_S = 900
BUILD_CMD = "bakeoff-sandbox images build"


@dataclass(frozen=True)
class BuiltImage:
    name: str
    tag: str
    image_id: str
    identity: str
    cached: bool


class BuildReporter(Protocol):
    def start(self, name: str) -> None: ...
    def line(self, name: str, text: str) -> None: ...
    def done(self, image: BuiltImage) -> None: ...


def images_dir() -> Path:
    """`images/` of this checkout (or BAKEOFF_IMAGES_DIR)."""
    configured = os.environ.get("BAKEOFF_IMAGES_DIR")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[2] / "images"


def tag_for(name: str) -> str:
    return BASE_TAG if name == BASE else f"bakeoff/{name}:latest"


def known_names(directory: Path | None = None) -> list[str]:
    """`base` first, then every directory under images/ holding a Dockerfile."""
    root = directory or images_dir()
    built = sorted(p.parent.name for p in root.glob("*/Dockerfile") if p.parent.name != BASE)
    return [BASE, *built]


def context_hash(directory: Path) -> str:
    """sha256 over every file's relative path and bytes in a build directory."""
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        digest.update(path.relative_to(directory).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def layers_digest(attrs: dict[str, Any]) -> str:
    layers = attrs.get("RootFS", {}).get("Layers") or []
    if len(layers) == 1:
        return str(layers[0])
    return "sha256:" + hashlib.sha256("\n".join(layers).encode()).hexdigest()


def identity_of(base_layers: str, context: str, build_args: dict[str, str]) -> str:
    blob = json.dumps({"base": base_layers, "context": context, "args": build_args},
                      sort_keys=True)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def inspect(engine: Engine, ref: str) -> dict[str, Any] | None:
    try:
        image = engine.call(f"inspect image {ref}", engine.client.images.get, ref, retry=True)
    except docker.errors.ImageNotFound:
        return None
    attrs: dict[str, Any] = image.attrs
    return attrs


def resolve(engine: Engine, name_or_ref: str) -> BuiltImage:
    """The local image for a toolchain name (or any reference). Never pulls."""
    ref = tag_for(name_or_ref) if "/" not in name_or_ref and ":" not in name_or_ref \
        else name_or_ref
    attrs = inspect(engine, ref)
    if attrs is None:
        name = name_or_ref if ref != name_or_ref else ""
        raise ImageMissingError(ref, f"{BUILD_CMD} {name}".rstrip())
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    identity = labels.get(LABEL_IDENTITY) or layers_digest(attrs)
    return BuiltImage(name_or_ref, ref, attrs["Id"], identity, cached=True)


def cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "bakeoff-sandbox"


def bootstrap_rootfs(reporter: BuildReporter) -> Path:
    """mmdebstrap a minbase rootfs tarball once; later builds reuse the cached tarball."""
    tarball = cache_dir() / f"base-{SUITE}.tar"
    if tarball.exists():
        reporter.line(BASE, f"reusing rootfs {tarball}")
        return tarball
    if shutil.which("mmdebstrap") is None:
        raise InfraError("mmdebstrap is not installed, so the base image cannot be bootstrapped",
                         hint="apt-get install mmdebstrap (make setup does), or set "
                              "BAKEOFF_BASE_IMAGE to a local image")
    tarball.parent.mkdir(parents=True, exist_ok=True)
    reporter.line(BASE, f"mmdebstrap --variant=minbase {SUITE} (about 15 s)")
    # mmdebstrap picks the output format from the name: keep the partial file a `.tar`.
    partial = Path(tempfile.mkdtemp(dir=tarball.parent, prefix="partial-")) / "base.tar"
    env = {**os.environ, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}
    try:
        done = subprocess.run(
            ["mmdebstrap", "--variant=minbase", "--quiet", SUITE, str(partial)],
            env=env, capture_output=True, text=True, timeout=MMDEBSTRAP_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        shutil.rmtree(partial.parent, ignore_errors=True)
        raise InfraError(f"mmdebstrap took over {MMDEBSTRAP_TIMEOUT_S}s",
                         hint="check the Debian mirror is reachable") from error
    if done.returncode != 0:
        shutil.rmtree(partial.parent, ignore_errors=True)
        tail = "\n".join(done.stderr.splitlines()[-5:])
        raise InfraError(f"mmdebstrap failed (exit {done.returncode}):\n{tail}",
                         hint="check the Debian mirror is reachable and we run as root")
    partial.replace(tarball)
    shutil.rmtree(partial.parent, ignore_errors=True)
    return tarball


def build_base(engine: Engine, reporter: BuildReporter, base_ref: str | None = None) -> BuiltImage:
    """The base image: an existing tag is reused; else a user's local ref or a bootstrap."""
    reporter.start(BASE)
    attrs = inspect(engine, BASE_TAG)
    cached = attrs is not None
    if base_ref:
        source = inspect(engine, base_ref)
        if source is None:
            raise ImageMissingError(base_ref, "load it locally first (docker load); "
                                    "nothing is ever pulled")
        cached = attrs is not None and attrs["Id"] == source["Id"]
        if not cached:
            reporter.line(BASE, f"using {base_ref} as the base")
            engine.call("tag base", engine.client.images.get(base_ref).tag, BASE_TAG)
        attrs = inspect(engine, BASE_TAG)
    if attrs is None:
        tarball = bootstrap_rootfs(reporter)
        reporter.line(BASE, f"docker import {tarball.name} {BASE_TAG}")
        repository, tag = BASE_TAG.split(":")
        engine.call("import base", engine.client.api.import_image_from_file, str(tarball),
                    repository=repository, tag=tag,
                    changes=[f"LABEL {LABEL_IMAGE}={BASE}"])
        attrs = inspect(engine, BASE_TAG)
    if attrs is None:
        raise InfraError(f"{BASE_TAG} is still missing after import")
    built = BuiltImage(BASE, BASE_TAG, attrs["Id"], layers_digest(attrs), cached)
    reporter.done(built)
    return built


def build_image(engine: Engine, name: str, base: BuiltImage, reporter: BuildReporter,
                *, nocache: bool = False, directory: Path | None = None) -> BuiltImage:
    """Build images/<name> FROM the base. Unchanged inputs are a cache hit (no build)."""
    context = (directory or images_dir()) / name
    if not (context / "Dockerfile").is_file():
        raise InfraError(f"no Dockerfile for image {name!r} in {context.parent}",
                         hint=f"known images: {', '.join(known_names(context.parent))}")
    args = {"BASE_IMAGE": base.tag}
    identity = identity_of(base.identity, context_hash(context), args)
    tag = tag_for(name)
    reporter.start(name)
    existing = inspect(engine, tag)
    labels = ((existing or {}).get("Config") or {}).get("Labels") or {}
    if existing is not None and not nocache and labels.get(LABEL_IDENTITY) == identity:
        built = BuiltImage(name, tag, existing["Id"], identity, cached=True)
        reporter.done(built)
        return built
    image_id = _stream_build(engine, name, context, tag, args, identity, reporter, nocache)
    built = BuiltImage(name, tag, image_id, identity, cached=False)
    reporter.done(built)
    return built


def _stream_build(engine: Engine, name: str, context: Path, tag: str, args: dict[str, str],
                  identity: str, reporter: BuildReporter, nocache: bool) -> str:
    stream = engine.call(
        f"build {name}", engine.client.api.build, path=str(context), tag=tag, rm=True,
        forcerm=True, decode=True, pull=False, nocache=nocache, buildargs=args,
        labels={LABEL_IMAGE: name, LABEL_IDENTITY: identity})
    image_id = ""
    tail: list[str] = []
    for chunk in iter_stream(stream):
        if "error" in chunk:
            detail = "\n".join(tail[-10:])
            raise InfraError(f"building image {name} failed: {chunk['error'].strip()}\n{detail}",
                             hint=f"fix images/{name}/Dockerfile, then {BUILD_CMD} {name}")
        text = str(chunk.get("stream", "")).rstrip()
        if text:
            tail.append(text)
            reporter.line(name, text)
        aux = chunk.get("aux")
        if isinstance(aux, dict) and "ID" in aux:
            image_id = str(aux["ID"])
    if not image_id:
        attrs = inspect(engine, tag)
        if attrs is None:
            raise InfraError(f"building image {name} produced no image")
        image_id = attrs["Id"]
    return image_id


def build(engine: Engine, names: list[str], reporter: BuildReporter, *, nocache: bool = False,
          base_ref: str | None = None) -> list[BuiltImage]:
    """Build the named images (all when empty), base first."""
    known = known_names()
    wanted = names or known
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise InfraError(f"unknown image(s): {', '.join(unknown)}",
                         hint=f"known images: {', '.join(known)}")
    base = build_base(engine, reporter, base_ref or os.environ.get("BAKEOFF_BASE_IMAGE"))
    results = [base] if BASE in wanted else []
    for name in (n for n in known if n in wanted and n != BASE):
        results.append(build_image(engine, name, base, reporter, nocache=nocache))
    return results


def name_of(tag: str) -> str | None:
    """The images/ name a tag of ours was built from (`bakeoff/python:latest` -> python)."""
    if tag == BASE_TAG:
        return BASE
    repository, _, version = tag.partition(":")
    if repository.startswith("bakeoff/") and version == "latest":
        return repository.removeprefix("bakeoff/")
    return None


def remove_ours(engine: Engine, ref: str) -> bool:
    """Remove an image only when it carries our image label; False when it was absent."""
    attrs = inspect(engine, ref)
    if attrs is None:
        return False
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    if LABEL_IMAGE not in labels:
        raise InfraError(f"image {ref} does not carry the {LABEL_IMAGE} label: not ours, "
                         "so it is never removed", hint="remove it yourself if you mean to")
    try:
        engine.call(f"remove image {ref}", engine.client.images.remove, ref)
    except docker.errors.ImageNotFound:
        return False
    return True
