"""`protected = [...]`: which files of the base a change pins, as a list of file paths.

Each entry is one of:

- a glob, git-style: `*` any run of characters within one path segment, `?` one
  character, `[abc]` / `[a-z]` / `[!abc]` one character of (not of) a set, none of them
  matching `/`; `**` as a whole segment matches any number of directories (`tests/**`
  every file under tests/, `**/conftest.py` every conftest.py, `a/**/b.py` a/b.py,
  a/x/b.py, a/x/y/b.py). A glob that matches a directory protects every file under it;
  with a trailing `/` (`tests/*/`) it matches directories only;
- a directory, `tests` or `tests/`: every file under it, at any depth;
- a literal file path: itself, whether or not the base has it (a file the base lacks is
  "absent": removed from every sample's tree).

Entries are expanded against the BASE commit's tree (the caller lists it from git, never
from a working tree). A glob, or a path with a trailing `/`, that matches nothing is a
`ManifestError` (exit 2): it would otherwise protect nothing without a word.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from runner.errors import ManifestError

GLOB_CHARS = frozenset("*?[")
FIX = ("correct the entry (globs: * ? [...] within one path segment, ** for any depth; a "
       "directory protects every file under it) or remove it")


def expand(patterns: Sequence[str], files: Collection[str], *, manifest: str, change: str,
           base: str) -> tuple[str, ...]:
    """The sorted, de-duplicated file paths `patterns` name among `files` (the base's)."""
    found: set[str] = set()
    for n, pattern in enumerate(patterns):
        matched = matches(pattern, files)
        if matched is None:
            found.add(pattern)
            continue
        if not matched:
            kind = "glob" if is_glob(pattern) else "directory"
            raise ManifestError(manifest, f"changes[{change}].protected[{n}]",
                                f"the {kind} matches no file at the base {base[:12]}",
                                found=pattern, fix=FIX)
        found |= matched
    return tuple(sorted(found))


def matches(pattern: str, files: Collection[str]) -> set[str] | None:
    """The files a glob or directory names (maybe none), or None for a literal file path."""
    if is_glob(pattern):
        compiled, dirs_only = compile_glob(pattern), pattern.endswith("/")
        return {path for path in files
                if any(compiled.fullmatch(name) for name in _names(path, dirs_only))}
    if pattern in files:
        return None
    prefix = pattern.rstrip("/") + "/"
    under = {path for path in files if path.startswith(prefix)}
    if under or pattern.endswith("/"):
        return under
    return None  # absent at the base: the literal path, removed from every sample


def _names(path: str, dirs_only: bool) -> list[str]:
    """What a glob is tried against for one file: each directory above it (a matched
    directory protects every file under it), then the file itself unless `dirs_only`."""
    parts = path.split("/")
    above = ["/".join(parts[:k]) for k in range(1, len(parts))]
    return above if dirs_only else [*above, path]


def is_glob(pattern: str) -> bool:
    return any(char in GLOB_CHARS for char in pattern)


def compile_glob(pattern: str) -> re.Pattern[str]:
    """The regex of a git-style glob over a whole repo-relative path."""
    segments = pattern.rstrip("/").split("/")
    parts = []
    for n, segment in enumerate(segments):
        last = n == len(segments) - 1
        if segment == "**":
            parts.append(".*" if last else "(?:[^/]+/)*")
        else:
            parts.append(_segment(segment) + ("" if last else "/"))
    return re.compile("".join(parts))


def _segment(segment: str) -> str:
    """One path segment: `*`, `?` and `[...]` never cross a `/`."""
    out, i = [], 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (end := _class_end(segment, i)) > 0:
            out.append(_char_class(segment[i + 1:end]))
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def _class_end(segment: str, start: int) -> int:
    """The index of the `]` closing the class opened at `start`; -1 when none does (then
    `[` is literal). A `]` right after `[` or `[!` is a member, as in fnmatch."""
    i = start + 1
    if i < len(segment) and segment[i] in "!^":
        i += 1
    if i < len(segment) and segment[i] == "]":
        i += 1
    return segment.find("]", i)


def _char_class(body: str) -> str:
    negate = body[:1] in ("!", "^")
    members = body[1:] if negate else body
    escaped = members.replace("\\", "\\\\").replace("^", "\\^").replace("[", "\\[")
    escaped = escaped.replace("]", "\\]")
    # `-` keeps its range meaning; a negated class still never matches `/`.
    return f"[^/{escaped}]" if negate else f"(?!/)[{escaped}]"
