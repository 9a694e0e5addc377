"""`init` writes a bakeoff.toml whose trailing comments share one column, whatever the
experiment's name; aligning changes no TOML value."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from runner.manifest.answers import TEMPLATE_ANSWERS, render_manifest
from runner.manifest.scaffold import (
    COMMENT_COLUMN,
    _template,
    align_comments,
    trailing_comment,
    write_init,
)

LONG = "a-very-long-experiment-directory-name"


def written(tmp_path: Path, name: str) -> str:
    write_init(tmp_path / name)
    return (tmp_path / name / "bakeoff.toml").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["x", "my-repo", "horizon", LONG])
def test_every_trailing_comment_of_the_written_manifest_starts_in_one_column(
        tmp_path: Path, name: str) -> None:
    """Regression: the template was aligned for an 8-character placeholder, so any other
    experiment name shifted the [experiment] comments; five long lines were never aligned."""
    text = written(tmp_path, name)
    found = [(line, trailing_comment(line)) for line in text.splitlines()]
    commented = [(line, split) for line, split in found if split is not None]
    assert len(commented) >= 40
    assert [line for line, (_, comment) in commented
            if line.index(comment) != COMMENT_COLUMN] == []
    assert tomllib.loads(text) == tomllib.loads(render_manifest(
        _template("bakeoff.toml"), replace(TEMPLATE_ANSWERS, name=name)))


def test_a_name_too_long_for_the_column_gets_its_comment_on_the_line_above(
        tmp_path: Path) -> None:
    lines = written(tmp_path, LONG).splitlines()
    at = lines.index(f'name = "{LONG}"')
    assert lines[at - 1] == "# [a-z0-9-]; names the state dir and the branches"
    at = lines.index(f'# branch = "bakeoff/{LONG}"')
    assert lines[at - 1] == ("# the experiment branch that accumulates merges "
                             "(default bakeoff/<name>)")


def test_a_short_name_keeps_its_comment_in_the_column(tmp_path: Path) -> None:
    lines = written(tmp_path, "x").splitlines()
    assert 'name = "x"' + " " * 23 + "# [a-z0-9-]; names the state dir and the branches" in lines
    assert ('# branch = "bakeoff/x"' + " " * 11 + "# the experiment branch that "
            "accumulates merges (default bakeoff/<name>)") in lines
    assert "[contract]" + " " * 23 + "# frozen at `up`; verified by every later command" in lines


def test_the_packaged_template_is_already_aligned() -> None:
    template = _template("bakeoff.toml")
    assert align_comments(template) == template


def test_a_trailing_comment_is_found_outside_strings_and_only_after_a_statement() -> None:
    assert trailing_comment('a = "x\\"#y"  # c') == ('a = "x\\"#y"', "# c")
    assert trailing_comment("a = '#'  # c") == ("a = '#'", "# c")
    assert trailing_comment('# metric = "x"   # or a regex') == ('# metric = "x"',
                                                                  "# or a regex")
    assert trailing_comment("[limits]  # per container") == ("[limits]", "# per container")
    assert trailing_comment("# Entries: a file path # not a key") is None
    assert trailing_comment('setup = ["pip install -e ."]') is None
    assert align_comments("  key = 1 # c\n") == "  key = 1".ljust(COMMENT_COLUMN) + "# c\n"
