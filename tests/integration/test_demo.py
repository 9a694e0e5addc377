"""`bakeoff-sandbox demo`: the whole loop on the bundled example, through the real CLI,
with the exact outcome the example is built to produce; then its REPORT.html in the real
browser image with no network (issue 23; tests/integration/report_browser.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rig.report import read_observation
from rig.report.page import CSP, flag_summary
from runner.containers.engine import LABEL_EXPERIMENT, Engine
from runner.containers.images import BuiltImage
from tests.integration.helpers import flat_record, git
from tests.integration.report_browser import (
    PAGE_URL,
    chart_names,
    keep_artifacts,
    open_report,
    png_size,
)
from tests.unit.html_page import numbers_compared, parse
from tests.unit.test_report_page import CHART_NAMES


def test_demo_runs_the_whole_loop_with_the_expected_outcome(
        engine: Engine, built_images: dict[str, BuiltImage], browser_image: BuiltImage,
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    keep = tmp_path / "demo"
    done = subprocess.run([sys.executable, "-m", "runner.cli", "demo", "--keep", str(keep)],
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    state = keep / "repo" / ".bakeoff" / "horizon"
    obs = read_observation(state / "OBSERVATION.json")  # validates abc-comparison/v2
    assert [r.change for r in obs.rounds] == ["cap-horizon", "horizon-units"]
    first, second = obs.rounds
    arms = {a.arm: a for a in first.arms}

    assert first.winner == "fixer"  # the correct fix with a test wins change 1
    assert first.baseline.pass_rate == 0.0
    assert arms["cheat"].scores.success == 0.0
    # The cheat rewrote the protected test and planted a conftest that prints a fake
    # summary at exit: every sample runs under the base's harness (its conftest removed,
    # the test restored): the success criterion failed honestly, and its checks measured
    # its code as it is (the unfixed code passes the other tests: PASS).
    def samples(arm: str, check: str) -> list[dict[str, object]]:
        return [flat_record(state / "stages" / "cap-horizon" / "samples" / arm / check /
                            f"{n}.json") for n in (1, 2, 3)]
    cheat = samples("cheat", "success")
    assert {(s["verdict"], s["reason"]) for s in cheat} == {("FAIL", "tests_failed")}
    assert [s["pinned"] for s in cheat] == [
        {"restored": [], "removed": ["conftest.py"], "bytecode": []}] * 3
    assert {(s["verdict"], s["reason"]) for s in samples("cheat", "tests")} == {
        ("PASS", None)}
    assert [s["pinned"]["removed"] for s in samples("cheat", "tests")] == [["conftest.py"]] * 3
    assert "harness_touched:cheat (conftest.py)" in first.flags
    assert not any(flag.startswith("spoofed:") for flag in first.flags)
    assert arms["cheat"].harness_touched == ["conftest.py"]
    # The ranking is the one the example is built to produce, the cheat last.
    assert [a.arm for a in sorted(first.arms, key=lambda a: -a.total)] == [
        "fixer", "fixer-graft", "control", "broken", "cheat"]
    broken = [flat_record(state / "stages" / "cap-horizon" / "samples" / "broken" /
                          "success" / f"{n}.json") for n in (1, 2, 3)]
    assert {(s["verdict"], s["reason"]) for s in broken} == {("FAIL", "build_failed")}
    assert arms["broken"].valid and arms["control"].valid
    assert arms["control"].results.success.pass_rate == 0.0

    assert [(g.from_arm, g.what, g.verified) for g in first.grafts] == [
        ("fixer-graft", "src/horizon/db.py", True)]
    repo = keep / "repo"
    first_head = json.loads((state / "stages" / "cap-horizon" / "merge.json").read_text())["head"]
    assert second.base_commit == first_head  # change 2 starts from the merged head
    assert git(repo, "show", f"{first_head}:src/horizon/db.py") == git(
        repo, "show", f"{arms['fixer-graft'].commit}:src/horizon/db.py")
    assert second.winner == "fixer"
    assert "effort_confounded" in first.flags
    assert engine.labelled("container", {LABEL_EXPERIMENT: "horizon"}) == []
    assert "artifacts:" in done.stderr and "| fixer |" in done.stdout
    # REPORT.html beside them (issue 23): every number of its tables is OBSERVATION's,
    # the winner is named, every sample of the grid has its details on the page.
    page = parse((state / "REPORT.html").read_text(encoding="utf-8"))
    assert numbers_compared(page, obs) == len(page.data)
    assert "Winner: fixer" in page.text
    grids = [t for t in page.tables.values() if t.caption.startswith("Samples of change")]
    cells = [c.text for t in grids for row in t.rows[2:] for c in row[1:]]
    assert len(grids) == 2 and len(cells) == 2 * 5 * 9
    assert not [c for c in cells if not c.startswith(("PASS", "FAIL"))]

    # ...and as a reader's browser shows it: opened from file:// in bakeoff/browser with no
    # network at all, it asks for nothing but itself and logs nothing; its charts are
    # images named by their titles, the winners are named, a sample opens from the grid.
    names = chart_names([r.change for r in obs.rounds], CHART_NAMES[:2])  # no gateway usage
    seen = open_report(engine, browser_image, (state / "REPORT.html").read_bytes(), names)
    assert seen.exit_code == 0, seen.stderr_tail
    assert seen["requests"] == [{"method": "GET", "url": PAGE_URL, "resource_type": "document"}]
    assert (seen["console"], seen["page_errors"]) == ([], [])
    assert seen["charts"] == {"found": dict.fromkeys(names, 1), "img_roles": 4}
    assert seen["winners"] == {
        "lines": ["Winner: fixer", "Winner: fixer"],
        "table": [[r.change, "fixer", "0.00", flag_summary(r)] for r in obs.rounds]}
    assert (seen["csp"], seen["scripts"]) == (CSP, 0)
    assert {name: (grid["rows"], grid["cells"]) for name, grid in seen["grids"].items()} == {
        t.caption: (2 + 5, 5 * 9) for t in grids}
    assert (seen["followed"]["visible"], seen["followed"]["open"]) == (True, True)
    assert png_size(seen.screenshot) == (1280, seen["height"])  # the whole page
    assert len(seen.screenshot) > 100_000
    keep_artifacts(seen, "report-demo", tmp_path_factory.getbasetemp())

