"""The command line without docker: init, schema, and bad input as one message, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.cli.app import main


def test_init_writes_files_and_refuses_to_overwrite(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path)]) == 0
    assert (tmp_path / "bakeoff.toml").is_file()
    assert main(["init", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "Traceback" not in err


def test_schema_is_json_schema_of_the_manifest(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "bakeoff.toml"
    assert {"experiment", "contract", "arms", "changes"} <= set(schema["properties"])


def test_missing_manifest_is_bad_input_naming_the_file(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.toml"
    assert main(["status", "-f", str(missing)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "init" in err and "Traceback" not in err
