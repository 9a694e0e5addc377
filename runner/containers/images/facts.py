"""What an image allows a sample: which tools are missing, what the sandbox user could
write outside the sample's tmpfs mounts, where its python's user site is.

Each is asked in a throwaway container of the image (`sandbox.check_image`: the sandbox
user, no network, no capability), never in-band: output the code under test printed
could imitate an in-band signal. An image ID names fixed content, so every answer is kept
on disk per image ID (`.bakeoff/<experiment>/tools/`): later executors of the same
experiment skip the check container.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from runner.containers import sandbox
from runner.containers.backend import ContainerEngine, Labels
from runner.containers.images import BuiltImage
from runner.store import layout
from runner.store.records import ImageFact, load_fact, save_fact

TOOL_CHECK = 'for x in "$@"; do command -v "$x" >/dev/null 2>&1 || echo "$x"; done'
# What the sandbox user could write outside the sample's tmpfs mounts (these, and HOME):
# must be nothing (else the code under test could fill the host's disk through the
# container's layer).
TMPFS_DIRS = ("/work", "/tmp", "/var/tmp", "/run/lock")
WRITABLE_CHECK = ('find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path /work '
                  '-o -path /tmp -o -path /var/tmp -o -path /run/lock -o -path "$HOME" \\) '
                  "-prune -o ! -type l -writable -printf '%y %p\\n' 2>/dev/null; true")
MODULES_CHECK = ("command -v python3 >/dev/null 2>&1 && cd / && python3 -c 'import pkgutil, sys; "
                 "print(chr(10).join(sorted(set(sys.builtin_module_names) | {m.name for m "
                 "in pkgutil.iter_modules()})))' || true")
USER_SITE_CHECK = ("command -v python3 >/dev/null 2>&1 && cd / && "
                   "python3 -I -c 'import site; print(site.getusersitepackages())' || true")
ROLE = "tool-check"


class ImageFacts:
    """The answers for one image, asked once each (per process, and per experiment on
    disk). Safe to share between threads."""

    def __init__(self, engine: ContainerEngine, repo: Path, experiment: str, image: BuiltImage,
                 labels: Labels) -> None:
        self.engine, self.image, self.labels = engine, image, labels
        self.directory = layout.experiment_dir(repo, experiment)
        self.lock = threading.Lock()
        self.known: dict[tuple[str, ...], tuple[str, ...]] = {}

    def missing_tools(self, tools: Sequence[str]) -> tuple[str, ...]:
        """The tools not on PATH in the image (checked once per tool set)."""
        wanted = tuple(dict.fromkeys(tools))
        return self._asked(wanted, "missing", wanted, lambda: tools_missing(
            self.engine, self.image.image_id, wanted, self.labels))

    def writable(self) -> tuple[str, ...]:
        """`writable` of the image: `d /path` or `f /path` per top-level writable path."""
        return self._asked(("@writable",), "writable", (), lambda: writable(
            self.engine, self.image.image_id, self.labels))

    def user_site(self) -> str:
        """The sandbox user's site directory of the image's python3 ("" without one):
        every python sample's driver makes it the rig's."""
        return self._asked(("@user-site",), "site", (), lambda: [sandbox.check_image(
            self.engine, self.image.image_id, ["sh", "-c", USER_SITE_CHECK], self.labels,
            env={"HOME": sandbox.HOME}).strip()])[0]

    def python_modules(self) -> tuple[str, ...]:
        """The top-level module names the image's python3 answers to (none without one):
        a module of the tree by one of these names would shadow it."""
        return self._asked(("@modules",), "modules", (), lambda: sandbox.check_image(
            self.engine, self.image.image_id, ["sh", "-c", MODULES_CHECK], self.labels,
            env={"HOME": sandbox.HOME}).split())

    def writable_dirs(self) -> list[str]:
        """Directories outside the standard tmpfs mounts the sandbox user could write in
        this image: each gets a tmpfs too."""
        return [item[2:] for item in self.writable() if item.startswith("d ")]

    def unsafe(self) -> str | None:
        """Why the image cannot hold a sample: files the sandbox user could grow."""
        files = [item[2:] for item in self.writable() if not item.startswith("d ")]
        if not files:
            return None
        return (f"image {self.image.tag} lets the sandbox user write {', '.join(files[:5])} "
                "outside the rig's size-limited mounts (fix: make them root-owned in the "
                "image)")

    def _asked(self, key: tuple[str, ...], what: str, wanted: tuple[str, ...],
               compute: Callable[[], Sequence[str]]) -> tuple[str, ...]:
        with self.lock:
            if key not in self.known:
                self.known[key] = tuple(self._on_disk(what, wanted, compute))
            return self.known[key]

    def _on_disk(self, what: str, wanted: tuple[str, ...],
                 compute: Callable[[], Sequence[str]]) -> list[str]:
        digest = hashlib.sha256("\0".join([what, self.image.image_id, *wanted]).encode())
        path = layout.tools_cache(self.directory, digest.hexdigest()[:24])
        known = load_fact(path)
        if known is not None and getattr(known, what) is not None:
            return list(getattr(known, what))
        found = list(compute())
        save_fact(path, ImageFact.model_validate(
            {"image_id": self.image.image_id, "tools": list(wanted), what: found}))
        return found


def tools_missing(engine: ContainerEngine, image_id: str, tools: tuple[str, ...],
                  labels: Labels) -> tuple[str, ...]:
    """Run `command -v` for each tool in a throwaway container of the image."""
    if not tools:
        return ()
    output = sandbox.check_image(engine, image_id,
                                 ["sh", "-c", TOOL_CHECK, "bakeoff-tools", *tools], labels)
    found = set(output.split())
    return tuple(t for t in tools if t in found)


def writable(engine: ContainerEngine, image_id: str, labels: Labels) -> list[str]:
    """The top-level paths the sandbox user can write outside the standard tmpfs mounts,
    `d /path` for a directory (it gets a tmpfs), `f /path` for anything else (a file no
    tmpfs can cover: the image is refused)."""
    output = sandbox.check_image(engine, image_id, ["sh", "-c", WRITABLE_CHECK], labels,
                                 env={"HOME": sandbox.HOME})
    found = sorted((line[2:], line[0]) for line in output.splitlines() if line[2:3] == "/")
    dirs = [p for p, kind in found if kind == "d"]
    return [f"{'d' if kind == 'd' else 'f'} {p}" for p, kind in found
            if not any(p.startswith(q + "/") for q in dirs)]
