"""An engine that fails mid-run costs time, never results (issue 31, "What it must show").

On a second engine of this module's own (tests/integration/remote_engine.py: stopping it
never disturbs another test), the two-change target of test_kill_points.py (scripted arms,
a scripted judge, a graft to verify) is run once cleanly; then, in a second repository of
the same experiment, dockerd is stopped at four points of a run and started again a few
seconds later: during `up` (the baseline proof), `dispatch` (an agent at work), `score`
(a sample recorded) and `merge` (the graft's verification). After each, `run` exits 3
with one line naming the engine, and `gc` leaves nothing but the live `up`'s. Then the
engine's disk fills up during the second change's `score`: exit 3, one line naming it,
and no sample is a FAIL for it (every stored result is the clean run's). One last `run`
resumes to the clean run's OBSERVATION.json, and `gc` leaves nothing labelled.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.manifest import load_manifest
from runner.store import state as state_mod
from tests.integration.helpers import PER_RUN_ARM_KEYS, cleanup, flat_record
from tests.integration.remote_engine import (
    RemoteEngine,
    answers,
    copy_image,
    fill_store,
    free_store,
    start_dockerd,
    started,
    stop_dockerd,
)
from tests.integration.test_kill_points import DATES, arm_running, leftovers, target

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ("python", "postgres")  # all the target needs on the second engine
RUN_S = 900
POINT_S = 300
RESTART_AFTER_S = 5  # the engine comes back this long after it stopped (or the run ended)
# an arm's attempts that were no result (the outages' count, not the arms'), and what its
# samples used of the machine (helpers.PER_RUN_ARM_KEYS)
PER_RUN = ("retried", *PER_RUN_ARM_KEYS)
INFRA_ASYMMETRIC = "infra_asymmetric"  # the round flag unequal retries raise (issue 33)


@dataclass(frozen=True)
class Clean:
    name: str
    observation: dict[str, Any]
    samples: dict[str, tuple[Any, ...]]


@pytest.fixture(scope="module")
def outage_engine(engine: Engine, engine_image: BuiltImage,
                  built_images: dict[str, BuiltImage]) -> Iterator[RemoteEngine]:
    """A second engine for this module only (it is stopped and filled), the target's
    images copied in once; fixed commit dates here too (the targets' base commits, so
    both repositories' commits, are the same)."""
    with pytest.MonkeyPatch.context() as patch, started(
            engine, engine_image, f"outage{secrets.token_hex(3)}") as remote:
        for key, value in DATES.items():
            patch.setenv(key, value)
        for name in IMAGES:
            copy_image(engine, remote.engine, built_images[name].tag)
        yield remote


def environ(remote: RemoteEngine) -> dict[str, str]:
    return {**os.environ, **DATES, "DOCKER_HOST": remote.url, "PYTHONPATH": str(ROOT)}


def start(repo: Path, remote: RemoteEngine, log: Path) -> subprocess.Popen[str]:
    """`bakeoff-sandbox run` on the second engine; its stderr into `log` (a file: a pipe
    nobody reads would stall it)."""
    with log.open("w") as err:
        return subprocess.Popen([sys.executable, "-m", "runner.cli", "run"], cwd=repo,
                                env=environ(remote), stdout=subprocess.DEVNULL, stderr=err,
                                text=True)


def bakeoff(repo: Path, remote: RemoteEngine, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "runner.cli", *args], cwd=repo,
                          env=environ(remote), capture_output=True, text=True, timeout=POINT_S,
                          check=False)


def results(state: Path) -> dict[str, tuple[Any, ...]]:
    """Every stored result of the run directory (proofs, samples, the merge's
    verification; never an attempt set aside under retried/): its verdict, reason and
    counts, by path (a proof's folder, named by the run's proof, as `proofs/*`)."""
    found = {}
    for path in sorted(state.glob("stages/**/*.json")):
        if path.parents[2].name == "samples":
            record = flat_record(path)
            where = re.sub(r"/proofs/\w+/", "/proofs/*/", str(path.relative_to(state)))
            found[where] = (record["verdict"], record["reason"], record["counts"])
    return found


def comparable(observation: dict[str, Any]) -> dict[str, Any]:
    """OBSERVATION.json without the per-run facts (`PER_RUN`, per arm, and the round flag
    they raise: `infra_asymmetric`, asserted on its own by `asymmetric`)."""
    copy = json.loads(json.dumps(observation))
    for round_ in copy["rounds"]:
        round_["flags"] = [f for f in round_["flags"] if f != INFRA_ASYMMETRIC]
        for arm in round_["arms"]:
            for key in PER_RUN:
                arm.pop(key, None)
    return copy


def asymmetric(observation: dict[str, Any]) -> dict[str, tuple[bool, bool]]:
    """Per round: (flagged `infra_asymmetric`, the arms' retried attempts differ)."""
    return {round_["change"]: (INFRA_ASYMMETRIC in round_["flags"],
                               len({a.get("retried", 0) for a in round_["arms"]}) > 1)
            for round_ in observation["rounds"]}


@pytest.fixture(scope="module")
def clean(outage_engine: RemoteEngine, tmp_path_factory: pytest.TempPathFactory) -> Clean:
    """The target run once, uninterrupted, on the second engine: what every resume must
    give."""
    name = f"eo-{secrets.token_hex(3)}"
    manifest = target(tmp_path_factory.mktemp("clean") / "repo", name)
    began = time.monotonic()
    done = start(manifest.parent, outage_engine, manifest.parent.parent / "run.err")
    code = done.wait(timeout=RUN_S)
    print(f"the clean run took {time.monotonic() - began:.0f} s")
    assert code == 0, (manifest.parent.parent / "run.err").read_text()[-3000:]
    state = manifest.parent / ".bakeoff" / name
    observation = json.loads((state / "OBSERVATION.json").read_text())
    assert [(g["from"], g["what"], g["verified"]) for g in observation["rounds"][0]["grafts"]
            ] == [("B", "extra_first.py", True)]  # there is a graft's verification to cut
    cleanup(outage_engine.engine, load_manifest(manifest))
    return Clean(name, observation, results(state))


def first(*parts: str) -> Callable[[Path], bool]:
    return lambda state: (state / "stages" / "first").joinpath(*parts).exists()


# (what is cut, the sign it is under way)
POINTS: list[tuple[str, Callable[[Path], bool]]] = [
    ("up: the baseline proof", lambda s: any((s / "stages" / "first").glob("proofs/*/samples"))),
    ("dispatch: an agent at work", arm_running),
    ("score: a sample recorded", first("samples", "A", "success", "1.json")),
    ("merge: the graft's verification", first("merge", "samples")),
]


def engine_line(url: str) -> re.Pattern[str]:
    """The error line of a run the engine failed under: it names the engine (one of
    `runner.containers.failures`) or the experiment's Postgres the engine stopped, alone
    or as why samples were cut (`OutageError`) or a dispatch did not finish; then the
    fix, which is to run the same command again."""
    where = re.escape(url)
    engine = (rf"no Docker engine answers at {where} |the engine at {where} (stopped or "
              r"restarted while|has no space left on its disk|ended it|stopped it)")
    service = r"the experiment's Postgres \(container \w+\) is exited"
    return re.compile(rf"^error: .*({engine}|{service}).*\n  fix: .*run the same command "
                      "again", re.MULTILINE)


def until(under_way: Callable[[Path], bool], state: Path, run: subprocess.Popen[str],
          what: str, err: Path) -> None:
    deadline = time.monotonic() + POINT_S
    while not under_way(state) and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run.poll() is None, f"{what}: run ended before it: {err.read_text()[-3000:]}"


def swept(repo: Path, remote: RemoteEngine, name: str, what: str) -> None:
    """`gc` exits 0 and leaves nothing labelled but the live `up`'s."""
    done = bakeoff(repo, remote, "gc")
    assert done.returncode == 0, f"{what}: gc: {done.stderr[-2000:]}"
    current = state_mod.load(repo / ".bakeoff" / name)
    live = current.run if current is not None and current.phase == "up" else None
    assert leftovers(remote.engine, name, live) == [], what


def stopped_at(host: Engine, remote: RemoteEngine, repo: Path, state: Path, what: str,
               under_way: Callable[[Path], bool], err: Path) -> str:
    """A `run` whose engine stops once `under_way` and starts again a few seconds later
    (or once the run ended); its exit code must be 3 and its error line name the engine.
    That line."""
    run = start(repo, remote, err)
    until(under_way, state, run, what, err)
    stop_dockerd(host, remote)
    with contextlib.suppress(subprocess.TimeoutExpired):  # still running: the engine
        run.wait(timeout=RESTART_AFTER_S)  # comes back under it
    start_dockerd(host, remote)
    code = run.wait(timeout=POINT_S)
    said = err.read_text()
    assert (code, "Traceback" in said) == (3, False), f"{what}: {said[-3000:]}"
    found = engine_line(remote.url).search(said)
    assert found, f"{what}: {said[-3000:]}"
    return found.group(0)


def filled_under(host: Engine, remote: RemoteEngine, repo: Path, state: Path, what: str,
                 under_way: Callable[[Path], bool], err: Path) -> str:
    """A `run` whose engine's disk fills up once `under_way`, given back once the run
    ended; exit 3 and the line that names the full disk."""
    run = start(repo, remote, err)
    until(under_way, state, run, what, err)
    fill_store(host, remote)
    try:
        code = run.wait(timeout=POINT_S)
    finally:
        free_store(host, remote)
    said = err.read_text()
    assert (code, "Traceback" in said) == (3, False), f"{what}: {said[-3000:]}"
    found = re.search(rf"^error: .*the engine at {re.escape(remote.url)} has no space left on "
                      r"its disk, so it could not .*: .*no space left on device.*\n  fix: free "
                      r"space on that engine's data root .*run the same command again.*",
                      said, re.MULTILINE)
    assert found, f"{what}: {said[-3000:]}"
    return found.group(0)


def set_aside(state: Path, stage: str) -> list[tuple[str, str | None]]:
    """(verdict, reason) of every attempt of a stage kept aside under retried/."""
    return sorted((r["verdict"], r["reason"]) for path in state.glob(
        f"stages/{stage}/**/retried/*.json") for r in [flat_record(path)])


def test_an_engine_stopped_at_four_points_and_filled_once_costs_time_never_results(
        engine: Engine, outage_engine: RemoteEngine, clean: Clean, tmp_path: Path) -> None:
    remote, name = outage_engine, clean.name
    repo = target(tmp_path / "cut", name).parent
    state = repo / ".bakeoff" / name
    began = time.monotonic()
    try:
        for index, (what, under_way) in enumerate(POINTS):
            said = stopped_at(engine, remote, repo, state, what, under_way,
                              tmp_path / f"{index}.err")
            print(f"{what}: exit 3: {said}")
            swept(repo, remote, name, what)
        what = "score of the second change: the engine's disk full"
        said = filled_under(engine, remote, repo, state, what, lambda s: (
            s / "stages" / "second" / "samples" / "A" / "success" / "1.json").exists(),
            tmp_path / "full.err")
        print(f"{what}: exit 3: {said}")
        stored = results(state)  # no sample FAILed for it: each is the clean run's, or cut
        assert {path: stored[path] for path in stored if "/second/" in path} == {
            path: clean.samples[path] for path in stored if "/second/" in path}, what
        assert set(set_aside(state, "second")) <= {("RIG_ERROR", "infra")}, what
        swept(repo, remote, name, what)

        resumed = start(repo, remote, tmp_path / "resume.err")
        assert resumed.wait(timeout=RUN_S) == 0, (tmp_path / "resume.err").read_text()[-3000:]
        observation = json.loads((state / "OBSERVATION.json").read_text())
        assert comparable(observation) == comparable(clean.observation)
        # The outages hit the arms unequally where their retries differ: said, never hidden.
        assert {change: flagged == differ for change, (flagged, differ)
                in asymmetric(observation).items()} == {"first": True, "second": True}
        assert asymmetric(clean.observation) == {"first": (False, False),
                                                 "second": (False, False)}
        assert results(state) == clean.samples
        redone = json.loads((state / "stages" / "first" / "arms" / "A" / "arm.json").read_text())
        assert redone["attempt"] == 2  # the dispatch really was cut, and redone from the base
        swept(repo, remote, name, "the end")
        assert leftovers(remote.engine, name, None) == []
        print(f"the outages and the resume took {time.monotonic() - began:.0f} s")
    finally:
        if not answers(remote):
            start_dockerd(engine, remote)
        cleanup(remote.engine, load_manifest(repo / "bakeoff.toml"))
