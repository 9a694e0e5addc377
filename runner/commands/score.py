"""`score` (and `oracle`): samples of checks on commits, each in a fresh container, and the
rubric. `score` runs every arm's final commit through every check and the success
criterion (planned by `runner.commands.sample_plan`, run by `runner.commands.sample_runs`), asks the
judge for the subjective dims, and writes SCORECARD.md. Execute, persist, then grade: the
scorecard is rebuilt from the stored sample records and judge answers alone
(`stage_scores`), without docker.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from rig import judge as judge_mod
from rig import rubric, standings
from rig.contract import LockVersion
from rig.guards import harness
from rig.persist import write_text_atomic
from rig.report import render_scorecard
from rig.report.scorecard import BrowserEvidence
from rig.sample import tree as tree_mod
from rig.sample.oracle import sample_dir
from rig.sample.record import SampleRecord
from rig.sample.spec import SampleSpec
from rig.stats import PassRate, pass_rate
from runner import contract, workspace
from runner.commands import judges, services
from runner.commands.dispatch.record import load_record
from runner.commands.sample_plan import (
    SUCCESS,
    arm_commits,
    check_plan,
    plan_specs,
    plans,
    redo,
    specs,
    stage_path,
    work_refused,
)
from runner.commands.sample_runs import executor_for, run_all
from runner.containers.backend import ContainerEngine
from runner.containers.images.prepared import Toolchain
from runner.manifest import Arm, LoadedManifest
from runner.store import layout
from runner.store.files import ensure_excluded
from runner.store.layout import experiment_dir, stage_dir
from runner.workspace import merge

Say = Callable[[str], None]


def oracle(engine: ContainerEngine, loaded: LoadedManifest, ref: str, check: str, samples: int,
           change: str | None, say: Callable[[str], None]
           ) -> tuple[list[SampleRecord], PassRate, Path]:
    """`bakeoff-sandbox oracle`: score one commit; records go to a new directory."""
    repo = loaded.repo_path
    change_id = change or loaded.manifest.changes[0].id
    plan = check_plan(loaded, change_id, check)
    commit = workspace.resolve_commit(repo, ref)
    toolchain = Toolchain(engine, loaded, say)
    frozen = contract.verify(toolchain, change_id)
    graded_under = None if frozen is None else f"v{frozen.version}:{frozen.sha256}"
    base = merge.stage_base(loaded, change_id)
    ensure_excluded(repo)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    stage = layout.oracle_dir(experiment_dir(repo, loaded.manifest.experiment.name),
                              f"{stamp}-{commit[:12]}-{plan.name}")
    todo = specs(loaded, change_id, "oracle", plan, commit, base, samples, graded_under)
    with executor_for(toolchain, base) as executor:
        records = run_all(executor, todo, stage, say,
                          proofs=stage_dir(experiment_dir(repo, loaded.manifest.experiment.name),
                                           change_id))
    return records, pass_rate(r.verdict for r in records), stage


def run_samples(toolchain: Toolchain, change: str, commits: dict[str, str], say: Say,
                stage: Path, frozen: LockVersion) -> None:
    """Every (arm, check, n) sample, in the base's prepared image: the dependency files
    are harness (a sample runs under the base's, and the arm's setup code never runs),
    so every arm shares one executor."""
    loaded = toolchain.loaded
    base, graded_under = frozen.contract.base_commit, f"v{frozen.version}:{frozen.sha256}"
    todo: list[SampleSpec] = []
    for arm, commit in commits.items():
        refused = work_refused(loaded, change, arm)
        for plan in plans(loaded, change):
            todo.extend(replace(spec, refused=refused) for spec in plan_specs(
                loaded, change, arm, plan, commit, base,
                frozen.contract.ratchet_baselines, graded_under))
    with executor_for(toolchain, base) as executor:
        run_all(executor, todo, stage, say, proofs=stage)


def records_of(stage: Path, arm: str, check: str) -> list[SampleRecord]:
    found = [SampleRecord.model_validate_json(p.read_text(encoding="utf-8"))
             for p in layout.sample_records(stage, arm, check)]
    return sorted(found, key=lambda r: r.n)


def browser_evidence(loaded: LoadedManifest, change: str
                     ) -> tuple[list[BrowserEvidence], str]:
    """The success criterion's browser samples, their trace and screenshots relative to
    the stage's folder, and the Playwright that wrote them."""
    stage = stage_path(loaded, change)
    found, playwright = [], ""
    for arm in loaded.manifest.arms:
        for record in records_of(stage, arm.id, SUCCESS):
            ran = record.browser_run
            if ran is None:
                continue
            folder = sample_dir(stage, record.arm, record.check).relative_to(stage)
            playwright = ran.identity.get("playwright", playwright)
            found.append(BrowserEvidence(
                record.sample, str(record.verdict) + (f" {record.reason}" if record.reason
                                                      else ""),
                None if ran.trace is None else f"{folder}/{ran.trace}",
                tuple(f"{folder}/{s}" for s in ran.screenshots)))
    return found, playwright


def stage_scores(loaded: LoadedManifest, change: str) -> list[rubric.ArmScore]:
    """The rubric for every arm, from stored records and judge answers (no docker)."""
    stage = stage_path(loaded, change)
    scored = []
    for arm in loaded.manifest.arms:
        success = rubric.check_result(SUCCESS,
                                      records_of(stage, arm.id, SUCCESS))
        checks = {p.name: rubric.check_result(p.name, records_of(stage, arm.id, p.name))
                  for p in plans(loaded, change)[1:]}
        answer = layout.judge_answer(stage, arm.id)
        judged = judge_mod.parse_judgement(answer.read_text()) if answer.exists() else None
        scored.append(replace(rubric.score_arm(arm, success, checks, judged,
                                               loaded.manifest.contract.weights,
                                               harness_touched(loaded, change, success),
                                               dispatched(loaded, change, arm)),
                              retried=len(layout.retried_attempts(stage, arm.id))))
    return scored


def dispatched(loaded: LoadedManifest, change: str, arm: Arm) -> rubric.Dispatched | None:
    """What the arm's dispatch record adds to its score: the identity with the wire's
    evidence, when the gateway saw it, and the marks; None without a record (as before)."""
    directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    record = load_record(layout.arm_record(directory, change, arm.id))
    if record is None:
        return None
    identity = record.identity() if record.gateway is not None else arm.identity()
    notes = [c for c in record.caveats if c.split(":", 1)[0] in record.marks]
    return rubric.Dispatched(identity, tuple(record.marks), tuple(notes), record.gateway,
                             record.agent_cli)


def harness_touched(loaded: LoadedManifest, change: str,
                    success: rubric.CheckResult) -> list[str]:
    """The harness files the arm's commit changed (`rig.guards.harness`: any runner's): by name
    or place from its diff (listed capped: `merge.listed`, a tree bomb's is never read
    whole), and by layout or content as its samples pinned them (a test directory made a
    package, a module shadowing another, a file a runner config names); the base's were
    used instead. As a record shows names (`rig.sample.tree.shown`), at most HARNESS_SHOWN."""
    record = next(iter(success.records), None)
    if record is None or record.commit == record.base_commit:
        return []
    changed, cut = merge.listed(loaded.repo_path, record.base_commit, record.commit)
    pinned: set[str] = set()
    for sample in success.records:
        pinned.update(sample.pinned.get("restored", ()), sample.pinned.get("removed", ()))
    found = {tree_mod.shown(p, 300) for p in harness.touched(changed)
             if not _obeyed(p, pinned)} | pinned
    touched = sorted(found)
    shown = touched[:HARNESS_SHOWN]
    if len(touched) > HARNESS_SHOWN or cut:
        more = len(touched) - len(shown)
        shown.append(f"[and {more}{' or more' if cut else ''} more: the diff lists "
                     f"{'over ' if cut else ''}{len(changed)} paths]")
    return shown


def _obeyed(path: str, pinned: set[str]) -> bool:
    """A conftest of the arm's own (`rig.guards.harness.own_conftests`: in a directory the base
    does not have) that its samples kept: obeyed, not touched."""
    return path.endswith("/conftest.py") and tree_mod.shown(path, 300) not in pinned


HARNESS_SHOWN = 50  # harness files a scorecard names per arm


CONTINUED = "continued_past_rig_errors"


def round_flags(loaded: LoadedManifest, change: str, arms: list[rubric.ArmScore],
                decision: standings.WinnerDecision) -> list[str]:
    """The round's flags (`standings.flags`), and `continued_past_rig_errors` when `run
    --continue-on-rig-error` went on past its rig errors."""
    flags = standings.flags(arms, decision)
    if layout.continued_file(stage_path(loaded, change)).is_file():
        flags = sorted([*flags, CONTINUED])
    return flags


def write_scorecard(loaded: LoadedManifest, change: str, merge_note: str = "not merged yet",
                    grafts: list[dict[str, object]] | None = None) -> Path:
    arms = stage_scores(loaded, change)
    terms = loaded.manifest.contract
    decision = standings.decide_winner(arms, terms.threshold)
    evidence, playwright = browser_evidence(loaded, change)
    flags = round_flags(loaded, change, arms, decision)
    text = render_scorecard(change, arms, terms.weights, flags, decision, merge_note,
                            grafts or [], evidence, playwright)
    path = layout.scorecard_file(stage_path(loaded, change))
    write_text_atomic(path, text)
    return path


def score(engine: ContainerEngine, loaded: LoadedManifest, change: str, say: Say,
          toolchain: Toolchain | None = None, *, redo_rig_errors: bool = False
          ) -> tuple[list[rubric.ArmScore], Path]:
    """Every arm's final commit through every check and the success criterion, the judge,
    SCORECARD.md. `toolchain`: the images of the command that calls it (`run`).
    `redo_rig_errors`: the stored RIG_ERROR samples are set aside first, so they run
    again (once the rig is fixed)."""
    toolchain = toolchain or Toolchain(engine, loaded, say)
    stage = stage_path(loaded, change)
    services.require_dispatched(loaded, change)
    services.restore(engine, loaded, say)  # the experiment's Postgres, after an outage
    commits = arm_commits(loaded, change)
    frozen = contract.require(toolchain, change)
    judges.judge_key(loaded, os.environ)  # a missing judge key fails before any sample
    if redo_rig_errors:
        redo(loaded, stage, say)
    run_samples(toolchain, change, commits, say, stage, frozen)
    judges.run_judges(toolchain, change, commits, frozen.contract.base_commit, stage,
                      [p.name for p in plans(loaded, change)], say)
    return stage_scores(loaded, change), write_scorecard(loaded, change)
