"""`merge`: the top valid arm (or `--base ARM`) onto the experiment branch, then grafts —
asked for (`--graft ARM:PATH`, `--graft ARM:COMMIT`) or proposed (files an arm whose
checks all passed changed and the winner did not) — each applied, re-verified in fresh
containers (success + checks) and kept only if nothing regresses.
"""

from __future__ import annotations

from collections.abc import Callable

from rig import ratchet, rubric
from rig.oracle import pass_rate
from rig.record import SampleRecord
from runner import contract, workspace
from runner.commands import score as score_mod
from runner.containers.engine import Engine
from runner.containers.prepared import Toolchain
from runner.errors import BadInputError
from runner.manifest import LoadedManifest
from runner.store import layout
from runner.store.records import GraftResult, MergeRecord, RatchetMove, load_merge, save_merge
from runner.workspace import merge

Say = Callable[[str], None]


def requested(loaded: LoadedManifest, change: str, asks: list[str],
              commits: dict[str, str], base: str) -> list[merge.Candidate]:
    """`ARM:PATH` or `ARM:COMMIT` (every file that commit changed) as candidates."""
    found = []
    for ask in asks:
        arm, _, what = ask.partition(":")
        if arm not in commits or not what:
            raise BadInputError(f"--graft {ask!r}: expected ARM:PATH or ARM:COMMIT with an "
                                f"arm of {change!r}", hint=f"arms: {', '.join(commits)}")
        sha = workspace.commit_of(loaded.repo_path, what)
        paths = sorted(merge.changed(loaded.repo_path, f"{sha}^", sha)) if sha else [what]
        found += [merge.Candidate(arm, commits[arm], p) for p in paths]
    return found


def _rates(records_by_check: dict[str, list[SampleRecord]]) -> dict[str, float]:
    return {check: pass_rate(r.verdict for r in recs).rate
            for check, recs in records_by_check.items()}


def verify(toolchain: Toolchain, loaded: LoadedManifest, change: str, commit: str, label: str,
           base: str, say: Say) -> dict[str, float]:
    """Pass-rates of success + every check on `commit`, fresh containers each (a ratchet
    graded against the stage's frozen base value)."""
    stage = layout.merge_dir(score_mod.stage_path(loaded, change))
    baselines = score_mod.frozen_baselines(loaded, change)
    todo = [spec for plan in score_mod.plans(loaded, change)
            for spec in score_mod.plan_specs(loaded, change, label, plan, commit, base,
                                             baselines)]
    with score_mod.executor_for(toolchain, commit) as executor:
        records = score_mod.run_all(executor, todo, stage, say,
                                  proofs=score_mod.stage_path(loaded, change))
    grouped: dict[str, list[SampleRecord]] = {}
    for record in records:
        grouped.setdefault(record.check, []).append(record)
    return _rates(grouped)


def merge_stage(engine: Engine, loaded: LoadedManifest, change: str, say: Say, *,
                base_arm: str | None = None, grafts: list[str] | None = None,
                toolchain: Toolchain | None = None) -> dict[str, object]:
    """`merge_change`, its record as merge.json spells it (for callers that index it)."""
    return merge_change(engine, loaded, change, say, base_arm=base_arm, grafts=grafts,
                        toolchain=toolchain).model_dump(mode="json", by_alias=True)


def merge_change(engine: Engine, loaded: LoadedManifest, change: str, say: Say, *,
                 base_arm: str | None = None, grafts: list[str] | None = None,
                 toolchain: Toolchain | None = None) -> MergeRecord:
    """The winner (or `base_arm`) onto the branch, then the grafts; merge.json written."""
    toolchain = toolchain or Toolchain(engine, loaded, say)
    frozen = contract.require(toolchain, change)
    base = frozen.contract.base_commit
    arms = score_mod.stage_scores(loaded, change)
    commits = {a.arm: a.commit for a in arms}
    decision = rubric.decide_winner(arms, loaded.manifest.contract.threshold)
    winner = base_arm or decision.winner
    branch = loaded.manifest.experiment.branch
    onto = merge.branch_head(loaded.repo_path, branch) or base
    if winner is None:
        merge.advance(loaded.repo_path, branch, onto)
        note = f"{decision.no_winner_reason}: nothing merged; the branch stays at the base"
        return _write(loaded, change, None, onto, note, [], _moves(loaded, change, None))
    if winner not in commits:
        raise BadInputError(f"--base {winner!r} is not an arm of {change!r}",
                            hint=f"arms: {', '.join(commits)}")
    head = merge.merge(loaded.repo_path, onto, commits[winner], f"bakeoff: merge {winner} "
                       f"for {change}")
    say(f"merged {winner} ({commits[winner][:12]}) onto {branch}")
    by_arm = {a.arm: a for a in arms}
    floor = _arm_rates(by_arm[winner])
    eligible = {a.arm: a.commit for a in arms if a.arm != winner and a.valid
                and all(c.rate.rate == 1.0 for c in a.checks.values())}
    protected = set(contract.protected_paths(loaded, change, base))
    asked = requested(loaded, change, grafts or [], commits, base)
    proposed = merge.candidates(loaded.repo_path, base, commits[winner], eligible, protected)
    results = []
    for n, candidate in enumerate([*asked, *(c for c in proposed if c not in asked)], 1):
        head, result = _try_graft(toolchain, loaded, change, head, candidate, floor, n, base,
                                  say, asked=candidate in asked)
        results.append(result)
    merge.advance(loaded.repo_path, branch, head)
    kept = sum(r.kept for r in results)
    note = (f"{winner} merged onto {branch}; {kept} of {len(results)} graft(s) kept; "
            f"head {head[:12]}")
    moves = _moves(loaded, change, _merged_records(toolchain, loaded, change, head,
                                                   (winner, commits[winner]), base, say))
    return _write(loaded, change, winner, head, note, results, moves)


def _merged_records(toolchain: Toolchain, loaded: LoadedManifest, change: str, head: str,
                    winner: tuple[str, str], base: str, say: Say
                    ) -> dict[str, list[SampleRecord]] | None:
    """The merged result's samples, per check (None without ratchets: nothing needs them):
    the winner's own when the merge left its tree as it was, else the last kept graft's
    re-verification, else a fresh verification of the head."""
    if not score_mod.frozen_baselines(loaded, change):
        return None
    stage = score_mod.stage_path(loaded, change)
    names = [p.name for p in score_mod.plans(loaded, change)]
    def tree(ref: str) -> str:
        return workspace.run_git(loaded.repo_path, "rev-parse", f"{ref}^{{tree}}")
    if tree(head) == tree(winner[1]):
        return {name: score_mod.records_of(stage, winner[0], name) for name in names}
    folder = layout.merge_dir(stage)
    for label in layout.sample_arms(folder):
        found = {name: score_mod.records_of(folder, label, name) for name in names}
        if all(found.values()) and all(r.commit == head for rs in found.values() for r in rs):
            return found
    verify(toolchain, loaded, change, head, f"merged-{head[:12]}", base, say)
    return {name: score_mod.records_of(folder, f"merged-{head[:12]}", name) for name in names}


def _moves(loaded: LoadedManifest, change: str,
           merged: dict[str, list[SampleRecord]] | None) -> dict[str, ratchet.Movement]:
    """Each ratchet's baseline for the next change (`rig.ratchet.move`); nothing merged:
    every baseline stays."""
    baselines = score_mod.frozen_baselines(loaded, change)
    moves = {}
    for check in loaded.manifest.checks:
        if check.name not in baselines or check.better is None:
            continue
        before = baselines[check.name]
        moves[check.name] = (
            ratchet.Movement(check.name, before, before, None, "kept: nothing was merged")
            if merged is None else ratchet.move(check.name, check.better, before, merged))
    return moves


def _arm_rates(arm: rubric.ArmScore) -> dict[str, float]:
    return {score_mod.SUCCESS: arm.success.rate.rate,
            **{name: c.rate.rate for name, c in arm.checks.items()}}


def _try_graft(toolchain: Toolchain, loaded: LoadedManifest, change: str, head: str,
               candidate: merge.Candidate, floor: dict[str, float], n: int, base: str,
               say: Say, *, asked: bool) -> tuple[str, GraftResult]:
    what = candidate.path
    rationale = ("asked for with --graft" if asked else
                 f"{candidate.arm}'s checks all passed and it changed {candidate.path}, "
                 "which the winner did not")
    grafted = merge.graft(loaded.repo_path, head, candidate)
    rates = verify(toolchain, loaded, change, grafted, f"graft-{n}", base, say)
    worse = [f"{k} {floor[k]:.2f} -> {v:.2f}" for k, v in rates.items() if v < floor.get(k, 0)]
    if worse:
        say(f"graft {what}: dropped ({'; '.join(worse)})")
        return head, GraftResult(arm=candidate.arm, what=what, rationale=rationale,
                                 verified=True, kept=False, why="regressed: " + "; ".join(worse))
    say(f"graft {what}: kept (nothing regressed)")
    return grafted, GraftResult(arm=candidate.arm, what=what, rationale=rationale,
                                verified=True, kept=True, why="re-verified: " + ", ".join(
                                    f"{k} {v:.2f}" for k, v in rates.items()))


def _write(loaded: LoadedManifest, change: str, winner: str | None, head: str, note: str,
           results: list[GraftResult],
           moves: dict[str, ratchet.Movement] | None = None) -> MergeRecord:
    """merge.json, then the scorecard (whose note adds where each ratchet went)."""
    moves = moves or {}  # the next change's ratchet baselines, and why each moved or stayed
    record = MergeRecord(change=change, winner=winner, head=head, note=note, grafts=results,
                         ratchets={name: RatchetMove.of(move) for name, move in moves.items()})
    if moves:
        note += "\n\nRatchet baselines for the next change: " + "; ".join(
            move.text() for move in moves.values())
    save_merge(score_mod.stage_path(loaded, change), record)
    score_mod.write_scorecard(loaded, change, note, [r.as_dict() for r in results])
    return record


def load(loaded: LoadedManifest, change: str) -> MergeRecord | None:
    """The stage's merge record, None before `merge` ran."""
    return load_merge(score_mod.stage_path(loaded, change))
