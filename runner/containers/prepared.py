"""Prepared images: the toolchain's `setup` (e.g. `pip install -e .`, `npm ci`) baked in.

`setup` may need a registry; samples run with the network off, so setup runs while an
image is built. A prepared image is keyed by (toolchain identity, setup commands, hash of
the dependency manifests and lockfiles in the tree): commits with the same dependency
set reuse it and never reinstall; a commit that changes its dependencies gets its own.
The tree's tracked files are removed after setup, so a sample only ever sees the tree
it is given; what setup generated in /work and in the sandbox user's HOME (node_modules,
*.egg-info, a `pip install --user`) is kept, root-owned, under /opt/bakeoff/prepared/:
a sample's /work and HOME are fresh tmpfs mounts, and its driver copies that in first.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

from runner.containers.engine import LABEL_IDENTITY, LABEL_IMAGE, Engine, iter_stream
from runner.containers.images import BuiltImage, inspect
from runner.errors import InfraError

PREPARED = "prepared"
FORMAT = 2  # of the image's layout (2: setup's output under /opt/bakeoff/prepared/)
DEPENDENCY_FILES = frozenset({
    "pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "requirements-dev.txt",
    "poetry.lock", "uv.lock", "Pipfile.lock", "package.json", "package-lock.json",
    "yarn.lock", "pnpm-lock.yaml", "Cargo.toml", "Cargo.lock", "go.mod", "go.sum",
})


def dependency_hash(repo: Path, commit: str) -> str:
    """sha256 over the dependency manifests and lockfiles of a commit's tree."""
    listing = subprocess.run(["git", "ls-tree", "-r", commit], cwd=repo, capture_output=True,
                             text=True, check=True, timeout=60).stdout
    digest = hashlib.sha256()
    for line in sorted(listing.splitlines()):
        meta, _, path = line.partition("\t")
        if path.rsplit("/", 1)[-1] in DEPENDENCY_FILES:
            digest.update(f"{path}\0{meta.split()[2]}\n".encode())
    return digest.hexdigest()


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


def _context(repo: Path, commit: str, toolchain: BuiltImage, setup: list[str]) -> bytes:
    tree = subprocess.run(["git", "archive", "--format=tar", "--prefix=tree/", commit],
                          cwd=repo, capture_output=True, check=True, timeout=120).stdout
    tracked = subprocess.run(["git", "ls-tree", "-r", "--name-only", commit], cwd=repo,
                             capture_output=True, check=True, timeout=60).stdout
    script = " && ".join(f"({command})" for command in setup)
    dockerfile = (
        f"FROM {toolchain.image_id}\nUSER root\nCOPY tree/ /work/\nCOPY tracked.txt /tmp/\n"
        "RUN chown -R 1000:1000 /work\nUSER 1000\nWORKDIR /work\n"
        f"RUN {script}\n"
        "RUN tr '\\n' '\\0' < /tmp/tracked.txt | xargs -0 -r rm -f --\n"
        # Root-owned, outside the sample's tmpfs mounts: read-only for the code under test.
        "USER root\n"
        "RUN mkdir -p /opt/bakeoff/prepared && cp -a /work /opt/bakeoff/prepared/work "
        "&& cp -a /home/agent /opt/bakeoff/prepared/home "
        "&& chown -R root:root /opt/bakeoff && chmod -R go-w /opt/bakeoff\n"
        "USER 1000\n")
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(tree)) as src, tarfile.open(fileobj=out, mode="w") as dst:
        for member in src.getmembers():
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        for name, data in (("Dockerfile", dockerfile.encode()), ("tracked.txt", tracked)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            dst.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _build(engine: Engine, repo: Path, commit: str, toolchain: BuiltImage, setup: list[str],
           tag: str, digest: str) -> str:
    context = _context(repo, commit, toolchain, setup)
    stream = engine.call("build prepared image", engine.client.api.build,
                         fileobj=io.BytesIO(context), custom_context=True, tag=tag, rm=True,
                         forcerm=True, decode=True, pull=False,
                         labels={LABEL_IMAGE: PREPARED, LABEL_IDENTITY: f"sha256:{digest}"})
    tail: list[str] = []
    image_id = ""
    for chunk in iter_stream(stream):
        if "error" in chunk:
            raise InfraError(f"toolchain setup failed for {commit[:12]}: "
                             f"{chunk['error'].strip()}\n" + "\n".join(tail[-10:]),
                             hint="fix [toolchain].setup (it runs while the image is built)")
        text = str(chunk.get("stream", "")).rstrip()
        if text:
            tail.append(text)
        aux = chunk.get("aux")
        if isinstance(aux, dict) and "ID" in aux:
            image_id = str(aux["ID"])
    return image_id or str(inspect(engine, tag)["Id"])  # type: ignore[index]
