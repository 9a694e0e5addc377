"""Prepared images: the toolchain's `setup` (e.g. `pip install -e .`, `npm ci`) baked in.

`setup` may need a registry; samples run with the network off, so setup runs while an
image is built. A prepared image is keyed by (toolchain identity, setup commands, hash of
the dependency manifests and lockfiles in the tree): commits with the same dependency
set reuse it and never reinstall; a commit that changes its dependencies gets its own.
The tree's tracked files are removed after setup, so a sample only ever sees the tree
it is given; what setup generated in /work and in the sandbox user's HOME (node_modules,
*.egg-info, a `pip install --user`) is kept, root-owned, under /opt/bakeoff/prepared/:
a sample's /work and HOME are fresh tmpfs mounts, and its driver copies that in first.

Setup reaches the registries as the host's own clients do (`host_trust`: the host's CA
bundle and proxy variables, for the build only). Its whole output is kept in a build log
on the host; a failure shows its last lines (no terminal escapes), the log's path, and
the input that is the likely cause (`likely_cause`).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from rig.tree import Kind, shown
from runner.containers import host_trust, images, sample_tree, stack
from runner.containers.engine import LABEL_IDENTITY, LABEL_IMAGE, Engine, iter_stream
from runner.containers.images import BuiltImage, inspect
from runner.manifest import LoadedManifest

PREPARED = "prepared"
GATEWAY_IMAGE = "python"
FORMAT = 2  # of the image's layout (2: setup's output under /opt/bakeoff/prepared/)
DEPENDENCY_FILES = frozenset({
    "pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "requirements-dev.txt",
    "poetry.lock", "uv.lock", "Pipfile.lock", "package.json", "package-lock.json",
    "yarn.lock", "pnpm-lock.yaml", "Cargo.toml", "Cargo.lock", "go.mod", "go.sum",
})


def dependency_hash(repo: Path, commit: str) -> str:
    """sha256 over the dependency manifests and lockfiles of a commit's tree (its listing
    streamed, never held; past `sample_tree.CAPS` it is refused like a sample's). The
    lines hashed, and their order, are `git ls-tree -r`'s: keys made before stay."""
    lines = sorted(f"{_MODE[row.kind]} blob {row.oid}\t{shown(row.path)}"
                   for row in sample_tree.listing(repo, commit, sample_tree.CAPS)
                   if row.path.rsplit("/", 1)[-1] in DEPENDENCY_FILES)
    digest = hashlib.sha256()
    for line in lines:
        meta, _, path = line.partition("\t")
        digest.update(f"{path}\0{meta.split()[2]}\n".encode())
    return digest.hexdigest()


_MODE = {Kind.FILE: "100644", Kind.EXECUTABLE: "100755", Kind.SYMLINK: "120000"}


def key(toolchain: BuiltImage, setup: list[str], deps: str) -> str:
    blob = json.dumps({"toolchain": toolchain.identity, "setup": setup, "deps": deps,
                       "format": FORMAT})
    return hashlib.sha256(blob.encode()).hexdigest()


def prepare(engine: Engine, repo: Path, commit: str, toolchain: BuiltImage, setup: list[str],
            say: Callable[[str], None]) -> BuiltImage:
    """The prepared image for a commit (the toolchain itself when there is no setup)."""
    if not setup:
        return toolchain
    digest = key(toolchain, setup, dependency_hash(repo, commit))
    tag = f"bakeoff/prepared:{digest[:16]}"
    attrs = inspect(engine, tag)
    if attrs is not None:
        return BuiltImage(PREPARED, tag, attrs["Id"], f"sha256:{digest}", cached=True)
    say(f"preparing image {tag}: {' && '.join(setup)}")
    image_id = _build(engine, repo, commit, toolchain, setup, tag, digest)
    return BuiltImage(PREPARED, tag, image_id, f"sha256:{digest}", cached=False)


def _context(repo: Path, commit: str, toolchain: BuiltImage, setup: list[str],
             out: IO[bytes]) -> None:
    """The build context, written to `out`: the commit's tree read from git objects and
    checked (as a sample's is: nothing unsafe reaches the daemon; blobs stream from the
    object store), a Dockerfile, the list of the tracked files (NUL-separated)."""
    files = sample_tree.read_tree(repo, commit)
    tracked = b"".join(path.encode("utf-8", "surrogateescape") + b"\0"
                       for path in sorted(files))
    script = " && ".join(f"({command})" for command in setup)
    dockerfile = (
        f"FROM {toolchain.image_id}\nUSER root\nCOPY tree/ /work/\nCOPY tracked.txt /tmp/\n"
        f"COPY {images.HOST_CA} {host_trust.CA_IN_BUILD}\n"
        "RUN chown -R 1000:1000 /work\nUSER 1000\nWORKDIR /work\n"
        f"RUN {host_trust.run_prefix()} && {script}\n"
        "RUN xargs -0 -r rm -f -- < /tmp/tracked.txt\n"
        # Root-owned, outside the sample's tmpfs mounts: read-only for the code under test.
        "USER root\n"
        f"RUN rm -f {host_trust.CA_IN_BUILD} "
        "&& mkdir -p /opt/bakeoff/prepared && cp -a /work /opt/bakeoff/prepared/work "
        "&& cp -a /home/agent /opt/bakeoff/prepared/home "
        "&& chown -R root:root /opt/bakeoff && chmod -R go-w /opt/bakeoff\n"
        "USER 1000\n")
    sample_tree.write_tar(out, {f"tree/{path}": entry for path, entry in files.items()},
                          repo, extra={"Dockerfile": dockerfile.encode(),
                                       "tracked.txt": tracked,
                                       images.HOST_CA: host_trust.ca_bundle()})


def _build(engine: Engine, repo: Path, commit: str, toolchain: BuiltImage, setup: list[str],
           tag: str, digest: str) -> str:
    with tempfile.TemporaryFile() as context:  # on disk: a large tree is never held
        _context(repo, commit, toolchain, setup, context)
        context.seek(0)
        stream = engine.call("build prepared image", engine.client.api.build,
                             fileobj=context, custom_context=True, tag=tag, rm=True,
                             forcerm=True, decode=True, pull=False,
                             buildargs=host_trust.proxy_args(),
                             labels={LABEL_IMAGE: PREPARED, LABEL_IDENTITY: f"sha256:{digest}"})
        with images.BuildLog(f"prepared-{digest[:16]}") as log:
            return _built(engine, commit, tag, stream, log)


def _built(engine: Engine, commit: str, tag: str, stream: Any, log: images.BuildLog) -> str:
    """The image id a build's stream ends with; every line to the log. `InfraError` when
    setup failed: its last lines, the log, the likely cause."""
    image_id = images.read_build_stream(PREPARED, iter_stream(stream), images.QuietReporter(),
                                        log, failed=f"toolchain setup failed for {commit[:12]}",
                                        hint=likely_cause)
    return image_id or str(inspect(engine, tag)["Id"])  # type: ignore[index]


# What a package manager prints when the cause is the network's trust, the network's
# reach, or the commit's own lockfile (npm, pip, cargo, go, curl, apt wording).
_TLS = ("SELF_SIGNED_CERT_IN_CHAIN", "UNABLE_TO_GET_ISSUER_CERT", "UNABLE_TO_VERIFY_LEAF",
        "unable to get local issuer certificate", "CERTIFICATE_VERIFY_FAILED",
        "certificate verify failed", "self-signed certificate", "SSL certificate problem",
        "x509: certificate signed by unknown authority")
_REACH = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT",
          "Could not resolve host", "Temporary failure in name resolution",
          "Network is unreachable", "getaddrinfo", "NewConnectionError", "ProxyError")
_LOCKFILE = ("npm ci` can only install packages when your package.json and",
             "npm ERR! code EUSAGE", "npm error code EUSAGE", "lockfile needs to be updated",
             "ERR_PNPM_OUTDATED_LOCKFILE", "Your lockfile needs to be updated",
             "the lock file needs to be updated but --locked was passed",
             "missing go.sum entry")


def likely_cause(lines: list[str]) -> str:
    """Which of the user's inputs most likely made setup fail, from its last lines."""
    text = "\n".join(lines)
    if any(mark in text for mark in _TLS):
        return ("a registry's TLS certificate is not trusted in the build, which trusts "
                f"{host_trust.described()}: add your network's CA to the host's bundle "
                "(or name it in SSL_CERT_FILE), then run the command again")
    if any(mark in text for mark in _REACH):
        return (f"the build could not reach a registry; it was given {host_trust.described()}"
                ": set HTTPS_PROXY / NO_PROXY as the host's other clients use them")
    if any(mark in text for mark in _LOCKFILE):
        return ("the commit's lockfile does not match its manifest: commit an updated "
                "lockfile, or change [toolchain].setup")
    return ("fix [toolchain].setup: it runs while the image is built, in /work on the "
            "commit's files, as the sandbox user")


def _quiet(_: str) -> None:
    return None


class Toolchain:
    """The images one command uses, resolved once and passed down (never re-resolved in
    the functions it calls): the toolchain image, the database image, and each commit's
    prepared image, made (or found) once per set of dependency files."""

    def __init__(self, engine: Engine, loaded: LoadedManifest,
                 say: Callable[[str], None] = _quiet) -> None:
        self.engine, self.loaded, self.say = engine, loaded, say
        self.lock = threading.Lock()
        self._image: BuiltImage | None = None
        self._database: tuple[BuiltImage | None] | None = None
        self._prepared: dict[str, BuiltImage] = {}  # commit -> its prepared image
        self._gateway: BuiltImage | None = None
        # "change <id>" / "toolchain" -> service -> image identity, checked once
        self._stacks: dict[str, dict[str, str]] = {}

    @property
    def image(self) -> BuiltImage:
        """The toolchain image (`[toolchain].image`)."""
        with self.lock:
            if self._image is None:
                self._image = images.resolve(self.engine, self.loaded.manifest.toolchain.image)
            return self._image

    @property
    def database(self) -> BuiltImage | None:
        """The Postgres image (`[database].image`), None without a database."""
        with self.lock:
            if self._database is None:
                section = self.loaded.manifest.database
                self._database = (None if section is None
                                  else images.resolve(self.engine, section.image),)
            return self._database[0]

    @property
    def gateway_image(self) -> BuiltImage:
        """The image the model gateway runs (`bakeoff/python`: the gateway is stdlib
        Python, whatever the arms' toolchain)."""
        with self.lock:
            if self._gateway is None:
                self._gateway = images.resolve(self.engine, GATEWAY_IMAGE)
            return self._gateway

    def stack_images(self, change: str) -> dict[str, str] | None:
        """The identity of each service image of the change's stack, checked once (a file
        that is refused, or an image that would be pulled, is `StackRefusedError`); None
        without a stack."""
        return self._stack_images(f"change {change}", self.loaded.stack_path(change), None)

    def arm_stack_images(self) -> dict[str, str] | None:
        """`stack_images` of the arms' own stack (`[toolchain] stack`), with its own
        refusals too (a service named like `db` or `model-gateway`); None without one."""
        return self._stack_images("toolchain", self.loaded.toolchain_stack_path,
                                  stack.ARM_RESERVED)

    def _stack_images(self, key: str, path: Path | None,
                      reserved: tuple[str, ...] | None) -> dict[str, str] | None:
        if path is None:
            return None
        with self.lock:
            if key not in self._stacks:
                found = stack.check(self.engine, path.read_bytes(), str(path),
                                    reserved=reserved)
                self._stacks[key] = {name: image.identity for name, image in found.items()}
            return dict(self._stacks[key])

    def for_commit(self, commit: str) -> BuiltImage:
        """The image a commit's samples and sandboxes run: the toolchain with `setup`
        baked in for that commit's dependency files (the toolchain itself without setup)."""
        toolchain = self.image
        with self.lock:
            if commit not in self._prepared:
                self._prepared[commit] = prepare(
                    self.engine, self.loaded.repo_path, commit, toolchain,
                    list(self.loaded.manifest.toolchain.setup), self.say)
            return self._prepared[commit]
