"""`bakeoff-sandbox init` and `bakeoff-sandbox schema`: the manifest's starting points."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any

from runner.errors import ManifestError
from runner.manifest.document import Manifest
from runner.manifest.loader import DEFAULT_MANIFEST

TEMPLATE_CHANGE = "first-change"
TEMPLATE_BRIEF = f"briefs/{TEMPLATE_CHANGE}.md"
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def write_init(directory: Path) -> list[Path]:
    """Write a commented bakeoff.toml and a brief template into `directory`.

    Never overwrites: if either file exists, nothing is written and a `ManifestError`
    says which one. Returns the written paths.
    """
    directory = Path(directory).expanduser().absolute()
    files = {
        directory / DEFAULT_MANIFEST: _template("bakeoff.toml").replace(
            "__NAME__", experiment_name(directory)
        ),
        directory / TEMPLATE_BRIEF: _template("brief.md").replace("__CHANGE__", TEMPLATE_CHANGE),
    }
    for path in files:
        if path.exists():
            raise ManifestError(
                str(path), "", "already exists; init never overwrites anything",
                fix="edit the existing file, move it away, or run init in another directory",
            )
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(files)


def experiment_name(directory: Path) -> str:
    """A valid experiment name from a directory name (``My Repo`` -> ``my-repo``)."""
    slug = re.sub(r"[^a-z0-9]+", "-", directory.name.lower()).strip("-")
    return slug or "experiment"


def json_schema() -> dict[str, Any]:
    """The JSON Schema of bakeoff.toml (the TOML, converted to JSON, validates against it).

    Cross-field rules (a control arm, unique ids, the judge, samples >= 3) are enforced
    by `load_manifest`, not by the schema.
    """
    schema = Manifest.model_json_schema()
    return {"$schema": JSON_SCHEMA_DIALECT, "title": "bakeoff.toml", **{
        key: value for key, value in schema.items() if key != "title"
    }}


def _template(name: str) -> str:
    return resources.files("runner.manifest").joinpath("templates", name).read_text(
        encoding="utf-8")
