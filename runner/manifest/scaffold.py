"""`bakeoff-sandbox init` and `bakeoff-sandbox schema`: the manifest's starting points."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from runner.errors import ManifestError
from runner.manifest.document import Manifest
from runner.manifest.loader import DEFAULT_MANIFEST

TEMPLATE_CHANGE = "first-change"
TEMPLATE_BRIEF = f"briefs/{TEMPLATE_CHANGE}.md"
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
COMMENT_COLUMN = 33  # the written bakeoff.toml's trailing comments start at column 34
# A TOML statement, commented out ("# key = ...") or not: where a trailing comment may follow.
_STATEMENT = re.compile(r"^\s*(?:#\s*)?(?:\[|[A-Za-z0-9_.-]+\s*=)")


def write_init(directory: Path) -> list[Path]:
    """Write a commented bakeoff.toml and a brief template into `directory`.

    Never overwrites: if either file exists, nothing is written and a `ManifestError`
    says which one. Returns the written paths.
    """
    directory = Path(directory).expanduser().absolute()
    files = {
        directory / DEFAULT_MANIFEST: align_comments(_template("bakeoff.toml").replace(
            "__NAME__", experiment_name(directory)
        )),
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


def next_steps(written: Sequence[Path]) -> list[str]:
    """What a newcomer does after `init` (the manifest, then the brief, as `write_init`
    returns them): `up` refuses a target repository with untracked files, and init has
    just written two."""
    manifest, brief = written
    where = shlex.quote(str(manifest.parent))
    files = " ".join(shlex.quote(str(path.relative_to(manifest.parent))) for path in written)
    return [
        "next:",
        f"  1. edit {manifest.name} (the arms, the checks, each change's success criterion) "
        f"and the brief {brief.relative_to(manifest.parent)}",
        "  2. `up` refuses a target repository with untracked files, and these are: commit "
        "them,",
        f"       git -C {where} add {files} && git -C {where} commit -m 'bakeoff manifest "
        "and brief'",
        "     or keep them out of the target repository: move them to a directory outside "
        "it and set [experiment] repo to the repository's path (or list them in its "
        ".git/info/exclude)",
        f"  3. bakeoff-sandbox up -f {shlex.quote(str(manifest))}",
    ]


def experiment_name(directory: Path) -> str:
    """A valid experiment name from a directory name (``My Repo`` -> ``my-repo``)."""
    slug = re.sub(r"[^a-z0-9]+", "-", directory.name.lower()).strip("-")
    return slug or "experiment"


def align_comments(text: str, column: int = COMMENT_COLUMN) -> str:
    """Every trailing comment of a TOML line (or of a commented-out one) starts at
    `column` (0-based); a line whose code leaves no space before it gets its comment on
    the line above instead. Everything else is left as it is."""
    lines: list[str] = []
    for line in text.split("\n"):
        found = trailing_comment(line)
        if found is None:
            lines.append(line)
            continue
        code, comment = found
        if len(code) < column:
            lines.append(code.ljust(column) + comment)
        else:
            indent = code[:len(code) - len(code.lstrip())]
            lines.extend([indent + comment, code])
    return "\n".join(lines)


def trailing_comment(line: str) -> tuple[str, str] | None:
    """(code, comment) of a TOML statement (``key = value``, ``[table]``), commented out
    or not, that carries a trailing ``# comment``; None for any other line."""
    statement = _STATEMENT.match(line)
    if statement is None:
        return None
    quote = ""
    escaped = False
    for at in range(statement.end(), len(line)):
        char = line[at]
        if escaped:
            escaped = False
        elif quote:
            escaped = quote == '"' and char == "\\"  # a basic string's escape
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "#":
            return line[:at].rstrip(), line[at:]
    return None


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
