"""What REPORT.html reads besides OBSERVATION.json (`runner.commands.evidence`,
`rig.report.evidence`): a log's head and tail (never read whole), pictures embedded up to
a cap and only when they are images inside the sample's folder, an arm's diff and commit
messages from git objects, and links only to files of the run directory."""

from __future__ import annotations

import json
import struct
import subprocess
import zlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import unquote

import pytest

from rig.report.evidence import (
    DIFF_FLOOR,
    DIFF_LIMIT,
    LOG_LINES,
    PICTURE_CAP_BYTES,
    diff_limit,
    log_excerpt,
    picture,
)
from rig.report.page import render_page
from rig.sample.record import BrowserRan
from runner.commands import evidence
from runner.store import layout
from runner.store.records import MergeRecord, save_merge
from tests.unit.html_page import parse
from tests.unit.test_report_page import PAYLOAD, observed
from tests.unit.test_score import record

STORED = Path(__file__).parent / "stored"


def png(width: int = 2, height: int = 2) -> bytes:
    """A real PNG (red pixels), made here."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2,
                                                              0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


# -- logs ---------------------------------------------------------------------------------


def test_a_short_log_shows_its_first_and_last_lines_and_counts_the_rest() -> None:
    lines = [f"line {n}\n".encode() for n in range(100)]
    data = b"".join(lines)
    head, tail = LOG_LINES
    shown = log_excerpt("1.log", len(data), data)
    assert shown.head == "".join(line.decode() for line in lines[:head])
    assert shown.tail == "".join(line.decode() for line in lines[-tail:])
    assert shown.omitted == sum(len(line) for line in lines[head:-tail])
    passed = log_excerpt("1.log", len(data), data, lines=(0, 3))
    assert passed.head == "" and passed.tail == "line 97\nline 98\nline 99\n"


def test_a_long_log_is_read_at_its_head_and_tail_only(tmp_path: Path) -> None:
    log = tmp_path / "1.log"
    log.write_bytes(b"first line\n" + b"x" * 5_000_000 + b"\nsecond last\nlast line\n")
    shown = evidence.read_log(tmp_path, log)
    assert shown is not None and shown.link == "1.log"
    assert shown.head == "first line\n"  # the cut line after it is not shown
    assert shown.tail == "second last\nlast line\n"
    assert shown.omitted == log.stat().st_size - len(shown.head) - len(shown.tail)


def test_terminal_escapes_and_control_characters_leave_the_log() -> None:
    raw = b"\x1b[31mred\x1b[0m \x1b]0;title\x07ok\x00\r\n\ttab\xff\n"
    assert log_excerpt("1.log", len(raw), raw).head == "red ok\n\ttab\ufffd\n"


# -- pictures -------------------------------------------------------------------------------


def test_a_png_is_embedded_as_a_data_uri() -> None:
    data = png()
    shown = picture("end.png", data)
    assert shown.uri is not None and shown.uri.startswith("data:image/png;base64,")
    assert shown.note == ""


@pytest.mark.parametrize(("data", "note"), [
    (b"<svg onload=alert(1)></svg>", "not embedded: not a PNG, JPEG or GIF image"),
    (b"\x89PNG\r\n\x1a\n" + b"\x00" * PICTURE_CAP_BYTES,
     f"not embedded: {PICTURE_CAP_BYTES + 8} bytes, over the {PICTURE_CAP_BYTES}-byte cap"),
])
def test_what_is_not_a_small_image_is_named_not_embedded(data: bytes, note: str) -> None:
    assert picture("end.png", data) == type(picture("x", b""))("end.png", None, note)


def test_only_regular_files_inside_the_sample_s_folder_are_read(tmp_path: Path) -> None:
    folder = tmp_path / "samples" / "fix" / "success"
    folder.mkdir(parents=True)
    (folder / "1.end.png").write_bytes(png())
    (tmp_path / "outside.png").write_bytes(png())
    (folder / "link.png").symlink_to(tmp_path / "outside.png")
    names = ["1.end.png", "../../../outside.png", "/etc/hostname", "link.png", "gone.png"]
    shown = evidence.read_pictures(folder, names)
    assert [p.uri is not None for p in shown[:4]] == [True, False, False, False]
    assert shown[-1].name == "1 more" and "4 pictures per sample" in shown[-1].note
    assert {p.note for p in shown[1:4]} == {"not embedded: not a file of the sample's folder"}


def test_a_browser_sample_names_its_screenshots_and_no_other_sample_does() -> None:
    """The report reads a sample's pictures from its record: a browser sample's
    screenshots, beside its log (issue 22); a command's sample keeps none."""
    plain = record("fix", "success", 1, "P")
    assert evidence.screenshots(plain) == []
    shots = ["1.browser/screenshots/001-t-end.png", "1.browser/screenshots/002-t-failed.png"]
    browsed = plain.model_copy(update={"browser_run": BrowserRan(
        image="bakeoff/browser:latest", image_id="sha256:b", screenshots=shots)})
    assert evidence.screenshots(browsed) == shots


# -- an arm's work from git -----------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env={"GIT_AUTHOR_NAME": "agent", "GIT_AUTHOR_EMAIL": "a@b",
                                          "GIT_COMMITTER_NAME": "agent",
                                          "GIT_COMMITTER_EMAIL": "a@b", "HOME": str(repo)}
                          ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "app.py").write_text("x = 1\n")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "base")
    (path / "app.py").write_text(f"x = 2  # {PAYLOAD}\n")
    git(path, "commit", "-q", "-am", f"fix: {PAYLOAD}")
    return path


def loaded_at(repo: Path) -> Any:
    return SimpleNamespace(repo_path=repo, path=repo / "bakeoff.toml",
                           manifest=SimpleNamespace(experiment=SimpleNamespace(name="exp")))


def test_an_arm_s_work_is_its_diff_and_messages_from_git(repo: Path) -> None:
    base, head = git(repo, "rev-parse", "HEAD~1"), git(repo, "rev-parse", "HEAD")
    work = evidence.work(loaded_at(repo), base, head)
    assert f"+x = 2  # {PAYLOAD}" in work.diff and work.diff_omitted == 0
    assert work.messages.startswith(f"{head[:7]} agent\nfix: {PAYLOAD}")
    cut = evidence.work(loaded_at(repo), base, head, limit=10)
    assert cut.diff == work.diff[:10] and cut.diff_omitted == len(work.diff) - 10
    assert cut.whole == f"git -C {repo} diff {base} {head}"
    missing = evidence.work(loaded_at(repo), base, "c0ffee")
    assert missing.diff == "" and "no diff to show: commit c0ffee or base" in missing.missing


@pytest.mark.parametrize(("diffs", "limit"), [
    (1, DIFF_LIMIT), (10, DIFF_LIMIT), (300, 27962), (10_000, DIFF_FLOOR)])
def test_the_diffs_share_a_budget_of_the_page(diffs: int, limit: int) -> None:
    """300 arms' diffs of 256 KiB would make a 75 MiB page: together they get 8 MiB."""
    assert diff_limit(diffs) == limit


# -- the run directory, read for the page ---------------------------------------------------


def stored_run(repo: Path) -> Path:
    """Round cap of `observed()` on disk: fix's samples and logs, its dispatch, a merge
    with a verification run, the scorecard."""
    directory = layout.experiment_dir(repo, "exp")
    stage = layout.stage_dir(directory, "cap")
    for check, letters in (("success", "PPP"), ("tests", "PPP"), ("compile", "PFF")):
        for n, letter in enumerate(letters, 1):
            path = layout.sample_record(stage, "fix", check, n)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(record("fix", check, n, letter).model_dump_json())
            layout.sample_log(stage, "fix", check, n).write_text(f"{check} {n}: {PAYLOAD}\n")
    verified = layout.sample_record(layout.merge_dir(stage), "graft-1", "success", 1)
    verified.parent.mkdir(parents=True)
    verified.write_text(record("graft-1", "success", 1, "P").model_dump_json())
    arm = json.loads((STORED / "arm-record-v1.json").read_text())
    layout.arm_dir(directory, "cap", "fix").mkdir(parents=True)
    layout.arm_record(directory, "cap", "fix").write_text(json.dumps(
        {**arm, "change": "cap", "last_line": PAYLOAD}))
    layout.dispatch_log(directory, "cap", "fix").write_text(f"agent says {PAYLOAD}\n")
    save_merge(stage, MergeRecord(change="cap", winner="fix", head="abc", note="fix merged",
                                  grafts=[]))
    layout.scorecard_file(stage).write_text("# Scorecard: cap\n")
    layout.results_file(directory).write_text("# Results\n")
    return directory


def test_the_page_links_only_to_files_of_the_run_directory(repo: Path) -> None:
    directory = stored_run(repo)
    found = evidence.collect(loaded_at(repo), observed())
    cap = found.rounds["cap"]
    assert sorted(cap.samples) == sorted(
        [f"cap/fix/{c}/{n}" for c in ("success", "tests", "compile") for n in (1, 2, 3)]
        + ["cap/graft-1/success/1"])
    assert cap.verification == {"graft-1": ("cap/graft-1/success/1",)}
    fix = cap.arms["fix"]
    assert fix.dispatch is not None and fix.dispatch.last_line == PAYLOAD
    assert fix.work is not None and "commit c0ffee or base ba5e is not in" in fix.work.missing
    assert found.reproduce == f"bakeoff-sandbox reproduce -f {repo / 'bakeoff.toml'}"
    page = parse(render_page(observed(), found))
    hrefs = [a["href"] for a in page.starts("a") if not a["href"].startswith("#")]
    # RESULTS.md (no OBSERVATION.json here), SCORECARD.md, 10 records, 9 logs (the
    # verification sample has none), the dispatch log
    assert len(hrefs) == 1 + 1 + 10 + 9 + 1 and "OBSERVATION.json" not in hrefs
    for href in hrefs:
        target = (directory / unquote(href)).resolve()
        assert target.is_file() and target.is_relative_to(directory.resolve()), href
    assert f"success 1: {PAYLOAD}" in page.text and f"agent says {PAYLOAD}" in page.text
    assert f"{found.reproduce} cap/fix/compile/2" in page.text
