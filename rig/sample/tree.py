"""A sample's tree as data: the files of one commit, checked, then overlaid by the rig.

The runner reads a commit's tree out of git (`runner.containers.samples.tree`); everything here is
pure. A tree is a mapping of repo-relative paths to `Entry` (a regular file, an
executable or a symlink). `checked` refuses what no honest checkout can hold and what
could make an extraction write outside its directory: absolute paths, `..`, `.git`
components, duplicate entries, a path that is both a file and a directory; and what the
sample's filesystem cannot hold: a name over NAME_MAX, a path over PATH_MAX, a symlink
whose target no `symlink()` takes. `Caps` bound a tree before it is held (files,
bytes, bytes of names). Overlays (`place`, `drop`) never follow a symlink: a protected
file is restored as a REGULAR file whatever the arm put at that path or on the way to it
(a symlink `tests -> /host/dir`, a directory where the file was).

Paths are `str` decoded with `surrogateescape` (git allows any byte but NUL and `/`):
`shown` is the one form a record, a report or a message gives them in.
"""

from __future__ import annotations

import enum
import itertools
import posixpath
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from rig.errors import RigError


class Kind(enum.StrEnum):
    FILE = "file"
    EXECUTABLE = "executable"
    SYMLINK = "symlink"


INLINE = 1024 * 1024  # a blob larger than this is held by its id, never read whole
NAME_MAX = 255  # bytes of one path component (Linux, tmpfs)
PATH_MAX = 4095  # bytes of a path a system call takes (4096 with its NUL)
WORK = "/work/"  # where a sample's tree sits: /work/PATH must be within PATH_MAX
SAFE_CHARS = set(range(0x20, 0x7F)) - {ord('"'), ord("\\")}


@dataclass(frozen=True, eq=False)
class Entry:
    """One path of a tree. A rig-made entry holds its bytes; one read from git also has
    its blob id and size, and holds its bytes only up to `INLINE` (a larger blob travels
    from the object store into the sample's tar without being held: `held` is False).
    Two entries of git are equal when their kind and blob id are: whether either holds
    its bytes changes nothing."""

    kind: Kind
    data: bytes  # the file's bytes, or a symlink's target (b"" when not held)
    oid: str = ""  # git's blob id, when it came from git
    size: int = -1  # its size in bytes (-1: len(data))

    @property
    def held(self) -> bool:
        return self.size < 0 or self.size == len(self.data)

    @property
    def length(self) -> int:
        return len(self.data) if self.size < 0 else self.size

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Entry):
            return NotImplemented
        if self.kind is not other.kind or self.length != other.length:
            return False
        if self.oid and other.oid:
            return self.oid == other.oid
        return self.held and other.held and self.data == other.data

    def __hash__(self) -> int:
        return hash((self.kind, self.length))


Tree = dict[str, Entry]


class UnsafeTreeError(RigError):
    """A commit's tree holds a path no checkout can hold safely (the arm's FAIL
    `unsafe_work`, never something the rig writes)."""

    def __init__(self, path: str, why: str) -> None:
        self.path = path
        self.why = why
        super().__init__(f"unsafe path {shown(path, 300)} in the tree: {why}" if path
                         else f"the tree cannot be laid out: {why}")


@dataclass(frozen=True)
class Caps:
    """What one tree may hold before it is held: entries (`[limits].max_files`), bytes of
    files (`[limits].disk_mb`: the sample's tmpfs) and bytes of names (paths and symlink
    targets: a listing of long paths is memory too). A tree past any is refused unread."""

    files: int
    bytes: int
    names: int = 32 * 1024 * 1024

    def problem(self, files: int, size: int, names: int) -> str | None:
        """Why a tree of `files` entries, `size` bytes of files and `names` bytes of
        paths (so far) is past the caps, or None."""
        if files > self.files:
            return (f"it holds more than {self.files} files ([limits].max_files): a tree "
                    "that large is refused unread")
        if size > self.bytes:
            return (f"its files add up to more than {self.bytes} bytes, more than a "
                    "sample can hold ([limits].disk_mb)")
        if names > self.names:
            return f"its paths add up to more than {self.names} bytes of names"
        return None


def path_problem(path: str) -> str | None:
    """Why `path` cannot be a file of a checkout, or None."""
    if not path or path.startswith("/"):
        return "absolute or empty"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "has an empty, '.' or '..' component"
    if any(part.lower() == ".git" for part in parts):
        return "has a .git component"
    if "\0" in path:
        return "has a NUL byte"
    raw = (WORK + path).encode("utf-8", "surrogateescape")
    if len(raw) > PATH_MAX:
        return (f"is {len(raw) - len(WORK)} bytes long: {WORK}PATH is over PATH_MAX "
                f"({PATH_MAX} bytes), no filesystem of the sample can hold it")
    if any(len(part.encode("utf-8", "surrogateescape")) > NAME_MAX for part in parts):
        return (f"has a component over NAME_MAX ({NAME_MAX} bytes): no filesystem of the "
                "sample can hold it")
    return None


def entry_problem(entry: Entry) -> str | None:
    """Why `entry` cannot be laid out, or None: a symlink `symlink()` refuses (an empty
    target, a NUL byte in it, a target over PATH_MAX)."""
    if entry.kind is not Kind.SYMLINK:
        return None
    if entry.length > PATH_MAX or not entry.held:
        return f"is a symlink whose target is {entry.length} bytes, over PATH_MAX"
    if not entry.data or b"\0" in entry.data:
        return "is a symlink whose target is empty or holds a NUL byte"
    return None


def checked(entries: Iterable[tuple[str, Entry]]) -> Indexed:
    """The entries as a tree, or `UnsafeTreeError` for the first unsafe one."""
    tree: dict[str, Entry] = {}
    for path, entry in entries:
        problem = path_problem(path) or entry_problem(entry)
        if problem is not None:
            raise UnsafeTreeError(path, problem)
        if path in tree:
            raise UnsafeTreeError(path, "appears twice (duplicate tree entries)")
        tree[path] = entry
    both = file_and_directory(tree)
    if both is not None:
        raise UnsafeTreeError(both[1], f"{shown(both[0], 300)} is both a file and a directory")
    return Indexed(tree)


def file_and_directory(paths: Iterable[str]) -> tuple[str, str] | None:
    """A (file, path below it) pair among `paths`, or None. With `/` sorting first, the
    paths below a file come right after it: one sort, no prefix built (a deep tree's
    parents would be quadratic in its depth)."""
    keys = sorted(p.replace("/", "\0") for p in paths)
    for above, below in itertools.pairwise(keys):
        if below.startswith(above + "\0"):
            return above.replace("\0", "/"), below.replace("\0", "/")
    return None


def parents(path: str) -> list[str]:
    """`a/b/c` -> [`a`, `a/b`]."""
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


class Indexed(dict[str, Entry]):
    """A tree that knows its directories and what each holds, so that `place` and
    `remove` never scan the whole tree: pinning a tree of 90,000 harness files is linear,
    not 90,000 scans. `children` maps a directory ("" is the root) to the paths right
    below it; a directory is there exactly while something is below it. Copies made with
    `dict()` or `{**tree}` are plain trees: correct, only slower."""

    def __init__(self, entries: Mapping[str, Entry] | Iterable[tuple[str, Entry]] = ()) -> None:
        super().__init__()
        self.children: dict[str, set[str]] = {}
        self.update(entries)

    def __setitem__(self, path: str, entry: Entry) -> None:
        if path not in self:
            self._link(path)
        super().__setitem__(path, entry)

    def __delitem__(self, path: str) -> None:
        super().__delitem__(path)
        self._unlink(path)

    def pop(self, path: str, *default: Entry | None) -> Entry | None:  # type: ignore[override]
        if path not in self:
            return default[0] if default else super().pop(path)
        entry = super().pop(path)
        self._unlink(path)
        return entry

    def update(self, *args: object, **kwargs: Entry) -> None:
        for path, entry in dict(*args, **kwargs).items():
            self[path] = entry

    def copy(self) -> Indexed:
        return Indexed(self)

    def below(self, directory: str) -> list[str]:
        """Every path below `directory`, found through the index."""
        found: list[str] = []
        todo = [directory]
        while todo:
            for child in self.children.get(todo.pop(), ()):
                (todo if child in self.children else found).append(child)
        return found

    def _link(self, path: str) -> None:
        child = path
        while True:
            parent = child[:child.rfind("/")] if "/" in child else ""
            kids = self.children.get(parent)
            if kids is not None:
                kids.add(child)
                return
            self.children[parent] = {child}
            if not parent:
                return
            child = parent

    def _unlink(self, path: str) -> None:
        child = path
        while True:
            parent = child[:child.rfind("/")] if "/" in child else ""
            kids = self.children[parent]
            kids.discard(child)
            if kids or not parent:
                return
            del self.children[parent]  # empty now: no longer a directory
            child = parent


def ancestors(paths: Iterable[str]) -> set[str]:
    """Every directory above `paths` ("" is the root), each made once: the walk up from a
    path stops at the first directory already found (a deep tree stays linear)."""
    found = {""}
    for path in paths:
        at = path.rfind("/")
        while at > 0 and path[:at] not in found:
            found.add(path[:at])
            at = path.rfind("/", 0, at)
    return found


def is_directory(tree: Tree, path: str) -> bool:
    """Whether something of `tree` is below `path` (through the index when it has one)."""
    if isinstance(tree, Indexed):
        return path in tree.children
    prefix = path + "/"
    return any(p.startswith(prefix) for p in tree)


def place(tree: Tree, path: str, data: bytes) -> None:
    """Put a regular file at `path`, removing whatever stands in its way: a symlink or
    file where a parent directory must be, a directory (all below it) where it goes."""
    at = path.rfind("/")
    while at > 0:  # the nearest parent first: above a directory there are only directories
        parent = path[:at]
        if isinstance(tree, Indexed) and parent in tree.children:
            break
        tree.pop(parent, None)
        at = path.rfind("/", 0, at)
    if path not in tree:  # a file has nothing below it
        _remove_below(tree, path)
    tree[path] = Entry(Kind.FILE, data)


def remove(tree: Tree, path: str) -> None:
    """Remove `path` (a file, a symlink or a whole directory), following nothing."""
    if tree.pop(path, None) is None:  # a file has nothing below it
        _remove_below(tree, path)


def _remove_below(tree: Tree, path: str) -> None:
    if isinstance(tree, Indexed):
        gone = tree.below(path)
    else:
        gone = [p for p in tree if p.startswith(path + "/")]
    for below in gone:
        del tree[below]


def drop(tree: Tree, unwanted: Callable[[str], bool]) -> list[str]:
    """Remove every path `unwanted` names; return them, sorted."""
    gone = sorted(p for p in tree if unwanted(p))
    for path in gone:
        del tree[path]
    return gone


def directories(tree: Mapping[str, Entry]) -> set[str]:
    """Every directory the tree implies ("" is the root)."""
    found = {""}
    for path in tree:
        found.update(parents(path))
    return found


def dirname(path: str) -> str:
    return posixpath.dirname(path)


_GIT_ESCAPES = {ord("\a"): "\\a", ord("\b"): "\\b", ord("\t"): "\\t", ord("\n"): "\\n",
                ord("\v"): "\\v", ord("\f"): "\\f", ord("\r"): "\\r", ord('"'): '\\"',
                ord("\\"): "\\\\"}


def shown(path: str, limit: int = 0) -> str:
    """A path as a record or a message holds it: as it is when it is printable UTF-8,
    else in git's quoted form (`"caf\\303\\251"`: octal escapes of its bytes), so any
    name git allows can be written, printed and read back. `limit` (characters, 0: none)
    cuts a long one in the middle, for a message."""
    raw = path.encode("utf-8", "surrogateescape")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or not text.isprintable() or '"' in text or "\\" in text:
        text = '"' + "".join(_GIT_ESCAPES.get(byte) or (chr(byte) if byte in SAFE_CHARS
                                                        else f"\\{byte:03o}")
                             for byte in raw) + '"'
    if limit and len(text) > limit:
        keep = max(1, (limit - 5) // 2)
        text = f"{text[:keep]}[...]{text[-keep:]}"
    return text


def clean(text: str) -> str:
    """Free text holding names (a test id, a message) as JSON and a terminal can hold it:
    unchanged when it is UTF-8, else in `shown`'s quoted form (its bytes, octal)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return shown(text)
    return text


_UNESCAPES = {v[1]: k for k, v in _GIT_ESCAPES.items()}


def unshown(text: str) -> str:
    """`shown`'s inverse: a name as a record holds it, back as the path it names (text
    that is not a quoted form is a name as it is)."""
    if len(text) < 2 or not (text.startswith('"') and text.endswith('"')):
        return text
    raw, at, body = bytearray(), 0, text[1:-1]
    while at < len(body):
        char = body[at]
        if char != "\\":
            raw += char.encode("utf-8", "surrogateescape")
            at += 1
        elif body[at + 1:at + 2] in _UNESCAPES:
            raw.append(_UNESCAPES[body[at + 1]])
            at += 2
        elif len(octal := body[at + 1:at + 4]) == 3 and set(octal) <= set("01234567"):
            raw.append(int(octal, 8) & 0xFF)
            at += 4
        else:
            return text
    return raw.decode("utf-8", "surrogateescape")
