"""What an installed tool's user meets first (issue 34): `--version`, the bundled examples
named when one is not, and a demo copy whose modes do not depend on what the install kept.
The installed wheel itself is proved by tests/integration/test_installed.py."""

from __future__ import annotations

import shutil
import stat
from importlib import metadata
from pathlib import Path

import pytest

from runner.cli.app import main
from runner.commands import demo


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_prints_the_installed_distribution_s_version(
        flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([flag]) == 0
    assert capsys.readouterr() == (f"bakeoff-sandbox {metadata.version('bakeoff-sandbox')}\n",
                                   "")
    assert metadata.version("bakeoff-sandbox") == "0.1.0"


def test_an_unknown_example_lists_the_bundled_ones(capsys: pytest.CaptureFixture[str]) -> None:
    """Regression (issue 34): an installed tool without its examples said "use one of: "
    with an empty list."""
    assert main(["demo", "--example", "nosuch"]) == 2
    assert capsys.readouterr().err == ("error: no bundled example 'nosuch'\n"
                                       "  fix: use one of: cachey, horizon, horizon-ui\n")


def test_the_demo_copy_is_writable_and_its_agents_executable_whatever_the_install_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A wheel keeps an executable bit only when the source had one (cachey's scripts have
    none) and a system install may be read-only: the copy the demo makes is the user's to
    edit, and every agent script in it runs when named directly."""
    installed = tmp_path / "site-packages" / "examples"
    shutil.copytree(demo.examples_dir() / "cachey", installed / "cachey")
    for path in sorted(installed.rglob("*"), reverse=True):  # files before their folders
        if path.is_file():
            path.chmod(0o444)
    monkeypatch.setattr(demo, "examples_dir", lambda: installed)
    manifest = demo.prepare(tmp_path / "copy", "cachey")
    root = manifest.parent
    scripts = sorted(p.name for p in (root / "agents").iterdir())
    assert scripts == ["breaker.sh", "control.sh", "fixer.sh", "lib.sh"]
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in (root / "agents").iterdir()} == (
        dict.fromkeys(scripts, 0o755))
    assert stat.S_IMODE(manifest.stat().st_mode) == 0o644
    assert stat.S_IMODE((root / "repo" / ".gitignore").stat().st_mode) == 0o644
