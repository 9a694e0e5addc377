"""Trees built from git objects, as an attacker would build them (issue 20, classes 6 and
7): nested trees sharing one blob (a million files in 60 KB of objects), names no host
filesystem takes (a component of 256 bytes, a path of 5000), names that are not UTF-8.
Nothing here touches a working tree: `commit_with` writes objects and one commit.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

TREE = "040000"
FILE = "100644"
LINK = "120000"
Entry = tuple[str, str]  # (mode, object id)


def git_out(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    done = subprocess.run(["git", *args], cwd=repo, input=stdin, capture_output=True,
                          check=True)
    return done.stdout.strip()


def blob(repo: Path, data: bytes) -> str:
    return git_out(repo, "hash-object", "-w", "--stdin", stdin=data).decode()


def tree(repo: Path, entries: Mapping[bytes, Entry]) -> str:
    """One tree object of `entries` (name -> (mode, id)), written as is (`--literally`:
    names of any length and bytes), in git's order."""
    def key(item: tuple[bytes, Entry]) -> bytes:
        return item[0] + (b"/" if item[1][0] == TREE else b"")
    body = b"".join(f"{mode} ".encode() + name + b"\0" + bytes.fromhex(oid)
                    for name, (mode, oid) in sorted(entries.items(), key=key))
    return git_out(repo, "hash-object", "-t", "tree", "-w", "--literally", "--stdin",
                   stdin=body).decode()


def fan(repo: Path, leaf: Entry, widths: list[int], prefix: bytes = b"e") -> str:
    """A tree of `widths[0]` directories of `widths[1]` ... of `leaf` each, every level one
    shared object: 1000 x 1000 empty files is two trees and one blob."""
    current = leaf
    for depth, width in enumerate(reversed(widths)):
        name = prefix if depth == 0 else b"d"
        current = (TREE, tree(repo, {name + b"%06d" % i: current for i in range(width)}))
    return current[1]


def chain(repo: Path, leaf: Mapping[bytes, Entry], names: list[bytes]) -> str:
    """Directories `names[0]/names[1]/...` down to a tree holding `leaf`."""
    current = tree(repo, leaf)
    for name in reversed(names[1:]):
        current = tree(repo, {name: (TREE, current)})
    return current


def commit_with(repo: Path, parent: str, added: Mapping[bytes, Entry],
                message: str = "attack") -> str:
    """A commit on `parent` whose tree is the parent's with `added` (top-level names ->
    entries, a directory of the parent's replaced whole)."""
    listing = git_out(repo, "ls-tree", "-z", f"{parent}^{{tree}}")
    entries: dict[bytes, Entry] = {}
    for record in listing.split(b"\0"):
        if record:
            meta, _, name = record.partition(b"\t")
            mode, _, oid = meta.decode().split()
            entries[name] = (mode.rjust(6, "0"), oid)
    entries.update(added)
    return git_out(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit-tree",
                   tree(repo, entries), "-p", parent, "-m", message).decode()


def nested(repo: Path, parent: str, path: bytes, entry: Entry,
           message: str = "attack") -> str:
    """A commit on `parent` with one more entry at `path` (its directories made fresh,
    so a directory of the parent's on the way is replaced by it)."""
    *dirs, name = path.split(b"/")
    if not dirs:
        return commit_with(repo, parent, {name: entry}, message)
    inner = chain(repo, {name: entry}, dirs)
    return commit_with(repo, parent, {dirs[0]: (TREE, inner)}, message)
