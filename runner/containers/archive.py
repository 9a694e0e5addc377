"""Tars for the engine's archive API, and their way back onto the host
(docs/scale-out.md: what a container needs or makes travels through the engine, never a
path of this machine).

`pack` builds one in memory whose entries carry their owner, mode and mtime: the engine
applies them as it extracts, so no file on the host is ever chowned for a container.
`unpack` writes what the engine streams back (`engine.get_archive`) into a host
directory: regular files and directories under one top folder only, no link, no device,
no way out of it; a file already there with the archive's size and mtime is left as it
is (records are read back again and again, and what they hold only ever grows).
"""

from __future__ import annotations

import io
import os
import secrets
import tarfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from runner.errors import InfraError

COPY_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class Member:
    """One member of a tar the engine extracts: a file (`data`) or a directory (None)."""

    name: str
    data: bytes | None = None
    mode: int = 0o644
    owner: int = 0                # uid = gid
    mtime: float | None = None    # None: now (to the microsecond: a reader that watches
                                  # (mtime, size) sees every new version)


def pack(entries: Iterable[Member]) -> bytes:
    """A PAX tar of `entries` (PAX keeps a fractional mtime, which ustar would round)."""
    now = time.time()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            info = tarfile.TarInfo(entry.name)
            info.uid = info.gid = entry.owner
            info.mode = entry.mode
            info.mtime = now if entry.mtime is None else entry.mtime
            if entry.data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(entry.data)
                tar.addfile(info, io.BytesIO(entry.data))
    return out.getvalue()


class _Chunks(io.RawIOBase):
    """The engine's stream of byte chunks as a file tarfile can read."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._left = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._left:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._left = chunk
        view = memoryview(buffer).cast("B")
        size = min(len(view), len(self._left))
        view[:size] = self._left[:size]
        self._left = self._left[size:]
        return size


def _relative(name: str, top: str, what: str) -> PurePosixPath:
    """`name` of a member as a path under `top`; anything else is refused."""
    path = PurePosixPath(name)
    parts = [part for part in path.parts if part != "."]
    if path.is_absolute() or not parts or parts[0] != top or ".." in parts:
        raise InfraError(f"{what}: the archive holds {name!r}, which is not under {top}/",
                         hint="nothing was written outside the run directory; report it")
    return PurePosixPath(*parts)


def _unchanged(target: Path, member: tarfile.TarInfo) -> bool:
    try:
        found = target.stat()
    except FileNotFoundError:
        return False
    return found.st_size == member.size and int(found.st_mtime) == int(member.mtime)


def _write(target: Path, source: IO[bytes], mtime: float) -> None:
    """`source` into `target` by a rename, so a reader never sees half a file."""
    part = target.with_name(f".{target.name}.{secrets.token_hex(4)}.part")
    try:
        with part.open("wb") as out:
            while chunk := source.read(COPY_CHUNK):
                out.write(chunk)
        os.utime(part, (mtime, mtime))
        part.replace(target)
    finally:
        part.unlink(missing_ok=True)


def unpack(chunks: Iterable[bytes], destination: Path, top: str, what: str) -> int:
    """The tar in `chunks` (whose members are `top` and what is under it) into
    `destination` / `top`; the number of files written. `what` names it in errors."""
    written = 0
    try:
        with tarfile.open(fileobj=io.BufferedReader(_Chunks(chunks)), mode="r|") as tar:
            for member in tar:
                target = destination.joinpath(*_relative(member.name, top, what).parts)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                elif not member.isreg():
                    raise InfraError(f"{what}: {member.name!r} is not a regular file",
                                     hint="only files and directories are read back")
                elif not _unchanged(target, member):
                    target.parent.mkdir(parents=True, exist_ok=True)
                    source = tar.extractfile(member)
                    assert source is not None  # a regular file always has content
                    _write(target, source, member.mtime)
                    written += 1
    except tarfile.TarError as error:
        raise InfraError(f"{what}: the engine's archive does not read: {error}",
                         hint="check that `docker info` answers, then run the command "
                              "again") from error
    return written
