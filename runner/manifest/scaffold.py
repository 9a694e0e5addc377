"""`bakeoff-sandbox init` and `bakeoff-sandbox schema`: the manifest's starting points."""

from __future__ import annotations

import re
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from runner.errors import ManifestError
from runner.manifest.answers import (
    AGENTS_DIR,
    TEMPLATE_ANSWERS,
    Answers,
    render_manifest,
    script_text,
)
from runner.manifest.document import Manifest
from runner.manifest.loader import DEFAULT_MANIFEST

TEMPLATE_CHANGE = "first-change"
TEMPLATE_BRIEF = f"briefs/{TEMPLATE_CHANGE}.md"
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
COMMENT_COLUMN = 33  # the written bakeoff.toml's trailing comments start at column 34
# A TOML statement, commented out ("# key = ...") or not: where a trailing comment may follow.
_STATEMENT = re.compile(r"^\s*(?:#\s*)?(?:\[|[A-Za-z0-9_.-]+\s*=)")


def write_init(directory: Path) -> list[Path]:
    """Write the commented bakeoff.toml with its placeholders (`TEMPLATE_ANSWERS`: `up`
    refuses them) and a brief template into `directory`, and an empty agents_dir.

    Never overwrites: if either file exists, nothing is written and a `ManifestError`
    says which one. Returns the written paths.
    """
    directory = Path(directory).expanduser().absolute()
    answers = replace(TEMPLATE_ANSWERS, name=experiment_name(directory))
    files = {
        directory / DEFAULT_MANIFEST: manifest_text(answers),
        directory / TEMPLATE_BRIEF: _template("brief.md").replace("__CHANGE__", TEMPLATE_CHANGE),
    }
    _write_new(files)
    (directory / AGENTS_DIR).mkdir(exist_ok=True)
    return list(files)


def write_setup(directory: Path, answers: Answers, brief: str) -> list[Path]:
    """`init`'s answers written into `directory` (outside the user's repository): the
    manifest, the brief, and a no-op script per scripted arm in its agents_dir.
    Never overwrites (`ManifestError` naming the file). Returns the written paths."""
    directory = Path(directory).expanduser().absolute()
    files = {directory / DEFAULT_MANIFEST: manifest_text(answers),
             directory / answers.brief_file: brief}
    files.update({directory / AGENTS_DIR / arm.script: script_text(arm)
                  for arm in answers.arms if arm.script is not None})
    _write_new(files)
    (directory / AGENTS_DIR).mkdir(exist_ok=True)
    for arm in answers.arms:
        if arm.script is not None:
            (directory / AGENTS_DIR / arm.script).chmod(0o755)
    return list(files)


def manifest_text(answers: Answers) -> str:
    """The commented bakeoff.toml of these answers."""
    return align_comments(render_manifest(_template("bakeoff.toml"), answers))


def _write_new(files: dict[Path, str]) -> None:
    for path in files:
        if path.exists():
            raise ManifestError(
                str(path), "", "already exists; init never overwrites anything",
                fix="edit the existing file, move it away, or run init in another directory",
            )
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


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
