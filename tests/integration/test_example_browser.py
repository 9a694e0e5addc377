"""examples/horizon-ui through `run` (issue 22): browser criteria, on the real path.

Two changes whose success criteria drive the app's page in the real `bakeoff/browser`
image (Debian's Chromium, Playwright), in a container that joins each sample's fresh
server's network namespace and opens http://localhost:PORT; five scripted contestants.
One run is shared by the tests of this module."""

from __future__ import annotations

import json
import os
import secrets
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rig.report import read_observation
from rig.sample.record import SampleRecord
from runner.commands import demo
from runner.containers.backend import LABEL_EXPERIMENT
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from tests.integration.helpers import cli

ARMS = ("control", "fixer", "client-only", "breaker", "skipper")


class Run:
    def __init__(self, root: Path, name: str) -> None:
        self.root, self.name = root, name
        self.state = root / "repo" / ".bakeoff" / name

    def folder(self, change: str, arm: str) -> Path:
        return self.state / "stages" / change / "samples" / arm / "success"

    def records(self, change: str, arm: str) -> list[SampleRecord]:
        return [SampleRecord.model_validate_json(p.read_text())
                for p in sorted(self.folder(change, arm).glob("*.json"))]


@pytest.fixture(scope="module")
def run(engine: Engine, built_images: dict[str, BuiltImage],
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    root = demo.prepare(tmp_path_factory.mktemp("ui") / "example", "horizon-ui").parent
    name = f"ui-{secrets.token_hex(3)}"
    manifest = root / "bakeoff.toml"
    manifest.write_text(manifest.read_text().replace('"horizon-ui"', f'"{name}"')
                        .replace('"bakeoff/horizon-ui"', f'"bakeoff/{name}"'))
    try:  # a run that failed leaves its `up` behind: removed whatever happened
        done = cli(root, "run", timeout=2400)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        yield Run(root, name)
    finally:
        engine.remove_labelled({LABEL_EXPERIMENT: name})


def test_each_contestant_gets_its_exact_verdict_on_the_real_path(run: Run) -> None:
    """cap-ui: the fixer's server-side validator passes; the client-only fix passes the
    plain browser test but never calls the API (not_real_path); the breaker's page does
    not parse. passkeys: the honest implementation passes; the one that skips the
    signature check on the server accepts a forged passkey and fails by that test's id."""
    fail = ("FAIL", "tests_failed")
    expected = {
        "cap-ui": {"control": fail, "fixer": ("PASS", None),
                   "client-only": ("FAIL", "not_real_path"), "breaker": fail,
                   "skipper": fail},
        "passkeys": {"control": fail, "fixer": ("PASS", None), "client-only": fail,
                     "breaker": fail, "skipper": fail}}
    got = {change: {arm: {(str(r.verdict), r.reason) for r in run.records(change, arm)}
                    for arm in ARMS} for change in expected}
    assert got == {change: {arm: {want} for arm, want in arms.items()}
                   for change, arms in expected.items()}
    assert all(len(run.records(change, arm)) == 3 for change in expected for arm in ARMS)
    (client,) = {r.detail for r in run.records("cap-ui", "client-only")}
    assert client == ("the flow did not take the real path: POST /api/horizon 2xx: never "
                      "requested by the page")
    for record in run.records("passkeys", "skipper"):
        failed = {str(t["id"]) for t in record.tests if t["status"] == "failed"}
        assert failed == {"test_passkeys.py::test_a_passkey_signed_with_another_key_is_"
                          "refused[chromium]"}, record.detail
    observation = read_observation(run.state / "OBSERVATION.json")
    assert [r.winner for r in observation.rounds] == ["fixer", "fixer"]


def test_every_browser_sample_keeps_its_evidence_named_in_its_record(run: Run) -> None:
    """Screenshots and a Playwright trace per sample beside its log, named in the record
    with the browser's identity, the requests the page made (who answered each) and the
    expectations decided; SCORECARD.md links them."""
    for change in ("cap-ui", "passkeys"):
        for arm in ARMS:
            for record in run.records(change, arm):
                browsed = record.browser_run
                assert browsed is not None and record.browser is not None, record.sample
                assert browsed.identity["chromium"].startswith("Chromium 156.")
                assert browsed.identity["playwright"] == "1.65.2"
                # The browser's own limits (the engine here is this machine's).
                assert browsed.limits == {"cpus": min(2.0, os.cpu_count() or 1),
                                          "memory_mb": 1536, "pids": 512, "tmp_mb": 512,
                                          "out_mb": 96, "home_mb": 64}
                folder = run.folder(change, arm)
                assert browsed.trace == f"{record.n}.browser/trace.zip"
                with zipfile.ZipFile(folder / browsed.trace) as trace:
                    assert trace.testzip() is None and trace.namelist()
                assert browsed.screenshots and all(
                    (folder / s).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
                    for s in browsed.screenshots)
                requests = (folder / browsed.files["requests"]).read_text().splitlines()
                assert len(requests) == browsed.requests > 0
                assert [p.expectation for p in record.real_path] == [
                    f"{e} 2xx" for e in record.browser.expect_requests]
    fixer = run.records("cap-ui", "fixer")[0]
    assert [(p.met, p.detail) for p in fixer.real_path] == [
        (True, "POST /api/horizon 2xx: 3 answer(s) from the app's server (200)")]
    posts = [json.loads(line) for line in (run.folder("cap-ui", "fixer") / fixer.browser_run
                                           .files["requests"]).read_text().splitlines()
             if json.loads(line).get("method") == "POST"]  # type: ignore[union-attr]
    assert {(p["path"], p["status"], p["answered_by"]) for p in posts} == {
        ("/api/horizon", 200, "server")}
    card = (run.state / "stages" / "cap-ui" / "SCORECARD.md").read_text()
    assert "## Browser evidence" in card
    assert ("- cap-ui/client-only/success/1 (FAIL not_real_path): "
            "[trace](samples/client-only/success/1.browser/trace.zip)") in card
    contract = json.loads((run.state / "stages" / "cap-ui" / "contract.lock.json")
                          .read_text())["versions"][-1]["contract"]
    browser = contract["changes"][0]["success"]["browser"]
    assert (browser["file"], browser["expect_requests"]) == ("ui/test_cap.py",
                                                             ["POST /api/horizon"])
    assert browser["image"]["playwright"] == "1.65.2"
    assert browser["image"]["chromium"].startswith("Chromium 156.")


def test_reproduce_re_creates_the_app_and_the_browser_with_a_fresh_trace(run: Run) -> None:
    done = cli(run.root, "reproduce", "cap-ui/client-only/success/2", timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "reproduced: the same verdict, counts and exit code" in done.stdout
    fresh = sorted((run.state / "reproduce").glob("*-cap-ui-client-only-success-2/samples/"
                                                  "client-only/success/2.browser/trace.zip"))
    assert len(fresh) == 1 and zipfile.ZipFile(fresh[0]).testzip() is None


def test_a_graft_that_lost_a_test_is_dropped_without_running_its_other_samples(
        run: Run) -> None:
    """cap-ui's grafts: the breaker's and the client-only arm's app.js lose every test of
    the criterion, so each is dropped as soon as one sample shows it (the samples then
    under way finish, no other starts); the kept ones ran all six (3 success, 3 tests)."""
    stage = run.state / "stages" / "cap-ui"
    grafts = json.loads((stage / "merge.json").read_text())["grafts"]
    assert [(g["what"], g["verified"], g["kept"]) for g in grafts] == [
        ("horizonui/static/app.js", True, False), ("horizonui/static/app.js", True, False),
        ("horizonui/static/index.html", True, True),
        ("horizonui/static/summaries.js", True, True)]
    ran = [len(list((stage / "merge" / "samples" / f"graft-{n}").glob("*/*.json")))
           for n in range(1, 5)]
    workers = os.cpu_count() or 1
    assert all(1 <= n <= min(6, workers) for n in ran[:2]) and ran[2:] == [6, 6], ran
    for dropped in grafts[:2]:
        assert dropped["why"].startswith("regressed: success 1.00 -> 0.00; lost by id: "
                                         "success: 3 of 3 test(s) that passed before")
