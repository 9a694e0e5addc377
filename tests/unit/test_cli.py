"""The command line without docker: init, schema, and bad input as one message, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.cli.app import main


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


def test_report_open_opens_only_a_graphical_browser(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    """Without a display a browser would be a text one taking the terminal: the path is
    printed instead (`runner.cli.app.report`)."""
    from runner.commands import report

    opened: list[str] = []
    monkeypatch.setattr(report.webbrowser, "open", lambda url: opened.append(url) or True)
    monkeypatch.setattr(report.sys, "platform", "linux")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    page = tmp_path / "REPORT.html"
    assert report.open_page(page) is False and opened == []
    monkeypatch.setenv("DISPLAY", ":0")
    assert report.open_page(page) is True and opened == [page.as_uri()]
