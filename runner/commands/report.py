"""`report`: OBSERVATION.json (abc-comparison/v2), RESULTS.md and REPORT.html across
every scored stage, rebuilt from stored records (sample records, judge answers, stage and
merge files) without docker. The raw sample records are always kept.
"""

from __future__ import annotations

import os
import sys
import webbrowser
from dataclasses import dataclass
from pathlib import Path

from rig import contract as contract_mod
from rig import standings
from rig.persist import write_text_atomic
from rig.report import (
    Graft,
    JudgeUsage,
    Observation,
    Round,
    observation,
    render_results,
    round_of,
)
from rig.report import write_observation as write_obs
from rig.report.page import render_page
from runner.commands import evidence, rescore, sample_plan
from runner.commands import merge as merge_mod
from runner.commands import score as score_mod
from runner.errors import BadInputError
from runner.manifest import LoadedManifest
from runner.store import layout
from runner.store.layout import experiment_dir
from runner.store.records import GraftResult, load_stage


def _round(loaded: LoadedManifest, change: str) -> Round | None:
    stage = sample_plan.stage_path(loaded, change)
    if not layout.samples_root(stage).is_dir():
        return None
    proof = load_stage(stage)
    if proof is None:
        return None
    arms = score_mod.stage_scores(loaded, change)
    merged = merge_mod.load(loaded, change)
    winner = None if merged is None else merged.winner
    grafts = [] if merged is None else [_graft(g) for g in merged.grafts]
    decision = standings.decide_winner(arms, loaded.manifest.contract.threshold)
    if winner is None:
        winner = decision.winner
    return round_of(change, proof.base_commit, proof.baseline.pass_rate,
                    proof.baseline.verdicts, arms, winner or None, grafts,
                    score_mod.round_flags(loaded, change, arms, decision), decision.tie,
                    judge_usage(loaded, stage))


def judge_usage(loaded: LoadedManifest, stage: Path) -> list[JudgeUsage]:
    """An agent judge's run on each arm (`judge/<arm>.wire.json`), in the arms' order."""
    found = []
    for arm in loaded.manifest.arms:
        path = layout.judge_wire(stage, arm.id)
        if path.is_file():
            found.append(JudgeUsage.model_validate_json(path.read_text(encoding="utf-8")))
    return found


def _graft(graft: GraftResult) -> Graft:
    """A graft as OBSERVATION.json has it: verified means it was kept."""
    how = "kept" if graft.kept else "dropped"
    return Graft.model_validate({"from": graft.arm, "what": graft.what, "verified": graft.kept,
                                 "rationale": f"{graft.rationale}; {how}: {graft.why}"})


def contract_summary(loaded: LoadedManifest) -> dict[str, object]:
    """The first stage's frozen contract (with its sha256) and every stage's version."""
    directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    stages: dict[str, object] = {}
    first: dict[str, object] | None = None
    for change in loaded.manifest.changes:
        lock = contract_mod.load_lock(layout.stage_dir(directory, change.id))
        if lock is None:
            continue
        latest = lock.latest
        stages[change.id] = {"version": latest.version, "sha256": latest.sha256}
        if first is None:
            first = {"sha256": latest.sha256, "version": latest.version,
                     **latest.contract.model_dump(mode="json")}
    if first is None:
        raise BadInputError("nothing to report: no stage has a frozen contract",
                            hint="run `bakeoff-sandbox up`, dispatch and score first")
    return {**first, "stages": stages}


@dataclass(frozen=True)
class Reported:
    """What `report` wrote."""

    observation: Observation
    observation_file: Path
    results_file: Path
    page_file: Path


def report(loaded: LoadedManifest) -> Reported:
    directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    rounds = [r for c in loaded.manifest.changes if (r := _round(loaded, c.id)) is not None]
    obs = observation(loaded.manifest.experiment.name, contract_summary(loaded), rounds)
    done = Reported(obs, layout.observation_file(directory), layout.results_file(directory),
                    layout.report_file(directory))
    write_obs(done.observation_file, obs)
    # The latest rescore of each stage, when there is one (runner.commands.rescore).
    write_text_atomic(done.results_file, render_results(obs) + rescore.results_section(loaded))
    write_text_atomic(done.page_file, render_page(obs, evidence.collect(loaded, obs)))
    return done


def graphical() -> bool:
    """Whether a browser opened from here would show a window (never a text browser
    taking over the terminal)."""
    return sys.platform in ("darwin", "win32") or bool(
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def open_page(page: Path) -> bool:
    """Open REPORT.html in the user's browser where there is a graphical one; False
    when there is none (the caller prints the path)."""
    return graphical() and webbrowser.open(page.resolve().as_uri())
