"""`bakeoff-sandbox demo`: the whole loop on the bundled example, through the real CLI,
with the exact outcome the example is built to produce; then its REPORT.html in the real
browser image with no network (issue 23; tests/integration/report_browser.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rig.report import read_observation
from rig.report.page import CSP, flag_summary
from rig.report.pairs import Pair, RankInterval
from runner.cli.app import main
from runner.commands import demo as demo_mod
from runner.containers.backend import LABEL_EXPERIMENT
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.containers.kube.about import ACCEPTED_PIDS
from tests.integration import create_spy
from tests.integration.helpers import flat_record, git
from tests.integration.installed import Installed
from tests.integration.kubelet_lab import on_a_node
from tests.integration.registry_lab import Registry, images_built, served
from tests.integration.remote_engine import RemoteEngine, copy_image
from tests.integration.report_browser import (
    PAGE_URL,
    chart_names,
    keep_artifacts,
    open_report,
    png_size,
)
from tests.unit.html_page import numbers_compared, parse
from tests.unit.test_report_page import CHART_NAMES, RANK_CHART

ROOT = Path(__file__).resolve().parents[2]
__all__ = ["images_built", "served"]  # the registry lab's fixtures, used here
DIGEST_REF = re.compile(r"^[^@ ]+/bakeoff/[a-z0-9._/-]+@sha256:[0-9a-f]{64}$")
CGROUP_V1 = not Path("/sys/fs/cgroup/cgroup.controllers").exists()  # the engine's, if local


@dataclass(frozen=True)
class Demo:
    keep: Path
    done: subprocess.CompletedProcess[str]

    @property
    def state(self) -> Path:
        return self.keep / "repo" / ".bakeoff" / "horizon"


@pytest.fixture(scope="module")
def local_demo(engine: Engine, built_images: dict[str, BuiltImage],
               installed_tool: Installed, tmp_path_factory: pytest.TempPathFactory) -> Demo:
    """The demo on this machine's engine, once for the module (the second engine's run is
    compared with it), run by the installed wheel's `bakeoff-sandbox` from a new
    directory, with no PYTHONPATH and no BAKEOFF_* variable (issue 34): the whole loop
    from the files the wheel carries."""
    keep = tmp_path_factory.mktemp("local") / "demo"
    done = installed_tool.run("demo", "--keep", str(keep),
                              cwd=tmp_path_factory.mktemp("elsewhere"), timeout=900)
    if done.returncode != 0:  # a demo that stopped leaves its `up` behind for a resume
        engine.remove_labelled({LABEL_EXPERIMENT: "horizon"})
    assert done.returncode == 0, done.stderr[-3000:]
    return Demo(keep, done)


def test_demo_runs_the_whole_loop_with_the_expected_outcome(
        engine: Engine, local_demo: Demo, browser_image: BuiltImage,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    keep, done, state = local_demo.keep, local_demo.done, local_demo.state
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
    which_arm_is_better(state, obs)
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
    names = [*chart_names([r.change for r in obs.rounds], CHART_NAMES[:2]),  # no gateway
             RANK_CHART]                                                       # usage
    seen = open_report(engine, browser_image, (state / "REPORT.html").read_bytes(), names)
    assert seen.exit_code == 0, seen.stderr_tail
    assert seen["requests"] == [{"method": "GET", "url": PAGE_URL, "resource_type": "document"}]
    assert (seen["console"], seen["page_errors"]) == ([], [])
    assert seen["charts"] == {"found": dict.fromkeys(names, 1), "img_roles": 5}
    assert seen["pairs"] == {"matrices": {MATRIX.format(r.change): DEMO_MATRIX
                                          for r in obs.rounds},
                             "paint": DEMO_PAINT, "ranks": DEMO_RANKS}
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


def test_the_demo_reports_each_arms_headroom(local_demo: Demo) -> None:
    """Issue 33, item 4: every sample's record holds what its container used and the limits
    its cgroup enforced ([limits] of examples/horizon: 1024 MiB, one CPU, 256 pids); each
    arm's worst headroom is in OBSERVATION.json, RESULTS.md and REPORT.html, and no arm of
    the demo comes near its memory limit."""
    state = local_demo.state
    records = [flat_record(p) for p in sorted(state.glob("stages/*/samples/*/*/*.json"))]
    assert len(records) == 2 * 5 * 9
    assert {(r["usage"]["source"], json.dumps(r["usage"]["allocation"], sort_keys=True))
            for r in records} == {("cgroup-v1" if CGROUP_V1 else "cgroup-v2", json.dumps(
                {"memory_reserved_bytes": 0, "memory_limit_bytes": 1024 * 1024 * 1024,
                 "cpu_quota": 1.0, "cpu_weight": 1024 if CGROUP_V1 else 100,
                 "pids_limit": 256}, sort_keys=True))}
    assert all(0 < r["usage"]["memory_peak_bytes"] < 0.5 * 1024 ** 3 and r["usage"]["cpu_s"] > 0
               for r in records)
    obs = read_observation(state / "OBSERVATION.json")
    for round_ in obs.rounds:
        assert not [f for f in round_.flags if f.startswith(("near_limit", "infra_asym"))]
        for arm in round_.arms:
            assert arm.headroom is not None and arm.headroom.limit_mib == 1024.0, arm.arm
            assert (arm.headroom.samples, arm.headroom.measured, arm.headroom.near_limit) == (
                9, 9, [])
    results = (state / "RESULTS.md").read_text()
    rows = [line for line in results.split("## Headroom (memory and CPU per sample)")[1]
            .split("\n## ")[0].splitlines() if line.startswith("| cap-horizon |")
            or line.startswith("| horizon-units |")]
    assert len(rows) == 2 * 5 and all(" / 1024 MiB, " in row for row in rows)
    page = parse((state / "REPORT.html").read_text(encoding="utf-8"))
    assert [sorted(row[0].text for row in page.tables[f"r{i}-headroom-table"].rows[1:])
            for i in (1, 2)] == [sorted(a.arm for a in r.arms) for r in obs.rounds]


# --- which arm is better, and how sure (issue 33) ------------------------------------------
# Every arm of the demo is all or nothing on the success criterion (fixer and fixer-graft
# 3/3, control, cheat and broken 0/3, in both changes): at 3 samples, fixer and
# fixer-graft are not distinguishable (and no number of samples would tell equal observed
# rates apart); fixer and control are.

SAME = "+0.00 [-0.56, +0.56]\nnot distinguishable at these samples"
MATRIX = ("Pairs of change {}: success pass-rate of the row's arm minus the column's, with "
          "its 95 % interval (Newcombe), and the verdict")
DEMO_MATRIX = [  # as the browser shows it: each row's cells, then its header
    [],
    ["", "-1.00 [-1.00, -0.21]\nfixer better", "-1.00 [-1.00, -0.21]\nfixer-graft better",
     SAME, SAME, "control"],
    ["", "", SAME, "+1.00 [+0.21, +1.00]\nfixer better", "+1.00 [+0.21, +1.00]\nfixer better",
     "fixer"],
    ["", "", "", "+1.00 [+0.21, +1.00]\nfixer-graft better",
     "+1.00 [+0.21, +1.00]\nfixer-graft better", "fixer-graft"],
    ["", "", "", "", SAME, "cheat"],
    ["", "", "", "", "", "broken"]]
DEMO_PAINT = {"heat-none": "rgb(244, 244, 244)", "heat-4 heat-column": "rgb(233, 163, 163)",
              "heat-0 heat-neither": "rgb(236, 236, 236)",
              "heat-4 heat-row": "rgb(159, 212, 159)"}
DEMO_RANKS = [[], ["3", "3", "0.00", "control"], ["1", "1", "1.00", "fixer"],
              ["1", "1", "1.00", "fixer-graft"], ["3", "3", "0.00", "cheat"],
              ["3", "3", "0.00", "broken"]]
APART = (-0.561497, 0.561497)


def which_arm_is_better(state: Path, obs: Any) -> None:
    """OBSERVATION.json's pairwise, rank_interval and paired; RESULTS.md's and the
    scorecard's lines, exact."""
    for round_ in obs.rounds:
        pairs = {(p.a, p.b): p for p in round_.pairwise}
        assert len(pairs) == 10  # every pair of the five valid arms
        assert pairs["fixer", "fixer-graft"] == Pair(
            a="fixer", b="fixer-graft", difference=0.0, ci95=APART,
            verdict="not_distinguishable", samples_needed=None)
        assert pairs["control", "fixer"] == Pair(
            a="control", b="fixer", difference=-1.0, ci95=(-1.0, -0.205923),
            verdict="b_better")
        assert round_.rank_interval == {
            arm: RankInterval(low=low, high=low, first=float(low == 1)) for arm, low in [
                ("control", 3), ("fixer", 1), ("fixer-graft", 1), ("cheat", 3), ("broken", 3)]}
    paired = obs.paired
    assert (paired.arms, paired.seed, paired.resamples) == (
        ["control", "fixer", "fixer-graft", "cheat", "broken"], 33, 1000)
    across = {(p.a, p.b): p for p in paired.pairs}
    assert [(p.wins, p.losses, p.ties, p.sign_p, p.mean_difference, p.ci95, p.verdict)
            for p in (across["fixer", "fixer-graft"], across["control", "fixer"])] == [
        (0, 0, 2, 1.0, 0.0, (0.0, 0.0), "not_distinguishable"),
        (0, 2, 0, 0.5, -1.0, (-1.0, -1.0), "b_better")]
    results = (state / "RESULTS.md").read_text(encoding="utf-8")
    for change in ("cap-horizon", "horizon-units"):
        assert (f"- **{change}**: the winner fixer is **not distinguishable** from the "
                "runner-up fixer-graft at these samples (success 1.00 against 1.00, fixer - "
                "fixer-graft 0.00 [-0.56, +0.56]).") in results
        assert (f"- {change}: fixer and fixer-graft passed at the same rate: no number of "
                "samples tells them apart on the success criterion.") in results
    assert "| control | fixer | -1.00 [-1.00, -0.21] | fixer better | — |" in results
    assert ("| fixer | fixer-graft | 0.00 [-0.56, +0.56] | not distinguishable at these "
            "samples | never: the same observed pass-rate |") in results
    assert "| control | fixer | 0 / 2 / 0 | 0.5 | -1.00 [-1.00, -1.00] | fixer better |" \
        in results
    assert "| fixer-graft | 1-1 | 100.0 % |" in results
    card = (state / "stages" / "cap-horizon" / "SCORECARD.md").read_text(encoding="utf-8")
    assert "## Pairs" in card and ("| control | fixer | -1.00 [-1.00, -0.21] | fixer better "
                                   "| — |") in card


# --- the same demo on a second engine (issue 24) -----------------------------------------

def outcome(state: Path) -> dict[str, Any]:
    """What a reader compares between two runs of the demo: per change the winner, the
    ranking, every arm's results, scores and total, the flags and grafts, and every
    sample's verdict and reason (not commits or image IDs: a commit carries its time, an
    image built on another engine its own ID)."""
    obs = read_observation(state / "OBSERVATION.json")
    rounds = [{
        "change": r.change, "winner": r.winner, "flags": r.flags,
        "baseline": (r.baseline.pass_rate, r.baseline.verdicts),
        "ranking": [a.arm for a in sorted(r.arms, key=lambda a: -a.total)],
        "arms": {a.arm: (a.results.model_dump(), a.scores.model_dump(), a.total, a.valid,
                         a.harness_touched, a.marks) for a in r.arms},
        "grafts": [(g.from_arm, g.what, g.verified) for g in r.grafts]} for r in obs.rounds]
    samples = {str(path.relative_to(state)): (rec["verdict"], rec["reason"], rec["counts"])
               for path in sorted(state.glob("stages/*/samples/*/*/*.json"))
               for rec in [flat_record(path)]}
    return {"rounds": rounds, "samples": samples}


def test_the_demo_on_a_second_engine_ranks_and_scores_as_on_this_one(
        engine: Engine, built_images: dict[str, BuiltImage], local_demo: Demo,
        remote_engine: RemoteEngine, tmp_path: Path) -> None:
    """`DOCKER_HOST` at an engine that shares no disk with this machine: the bundled demo's
    whole loop (up, dispatch, score, merge, report; Postgres, the judge, the grafts) gives
    the same ranking, verdicts and scores as on this machine's engine; every container it
    made there (each create request, read as it was sent) binds no path of any host; then
    `reproduce`, `rescore`, `up`/`status`/`down` and `gc` against it."""
    remote = remote_engine.engine
    for name in ("base", "python", "postgres"):  # imported through the API; the rest is
        copied = copy_image(engine, remote, built_images[name].tag)  # built there
        assert copied == built_images[name].image_id
    creates = tmp_path / "creates.jsonl"
    keep = tmp_path / "demo"
    environ = {**os.environ, "DOCKER_HOST": remote_engine.url, "PYTHONPATH": str(ROOT)}

    def bakeoff(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tests.integration.create_spy", str(creates), *args],
            cwd=keep if keep.exists() else ROOT, env=environ, capture_output=True, text=True,
            timeout=timeout, check=False)

    done = bakeoff("demo", "--keep", str(keep), timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    state = keep / "repo" / ".bakeoff" / "horizon"
    assert outcome(state) == outcome(local_demo.state)
    info = remote_engine.info()
    where = {"host": remote_engine.url, "id": info["ID"], "name": info["Name"]}
    records = [flat_record(p) for p in state.glob("stages/*/samples/*/*/*.json")]
    assert len(records) == 2 * 5 * 9 and {json.dumps(r["engine"]) for r in records} == {
        json.dumps(where)}
    # Every sample ran in an image of the second engine's (imported or built there).
    there = {i.id for i in remote.client.images.list()}
    assert {r["image_id"] for r in records} <= there and len(records) == 90

    def inspected() -> list[dict[str, Any]]:
        made = create_spy.read(creates)
        assert made and {m["engine"] for m in made} == {
            remote_engine.url.replace("tcp://", "http://")}
        return made
    made = inspected()
    assert [(m["name"], create_spy.host_paths(m)) for m in made
            if create_spy.host_paths(m)] == []
    assert engine.labelled("container", {LABEL_EXPERIMENT: "horizon"}) == []  # none here

    # reproduce: the same verdict, in a container re-created on the second engine; a
    # command in it through the docker CLI (DOCKER_HOST honoured there too).
    again = bakeoff("reproduce", "cap-horizon/fixer/success/1")
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "reproduced: the same verdict, counts and exit code" in again.stdout
    fixer = next(a for a in read_observation(state / "OBSERVATION.json").rounds[0].arms
                 if a.arm == "fixer")
    shown = bakeoff("reproduce", "cap-horizon/fixer/success/1", "--", "cat",
                    "src/horizon/db.py")
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert shown.stdout.rstrip("\n") == git(keep / "repo", "show",
                                            f"{fixer.commit}:src/horizon/db.py")
    rescored = bakeoff("rescore", "--change", "cap-horizon", "--arm", "fixer")
    assert rescored.returncode == 0, rescored.stderr[-2000:]
    assert "9 samples re-scored: 0 verdicts changed." in rescored.stdout

    # up / status / down: the state and status name the engine; down leaves nothing.
    staged = bakeoff("up", "--change", "horizon-units", "--refreeze",  # its base moved on
                     "--allow-passing-baseline")  # to the merged head, which passes
    assert staged.returncode == 0, staged.stderr[-2000:]
    status = bakeoff("status")
    assert status.returncode == 0 and f"engine: {remote_engine.url} ({info['Name']}, ID " \
        f"{info['ID'][:12]})" in status.stdout + status.stderr
    assert remote.labelled("container", {LABEL_EXPERIMENT: "horizon"}) != []
    assert bakeoff("down").returncode == 0
    left = [remote.labelled(kind, {LABEL_EXPERIMENT: "horizon"})
            for kind in ("container", "network", "volume")]
    assert left == [[], [], []]
    swept = bakeoff("gc")
    assert swept.returncode == 0, swept.stderr[-2000:]
    assert [(m["name"], create_spy.host_paths(m)) for m in inspected()
            if create_spy.host_paths(m)] == []


# --- the same demo on a cluster (issue 36) -------------------------------------------------

def test_the_demo_on_a_cluster_ranks_and_scores_as_on_this_one(
        engine: Engine, local_demo: Demo, served: Registry, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`engine = "kubernetes"`: the bundled demo's whole loop (the cluster's proofs, up,
    dispatch, score, merge, report; Postgres administered by psql's held exec, the judge,
    the grafts), then `reproduce` and `rescore`, against the emulator of the API, whose
    Pods a node of this machine's docker engine runs from their specs
    (tests/integration/kubelet_lab.py), every image pushed to a real registry and run by
    its digest: the same ranking, verdicts and scores as on this machine's engine, the
    same verdicts again, and nothing left on the cluster."""
    with on_a_node(engine, tmp_path, monkeypatch) as (emulator, node):
        manifest = demo_mod.prepare(tmp_path / "example")
        manifest.write_text('engine = "kubernetes"\n' + manifest.read_text() + (
            f'\n[kubernetes]\nregistry = "{served.address}"\naccept_node_pids_limit = true\n'
            "parallelism = 2\ncpus = 2\nvolume_mb = 16\n"))
        code = main(["run", "-f", str(manifest)])
        said = capsys.readouterr().err
        assert code == 0, said[-3000:]
        state = manifest.parent / "repo" / ".bakeoff" / "horizon"
        assert outcome(state) == outcome(local_demo.state)
        records = [flat_record(p) for p in state.glob("stages/*/samples/*/*/*.json")]
        assert len(records) == 2 * 5 * 9
        assert {r["image_ref"].split("/")[0] for r in records} == {served.address}
        assert all(DIGEST_REF.search(r["image_ref"]) for r in records)  # by digest only
        assert {r["engine"]["accepted_pids"] for r in records} == {ACCEPTED_PIDS}
        roles = {role for _, role in node.played}
        assert {"database", "arm", "sample", "cluster-probe"} <= roles, roles
        assert emulator.objects == {}  # every Pod, policy, claim, Service and Secret
        # A sample re-created on the cluster from its record (its image by digest, its
        # database a fresh one), and the fixer's samples re-scored: what they were.
        for args, said in ((["reproduce", "cap-horizon/fixer/success/1"],
                            "reproduced: the same verdict, counts and exit code"),
                           (["rescore", "--change", "cap-horizon", "--arm", "fixer"],
                            "9 samples re-scored: 0 verdicts changed.")):
            code = main([*args, "-f", str(manifest)])
            shown = capsys.readouterr()
            assert code == 0, shown.out[-2000:] + shown.err[-2000:]
            assert said in shown.out, shown.out[-2000:]
        # What they leave is the experiment's deny-all (inert: it closes only the
        # experiment's Pods; removing it while another command's Pods rely on it would
        # open them): `gc` takes it, as `down` would.
        assert [name for _, name in emulator.objects] == ["horizon-deny-all"]
        assert main(["gc", "-f", str(manifest)]) == 0
        shown = capsys.readouterr()
        assert ("gc: removed 0 containers, 1 network policies, 0 volume claims, 0 services, "
                "0 secrets at ") in shown.err
        assert emulator.objects == {}
    assert engine.labelled("container", {LABEL_EXPERIMENT: "horizon"}) == []
