"""Prepared images: the toolchain's `setup` (e.g. `pip install -e .`, `npm ci`) baked in.

`setup` may need a registry; samples run with the network off, so setup runs while an
image is built. A prepared image is keyed by (toolchain identity, setup commands, what is
kept, hash of the dependency manifests and lockfiles in the tree): commits with the same
dependency set reuse it and never reinstall; a commit that changes its dependencies gets
its own.

A sample's tree is the arm's tree plus the declared dependencies, nothing the base's
setup built. After setup, the tree's tracked files are removed and what setup left in
/work is sorted (`SETTLE`, under /opt/bakeoff/prepared/, root-owned, read-only to the code
under test):

- dependency directories (`node_modules`, virtualenvs, `*.egg-info`, yarn's cache and
  unplugged packages) move to `deps/`, stored once; `skel/` holds links to them that the
  sample's driver copies into its /work (a `node_modules` becomes a directory of links, one per
  package, so tools still write their caches beside them): shared read-only, never
  copied per sample;
- cargo's `target/`, yarn's PnP maps (`.pnp.cjs`: they find the project from where they
  sit) and what `[toolchain] keep` names move to `copy/`, which the driver copies;
- the rest (`dist/`, `*.tsbuildinfo`, `build/`: the base's build) is dropped and listed in
  `dropped.txt`; a `[toolchain] build` step makes the arm's own in every sample.

The sandbox user's HOME after setup (a `pip install --user`, go's and cargo's caches)
is kept as `home/`, npm's and pip's download caches left out. A setup that installs the
project itself from /work, not editable (`pip install .`), is refused: every sample would
import the base's copy. The image is the toolchain plus one layer of these (a second
build stage holds the setup's own layers).

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
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from rig.sample.tree import Kind, shown
from runner import workspace
from runner.containers import browser as browser_mod
from runner.containers import images
from runner.containers import stacks as stack
from runner.containers.backend import (
    LABEL_BUILD_OF,
    LABEL_IDENTITY,
    LABEL_IMAGE,
    ContainerEngine,
    Labels,
)
from runner.containers.dockerclient import iter_stream
from runner.containers.engine import Engine, docker_engine
from runner.containers.images import BuiltImage, buildlog, host_trust, inspect, reporters
from runner.containers.images.identity import HOST_CA
from runner.containers.samples.tree import CAPS, listing, read_tree, write_tar
from runner.errors import BadInputError
from runner.manifest import LoadedManifest, Toolchain
from runner.manifest import node as node_mod
from runner.manifest.node import NodeChoice

PREPARED = "prepared"
GATEWAY_IMAGE = "python"
FORMAT = 3  # of the image's layout (3: deps/, skel/, copy/, home/ under PREPARED_DIR)
PREPARED_DIR = "/opt/bakeoff/prepared"
DEPENDENCY_FILES = frozenset({
    "pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "requirements-dev.txt",
    "poetry.lock", "uv.lock", "Pipfile.lock", "package.json", "package-lock.json",
    "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "pnpm-workspace.yaml", ".npmrc",
    ".yarnrc.yml", "Cargo.toml", "Cargo.lock", "go.mod", "go.sum",
})
REFUSED_MARK = "bakeoff-setup:"  # the settle step's own refusals, in the build's output

# Run as root in the setup's stage, in /work, once setup is done: tracked files go, what
# setup left is sorted into deps/ (shared through skel/'s links), copy/ and dropped, and
# HOME is kept. $1: the tracked files (NUL-separated); $2: `[toolchain] keep`, one per line.
SETTLE = r'''set -eu
out=/opt/bakeoff/prepared
mkdir -p "$out/deps" "$out/skel" "$out/copy"
: > "$out/kept.txt"
cd /work
xargs -0 -r rm -f -- < "$1"
found=$(find /home/agent /work -path '*.dist-info/direct_url.json' 2>/dev/null |
        xargs -r grep -l '"url": *"file:///work[/"]' | xargs -r grep -L '"editable": *true' || :)
if [ -n "$found" ]; then
  echo "bakeoff-setup: setup installed the project itself from /work, not editable:" \
       "$(dirname $found | xargs -n1 basename | tr '\n' ' ')" >&2
  exit 3
fi
keep() {  # $1: a path relative to /work; $2: deps (linked from skel/) or copy
  [ "$1" != . ] && { [ -e "/work/$1" ] || [ -L "/work/$1" ]; } || return 0
  mkdir -p "$out/$2/$(dirname "$1")"
  mv "/work/$1" "$out/$2/$1"
  printf '%s\t%s\n' "$2" "$1" >> "$out/kept.txt"
  [ "$2" = deps ] || return 0
  if [ "${1##*/}" = node_modules ]; then farm "$out/deps/$1" "$out/skel/$1"; return 0; fi
  mkdir -p "$out/skel/$(dirname "$1")" && ln -s "$out/deps/$1" "$out/skel/$1"
}
farm() {  # a node_modules as links: one per package (a scope's, one per member); a link
  # of its own (a workspace package, pnpm's) and .bin (relative links) are copied as they are
  mkdir -p "$2"
  for e in "$1"/* "$1"/.[!.]* "$1"/..?*; do
    [ -e "$e" ] || [ -L "$e" ] || continue
    n=${e##*/}
    if [ -L "$e" ] || [ "$n" = .bin ]; then cp -a "$e" "$2/$n"
    elif [ -d "$e" ] && [ "${n#@}" != "$n" ] && [ "${1##*/}" = node_modules ]; then
      farm "$e" "$2/$n"
    else ln -s "$e" "$2/$n"; fi
  done
}
each() {  # $1: deps|copy, then find's arguments: every path it prints is kept
  kind=$1; shift
  find . "$@" | sed 's|^\./||' > /tmp/bakeoff/found
  while IFS= read -r p; do keep "$p" "$kind"; done < /tmp/bakeoff/found
}
each deps -name pyvenv.cfg -not -path '*/node_modules/*' -exec dirname {} \;
each deps -name node_modules -type d -prune
each deps -name '*.egg-info' -type d -prune
for p in .yarn/cache .yarn/unplugged; do keep "$p" deps; done
# yarn's PnP maps find the project from where they sit: copies, at the root of /work
for p in .yarn/install-state.gz .pnp.cjs .pnp.loader.mjs .pnp.data.json target; do
  keep "$p" copy
done
while IFS= read -r pattern; do
  [ -n "$pattern" ] || continue
  for p in ./$pattern; do keep "${p#./}" copy; done
done < "$2"
find . -mindepth 1 ! -type d | sed 's|^\./||' | sort > "$out/dropped.txt"
rm -rf /work/* /work/.[!.]* /work/..?*
cp -a /home/agent "$out/home"
rm -rf "$out/home/.npm/_cacache" "$out/home/.npm/_logs" "$out/home/.cache/pip"
chown -R -h root:root "$out" && chmod -R go-w "$out"
'''



def dependency_hash(repo: Path, commit: str) -> str:
    """sha256 over the dependency manifests and lockfiles of a commit's tree (its listing
    streamed, never held; past `CAPS` it is refused like a sample's). The
    lines hashed, and their order, are `git ls-tree -r`'s: keys made before stay."""
    lines = sorted(f"{_MODE[row.kind]} blob {row.oid}\t{shown(row.path)}"
                   for row in listing(repo, commit, CAPS)
                   if row.path.rsplit("/", 1)[-1] in DEPENDENCY_FILES)
    digest = hashlib.sha256()
    for line in lines:
        meta, _, path = line.partition("\t")
        digest.update(f"{path}\0{meta.split()[2]}\n".encode())
    return digest.hexdigest()


_MODE = {Kind.FILE: "100644", Kind.EXECUTABLE: "100755", Kind.SYMLINK: "120000"}


@dataclass(frozen=True)
class Setup:
    """What a prepared image bakes in: `[toolchain] setup`'s commands, run in order, and
    what `[toolchain] keep` adds to the dependency directories samples keep."""

    commands: tuple[str, ...] = ()
    keep: tuple[str, ...] = ()

    @classmethod
    def of(cls, toolchain: Toolchain) -> Setup:
        return cls(tuple(toolchain.setup), tuple(toolchain.keep))


def key(toolchain: BuiltImage, setup: Setup, deps: str) -> str:
    blob = json.dumps({"toolchain": toolchain.identity, "setup": list(setup.commands),
                       "keep": list(setup.keep), "deps": deps, "format": FORMAT})
    return hashlib.sha256(blob.encode()).hexdigest()


def tag_of(repo: Path, commit: str, toolchain: BuiltImage, setup: Setup) -> tuple[str, str]:
    """(tag, key) of a commit's prepared image."""
    digest = key(toolchain, setup, dependency_hash(repo, commit))
    return f"bakeoff/{PREPARED}:{digest[:16]}", digest


def prepare(engine: ContainerEngine, repo: Path, commit: str, toolchain: BuiltImage, setup: Setup,
            say: Callable[[str], None]) -> BuiltImage:
    """The prepared image for a commit (the toolchain itself when there is no setup)."""
    engine = docker_engine(engine)
    if not setup.commands:
        return toolchain
    tag, digest = tag_of(repo, commit, toolchain, setup)
    attrs = inspect(engine, tag)
    if attrs is not None:
        return BuiltImage(PREPARED, tag, attrs["Id"], f"sha256:{digest}", cached=True)
    say(f"preparing image {tag}: {' && '.join(setup.commands)}")
    image_id = _build(engine, repo, commit, toolchain, setup, tag, digest)
    return BuiltImage(PREPARED, tag, image_id, f"sha256:{digest}", cached=False)


def _context(repo: Path, commit: str, toolchain: BuiltImage, setup: Setup, tag: str,
             out: IO[bytes]) -> None:
    """The build context, written to `out`: the commit's tree read from git objects and
    checked (as a sample's is: nothing unsafe reaches the daemon; blobs stream from the
    object store), a Dockerfile, the settle step and its inputs (the tracked files,
    NUL-separated; `keep`). Two stages: setup's layers stay in the first, the image is the
    toolchain plus PREPARED_DIR."""
    files = read_tree(repo, commit)
    tracked = b"".join(path.encode("utf-8", "surrogateescape") + b"\0"
                       for path in sorted(files))
    script = " && ".join(f"({command})" for command in setup.commands)
    dockerfile = (
        # The setup stage's image is left dangling: its label says which build left it.
        f"FROM {toolchain.image_id} AS setup\nLABEL {LABEL_BUILD_OF}={tag}\n"
        "USER root\nCOPY tree/ /work/\n"
        "COPY tracked.txt keep.txt settle.sh /tmp/bakeoff/\n"
        f"COPY {HOST_CA} {host_trust.CA_IN_BUILD}\n"
        "RUN chown -R 1000:1000 /work\nUSER 1000\nWORKDIR /work\n"
        f"RUN {host_trust.run_prefix()} && {script}\n"
        # Root-owned, outside the sample's tmpfs mounts: read-only for the code under test.
        "USER root\n"
        f"RUN rm -f {host_trust.CA_IN_BUILD} "
        "&& sh /tmp/bakeoff/settle.sh /tmp/bakeoff/tracked.txt /tmp/bakeoff/keep.txt\n"
        f"FROM {toolchain.image_id}\n"
        f"COPY --from=setup {PREPARED_DIR} {PREPARED_DIR}\n")
    write_tar(out, {f"tree/{path}": entry for path, entry in files.items()},
                          repo, extra={"Dockerfile": dockerfile.encode(),
                                       "tracked.txt": tracked,
                                       "keep.txt": "".join(f"{k}\n" for k in setup.keep)
                                       .encode(),
                                       "settle.sh": SETTLE.encode(),
                                       HOST_CA: host_trust.ca_bundle()})


def _build(engine: Engine, repo: Path, commit: str, toolchain: BuiltImage, setup: Setup,
           tag: str, digest: str) -> str:
    with tempfile.TemporaryFile() as context:  # on disk: a large tree is never held
        _context(repo, commit, toolchain, setup, tag, context)
        context.seek(0)
        stream = engine.call("build prepared image", engine.client.api.build,
                             fileobj=context, custom_context=True, tag=tag, rm=True,
                             forcerm=True, decode=True, pull=False,
                             buildargs=host_trust.proxy_args(),
                             labels={LABEL_IMAGE: PREPARED, LABEL_IDENTITY: f"sha256:{digest}"})
        with buildlog.BuildLog(f"prepared-{digest[:16]}") as log:
            return _built(engine, commit, tag, stream, log)


def _built(engine: Engine, commit: str, tag: str, stream: Any, log: buildlog.BuildLog) -> str:
    """The image id a build's stream ends with; every line to the log. `InfraError` when
    setup failed: its last lines, the log, the likely cause."""
    image_id = images.read_build_stream(PREPARED, iter_stream(stream),
                                        reporters.QuietBuildReporter(), log,
                                        failed=f"toolchain setup failed for {commit[:12]}",
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
_UNSIGNED = "No compatible signature found in package metadata"  # corepack's
_LOCKFILE = ("npm ci` can only install packages when your package.json and",
             "npm ERR! code EUSAGE", "npm error code EUSAGE", "lockfile needs to be updated",
             "ERR_PNPM_OUTDATED_LOCKFILE", "Your lockfile needs to be updated",
             "the lock file needs to be updated but --locked was passed",
             "missing go.sum entry")


def likely_cause(lines: list[str]) -> str:
    """Which of the user's inputs most likely made setup fail, from its last lines."""
    text = "\n".join(lines)
    if REFUSED_MARK in text:
        return ("fix [toolchain].setup: install the project editable (pip install -e .) or "
                "only its dependencies, so samples import the arm's code, never the base's")
    if _UNSIGNED in text:
        return ("corepack found no registry signature to check pnpm or yarn against (a "
                "registry mirror that serves none): pin the package manager's version in "
                "package.json's packageManager and put COREPACK_INTEGRITY_KEYS=0 before the "
                "command in [toolchain].setup, if your network's registry is trusted")
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


def node_for(loaded: LoadedManifest) -> NodeChoice | None:
    """`ResolvedImages.node`: the pin files read at `[experiment] base` (one Node for every
    stage); a pin no build honours is bad input naming the file and the fix."""
    section = loaded.manifest.toolchain
    if section.image != "node":
        return None
    repo = loaded.repo_path
    base = workspace.resolve_commit(repo, loaded.manifest.experiment.base)
    files = {name: workspace.file_at(repo, base, name) for name in node_mod.PIN_FILES}
    try:
        return node_mod.choose(section.node, files)
    except node_mod.NodePinError as error:
        raise BadInputError(f"{repo} at {loaded.manifest.experiment.base}: {error}",
                            hint=f'set node = "22" (or 18, 20, 24) under [toolchain] in '
                                 f"{loaded.path}") from None


class ResolvedImages:
    """The images one command uses, resolved once and passed down (never re-resolved in
    the functions it calls): the toolchain image, the database image, and each commit's
    prepared image, made (or found) once per set of dependency files."""

    def __init__(self, engine: ContainerEngine, loaded: LoadedManifest,
                 say: Callable[[str], None] = _quiet) -> None:
        self.engine, self.loaded, self.say = engine, loaded, say
        self.lock = threading.Lock()
        self._image: BuiltImage | None = None
        self._database: tuple[BuiltImage | None] | None = None
        self._prepared: dict[str, BuiltImage] = {}  # commit -> its prepared image
        self._gateway: BuiltImage | None = None
        self._node: tuple[NodeChoice | None] | None = None
        self._browser: dict[str, str] | None = None
        # "change <id>" / "toolchain" -> service -> image identity, checked once
        self._stacks: dict[str, dict[str, str]] = {}

    @property
    def image(self) -> BuiltImage:
        """The toolchain image (`[toolchain].image`; a node toolchain's in its Node)."""
        node = self.node
        with self.lock:
            if self._image is None:
                self._image = images.resolve(self.engine, self.loaded.manifest.toolchain.image,
                                             variant=None if node is None else node.major)
            return self._image

    @property
    def node(self) -> NodeChoice | None:
        """The Node an `image = "node"` toolchain runs: `[toolchain] node`, else the pin of
        the experiment's base commit (`runner.manifest.node`); None for another image."""
        with self.lock:
            if self._node is None:
                self._node = (node_for(self.loaded),)
            return self._node[0]

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

    def browser(self, change: str) -> dict[str, str] | None:
        """A browser criterion's browser, for the contract: the image's identity and the
        Chromium and Playwright it holds (built on first use, asked once); None when the
        change's criterion is not a browser's."""
        if self.loaded.change(change).success.browser is None:
            return None
        with self.lock:
            if self._browser is None:
                image = images.resolve(self.engine, browser_mod.IMAGE)
                found = browser_mod.installed(self.engine, image, Labels(
                    self.loaded.manifest.experiment.name, "tool-check"))
                self._browser = {"identity": image.identity, "chromium": found.chromium,
                                 "playwright": found.playwright}
            return dict(self._browser)

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
                    Setup.of(self.loaded.manifest.toolchain), self.say)
            return self._prepared[commit]
