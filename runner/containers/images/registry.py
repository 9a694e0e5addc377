"""Images through a registry (issue 36): what a cluster runs is what a registry holds, so
a local image is pushed there under a content-addressed tag and named from then on by
the digest the registry gave it (`REGISTRY/REPO@sha256:...`), the only name a Pod gets
(`kube.objects` refuses a tag: a tag can move under a run).

The tag is the image's own id (`id-<sha256 hex>`): two different images never share one
(an anchor's `:latest` for two images handed a run the wrong one), and the same image
pushed again is the same tag and the same digest. The local tag made for the push is
removed after it (the image keeps its own tags): nothing of the push is left here.
"""

from __future__ import annotations

import contextlib
import io
import re
import tarfile
import threading
from dataclasses import dataclass
from typing import Any

from runner.containers import sandbox
from runner.containers.backend import ContainerSpec, Labels
from runner.containers.dockerclient import iter_stream
from runner.containers.engine import Engine
from runner.errors import EngineError, EngineFailedError, EngineRefusedError, InfraError

TAG_PREFIX = "id-"
USER_CHECK = Labels("registry", "user-check")  # the container that reads an image's users
PASSWD_MAX = 1 << 20
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
PUSH_HINT = ("check that the registry answers and accepts pushes from this engine (an "
             "HTTP registry must be on loopback or in the engine's insecure-registries)")


@dataclass(frozen=True)
class Pushed:
    """A local image as the registry holds it."""

    image_id: str    # the local image (sha256:...)
    tag: str         # REGISTRY/REPO:id-<hex>, where it was pushed
    reference: str   # REGISTRY/REPO@sha256:..., what a Pod runs and a record keeps


def content_tag(image_id: str) -> str:
    """The tag an image is pushed under: its own id (`id-` and the 64 hex digits)."""
    if not DIGEST.fullmatch(image_id):
        raise ValueError(f"not an image id (sha256:<64 hex>): {image_id!r}")
    return TAG_PREFIX + image_id.removeprefix("sha256:")


def repository(registry: str, local: str) -> str:
    """Where a local image goes: `bakeoff/python:latest` -> REGISTRY/bakeoff/python (a
    name that starts with a registry of its own keeps only its path)."""
    name = local.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]
    parts = name.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]
    return f"{registry.rstrip('/')}/{'/'.join(parts)}"


def push(engine: Engine, image_id: str, repo: str) -> Pushed:
    """Push `image_id` to `repo` under its content tag; the digest the registry answered."""
    tag = content_tag(image_id)
    what = f"push {repo}:{tag}"
    engine.call(f"tag {image_id} for {repo}", engine.client.api.tag, image_id, repo, tag)
    digest = ""
    try:
        lines = engine.call(what, engine.client.api.push, repo, tag, stream=True, decode=True)
        for line in iter_stream(lines, what, engine.address):
            if line.get("error"):
                raise EngineRefusedError(engine.address, what, str(line["error"]),
                                         status=None, hint=PUSH_HINT)
            digest = str((line.get("aux") or {}).get("Digest") or digest)
    finally:
        with contextlib.suppress(EngineError):
            engine.call(f"untag {repo}:{tag}", engine.client.api.remove_image,
                        f"{repo}:{tag}", noprune=True)
    if not DIGEST.fullmatch(digest):
        raise EngineFailedError(f"the push of {repo}:{tag} ended with no digest from the "
                                f"registry (got {digest!r})", hint=PUSH_HINT)
    return Pushed(image_id, f"{repo}:{tag}", f"{repo}@{digest}")


class Registered:
    """What a cluster runs for a local image: the image pushed to `registry` (once per
    process, by its content tag) and named by digest; an image already named by digest
    is as it is. `KubeEngine(image_ref=...)` asks it for every container it plans."""

    def __init__(self, engine: Engine, registry: str) -> None:
        self.engine, self.registry = engine, registry
        self._pushed: dict[str, Pushed] = {}
        self._users: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def __call__(self, image: str) -> str:
        if DIGEST.fullmatch(image.rsplit("@", 1)[-1]) and "@" in image:
            return image
        attrs: Any = self.engine.call(f"inspect {image}", self.engine.client.api.inspect_image,
                                      image, retry=True)
        image_id = str(attrs["Id"])  # by id or by tag: one image, one push
        with self._lock:  # one push at a time, each image once
            found = self._pushed.get(image_id)
            if found is None:
                tags = [str(tag) for tag in attrs.get("RepoTags") or []]
                local = next((tag for tag in tags if tag.startswith("bakeoff/")),
                             tags[0] if tags else "bakeoff/image")
                found = push(self.engine, image_id, repository(self.registry, local))
                self._pushed[image_id] = found
        return found.reference

    def user(self, image: str, user: str) -> str:
        """`user` as a Pod runs it (numbers only: `runAsUser`): a name looked up in the
        image's own /etc/passwd, its uid and primary gid, as Docker resolves it when it
        runs the image (read from a container of it that never starts, once per image
        and name)."""
        with self._lock:
            found = self._users.get((image, user))
        if found is None:
            found = passwd_ids(image_file(self.engine, image, "/etc/passwd"), user)
            if found is None:
                raise InfraError(f"the image {image} has no user {user!r} in its /etc/passwd",
                                 hint="name the user by uid:gid, or add it to the image")
            with self._lock:
                self._users[(image, user)] = found
        return found

    @property
    def pushed(self) -> list[Pushed]:
        """Every image pushed so far (what a record of the run names)."""
        return list(self._pushed.values())


def image_file(engine: Engine, image: str, path: str) -> bytes:
    """A small file of `image` (at most `PASSWD_MAX`), read through a container of it that
    is created and never started: nothing of the image runs."""
    holder = engine.create(ContainerSpec(
        image=image, command=("true",), labels=USER_CHECK, resources=sandbox.CHECK_RESOURCES,
        user=sandbox.KEEPER_USER, purpose=f"the reader of {path} in {image}"))
    try:
        data = b"".join(engine.get_archive(holder, path))
    finally:
        sandbox.remove(engine, holder)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = tar.next()
        handle = None if member is None or not member.isfile() else tar.extractfile(member)
        return b"" if handle is None else handle.read(PASSWD_MAX)


def passwd_ids(passwd: bytes, user: str) -> str | None:
    """`uid:gid` of `user` in an /etc/passwd (name:password:uid:gid:...), else None."""
    for line in passwd.decode(errors="replace").splitlines():
        fields = line.split(":")
        if len(fields) >= 4 and fields[0] == user and fields[2].isdigit() \
                and fields[3].isdigit():
            return f"{fields[2]}:{fields[3]}"
    return None
