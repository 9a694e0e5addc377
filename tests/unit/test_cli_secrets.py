"""Everything the command line prints is redacted: errors (runner's, rig's, git's, the
internal-error path, the debug traceback) and results, on stdout and stderr.

Pins issue 11: a git error whose text held a secret was printed raw on the terminal.
"""

from __future__ import annotations

import base64
import urllib.parse
from pathlib import Path

import pytest

from rig.errors import RigError
from runner import workspace
from runner.cli.app import main
from runner.cli.terminal import declared_secrets
from runner.commands import report as report_mod
from tests.integration.helpers import make_target

SECRET = "tok-9f8e7d6c5b4a3210/+="
NAME = "BAKEOFF_TEST_TOKEN"


@pytest.fixture
def manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A loadable manifest whose arm declares `secrets = [NAME]`, NAME set to SECRET."""
    path = make_target(tmp_path / "repo", ["A"], database=False)
    text = path.read_text().replace('network = "none"', f'network = "none"\nsecrets = ["{NAME}"]')
    path.write_text(text)
    monkeypatch.setenv(NAME, SECRET)
    return path


def printed(capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    done = capsys.readouterr()
    forms = [SECRET, base64.b64encode(SECRET.encode()).decode(),
             urllib.parse.quote(SECRET, safe=""), SECRET[:12]]
    for form in forms:
        assert form not in done.out and form not in done.err, form
    return done.out, done.err


def test_a_git_failure_whose_stderr_holds_the_secret_prints_stars(
        manifest: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A real `git show` of a ref named after the secret: git echoes the name on stderr."""
    def fails(_loaded: object) -> None:
        workspace.run_git(manifest.parent, "show", f"{SECRET}:app.py")

    monkeypatch.setattr(report_mod, "report", fails)
    assert main(["report", "-f", str(manifest)]) == 1
    _, err = printed(capsys)
    assert err.startswith("error: git show ***:app.py failed in ")
    assert err.rstrip().endswith(": fatal: invalid object name '***'.")


@pytest.mark.parametrize(("error", "code", "shown"), [
    (RigError(f"rig broke on {base64.b64encode(f'user:{SECRET}'.encode()).decode()}",
              hint=f"unset {urllib.parse.quote(SECRET, safe='')}"), 3,
     "error: rig broke on dXNlcjp***Q==\n  fix: unset ***\n"),
    (ValueError(f"boom {urllib.parse.quote_plus(SECRET).lower()}"), 1,
     "internal error: ValueError: boom ***\n"
     "  (set BAKEOFF_DEBUG=1 to see the traceback, and please report it)\n"),
])
def test_rig_and_internal_errors_holding_an_encoded_secret_print_stars(
        manifest: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        error: Exception, code: int, shown: str) -> None:
    def fails(_loaded: object) -> None:
        raise error

    monkeypatch.setattr(report_mod, "report", fails)
    assert main(["report", "-f", str(manifest)]) == code
    assert printed(capsys) == ("", shown)


def test_the_debug_traceback_is_redacted_too(manifest: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    def fails(_loaded: object) -> None:
        raise KeyError(SECRET)

    monkeypatch.setattr(report_mod, "report", fails)
    monkeypatch.setenv("BAKEOFF_DEBUG", "1")
    assert main(["report", "-f", str(manifest)]) == 1
    _, err = printed(capsys)
    assert err.startswith("Traceback (most recent call last):")
    assert err.rstrip().endswith("KeyError: '***'")


def test_results_and_progress_lines_holding_the_secret_print_stars(
        manifest: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    results.write_text(f"# results\nthe agent printed {SECRET}\n")

    class Observation:
        rounds: list[object] = []

    def report(_loaded: object) -> report_mod.Reported:
        return report_mod.Reported(Observation(), Path(f"/obs/{SECRET}.json"),  # a stand-in
                                  results, Path(f"/page/{SECRET}.html"))

    monkeypatch.setattr(report_mod, "report", report)
    assert main(["report", "-f", str(manifest)]) == 0
    assert printed(capsys) == ("# results\nthe agent printed ***\n\n",
                               f"report: {results}, /obs/***.json, /page/***.html "
                               "(0 round(s))\n")


def test_a_manifest_error_is_redacted_before_the_manifest_validates(
        manifest: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The secret names are read from the raw TOML: the error that the manifest is bad
    (here: its base names no ref, and the ref holds the secret) is redacted too."""
    manifest.write_text(manifest.read_text().replace('base = "main"', f'base = "r-{SECRET}"'))
    assert main(["status", "-f", str(manifest)]) == 2
    _, err = printed(capsys)
    assert "experiment.base: is not a ref or commit of" in err and "(found 'r-***')" in err


def test_declared_secrets_are_read_from_raw_toml_whatever_else_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "bakeoff.toml"
    path.write_text('[experiment]\nname = 3\n[[arms]]\nsecrets = ["A", 7]\n[[arms]]\n'
                    'secrets = "B"\n[[arms]]\nsecrets = ["C"]\n')
    assert declared_secrets(path) == ["A", "C"]
    path.write_text("not = [toml")
    assert declared_secrets(path) == []
    assert declared_secrets(tmp_path / "missing.toml") == []
