"""The image build view: a build stream becomes one line per image, every line goes to the
image's log, a failure shows the log's tail and path (no docker: a captured stream)."""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from rig.parsers.base import plain as without_escapes
from runner.cli.progress import ImageBuildView
from runner.containers import images
from runner.containers.images import BuiltImage, buildlog, catalog, reporters
from runner.errors import InfraError

STREAM = Path(__file__).parent / "build_streams" / "postgres-no-cache.txt"
IMAGE_ID = "sha256:075426756efc" + "0" * 52
LOG = r"/bakeoff-sandbox/logs/postgres-\d{8}-\d{6}-\d+\.log"


def captured() -> list[str]:
    """The stream lines of a real `--no-cache` build of images/postgres (282 lines)."""
    lines = STREAM.read_text(encoding="utf-8").splitlines()
    return [line for line in lines[1:] if line]


def chunks(lines: list[str]) -> Iterator[dict[str, Any]]:
    """What docker-py's decoded legacy build stream yields for those lines."""
    for line in lines:
        yield {"stream": line + "\n"}
        if line.startswith("Successfully built"):
            yield {"aux": {"ID": IMAGE_ID}}


def plain() -> Console:
    return Console(file=io.StringIO(), force_terminal=False, width=300)


def printed(console: Console) -> list[str]:
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue().splitlines()


def built(name: str, *, cached: bool = False) -> BuiltImage:
    return BuiltImage(name, catalog.tag_for(name), IMAGE_ID, "sha256:identity", cached)


@pytest.fixture(autouse=True)
def logs_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "bakeoff-sandbox" / "logs"


def build(view: ImageBuildView, name: str, lines: list[str]) -> tuple[str, Path]:
    """One image's build as images.build_image reports it: start, log, stream, done."""
    view.start(name)
    with reporters.open_log(name, view) as log:
        image_id = images.read_build_stream(name, chunks(lines), view, log)
    view.done(built(name))
    return image_id, log.path


def test_plain_view_prints_one_line_at_start_and_end_and_the_log_has_every_line() -> None:
    """Issue 12: `make demo` printed some 3,000 lines of apt output; now two per image."""
    console = plain()
    with ImageBuildView(console) as view:
        image_id, path = build(view, "postgres", captured())
    assert image_id == IMAGE_ID
    assert re.fullmatch(".*" + LOG, str(path))
    start, end = printed(console)
    assert start == f"building postgres, log {path}"
    assert re.fullmatch(rf"built postgres in \d+\.\ds: sha256:075426756efc, log {path}", end)
    # Every line, without the terminal escapes apt's stderr came with (a line that was
    # only an escape is none; a log and an error are read as text: issue 21's npm error
    # showed `^[[91m`).
    assert any("\x1b[" in line for line in captured())
    assert path.read_text(encoding="utf-8").splitlines() == [
        text for line in captured() if (text := without_escapes(line))]
    assert len(captured()) == 282


def test_each_image_built_is_two_lines_and_a_cache_hit_is_none() -> None:
    console = plain()
    with ImageBuildView(console) as view:
        view.start("base")
        view.done(built("base", cached=True))
        build(view, "postgres", captured())
        view.start("python")
        view.done(built("python", cached=True))
    assert [line.split(",")[0].split(" in ")[0] for line in printed(console)] == [
        "building postgres", "built postgres"]


def test_terminal_view_shows_the_current_step_never_the_apt_output() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    lines = captured()
    apt = next(i for i, line in enumerate(lines) if line.startswith("Get:6 "))
    with ImageBuildView(console) as view:
        view.start("postgres")
        with reporters.open_log("postgres", view) as log:
            images.read_build_stream("postgres", chunks(lines[:apt + 1]), view, log)
            assert view.progress is not None
            [task] = view.progress.tasks
            assert task.fields["image"] == "postgres"
            assert task.description == lines[3][:95] + "…"  # fits 120 columns
            assert lines[3].startswith("Step 3/13 : RUN mkdir -p ") and len(lines[3]) > 96
            images.read_build_stream("postgres", chunks(lines[apt + 1:]), view, log)
            assert view.progress.tasks[0].description == (
                "Step 13/13 : LABEL io.bakeoff.image=postgres")
        view.done(built("postgres"))
        assert view.progress is None  # the live line is gone, one `built` line stays
    shown = "\n".join(printed(console))
    assert re.search(rf"built postgres in \d+\.\ds: sha256:075426756efc, log \S*{LOG}", shown)
    assert "Get:6 " not in shown


def test_before_the_first_step_our_own_lines_are_the_step() -> None:
    """The base has no Dockerfile: its bootstrap's own lines are its steps."""
    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    with ImageBuildView(console) as view:
        view.start("base")
        view.line("base", "reusing rootfs /root/.cache/bakeoff-sandbox/base-bookworm.tar")
        view.line("base", "docker import base-bookworm.tar bakeoff/base:bookworm")
        assert view.progress is not None
        assert view.progress.tasks[0].description == (
            "docker import base-bookworm.tar bakeoff/base:bookworm")


def test_a_failed_build_shows_the_last_20_lines_and_the_log_path() -> None:
    console = plain()
    lines = captured()[:30]
    failing = [*chunks(lines), {
        "error": "The command '/bin/sh -c apt-get update' returned a non-zero code: 100",
        "errorDetail": {"code": 100}}]
    with ImageBuildView(console) as view:
        view.start("postgres")
        with pytest.raises(InfraError) as caught, reporters.open_log("postgres", view) as log:
            images.read_build_stream("postgres", iter(failing), view, log)
    what = ("building image postgres failed: The command '/bin/sh -c apt-get update' "
            "returned a non-zero code: 100")
    tail = "\n".join(f"    {line}" for line in lines[-20:])
    assert str(caught.value) == (
        f"{what}\n  last 20 lines of the build:\n{tail}\n  full log: {log.path}\n"
        "  fix: fix images/postgres/Dockerfile, then bakeoff-sandbox images build postgres")
    assert caught.value.exit_code == 3
    assert log.path.read_text(encoding="utf-8").splitlines() == [*lines, f"error: {what}"]
    assert printed(console) == [f"building postgres, log {log.path}"]


def test_only_the_newest_ten_logs_of_an_image_are_kept(logs_in_tmp: Path) -> None:
    logs_in_tmp.mkdir(parents=True)
    old = [logs_in_tmp / f"go-20260101-0000{i:02d}-7.log" for i in range(12)]
    other = logs_in_tmp / "gopher-20260101-000000-7.log"
    for age, path in enumerate([*old, other]):
        path.write_text("old\n")
        os.utime(path, (1_700_000_000 + age, 1_700_000_000 + age))
    with buildlog.BuildLog("go") as log:
        log.write("Step 1/2 : FROM bakeoff/base:bookworm")
    kept = sorted(p.name for p in logs_in_tmp.glob("go-*.log"))
    assert kept == sorted([*(p.name for p in old[3:]), log.path.name])
    assert other.exists()


def test_builds_started_on_first_use_go_to_the_installed_reporter() -> None:
    view = ImageBuildView(plain())
    assert reporters._FIRST_USE.get() is None
    with reporters.reporting(view):
        assert reporters._FIRST_USE.get() is view
    assert reporters._FIRST_USE.get() is None
