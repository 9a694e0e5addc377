"""The sample plan of `score`, `oracle`, `merge` and `up`'s proofs: which samples run for
which arm, check and commit (`CheckPlan`, `plans`, `specs`, `plan_specs`: the success
criterion, then every check; a ratchet's samples carry its frozen base value), each arm's
final commit, why an arm's work was refused, and what a resume re-runs (`redo`: the
stored RIG_ERROR samples set aside). No container is touched here:
`runner.commands.sample_runs` runs what this plans.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from rig import contract as contract_mod
from rig.ratchet import RatchetError
from rig.sample import metric
from rig.sample.oracle import set_aside
from rig.sample.record import BrowserAsked, SampleRecord
from rig.sample.spec import SampleSpec, ServerSpec, StackSpec
from runner import contract, workspace
from runner.commands.dispatch.record import load_record
from runner.errors import BadInputError
from runner.manifest import LoadedManifest
from runner.store import layout
from runner.store.layout import experiment_dir, stage_dir
from runner.workspace import merge

Say = Callable[[str], None]
SUCCESS = "success"
METRIC_PARSER = "metric"  # a ratchet's samples: read by rig.ratchet, not by a parser


@dataclass(frozen=True)
class CheckPlan:
    name: str
    command: str
    parser: str
    build: bool = True  # runs [toolchain] build first


def check_plan(loaded: LoadedManifest, change: str, check: str) -> CheckPlan:
    """The command and parser of `check` (or the change's success criterion)."""
    if check == SUCCESS:
        success = loaded.change(change).success
        return CheckPlan(SUCCESS, success.command, success.parser, success.build)
    for item in loaded.manifest.checks:
        if item.name == check:
            if item.parser is None:
                raise BadInputError(f"check {check!r} has no parser (a ratchet?)",
                                    hint="score a test check or `success`")
            return CheckPlan(item.name, item.run, item.parser, item.build)
    known = ", ".join([SUCCESS, *(c.name for c in loaded.manifest.checks)])
    raise BadInputError(f"{loaded.path}: no check {check!r}", hint=f"use one of: {known}")


def specs(loaded: LoadedManifest, change: str, arm: str, plan: CheckPlan, commit: str,
          base: str, samples: int, graded_under: str | None = None) -> list[SampleSpec]:
    manifest = loaded.manifest
    protected = contract.protected_paths(loaded, change, base)
    server = loaded.change(change).success.server if plan.name == SUCCESS else None
    serve = None if server is None else ServerSpec(server.run, server.health, server.port_env,
                                                   server.startup_timeout_s)
    return [SampleSpec(change=change, arm=arm, check=plan.name, n=n, commit=commit,
                       base_commit=base, command=plan.command, parser=plan.parser,
                       timeout_s=manifest.limits.check_timeout_s, protected=protected,
                       requires=tuple(manifest.toolchain.requires), contract=graded_under,
                       server=serve, stack=stack_of(loaded, change) if plan.name == SUCCESS
                       else None, harness="base",
                       build=tuple(manifest.toolchain.build) if plan.build else (),
                       browser=browser_of(loaded, change) if plan.name == SUCCESS else None)
            for n in range(1, samples + 1)]


def stack_of(loaded: LoadedManifest, change: str) -> StackSpec | None:
    """The success criterion's stack: the manifest's compose file, by path and hash (the
    hash the contract froze whenever it verifies)."""
    path = loaded.stack_path(change)
    if path is None:
        return None
    return StackSpec(str(path), hashlib.sha256(path.read_bytes()).hexdigest(),
                     loaded.change(change).success.stack_timeout_s)


def browser_of(loaded: LoadedManifest, change: str) -> BrowserAsked | None:
    """The success criterion's browser file, by path and hash (the hash the contract
    froze whenever it verifies), and the endpoints its flow must reach."""
    path = loaded.browser_path(change)
    if path is None:
        return None
    return BrowserAsked(file=str(path), sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
                        expect_requests=list(loaded.change(change).success.expect_requests))


def stage_path(loaded: LoadedManifest, change: str) -> Path:
    return stage_dir(experiment_dir(loaded.repo_path, loaded.manifest.experiment.name), change)


def arm_commits(loaded: LoadedManifest, change: str) -> dict[str, str]:
    """Each arm's final commit, as dispatch fetched it back."""
    commits: dict[str, str] = {}
    for arm in loaded.manifest.arms:
        branch = workspace.arm_branch(loaded.manifest.experiment.name, change, arm.id)
        head = merge.branch_head(loaded.repo_path, branch)
        if head is None:
            raise BadInputError(f"arm {arm.id!r} has no commits for {change!r} ({branch})",
                                hint="run `bakeoff-sandbox dispatch` first")
        commits[arm.id] = head
    return commits


def plans(loaded: LoadedManifest, change: str) -> list[CheckPlan]:
    """The success criterion, then every check; a ratchet is a check (its pass-rate counts
    in the checks dim), graded on its metric by `rig.ratchet`, never by a parser."""
    return [check_plan(loaded, change, SUCCESS),
            *(check_plan(loaded, change, c.name) if c.kind == "test"
              else CheckPlan(c.name, c.run, METRIC_PARSER, c.build)
              for c in loaded.manifest.checks)]


def ratchet_of(loaded: LoadedManifest, check: str,
               baselines: Mapping[str, float] | None) -> metric.Ratchet | None:
    """The ratchet `check` graded against its frozen base value; None for a test check.
    `baselines` None: the base's own value is being measured (at `up`)."""
    for item in loaded.manifest.checks:
        if item.name != check or item.kind != "ratchet":
            continue
        assert item.metric is not None and item.better is not None  # the manifest's rule
        if baselines is not None and check not in baselines:
            raise RatchetError(
                f"ratchet {check!r} has no frozen base value in the stage's contract",
                hint="run `bakeoff-sandbox up` with its proofs: it measures the base's value")
        base = None if baselines is None else baselines[check]
        return metric.Ratchet(item.metric, item.better, item.tolerance, base)
    return None


def plan_specs(loaded: LoadedManifest, change: str, arm: str, plan: CheckPlan,
               commit: str, base: str, baselines: Mapping[str, float] | None,
               graded_under: str | None = None) -> list[SampleSpec]:
    """`specs` of one plan; a ratchet's samples carry what they are graded on."""
    todo = specs(loaded, change, arm, plan, commit, base,
                         loaded.manifest.contract.samples, graded_under)
    ratchet = ratchet_of(loaded, plan.name, baselines) if plan.name != SUCCESS else None
    return todo if ratchet is None else [replace(spec, ratchet=ratchet) for spec in todo]


def frozen_baselines(loaded: LoadedManifest, change: str) -> dict[str, float]:
    """The ratchet base values frozen in the stage's contract (none before `up`)."""
    lock = contract_mod.load_lock(stage_path(loaded, change))
    return {} if lock is None else dict(lock.latest.contract.ratchet_baselines)


def redo(loaded: LoadedManifest, stage: Path, say: Say) -> list[str]:
    """Set every arm's RIG_ERROR sample of the stage aside (`rig.sample.oracle.set_aside`): no
    longer a result, it runs again. The samples set aside."""
    found = []
    for arm in loaded.manifest.arms:
        for path in layout.sample_records(stage, arm.id):
            record = SampleRecord.model_validate_json(path.read_text(encoding="utf-8"))
            if record.verdict == "RIG_ERROR":
                set_aside(stage, record)
                found.append(record.sample)
    say(f"set aside {len(found)} rig-error sample(s) to run again"
        + (f": {', '.join(found)}" if found else ""))
    return found


def work_refused(loaded: LoadedManifest, change: str, arm: str) -> str | None:
    """Why the arm's work was refused at import (its samples are FAIL unsafe_work)."""
    directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    record = load_record(layout.arm_record(directory, change, arm))
    why = None if record is None else record.work_refused
    return None if why is None else f"the arm's work was refused at import: {why}"
