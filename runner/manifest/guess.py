"""`init`'s guesses from a repository and the commands its user gives: the image, the
parser, the test command, the files to protect. Pure: file names in, names out.

Each guess is only a default: every one is asked on a terminal and has a flag.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from rig.preflight import named_test_files


@dataclass(frozen=True)
class ImageDefaults:
    """What `[toolchain]` and `[[checks]]` get for an image nobody configured."""

    test: str               # the project's test command
    requires: tuple[str, ...]
    setup: tuple[str, ...] = ()


# The images under images/ a repository's own files point at, in the order they are tried.
MARKERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("python", ("pyproject.toml", "setup.py", "setup.cfg", "requirements.txt")),
    ("node", ("package.json",)),
    ("rust", ("Cargo.toml",)),
    ("go", ("go.mod",)),
)
IMAGE_DEFAULTS = {
    "python": ImageDefaults("pytest -q -p no:cacheprovider", ("python3", "pytest", "git")),
    "node": ImageDefaults("npm test", ("node", "npm", "git"), ("npm install",)),
    "rust": ImageDefaults("cargo test --offline", ("cargo", "git")),
    "go": ImageDefaults("go test ./...", ("go", "git")),
}
DEFAULT_IMAGE = "python"
# The parser a command's runner speaks, by the words it starts (first match wins).
_PARSERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("pytest", re.compile(r"(?:^|[\s/])(?:py\.?test|python3? -m pytest)(?:\s|$)")),
    ("cargo", re.compile(r"(?:^|\s)cargo (?:test|nextest)\b")),
    ("go-test", re.compile(r"(?:^|\s)go test\b")),
    ("vitest", re.compile(r"\bvitest\b")),
    ("jest", re.compile(r"\bjest\b")),
    ("node-test", re.compile(r"(?:^|\s)node (?:[^|;&]* )?--test\b")),
)
EXIT_CODE = "exit-code"


def guess_image(files: Collection[str]) -> str:
    """The image the repository's top-level files point at (pyproject.toml -> python,
    package.json -> node, Cargo.toml -> rust, go.mod -> go); python when none does."""
    for image, markers in MARKERS:
        if any(marker in files for marker in markers):
            return image
    return DEFAULT_IMAGE


def guess_parser(command: str) -> str:
    """The parser of the runner `command` starts (pytest, cargo, go-test, vitest, jest,
    node-test); exit-code for any other command (its exit code is the verdict)."""
    for name, pattern in _PARSERS:
        if pattern.search(command):
            return name
    return EXIT_CODE


def guess_protected(success: str, files: Collection[str]) -> list[str]:
    """The test files of the repository the success command names: restored from the
    contract before every sample, so no arm can pass by rewriting its own test."""
    return named_test_files(success, files)


def defaults_for(image: str) -> ImageDefaults:
    """An image's defaults; an image of the user's own gets the python ones' shape with
    nothing required beyond git."""
    return IMAGE_DEFAULTS.get(image, ImageDefaults("make test", ("git",)))
