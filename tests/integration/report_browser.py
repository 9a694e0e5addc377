"""REPORT.html opened in the real browser image (issue 23): the page, `report_check.py`
(the Playwright program that looks at it) and its query go into a browser container with
no network at all through the engine (`browser.inputs_archive`, put into a tmpfs volume
once the container runs: no host path is mounted), made by the choke point as every
browser container is (the sandbox user, no capability, a read-only root). What the
program saw comes back on its stdout (`browser.read_outputs`). Shared by the tests and
`bench/report_scale.py --browser`."""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.containers import browser, sandbox
from runner.containers.backend import LABEL_EXPERIMENT, Labels
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage

CHECK = Path(__file__).with_name("report_check.py")
PAGE = "REPORT.html"
PAGE_PATH = f"{browser.CRITERION_DIR}/{PAGE}"
PAGE_URL = f"file://{PAGE_PATH}"
INPUTS_MB = 64  # the inputs volume: the page (9 MB at 100 arms), the program, its query
INPUTS_WAIT_S = 30  # for the engine to put them in, once the container runs
PNG = b"\x89PNG\r\n\x1a\n"
# Where a run keeps its screenshots for people to look at: ignored by git (.gitignore's
# .state/), beside the copy under pytest's own temporary directory.
ARTIFACTS = Path(__file__).resolve().parents[2] / ".state" / "artifacts"


@dataclass(frozen=True)
class PageSeen:
    """What the program in the browser's container saw, and how its container ended."""

    exit_code: int
    seen: dict[str, Any]  # report_check.py's seen.json; {} when it wrote none
    screenshot: bytes     # the page as opened
    sample: bytes         # the screen once a sample was opened from the grid
    duration_s: float     # the container's start to its end, on the host's clock
    stderr_tail: str

    def __getitem__(self, key: str) -> Any:
        return self.seen[key]


def chart_names(changes: Sequence[str], kinds: Sequence[str]) -> list[str]:
    """The accessible names of the charts of `changes`: `kinds` are formats of one change
    (tests.unit.test_report_page.CHART_NAMES)."""
    return [kind.format(change) for change in changes for kind in kinds]


def open_report(engine: Engine, image: BuiltImage, html: bytes, charts: Sequence[str], *,
                full_page: bool = True, timeout_s: int = 300,
                experiment: str = "it-report") -> PageSeen:
    """`html` opened from file:// in a browser container of `image` with no network,
    looked at by report_check.py for `charts`; what it made (the container, the inputs
    volume: labelled `experiment-<random>`) is removed by label before it returns."""
    labelled = f"{experiment}-{secrets.token_hex(3)}"
    query = {"page": PAGE_PATH, "charts": list(charts), "full_page": full_page}
    inputs = {CHECK.name: CHECK.read_bytes(), PAGE: html,
              "query.json": json.dumps(query).encode()}
    argv = browser.after_inputs(sandbox.under_timeout(
        ["python", f"{browser.CRITERION_DIR}/{CHECK.name}",
         f"{browser.CRITERION_DIR}/query.json"], timeout_s), INPUTS_WAIT_S)
    try:
        volume = engine.create_volume(f"bakeoff-{labelled}-in", Labels(labelled, "inputs"),
                               size_mb=INPUTS_MB, owner=sandbox.SANDBOX_UID)
        spec = browser.container_spec(image.image_id, None, argv, Labels(labelled, "browser"),
                                      volume, limits=browser.BrowserLimits().on(engine),
                                      purpose="the report's browser")
        done = sandbox.run_to_end(engine, spec, sandbox.host_deadline(timeout_s) + INPUTS_WAIT_S,
                                  stdout=True, archive=browser.inputs_archive(inputs))
    finally:
        engine.remove_labelled({LABEL_EXPERIMENT: labelled})
    outputs = browser.read_outputs(done.stdout)
    seen = json.loads(outputs.files["seen.json"]) if "seen.json" in outputs.files else {}
    return PageSeen(done.exit_code, seen, outputs.files.get("screenshot.png", b""),
                    outputs.files.get("sample.png", b""), done.duration_s, done.stderr_tail)


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) of a PNG, read from its IHDR chunk; a PNG is asserted."""
    assert data[:8] == PNG and data[12:16] == b"IHDR", data[:16]
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def keep_artifacts(seen: PageSeen, name: str, temp: Path) -> None:
    """What a run keeps for people to look at, as `name`.png (the page as opened),
    `name`-sample.png and `name`.json (the page's height and timings), in
    `temp`/artifacts (pytest's temporary directory) and in ARTIFACTS; both screenshots
    are asserted PNGs."""
    for shot in (seen.screenshot, seen.sample):
        png_size(shot)
    facts = {"height": seen["height"], "timings": seen["timings"],
             "followed": seen["followed"], "container_s": seen.duration_s}
    for folder in (temp / "artifacts", ARTIFACTS):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.png").write_bytes(seen.screenshot)
        (folder / f"{name}-sample.png").write_bytes(seen.sample)
        (folder / f"{name}.json").write_text(json.dumps(facts, indent=1))
