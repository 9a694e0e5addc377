"""`run`: for each change in order, up → dispatch → score → merge (→ down); then report.

Interrupt-safe: run it again and it continues where it stopped. A merged change is
skipped; an arm whose dispatch finished is not re-run (dispatch resumes); a stored
sample is never re-run (scoring resumes; a sample an outage cut left no record, so it
runs again); the next change starts from the merge. A change whose scoring ended in rig
errors stops the run before its merge (exit 3), unless `--continue-on-rig-error`.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from rig.persist import write_text_atomic
from rig.report import Observation
from runner.commands import down as down_mod
from runner.commands import merge as merge_mod
from runner.commands import report as report_mod
from runner.commands import sample_plan, services
from runner.commands import score as score_mod
from runner.commands import up as up_mod
from runner.commands.dispatch.run import DispatchReporter, dispatch
from runner.containers.backend import ContainerEngine
from runner.containers.images.prepared import ResolvedImages
from runner.errors import RigErrorRoundError
from runner.manifest import LoadedManifest
from runner.store import layout, state
from runner.store.layout import experiment_dir

Say = Callable[[str], None]


def dispatched(loaded: LoadedManifest, change: str) -> bool:
    """Every arm's dispatch finished for `change` (its work is fetched back)."""
    return not pending(loaded, change)


AGAIN = ("once the engine and the experiment's services answer (`docker info`), run the "
         "same command again: the experiment's services are restored and that arm is "
         "dispatched again from the base; an arm whose work is kept is not")


def pending(loaded: LoadedManifest, change: str) -> list[str]:
    """The arms whose dispatch is not done for `change`: an arm whose work is kept (in
    any `up` of this change: `services.done_arms`) is never dispatched again, even after
    a `down` and a new `up` (the one way back from a service the engine lost)."""
    done = services.done_arms(loaded, change)
    return [arm.id for arm in loaded.manifest.arms if arm.id not in done]


def run_change(engine: ContainerEngine, loaded: LoadedManifest, change: str, say: Say,
               reporter: DispatchReporter | None = None,
               toolchain: ResolvedImages | None = None, *, go_on: bool = False) -> None:
    """One change, from wherever an interrupted run left it. `toolchain`: the images of
    the whole `run`, resolved once (each commit's prepared image made once). A round
    with rig errors stops here (`RigErrorRoundError`, before its merge) unless `go_on`
    (`--continue-on-rig-error`: recorded in the stage, flagged in every report)."""
    toolchain = toolchain or ResolvedImages(engine, loaded, say)
    if merge_mod.load(loaded, change) is not None:
        say(f"{change}: already merged; skipping")
        return
    directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    if not dispatched(loaded, change):
        current = state.load(directory)
        if current is not None and current.phase == "up" and current.change != change:
            down_mod.down(engine, loaded, say)
            current = None
        if current is None or current.phase != "up":
            say(f"{change}: up")
            up_mod.up(engine, loaded, change, say, toolchain=toolchain)
        say(f"{change}: dispatch")
        dispatch(engine, loaded, pending(loaded, change), reporter, toolchain=toolchain,
                 say=say).require_started(loaded.path)
        services.require_dispatched(loaded, change, fix=AGAIN)  # an arm the outage cut
    say(f"{change}: score")
    arms, _ = score_mod.score(engine, loaded, change, say, toolchain)
    errors = [f"{sample} {reason}" for arm in arms for sample, reason in arm.rig_errors]
    if errors and not go_on:
        raise RigErrorRoundError(change, errors, str(loaded.path))
    if errors:
        say(f"{change}: going on past {len(errors)} rig error(s) (--continue-on-rig-error; "
            "every report flags it)")
        write_text_atomic(layout.continued_file(sample_plan.stage_path(loaded, change)),
                          json.dumps(errors, indent=2) + "\n")
    say(f"{change}: merge")
    merge_mod.merge_change(engine, loaded, change, say, toolchain=toolchain)
    down_mod.down(engine, loaded, say)


def run(engine: ContainerEngine, loaded: LoadedManifest, say: Say,
        reporter: DispatchReporter | None = None, *, go_on: bool = False) -> Observation:
    toolchain = ResolvedImages(engine, loaded, say)
    for change in loaded.manifest.changes:
        run_change(engine, loaded, change.id, say, reporter, toolchain, go_on=go_on)
    return report_mod.report(loaded).observation
