"""A build's context and the identity it gives an image.

Importing the same rootfs twice gives two image IDs, so an image is identified by a stable
content identity as well: the sha256 of the base's layer digests plus the hash of the
image's build directory and build arguments (FIELD-NOTES, "Engine and images").
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

from runner.containers.images import host_trust

HOST_CA = "host-ca.crt"  # the host's CA bundle, in every build context that fetches


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
