"""The installed tool is built once per run (tests/integration/installed.py
`install_once`): the workers of `pytest -n N` wait for the first one's build and share it;
a failed build is not kept."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.integration import installed
from tests.integration.installed import Installed, InstallError


def fake_install(built: list[Path], fail: int = 0):  # type: ignore[no-untyped-def]
    """An `install` that takes a while, counts its builds and fails the first `fail`."""
    def build(root: Path) -> Installed:
        built.append(root)
        time.sleep(0.2)
        if len(built) <= fail:
            raise InstallError("pip: no network")
        return Installed(root, root / "source", root / "t.whl", root / "t.tar.gz",
                         root / "venv", {"install": 1.5})
    return build


def test_every_worker_that_asks_gets_the_one_build(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Path] = []
    monkeypatch.setattr(installed, "install", fake_install(built))
    with ThreadPoolExecutor(3) as pool:  # three workers at once, each its own lock file
        found = list(pool.map(lambda _: installed.install_once(tmp_path / "run"), range(3)))
    assert len(built) == 1 and built[0].parent == tmp_path / "run"
    assert found == [found[0]] * 3 and found[0].seconds == {"install": 1.5}


def test_a_failed_build_is_not_kept_and_the_next_worker_builds_anew(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Path] = []
    monkeypatch.setattr(installed, "install", fake_install(built, fail=1))
    with pytest.raises(InstallError):
        installed.install_once(tmp_path / "run")
    found = installed.install_once(tmp_path / "run")
    assert len(built) == 2 and built[0] != built[1] and found.root == built[1]
