"""A tree's symlinks laid out so that every tool sees what the runtime sees (class 9).

The interpreter, the kernel and every runtime follow a symlink; many tools do not
(`compileall` skips a linked directory, linters and type checkers skip or dedupe links).
A package linked to a directory elsewhere in the tree is imported at run time and never
checked. So, before anything else of the rig's layer (bytecode dropped, the base's
harness, the protected files, the canaries), `lay_out` resolves every link of the tree as
the kernel would in the sample (the tree is /work; `..` above it is `/`):

- it leads to a file or a directory IN the tree -> the link is replaced by a copy of what
  it leads to (a file: the same bytes and mode; a directory: its whole subtree, links in it
  resolved from where they really are). Pinning and protection then see the paths a
  runtime sees (a link `node_modules -> lib` becomes `node_modules/...`: harness);
- it leads to nothing in the tree -> kept: whatever is there at run time is the rig's
  (restored harness, protected files) or the base's setup output, never the arm's code;
- it leaves the tree (`/usr/...`, `../../usr/...`) -> kept: the image's files are not the
  arm's work, and it resolves the same way for every tool;
- where it leads depends on the process or on the image's own links (through `/proc` or
  `/dev`, a `..` out of a directory outside the tree), it loops, or a copy would hold
  itself -> refused (`UnsafeTreeError`: FAIL unsafe_work), unless the base has the very
  same link at the same path (the project's own layout: kept as it is).

The laid-out tree must fit the sample: copies count against the bytes (`[limits].disk_mb`)
and the entries (`LayoutCaps.entries`) a sample may hold, and a path that a copy makes too long
or too deep is refused, as is a committed path deeper than any tool walks (`MAX_DEPTH`).
Pure: a tree in, the same tree laid out (in place) and what was done out.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Mapping
from dataclasses import dataclass

from rig.sample.tree import Entry, Kind, Tree, UnsafeTreeError, directories, shown

MAX_HOPS = 40  # links followed to resolve one path (the kernel's own limit)
MAX_NESTING = 16  # directory links inside copies of directory links
MAX_PATH = 4000  # bytes of a laid-out path (/work/ + it stays under PATH_MAX, 4096)
MAX_TARGET = 4095  # bytes of a link's target (the kernel's limit)
MAX_DEPTH = 256  # directories deep: compileall stops at 1000 levels, a runtime does not
# The default of `LayoutCaps.entries`; a sample passes `[limits].max_files` (the manifest's cap).
MAX_ENTRIES = 100_000
MAX_NOTED = 100  # materialized links named in a record
WORK = "work"  # the tree's mount point below `/`
_MAGIC = ("proc", "dev", "sys")  # where a link leads depends on the process that follows it
_HARMLESS = ("/dev/null",)


class Where(enum.StrEnum):
    FILE = "file"
    DIR = "directory"
    MISSING = "missing"  # in the tree, but nothing is there
    OUTSIDE = "outside"  # out of the tree, the same for every process
    UNSAFE = "unsafe"  # depends on the process or the image's own links
    LOOP = "loop"


@dataclass(frozen=True)
class Resolved:
    where: Where
    path: str  # FILE, DIR: the tree path; MISSING, OUTSIDE: an absolute target; else ""
    why: str = ""


@dataclass(frozen=True)
class LayoutCaps:
    """What a laid-out tree may hold (None: no byte cap)."""

    bytes: int | None = None
    entries: int = MAX_ENTRIES


DEFAULT_CAPS = LayoutCaps()


@dataclass(frozen=True)
class Laid:
    """What `lay_out` did: links replaced by copies (`link -> target`, as records show
    them, at most `MAX_NOTED` and a count), and links kept as they are."""

    materialized: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()


def lay_out(tree: Tree, base: Mapping[str, Entry] | None = None,
            caps: LayoutCaps = DEFAULT_CAPS) -> Laid:
    """Replace every link of `tree` that leads into it by a copy (in place), keep the ones
    that cannot hide the tree's files, refuse the rest (`UnsafeTreeError`). `base`: the
    base's tree as committed (`tree` itself when it is the base's); a link it holds
    identically is kept when it cannot be laid out. None: no base, nothing is kept."""
    deep = next((p for p in tree if p.count("/") >= MAX_DEPTH), None)
    if deep is not None:
        raise UnsafeTreeError(deep, f"is more than {MAX_DEPTH} directories deep: tools stop "
                                    "walking before a runtime stops importing")
    links = sorted(p for p, e in tree.items() if e.kind is Kind.SYMLINK)
    if not links:
        return Laid()
    layout = _Layout(tree, {} if base is None else base, caps)
    for link in links:
        layout.top(link)
    for link in layout.replaced:
        del tree[link]
    tree.update(layout.added)
    noted = layout.noted
    if len(noted) > MAX_NOTED:
        noted = [*noted[:MAX_NOTED], f"... and {len(noted) - MAX_NOTED} more links"]
    return Laid(tuple(noted), tuple(layout.kept))


def resolve(tree: Mapping[str, Entry], dirs: set[str], link: str) -> Resolved:
    """Where the link at `link` leads, as the kernel resolves it with the tree at /work."""
    walk = _Walk(tree, dirs, [WORK, *link.split("/")[:-1]])
    return walk.run(_target(tree[link]))


def _target(entry: Entry) -> str:
    return entry.data.decode("utf-8", "surrogateescape")


class _Walk:
    """One path resolution: `pos` is where it stands, as components below `/`."""

    def __init__(self, tree: Mapping[str, Entry], dirs: set[str], pos: list[str]) -> None:
        self.tree, self.dirs, self.pos = tree, dirs, pos
        self.todo: list[str] = []  # components still to walk, the next one last
        self.hops = 0

    def push(self, target: str) -> None:
        if target.startswith("/"):
            self.pos = []
        self.todo.extend(reversed(target.split("/")))

    def run(self, target: str) -> Resolved:
        problem = _target_problem(target)
        if problem is not None:
            return Resolved(Where.UNSAFE, "", problem)
        self.push(target)
        while self.todo:
            found = self.step(self.todo.pop())
            if found is not None:
                return found
        return self.end()

    def step(self, part: str) -> Resolved | None:
        pos = self.pos
        if part in ("", "."):
            return None
        if part == "..":
            if pos and pos[0] != WORK:
                return Resolved(Where.UNSAFE, "", "'..' out of a directory outside the tree: "
                                                  "where it leads depends on the image's links")
            if pos:
                pos.pop()
            return None
        pos.append(part)
        if pos[0] != WORK or len(pos) == 1:
            return None
        path = "/".join(pos[1:])
        entry = self.tree.get(path)
        if entry is not None and entry.kind is Kind.SYMLINK:
            self.hops += 1
            if self.hops > MAX_HOPS:
                return Resolved(Where.LOOP, "", f"more than {MAX_HOPS} links deep (a loop)")
            pos.pop()
            self.push(_target(entry))
            return None
        if (entry is not None and any(p not in ("", ".") for p in self.todo)) or (
                entry is None and path not in self.dirs):
            rest = "/".join(reversed(self.todo))
            return Resolved(Where.MISSING, f"/{WORK}/{path}" + (f"/{rest}" if rest else ""))
        return None

    def end(self) -> Resolved:
        pos = self.pos
        if pos and pos[0] == WORK:
            path = "/".join(pos[1:])
            return Resolved(Where.DIR if path == "" or path in self.dirs else Where.FILE, path)
        absolute = "/" + "/".join(pos)
        if pos and pos[0] in _MAGIC and absolute not in _HARMLESS:
            return Resolved(Where.UNSAFE, "", f"it leads through /{pos[0]} ({absolute}): "
                                              "where depends on the process that follows it")
        return Resolved(Where.OUTSIDE, absolute)


def _target_problem(target: str) -> str | None:
    if not target:
        return "an empty target (no filesystem holds one)"
    if "\0" in target:
        return "a NUL byte in its target"
    if len(target.encode("utf-8", "surrogateescape")) > MAX_TARGET:
        return f"a target longer than {MAX_TARGET} bytes"
    return None


def within(path: str, directory: str) -> bool:
    """`path` is `directory` or below it ("" is the root)."""
    return directory == "" or path == directory or path.startswith(directory + "/")


class _Layout:
    """The copies one tree's links make, computed from the tree as committed."""

    def __init__(self, tree: Tree, base: Mapping[str, Entry], caps: LayoutCaps) -> None:
        self.tree, self.base, self.caps = tree, base, caps
        self.paths = sorted(tree)
        self.dirs = directories(tree)
        self.added: dict[str, Entry] = {}
        self.replaced: list[str] = []
        self.noted: list[str] = []
        self.kept: list[str] = []
        self.entries = len(tree)
        self.bytes = sum(e.length for e in tree.values() if e.kind is not Kind.SYMLINK)

    def top(self, link: str) -> None:
        """One link of the tree as committed: copied, kept or refused."""
        found = resolve(self.tree, self.dirs, link)
        if found.where is Where.DIR and within(link, found.path):
            found = Resolved(Where.LOOP, "", f"it leads to {_dir(found.path)}, which holds it")
        if found.where in (Where.FILE, Where.DIR):
            self.entries -= 1  # the link itself goes
            self.replaced.append(link)
            self.copy(link, link, found, (link,))
            self.noted.append(f"{shown(link)} -> {_dir(found.path)}")
        elif found.where in (Where.MISSING, Where.OUTSIDE):
            self.kept.append(f"{shown(link)} -> {shown(found.path)} ({found.where})")
        elif self.base.get(link) == self.tree[link]:
            self.kept.append(f"{shown(link)} ({found.why}; the base's own link)")
        else:
            raise UnsafeTreeError(link, f"is a symlink the rig cannot lay out: {found.why}")

    def copy(self, new: str, link: str, found: Resolved, stack: tuple[str, ...]) -> None:
        """`found` (what the link at `link` leads to) at `new`."""
        if found.where is Where.FILE:
            self.add(new, self.tree[found.path])
        elif found.where is Where.DIR:
            self.copy_dir(new, found.path, stack)
        elif found.where in (Where.MISSING, Where.OUTSIDE):
            self.add(new, Entry(Kind.SYMLINK, found.path.encode("utf-8", "surrogateescape")))
        else:
            raise UnsafeTreeError(link, f"is a symlink the rig cannot lay out where a copy "
                                        f"puts it ({shown(new)}): {found.why}")

    def copy_dir(self, new: str, source: str, stack: tuple[str, ...]) -> None:
        if len(stack) > MAX_NESTING:
            raise UnsafeTreeError(stack[0], f"its copy nests more than {MAX_NESTING} linked "
                                            "directories")
        prefix = source + "/" if source else ""
        start = bisect.bisect_left(self.paths, prefix)
        end = bisect.bisect_left(self.paths, source + "0") if source else len(self.paths)
        for path in self.paths[start:end]:
            target = f"{new}/{path[len(prefix):]}"
            entry = self.tree[path]
            if entry.kind is not Kind.SYMLINK:
                self.add(target, entry)
                continue
            found = resolve(self.tree, self.dirs, path)
            if found.where is Where.DIR and any(within(s, found.path) for s in (*stack, path)):
                found = Resolved(Where.LOOP, "", f"{shown(path)} leads to "
                                                 f"{_dir(found.path)}, which holds it")
            self.copy(target, path, found, (*stack, path))

    def add(self, path: str, entry: Entry) -> None:
        if len(path.encode("utf-8", "surrogateescape")) > MAX_PATH or \
                path.count("/") >= MAX_DEPTH:
            raise UnsafeTreeError(path, "a symlink's copy makes this path too long or too "
                                        f"deep (at most {MAX_PATH} bytes, {MAX_DEPTH} levels)")
        self.added[path] = entry
        self.entries += 1
        if entry.kind is not Kind.SYMLINK:
            self.bytes += entry.length
        if self.entries > self.caps.entries:
            raise UnsafeTreeError("", f"its symlinks, laid out as copies, make more than "
                                      f"{self.caps.entries} entries")
        if self.caps.bytes is not None and self.bytes > self.caps.bytes:
            raise UnsafeTreeError("", f"its symlinks, laid out as copies, make more than the "
                                      f"{self.caps.bytes} bytes a sample can hold")


def _dir(path: str) -> str:
    return shown(path) if path else "the tree's root"
