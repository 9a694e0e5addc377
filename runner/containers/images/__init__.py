"""Images without a registry: bootstrap the base rootfs locally, build toolchains FROM it.

Nothing here ever pulls. Every image is identified by its image ID *and* a stable content
identity: importing the same rootfs twice gives two image IDs, so the identity is the
sha256 of the base's layer digests plus the hash of the image's build directory and build
arguments (FIELD-NOTES, "Engine and images").

Only what is needed is built: `make setup` builds what the bundled example uses, and a
project image (a directory under images/) that a manifest names is built on first use by
`resolve`, with the same identity and cache rules. Every build's full output goes to a log
file of its own (`logs_dir()`); a failed build's error carries the last lines and the path.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
import tomllib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Protocol, runtime_checkable

from rig.parsers.base import plain
from runner.containers.backend import ContainerEngine
from runner.containers.dockerclient import iter_stream
from runner.containers.engine import LABEL_IDENTITY, LABEL_IMAGE, Engine, docker_engine
from runner.containers.images import host_trust
from runner.errors import BadInputError, ImageMissingError, InfraError, NotFoundError
from runner.install import compose, resources
from runner.manifest import Manifest, parse_manifest

BASE = "base"
BASE_TAG = "bakeoff/base:bookworm"
SUITE = "bookworm"
# A fixed epoch makes the rootfs tarball reproducible for the same mirror state.
SOURCE_DATE_EPOCH = "1700000000"
MMDEBSTRAP_TIMEOUT_S = 900
BUILD_CMD = "bakeoff-sandbox images build"
TAIL_LINES = 20  # of a failed build's output, in its error
LOGS_KEPT = 10  # per image: older build logs are removed
HOST_CA = "host-ca.crt"  # the host's CA bundle, in every build context that fetches


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


@runtime_checkable
class LogReporter(BuildReporter, Protocol):
    """A reporter that also wants to know where an image's full build output goes."""

    def log_opened(self, name: str, path: Path) -> None: ...


class QuietReporter:
    """Reports nothing (the build log still has everything)."""

    def start(self, name: str) -> None: ...
    def line(self, name: str, text: str) -> None: ...
    def done(self, image: BuiltImage) -> None: ...


# Who hears about a build that `resolve` starts on first use (the command line installs
# its progress view here with `reporting`); a caller may also pass one explicitly.
_FIRST_USE: ContextVar[BuildReporter | None] = ContextVar("first_use_reporter", default=None)


@contextlib.contextmanager
def reporting(reporter: BuildReporter) -> Iterator[BuildReporter]:
    """Builds started by `resolve` without a reporter are reported to `reporter` here."""
    token = _FIRST_USE.set(reporter)
    try:
        yield reporter
    finally:
        _FIRST_USE.reset(token)


def current_reporter() -> BuildReporter:
    """The reporter `reporting` installed (a build on first use shows there), else quiet."""
    return _FIRST_USE.get() or QuietReporter()


def logs_dir() -> Path:
    return cache_dir() / "logs"


class BuildLog:
    """One image build's full output in a file of its own, and its last lines for an error."""

    def __init__(self, name: str, directory: Path | None = None) -> None:
        root = directory or logs_dir()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.name = name
        self.path = root / f"{file_name(name)}-{stamp}-{os.getpid()}.log"
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        try:
            root.mkdir(parents=True, exist_ok=True)
            self._file: IO[str] = self.path.open("w", encoding="utf-8")
        except OSError as error:
            raise InfraError(f"cannot write the build log of image {name}: {error}",
                             hint="make ~/.cache writable, or set XDG_CACHE_HOME") from error
        _prune(root, file_name(name), keep=self.path)

    def __enter__(self) -> BuildLog:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._file.close()

    def write(self, text: str) -> None:
        """Every line goes to the file as it comes (so `tail -f` follows a build); a chunk
        that is only a line break (the builder sends many) is not a line."""
        if not text.strip():
            return
        for line in text.splitlines():
            self.tail.append(line)
            self._file.write(line + "\n")
        self._file.flush()

    def failure(self, what: str, hint: str) -> InfraError:
        """`what` with the build's last lines and the log's path, as one error."""
        self._file.write(f"error: {what}\n")  # the log ends with why; the tail is the build's
        self._file.flush()
        shown = "\n".join(f"    {line}" for line in self.tail)
        return InfraError(f"{what}\n  last {len(self.tail)} lines of the build:\n{shown}\n"
                          f"  full log: {self.path}", hint=hint)


def file_name(name: str) -> str:
    """A build's name as a log file's (`node:22` -> node-22, `x on bakeoff/y` -> x-on-bakeoff-y)."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", name)


def _prune(root: Path, name: str, keep: Path) -> None:
    """Only the newest LOGS_KEPT logs of an image stay (another process may prune too)."""
    pattern = re.compile(rf"{re.escape(name)}-\d{{8}}-\d{{6}}-\d+\.log")
    logs = sorted((p for p in root.iterdir() if pattern.fullmatch(p.name) and p != keep),
                  key=_mtime)
    for old in logs[:max(0, len(logs) - (LOGS_KEPT - 1))]:
        old.unlink(missing_ok=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def open_log(name: str, reporter: BuildReporter) -> BuildLog:
    log = BuildLog(name)
    if isinstance(reporter, LogReporter):
        reporter.log_opened(name, log.path)
    return log


IMAGES_ENV = "BAKEOFF_IMAGES_DIR"


def images_dir() -> Path:
    """The images' build contexts the tool ships, or BAKEOFF_IMAGES_DIR (a folder of one's
    own laid out the same way: one folder per image, its Dockerfile `FROM` the base)."""
    configured = os.environ.get(IMAGES_ENV)
    if configured:
        return Path(configured)
    return resources.images_dir()


def tag_for(name: str, directory: Path | None = None) -> str:
    """The tag of a buildable name: `node` -> bakeoff/node:latest, `node:22` (a variant,
    `variants.toml`) -> bakeoff/node:22, the default variant's is `latest`."""
    if name == BASE:
        return BASE_TAG
    folder, variant = split_name(name)
    if variant is None or variant == variants_of(folder, directory).default:
        return f"bakeoff/{folder}:latest"
    return f"bakeoff/{folder}:{variant}"


@dataclass(frozen=True)
class Variants:
    """The variants of an images/ image (`variants.toml` beside its Dockerfile): one build
    argument, its default (the `latest` tag) and the values it may take."""

    arg: str = ""
    default: str = ""
    values: tuple[str, ...] = ()

    def args(self, variant: str | None) -> dict[str, str]:
        """The build arguments of a variant (none for the default: its identity is the
        image's without variants)."""
        return {} if variant in (None, self.default) else {self.arg: str(variant)}


def variants_of(name: str, directory: Path | None = None) -> Variants:
    path = (directory or images_dir()) / name / "variants.toml"
    if not path.is_file():
        return Variants()
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return Variants(str(data["arg"]), str(data["default"]),
                    tuple(str(v) for v in data["values"]))


def split_name(name: str) -> tuple[str, str | None]:
    """`node:22` -> (node, 22); `node` -> (node, None)."""
    directory, colon, variant = name.partition(":")
    return directory, (variant if colon else None)


def with_variant(name: str, variant: str | None) -> str:
    return name if variant is None else f"{name}:{variant}"


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


def directory_context(directory: Path) -> bytes:
    """An images/ build's context: the files of its directory (modes kept) and the host's
    CA bundle as `host-ca.crt`, for a RUN that fetches over TLS (pip behind a
    TLS-intercepting proxy): the Dockerfile copies it, names it to the client on that RUN
    line only and removes it, as a prepared image's setup does (`host_trust`). The bundle
    is the host's, not the image's: it is not part of the identity."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            tar.add(path, arcname=path.relative_to(directory).as_posix(), recursive=False)
        add_file(tar, HOST_CA, host_trust.ca_bundle())
    return out.getvalue()


def tar_of(files: dict[str, bytes]) -> bytes:
    """A build context (or any small archive) holding `files`, mode 0644."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in files.items():
            add_file(tar, name, data)
    return out.getvalue()


def add_file(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def layers_digest(attrs: dict[str, Any]) -> str:
    layers = attrs.get("RootFS", {}).get("Layers") or []
    if len(layers) == 1:
        return str(layers[0])
    return "sha256:" + hashlib.sha256("\n".join(layers).encode()).hexdigest()


def identity_of(base_layers: str, context: str, build_args: dict[str, str]) -> str:
    blob = json.dumps({"base": base_layers, "context": context, "args": build_args},
                      sort_keys=True)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def inspect(engine: ContainerEngine, ref: str) -> dict[str, Any] | None:
    engine = docker_engine(engine)
    try:
        image = engine.call(f"inspect image {ref}", engine.client.images.get, ref, retry=True)
    except NotFoundError:
        return None
    attrs: dict[str, Any] = image.attrs
    return attrs


def ref_for(name_or_ref: str, variant: str | None = None) -> str:
    """The tag a toolchain/database name stands for (`go` -> bakeoff/go:latest; `node`
    with variant 22 -> bakeoff/node:22); a reference (anything with `/` or `:`) is
    itself."""
    if "/" in name_or_ref or ":" in name_or_ref:
        return name_or_ref
    return tag_for(with_variant(name_or_ref, variant))


def project_name(name_or_ref: str, directory: Path | None = None) -> str | None:
    """The images/ directory a name or tag of ours is built from, else None (not ours)."""
    name = name_of(ref_for(name_or_ref), directory)
    return None if name is None else split_name(name)[0]


def needed(manifest: Manifest, directory: Path | None = None) -> list[str]:
    """The project images a manifest runs (its toolchain, its database), base first."""
    refs = [manifest.toolchain.image, *([manifest.database.image] if manifest.database else [])]
    names = {BASE, *(n for n in (project_name(r, directory) for r in refs) if n)}
    return [n for n in known_names(directory) if n in names]


def not_built_here(manifest: Manifest, directory: Path | None = None) -> list[str]:
    """The references a manifest runs that `images build` cannot make: a local image of
    the user's own, or a name that is not one of images/ (`resolve` says how to get it)."""
    refs = [manifest.toolchain.image, *([manifest.database.image] if manifest.database else [])]
    return [ref_for(r) for r in refs if project_name(r, directory) is None]


def manifest_at(path: Path) -> Manifest:
    """The manifest at `path`, only its TOML and models read, so the bundled example's
    (whose repo/ is not a git repository yet) answers too."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise BadInputError(f"{path}: cannot read the manifest: {error}",
                            hint="pass -f FILE, name the images, or use --all") from None
    return parse_manifest(data, path)


def needed_by_file(path: Path, directory: Path | None = None) -> list[str]:
    """`needed` for the manifest at `path` (`manifest_at`)."""
    return needed(manifest_at(path), directory)


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
        chosen = reporter or _FIRST_USE.get() or QuietReporter()
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


def cache_dir() -> Path:
    """The tool's per-user cache (the rootfs tarball, build logs), Compose's too."""
    return compose.cache_root()


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


def bootstrap_rootfs(reporter: BuildReporter, log: BuildLog) -> Path:
    """mmdebstrap a minbase rootfs tarball once; later builds reuse the cached tarball."""
    tarball = cache_dir() / f"base-{SUITE}.tar"
    if tarball.exists():
        _emit(log, reporter, BASE, f"reusing rootfs {tarball}")
        return tarball
    if shutil.which("mmdebstrap") is None:
        raise InfraError("mmdebstrap is not installed, so the base image cannot be bootstrapped",
                         hint="apt-get install mmdebstrap (`bakeoff-sandbox doctor --fix` "
                              "does), or set BAKEOFF_BASE_IMAGE to a local image")
    tarball.parent.mkdir(parents=True, exist_ok=True)
    _emit(log, reporter, BASE, f"mmdebstrap --variant=minbase {SUITE} (about 15 s)")
    # mmdebstrap picks the output format from the name: keep the partial file a `.tar`.
    partial = Path(tempfile.mkdtemp(dir=tarball.parent, prefix="partial-")) / "base.tar"
    env = {**os.environ, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}
    try:
        done = subprocess.run(
            ["mmdebstrap", "--variant=minbase", "--quiet", SUITE, str(partial)],
            env=env, capture_output=True, text=True, timeout=MMDEBSTRAP_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        shutil.rmtree(partial.parent, ignore_errors=True)
        raise log.failure(f"mmdebstrap took over {MMDEBSTRAP_TIMEOUT_S}s",
                          hint="check the Debian mirror is reachable") from error
    log.write(plain("\n".join((done.stdout, done.stderr))))
    if done.returncode != 0:
        shutil.rmtree(partial.parent, ignore_errors=True)
        raise log.failure(f"mmdebstrap failed (exit {done.returncode})",
                          hint="check the Debian mirror is reachable and we run as root")
    partial.replace(tarball)
    shutil.rmtree(partial.parent, ignore_errors=True)
    return tarball


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
        _emit(log, reporter, BASE, f"using {base_ref} as the base")
        engine.call("tag base", engine.client.images.get(base_ref).tag, BASE_TAG)
        return inspect(engine, BASE_TAG)
    tarball = bootstrap_rootfs(reporter, log)
    _emit(log, reporter, BASE, f"docker import {tarball.name} {BASE_TAG}")
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
        _emit(log, reporter, name, str(chunk.get("stream", "")))
        aux = chunk.get("aux")
        if isinstance(aux, dict) and "ID" in aux:
            image_id = str(aux["ID"])
    return image_id


def _emit(log: BuildLog, reporter: BuildReporter, name: str, text: str) -> None:
    """`text` of a build, without terminal escapes (npm's colours), to the log and the
    reporter."""
    text = plain(text)
    log.write(text)
    for line in text.splitlines():
        if line.strip():
            reporter.line(name, line.rstrip())


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


def name_of(tag: str, directory: Path | None = None) -> str | None:
    """The buildable name a tag of ours stands for (`bakeoff/python:latest` -> python;
    `bakeoff/python`, as a compose file writes it, is docker's `:latest` too;
    `bakeoff/node:22` -> node:22, a variant of images/node), else None (not ours)."""
    if tag == BASE_TAG:
        return BASE
    repository, _, version = tag.partition(":")
    if not repository.startswith("bakeoff/"):
        return None
    folder = repository.removeprefix("bakeoff/")
    if folder not in known_names(directory):
        return None
    if version in ("latest", ""):
        return folder
    return f"{folder}:{version}" if version in variants_of(folder, directory).values else None


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
