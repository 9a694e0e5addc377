"""The files a check reads back from a sample (a coverage report: `driver.COLLECT`), run by
this machine's real sh and coreutils with the sandbox user's `as` standing for itself: a
file is kept only when it was read whole, and `Outputs.collected` hands the rig exactly
those. A read cut short (the deadline's `timeout` killing `dd` under load, a write refused
on a full tmpfs) stood in for by a `dd` that stops early: it used to be kept, and a ratchet
read its head as the whole report."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from runner.containers.samples import driver
from runner.containers.samples.driver import Outputs

DD = shutil.which("dd")


def collect(tmp_path: Path, paths: list[str], *, limit: int = 1000, together: int = 4000,
            dd_stops_at: int | None = None) -> dict[str, str]:
    """Run `collect` over `tmp_path/work` for `paths`; what the rig would read back."""
    out, work = tmp_path / "out", tmp_path / "work"
    (out / "files").mkdir(parents=True)
    env = dict(os.environ)
    if dd_stops_at is not None:  # a `dd` whose read ends early, as when it is killed
        stub = tmp_path / "bin"
        stub.mkdir()
        (stub / "dd").write_text(f'#!/bin/sh\n"{DD}" "$@" | head -c {dd_stops_at}\n')
        (stub / "dd").chmod(0o755)
        env["PATH"] = f"{stub}:{env['PATH']}"
    shell = (f'AS=""; as() {{ "$@"; }}; out="{out}"; LIMIT={limit + 1}; '
             f'COLLECTED={together}\n{driver.COLLECT}\ncollect "{work}"\n')
    subprocess.run(["sh", "-c", shell], input="".join(f"{p}\n" for p in paths), text=True,
                   env=env, check=True, timeout=60)
    files = {f"files/{f.name}": f.read_bytes() for f in (out / "files").iterdir()}
    return Outputs(files).collected()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "work" / "reports").mkdir(parents=True)
    return tmp_path / "work"


def test_whole_files_are_read_back_with_their_paths(tmp_path: Path, work: Path) -> None:
    (work / "cov.json").write_text('{"totals": {"percent_covered": 81.5}}')
    (work / "reports" / "empty.json").write_text("")
    found = collect(tmp_path, ["cov.json", "reports/empty.json"])
    assert found == {"cov.json": '{"totals": {"percent_covered": 81.5}}',
                     "reports/empty.json": ""}


def test_a_read_cut_short_is_left_out_never_kept_as_the_whole_file(
        tmp_path: Path, work: Path) -> None:
    (work / "cov.json").write_text('{"totals": {"percent_covered": 81.5}}')
    assert collect(tmp_path, ["cov.json"], dd_stops_at=12) == {}


def test_a_short_read_of_a_file_no_longer_than_it_is_kept(tmp_path: Path, work: Path) -> None:
    """Twin: the same `dd` that stops at 12 bytes reads a 12-byte report whole."""
    (work / "cov.json").write_text("x" * 12)
    assert collect(tmp_path, ["cov.json"], dd_stops_at=12) == {"cov.json": "x" * 12}


def test_a_file_past_the_limit_is_left_out_and_one_at_it_is_kept(
        tmp_path: Path, work: Path) -> None:
    (work / "big.json").write_text("b" * 1001)
    (work / "full.json").write_text("f" * 1000)
    assert collect(tmp_path, ["big.json", "full.json"], limit=1000) == {"full.json": "f" * 1000}


def test_past_what_all_may_hold_together_a_file_is_left_out(tmp_path: Path, work: Path) -> None:
    for name in ("a", "b", "c"):
        (work / name).write_text(name * 600)
    assert collect(tmp_path, ["a", "b", "c"], together=1300) == {"a": "a" * 600, "b": "b" * 600}


def test_a_link_a_fifo_a_directory_or_nothing_is_not_read(tmp_path: Path, work: Path) -> None:
    (work / "target.json").write_text("{}")
    (work / "link.json").symlink_to(work / "target.json")
    os.mkfifo(work / "fifo.json")
    (work / "dir.json").mkdir()
    found = collect(tmp_path, ["link.json", "fifo.json", "dir.json", "none.json",
                               "target.json"])
    assert found == {"target.json": "{}"}
