"""The images/ catalogue: which images there are (a folder each, `variants.toml` beside
a Dockerfile with variants), the tag each name stands for and back, and which of them a
manifest runs. Pure: files and names in, names out; nothing here asks the engine.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from runner.errors import BadInputError
from runner.install import resources
from runner.manifest import Manifest, parse_manifest

BASE = "base"
BASE_TAG = "bakeoff/base:bookworm"
BUILD_CMD = "bakeoff-sandbox images build"


IMAGES_ENV = "BAKEOFF_IMAGES_DIR"


def images_dir() -> Path:
    """The images' build contexts the tool ships, or BAKEOFF_IMAGES_DIR (a folder of one's
    own laid out the same way: one folder per image, its Dockerfile `FROM` the base)."""
    configured = os.environ.get(IMAGES_ENV)
    if configured:
        return Path(configured)
    return resources.images_dir()


def tag_for(name: str, directory: Path | None = None) -> str:
    """The tag of a buildable name: `node` -> bakeoff/node:latest, `node:22` (a variant,
    `variants.toml`) -> bakeoff/node:22, the default variant's is `latest`."""
    if name == BASE:
        return BASE_TAG
    folder, variant = split_name(name)
    if variant is None or variant == variants_of(folder, directory).default:
        return f"bakeoff/{folder}:latest"
    return f"bakeoff/{folder}:{variant}"


@dataclass(frozen=True)
class Variants:
    """The variants of an images/ image (`variants.toml` beside its Dockerfile): one build
    argument, its default (the `latest` tag) and the values it may take."""

    arg: str = ""
    default: str = ""
    values: tuple[str, ...] = ()

    def args(self, variant: str | None) -> dict[str, str]:
        """The build arguments of a variant (none for the default: its identity is the
        image's without variants)."""
        return {} if variant in (None, self.default) else {self.arg: str(variant)}


def variants_of(name: str, directory: Path | None = None) -> Variants:
    path = (directory or images_dir()) / name / "variants.toml"
    if not path.is_file():
        return Variants()
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return Variants(str(data["arg"]), str(data["default"]),
                    tuple(str(v) for v in data["values"]))


def split_name(name: str) -> tuple[str, str | None]:
    """`node:22` -> (node, 22); `node` -> (node, None)."""
    directory, colon, variant = name.partition(":")
    return directory, (variant if colon else None)


def with_variant(name: str, variant: str | None) -> str:
    return name if variant is None else f"{name}:{variant}"


def known_names(directory: Path | None = None) -> list[str]:
    """`base` first, then every directory under images/ holding a Dockerfile."""
    root = directory or images_dir()
    built = sorted(p.parent.name for p in root.glob("*/Dockerfile") if p.parent.name != BASE)
    return [BASE, *built]


def ref_for(name_or_ref: str, variant: str | None = None) -> str:
    """The tag a toolchain/database name stands for (`go` -> bakeoff/go:latest; `node`
    with variant 22 -> bakeoff/node:22); a reference (anything with `/` or `:`) is
    itself."""
    if "/" in name_or_ref or ":" in name_or_ref:
        return name_or_ref
    return tag_for(with_variant(name_or_ref, variant))


def project_name(name_or_ref: str, directory: Path | None = None) -> str | None:
    """The images/ directory a name or tag of ours is built from, else None (not ours)."""
    name = name_of(ref_for(name_or_ref), directory)
    return None if name is None else split_name(name)[0]


def needed(manifest: Manifest, directory: Path | None = None) -> list[str]:
    """The project images a manifest runs (its toolchain, its database), base first."""
    refs = [manifest.toolchain.image, *([manifest.database.image] if manifest.database else [])]
    names = {BASE, *(n for n in (project_name(r, directory) for r in refs) if n)}
    return [n for n in known_names(directory) if n in names]


def not_built_here(manifest: Manifest, directory: Path | None = None) -> list[str]:
    """The references a manifest runs that `images build` cannot make: a local image of
    the user's own, or a name that is not one of images/ (`resolve` says how to get it)."""
    refs = [manifest.toolchain.image, *([manifest.database.image] if manifest.database else [])]
    return [ref_for(r) for r in refs if project_name(r, directory) is None]


def manifest_at(path: Path) -> Manifest:
    """The manifest at `path`, only its TOML and models read, so the bundled example's
    (whose repo/ is not a git repository yet) answers too."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise BadInputError(f"{path}: cannot read the manifest: {error}",
                            hint="pass -f FILE, name the images, or use --all") from None
    return parse_manifest(data, path)


def needed_by_file(path: Path, directory: Path | None = None) -> list[str]:
    """`needed` for the manifest at `path` (`manifest_at`)."""
    return needed(manifest_at(path), directory)


def name_of(tag: str, directory: Path | None = None) -> str | None:
    """The buildable name a tag of ours stands for (`bakeoff/python:latest` -> python;
    `bakeoff/python`, as a compose file writes it, is docker's `:latest` too;
    `bakeoff/node:22` -> node:22, a variant of images/node), else None (not ours)."""
    if tag == BASE_TAG:
        return BASE
    repository, _, version = tag.partition(":")
    if not repository.startswith("bakeoff/"):
        return None
    folder = repository.removeprefix("bakeoff/")
    if folder not in known_names(directory):
        return None
    if version in ("latest", ""):
        return folder
    return f"{folder}:{version}" if version in variants_of(folder, directory).values else None
