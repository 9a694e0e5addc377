"""A sample's inputs on their way into its containers, through the engine's API only
(docs/scale-out.md: no container of ours gets a path of this machine).

The executor stages a sample's inputs in a scratch directory of the orchestrator's
(`tree.tar`, the driver, the observer's files, ...). They reach the sample's container,
and its server's, on the container's **stdin** (`stream`): a line with the size of a tar
of the small inputs, that tar, then `tree.tar` as it is (`driver.BOOT` extracts the
first into a tmpfs at /bakeoff/in; the driver extracts the tree straight into /work, so
the tree is never held twice in the container's memory). A stack's tree services get
them in a volume on the engine's disk (`volume`), filled by a container that never
starts, mounted read-only, removed with the sample's other resources by its labels.
"""

from __future__ import annotations

import contextlib
import io
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from runner.containers import sandbox
from runner.containers.backend import ContainerEngine, Labels

TREE = "tree.tar"  # in the staging directory: the sample's tree, streamed last
FILLER = "sample-inputs"  # the role label of a stack's inputs' volume and its filler


def small(inputs: Path) -> bytes:
    """A tar of the staging directory's files but the tree."""
    out = io.BytesIO()
    write(out, inputs, tree=False)
    return out.getvalue()


def write(out: IO[bytes], inputs: Path, *, tree: bool) -> None:
    """A tar of the staging directory's files (root's, 0644, directories 0755) into
    `out`, the tree left out unless `tree`."""
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for path in sorted(inputs.rglob("*")):
            name = path.relative_to(inputs).as_posix()
            if (name == TREE and not tree) or path.is_symlink():
                continue
            info = tar.gettarinfo(str(path), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mode = 0o755 if path.is_dir() else 0o644
            if path.is_dir():
                tar.addfile(info)
            else:
                with path.open("rb") as handle:
                    tar.addfile(info, handle)


class _Chained(io.RawIOBase):
    """Readable parts, one after the other."""

    def __init__(self, parts: list[IO[bytes]]) -> None:
        self.parts = parts

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self.parts:
            data = self.parts[0].read(len(buffer))
            if data:
                buffer[:len(data)] = data
                return len(data)
            self.parts.pop(0).close()
        return 0


@contextlib.contextmanager
def stream(inputs: Path) -> Iterator[IO[bytes]]:
    """What a sample's container reads on its stdin (the module's docstring)."""
    head = small(inputs)
    tree = inputs / TREE
    parts: list[IO[bytes]] = [io.BytesIO(f"{len(head)}\n".encode() + head)]
    if tree.is_file():
        parts.append(tree.open("rb"))
    chained = io.BufferedReader(_Chained(parts))
    try:
        yield chained
    finally:
        chained.close()


def volume(engine: ContainerEngine, image_id: str, inputs: Path, labels: Labels, name: str) -> str:
    """A volume on the engine's disk holding the staging directory (the tree included),
    filled through a container that never starts (`sandbox.fill`); its name."""
    made = engine.create_volume(name, labels, size_mb=None, owner=0)
    with tempfile.TemporaryFile() as staged:  # on disk: a tree is never held here
        write(staged, inputs, tree=True)
        staged.seek(0)
        sandbox.fill(engine, made, image_id, labels, staged)
    return made
