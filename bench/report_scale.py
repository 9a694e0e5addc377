"""REPORT.html at scale: 100 arms x 3 changes x 3 samples, its size and its render time.

    .venv/bin/python bench/report_scale.py [--arms 100] [--changes 3] [--samples 3]
                                           [--repeat 3] [--chromium /usr/bin/chromium]
                                           [--browser [--full-page]] [--keep DIR]

Generates, in a temporary directory and without docker, what a run of that size leaves:
a git repository with the base and one commit per arm and change (a diff of about 60
lines each, made with `git fast-import`), and a run directory with every sample of the
success criterion and two checks (a record and a log of about 5 KiB, one in ten of
200 KiB), an arm record per arm and change, a merge record per change. The observation is
scored by the rubric's own code from those records (some arms invalid, flaky, with
gateway usage priced, unpriced or none). Then, `--repeat` times: `evidence.collect`
(reading the run directory and git), `render_page`, and the page written; it prints the
page's size and each phase's time. With `--chromium`, the page is also opened in headless
Chromium from file:// until its first screen is painted (`--screenshot`), against an
empty page as the browser's own start-up. With `--browser`, it is opened `--repeat` times
in the real `bakeoff/browser` image (built on first use), with no network, by the program
the tests use (tests/integration/report_check.py: load, the charts found by role and name,
a grid link followed, a screenshot of the first screen or, `--full-page`, the whole page),
each phase timed inside the container.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rig import rubric, standings
from rig.report import Observation, Round, observation, round_of
from rig.report.page import render_page
from rig.sample.record import SampleCounts, SampleRecord
from rig.sample.verdict import Verdict
from rig.wire import WireSummary
from runner.commands import evidence
from runner.manifest import Arm
from runner.store import layout
from runner.store.records import MergeRecord, save_merge

EXPERIMENT = "scale"
CHECKS = ("success", "tests", "compile")
WEIGHTS = SimpleNamespace(success=3, checks=2, diagnosis=2, plan=1, code_quality=1, intent=1)
CONTRACT = {"sha256": "ab" * 32, "threshold": 1.0,
            "weights": {"success": 3, "checks": 2, "diagnosis": 2, "plan": 1,
                        "code_quality": 1, "intent": 1}}
ARM_RECORD = {"record": "bakeoff-arm-dispatch/v1", "experiment": EXPERIMENT, "attempt": 1,
              "state": "finished", "run": "r1", "image_id": "sha256:" + "1" * 64,
              "egress": False, "adapter": "command", "env": {}, "secrets": [],
              "brief_path": "/tmp/bakeoff/brief.md", "brief_sha256": "2" * 64,
              "brief_file_sha256": "3" * 64, "dispatch_timeout_s": 600.0,
              "started_at": "2026-12-01T10:00:00.000+00:00",
              "finished_at": "2026-12-01T10:04:12.345+00:00", "duration_s": 252.3,
              "exit_code": 0, "commits": 1, "effort": "high", "effort_normalized": "high",
              "effort_provenance": "experiment_config", "effort_evidence": "stated",
              "mode": "single_agent", "control": False, "last_line": "committed"}


def git(repo: Path, *args: str, data: bytes | None = None) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], input=data, capture_output=True,
                          check=True).stdout.decode().strip()


def repository(root: Path, arms: list[str], changes: list[str]) -> tuple[Path, dict[str, str]]:
    """A repository with a base commit and, per change and arm, a commit on it; returns
    the base and `change/arm` -> commit id (marks of one fast-import stream)."""
    repo = root / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    base = "".join(f"def f{n}(x):\n    return x + {n}\n\n" for n in range(60)).encode()
    stream = [b"commit refs/heads/main\nmark :1\ncommitter b <b@b> 0 +0000\ndata 4\nbase\n",
              b"M 644 inline src/app.py\ndata %d\n%s\n" % (len(base), base)]
    marks: dict[str, int] = {}
    for change in changes:
        for arm in arms:
            mark = len(marks) + 2
            marks[f"{change}/{arm}"] = mark
            body = base.replace(b"return x + 1", f"return x * {mark}  # {arm}".encode()) + (
                "".join(f"# {arm} {change} line {n}\n" for n in range(40)).encode())
            message = f"{arm}: fix {change}\n\nWhat changed and why, in a few lines.\n".encode()
            stream.append(b"commit refs/heads/%s\nmark :%d\ncommitter b <b@b> 0 +0000\n"
                          b"data %d\n%s\nfrom :1\nM 644 inline src/app.py\ndata %d\n%s\n" % (
                              f"arms/{change}/{arm}".encode(), mark, len(message), message,
                              len(body), body))
    git(repo, "fast-import", "--quiet", f"--export-marks={root / 'marks'}",
        data=b"".join(stream))
    ids = dict(line.split() for line in (root / "marks").read_text().splitlines())
    return repo, {key: ids[f":{mark}"] for key, mark in marks.items()} | {"base": ids[":1"]}


def sample(change: str, arm: str, check: str, n: int, verdict: Verdict, commit: str,
           base: str) -> SampleRecord:
    failed = 0 if verdict is Verdict.PASS else 3
    return SampleRecord(
        sample=f"{change}/{arm}/{check}/{n}", change=change, arm=arm, check=check, n=n,
        commit=commit, base_commit=base, image="bakeoff/python:latest",
        image_id="sha256:" + "1" * 64, image_identity="sha256:" + "2" * 64,
        command="pytest -q -p no:cacheprovider tests", parser="pytest", env={"HOME": "/h"},
        mounts=[], limits={"cpus": 1.0}, network="none", db_schema=None, protected={},
        requires=["python3"], exit_code=0 if verdict is Verdict.PASS else 1, timed_out=False,
        oom_killed=False, program_present=True,
        counts=SampleCounts(passed=20 - failed, failed=failed, skipped=0, errors=0),
        tests_ran=20, verdict=verdict,
        reason={Verdict.PASS: None, Verdict.FAIL: "tests_failed",
                Verdict.RIG_ERROR: "tool_missing"}[verdict],
        rig_error="tool_missing" if verdict is Verdict.RIG_ERROR else None,
        detail="" if verdict is Verdict.PASS else f"exit 1: {20 - failed} passed, {failed} failed",
        started_at="2026-12-01T10:05:00+00:00", duration_s=1.4, log=f"{n}.log",
        tests=[{"id": f"tests/test_app.py::test_{t}", "status": "failed"} for t in range(failed)])


def log_text(rng: random.Random, name: str) -> str:
    lines = 20_000 if rng.random() < 0.1 else 80  # one in ten: 200 KiB, cut to head and tail
    return "".join(f"{name}: tests/test_app.py::test_{n} PASSED [{n % 100:3d}%]\n"
                   for n in range(lines))


def arm_of(arm: str, control: bool) -> Arm:
    return Arm.model_validate({"id": arm, "model": f"model-{arm}", "effort": "high",
                               "effort_normalized": "unknown" if control else "high",
                               "effort_provenance": "experiment_config",
                               "effort_evidence": "stated", "mode": "single_agent",
                               "command": "true", "control": control})


def usage_of(rng: random.Random, arm: str) -> WireSummary | None:
    kind = rng.random()
    if kind < 0.3:
        return None
    tokens = rng.randrange(10_000, 2_000_000)
    return WireSummary(records="gateway/records", requests=rng.randrange(5, 200),
                       input=tokens, output=tokens // 10,
                       cost_usd=None if kind < 0.45 else round(tokens * 3e-6, 6))


def stage(directory: Path, rng: random.Random, change: str, arms: list[str],
          commits: dict[str, str], samples: int) -> Round:
    """One change's stored files, and its round scored by the rubric."""
    stage_dir = layout.stage_dir(directory, change)
    scored = []
    for at, arm in enumerate(arms):
        by_check = {}
        for check in CHECKS:
            records = []
            for n in range(1, samples + 1):
                roll = rng.random()
                verdict = (Verdict.RIG_ERROR if roll < 0.01 else Verdict.FAIL if roll < 0.35
                           else Verdict.PASS)
                record = sample(change, arm, check, n, verdict, commits[f"{change}/{arm}"],
                                commits["base"])
                path = layout.sample_record(stage_dir, arm, check, n)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(record.model_dump_json())
                layout.sample_log(stage_dir, arm, check, n).write_text(
                    log_text(rng, record.sample))
                records.append(record)
            by_check[check] = rubric.check_result(check, records)
        judged = rubric.JudgeScores(*(rubric.DimScore(rng.randrange(6), "e") for _ in range(4)))
        usage = usage_of(rng, arm)
        scored.append(rubric.score_arm(
            arm_of(arm, at == 0), by_check["success"],
            {c: by_check[c] for c in CHECKS[1:]}, judged, WEIGHTS,
            dispatched=rubric.Dispatched(arm_of(arm, at == 0).identity(), usage=usage)))
        layout.arm_dir(directory, change, arm).mkdir(parents=True, exist_ok=True)
        layout.arm_record(directory, change, arm).write_text(_arm_json(change, arm, commits))
        layout.dispatch_log(directory, change, arm).write_text(f"{arm}: working\n" * 30)
    decision = standings.decide_winner(scored, 1.0)
    save_merge(stage_dir, MergeRecord(change=change, winner=decision.winner, head=commits["base"],
                                      note=f"{decision.winner} merged", grafts=[]))
    return round_of(change, commits["base"], 0.0, [Verdict.FAIL] * samples, scored,
                    decision.winner, [], standings.flags(scored, decision), decision.tie)


def _arm_json(change: str, arm: str, commits: dict[str, str]) -> str:
    return json.dumps({**ARM_RECORD, "change": change, "arm": arm, "container": f"c-{arm}",
                       "network": f"n-{arm}", "command": f"sh /agents/{arm}.sh",
                       "base_commit": commits["base"], "commit": commits[f"{change}/{arm}"],
                       "model": f"model-{arm}"})


def chromium_seconds(binary: str, page: Path) -> float:
    """Headless Chromium opening `page` from disk until its first screen is painted."""
    started = time.perf_counter()
    subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu",
                    "--window-size=1280,900", f"--screenshot={page.parent / 'shot.png'}",
                    page.as_uri()], capture_output=True, check=True, timeout=300)
    return time.perf_counter() - started


@dataclass(frozen=True)
class Generated:
    """A generated run: its repository and run directory, the observation scored from its
    records, and the stand-in for the loaded manifest that `evidence.collect` reads."""

    repo: Path
    directory: Path
    changes: list[str]
    obs: Observation
    loaded: Any


def generate(root: Path, arms: int, changes: int, samples: int) -> Generated:
    """A run of `arms` x `changes` x CHECKS x `samples` in `root` (no docker)."""
    arm_ids = [f"arm-{n:03d}" for n in range(arms)]
    change_ids = [f"change-{n}" for n in range(1, changes + 1)]
    repo, commits = repository(root, arm_ids, change_ids)
    directory = layout.experiment_dir(repo, EXPERIMENT)
    rng = random.Random(23)
    rounds = [stage(directory, rng, c, arm_ids, commits, samples) for c in change_ids]
    loaded: Any = SimpleNamespace(repo_path=repo, path=root / "bakeoff.toml",
                                  manifest=SimpleNamespace(
                                      experiment=SimpleNamespace(name=EXPERIMENT)))
    return Generated(repo, directory, change_ids,
                     observation(EXPERIMENT, CONTRACT, rounds), loaded)


def page_of(run: Generated) -> str:
    """REPORT.html of `run`, as `report` makes it: the evidence collected, the page rendered."""
    return render_page(run.obs, evidence.collect(run.loaded, run.obs))


def measure(args: argparse.Namespace, root: Path) -> None:
    started = time.perf_counter()
    run = generate(root, args.arms, args.changes, args.samples)
    records = sum(1 for _ in run.directory.rglob("*.json"))
    print(f"generated {args.arms} arms x {args.changes} changes x {len(CHECKS)} checks x "
          f"{args.samples} samples ({records} records) in {time.perf_counter() - started:.1f} s")
    page = layout.report_file(run.directory)
    timings: dict[str, list[float]] = {"collect": [], "render": [], "write": []}
    for _ in range(args.repeat):
        at = time.perf_counter()
        found = evidence.collect(run.loaded, run.obs)
        timings["collect"].append(time.perf_counter() - at)
        at = time.perf_counter()
        html = render_page(run.obs, found)
        timings["render"].append(time.perf_counter() - at)
        at = time.perf_counter()
        page.write_text(html, encoding="utf-8")
        timings["write"].append(time.perf_counter() - at)
    size = page.stat().st_size
    print(f"REPORT.html: {size:,} bytes ({size / 2**20:.1f} MiB)")
    for phase, seen in timings.items():
        print(f"{phase:8} {spread(seen)}")
    if args.chromium:
        empty = root / "empty.html"
        empty.write_text("<!DOCTYPE html><title>x</title>")
        loads = [chromium_seconds(args.chromium, page) for _ in range(args.repeat)]
        idle = [chromium_seconds(args.chromium, empty) for _ in range(args.repeat)]
        print(f"chromium, opened to its first screen: the page median "
              f"{statistics.median(loads):.2f} s (range {min(loads):.2f}-{max(loads):.2f}), "
              f"an empty page {statistics.median(idle):.2f} s (the browser's own start-up)")
    if args.browser:
        in_browser(run, page.read_bytes(), args.repeat, args.full_page)


def spread(seen: list[float]) -> str:
    return (f"median {statistics.median(seen):6.2f} s  range {min(seen):.2f}-{max(seen):.2f} s"
            f"  ({len(seen)} runs)")


def in_browser(run: Generated, html: bytes, repeat: int, full_page: bool) -> None:
    """The page opened `repeat` times in the real `bakeoff/browser` image, with no network
    (tests/integration/report_check.py, as the tests open it); each phase's time on the
    container's clock, the container's whole life on the host's."""
    from runner.containers import images
    from runner.containers.engine import Engine
    from tests.integration.report_browser import chart_names, open_report
    from tests.unit.test_report_page import CHART_NAMES

    engine = Engine()
    image = images.resolve(engine, "browser")
    phases: dict[str, list[float]] = {}
    for _ in range(repeat):
        seen = open_report(engine, image, html, chart_names(run.changes, CHART_NAMES),
                           full_page=full_page, experiment="bench-report")
        if seen.exit_code != 0:
            raise SystemExit(f"the browser's container failed: {seen.stderr_tail}")
        found = {k: v for k, v in seen["timings"].items() if v is not None} | {
            "follow_s": seen["followed"]["seconds"], "container_s": seen.duration_s}
        for phase, value in found.items():
            phases.setdefault(phase, []).append(value / 1000 if phase.endswith("_ms")
                                                else value)
    print(f"bakeoff/browser ({image.image_id[:19]}), no network, {seen['height']:,} px tall, "
          f"{len(seen['requests'])} request(s), {len(seen['console'])} console message(s); "
          f"screenshot ({'full page' if full_page else 'first screen'}) "
          f"{len(seen.screenshot):,} bytes")
    for phase, values in phases.items():
        print(f"  {phase.removesuffix('_s').removesuffix('_ms'):26} {spread(values)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", type=int, default=100)
    parser.add_argument("--changes", type=int, default=3)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--chromium", default=None, help="a Chromium binary to load it in")
    parser.add_argument("--browser", action="store_true",
                        help="also open it in the real bakeoff/browser image (docker)")
    parser.add_argument("--full-page", action="store_true",
                        help="with --browser: a screenshot of the whole page, not its "
                             "first screen (Chromium cannot at 100 arms: 75,000 px)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="generate in this new directory and leave it there")
    args = parser.parse_args()
    if args.keep is not None:
        args.keep.mkdir(parents=True)
        measure(args, args.keep.resolve())
        print(f"kept: {layout.report_file(layout.experiment_dir(args.keep / 'repo', EXPERIMENT))}")
        return
    with tempfile.TemporaryDirectory(prefix="report-scale-") as tmp:
        measure(args, Path(tmp))


if __name__ == "__main__":
    main()
