"""REPORT.html at scale in a reader's browser (issue 23): 100 arms x 3 changes x 3 samples,
generated without docker by bench/report_scale.py's own code, opened from file:// in the
real `bakeoff/browser` image with no network. (The demo's page is opened the same way at
the end of tests/integration/test_demo.py.) What it takes there is measured by
`bench/report_scale.py --browser` (docs/benchmarks.md), not asserted: a clock is no test."""

from __future__ import annotations

import pytest

from bench import report_scale
from rig.report.heatmap import MATRIX_ARMS
from rig.report.page import CSP
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from tests.integration.report_browser import (
    PAGE_URL,
    chart_names,
    keep_artifacts,
    open_report,
    png_size,
)
from tests.unit.test_report_page import CHART_NAMES, RANK_CHART

ARMS, CHANGES, SAMPLES = 100, 3, 3
CHECKS = len(report_scale.CHECKS)
GRID = ("Samples of change {}: the verdict of every sample, per arm and check (each links "
        "to its details)")
PAIRS = ("Pairs of change {}: success pass-rate of the row's arm minus the column's, with its "
         "95 % interval (Newcombe), and the verdict")


def test_a_report_of_100_arms_3_changes_and_3_samples_stays_usable_offline(
        engine: Engine, browser_image: BuiltImage,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every chart is there by role and exact name (the rank intervals' too), each change's
    sample grid has a row per arm and a cell per sample, its pair matrix is capped, a link
    of the last grid opens its sample; nothing is requested but the page, nothing logged;
    the first screen is kept (with the timings)."""
    run = report_scale.generate(tmp_path_factory.mktemp("scale"), ARMS, CHANGES, SAMPLES)
    html = report_scale.page_of(run).encode()
    names = [*chart_names(run.changes, CHART_NAMES), RANK_CHART]
    seen = open_report(engine, browser_image, html, names, full_page=False)
    assert seen.exit_code == 0, seen.stderr_tail
    assert seen["requests"] == [{"method": "GET", "url": PAGE_URL, "resource_type": "document"}]
    assert (seen["console"], seen["page_errors"]) == ([], [])
    assert (seen["csp"], seen["scripts"]) == (CSP, 0)
    assert seen["charts"] == {"found": dict.fromkeys(names, 1), "img_roles": 4 * CHANGES + 1}
    # issue 33: each change's pair matrix holds its first MATRIX_ARMS valid arms (a row
    # each: a cell per arm, then the row's header); the rank table every arm
    matrices = seen["pairs"]["matrices"]
    assert sorted(matrices) == sorted(PAIRS.format(change) for change in run.changes)
    widths = [0] + [MATRIX_ARMS + 1] * MATRIX_ARMS
    assert {name: [len(row) for row in rows] for name, rows in matrices.items()} == dict.fromkeys(
        matrices, widths)
    assert run.obs.paired is not None  # the arms valid in every change: a rank row each
    assert len(seen["pairs"]["ranks"]) == 1 + len(run.obs.paired.arms)
    assert seen["grids"] == {GRID.format(change): {"rows": 2 + ARMS,
                                                   "cells": ARMS * CHECKS * SAMPLES}
                             for change in run.changes}
    followed = seen["followed"]
    assert (followed["visible"], followed["open"]) == (True, True), followed
    assert png_size(seen.screenshot) == png_size(seen.sample) == (1280, 720)  # first screens
    assert len(html) > 5_000_000 and seen["height"] > 20_000  # the scale is real
    keep_artifacts(seen, "report-100-arms", tmp_path_factory.getbasetemp())
