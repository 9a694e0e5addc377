"""`merge`: the top valid arm (or `--base ARM`) onto the experiment branch as it was
measured (where it changed harness, the branch keeps the base's: it ran under the
base's), then grafts: asked for (`--graft ARM:PATH`, `--graft ARM:COMMIT`) or proposed
(files an arm that played fair changed and the winner did not: `_sources`). A graft is
never harness, a protected file or a check's own program (`Never`, then
`rig.graft.harness_paths` in the grafted tree: withheld), never a change to a test the
branch has (`rig.graft.rewritten`: dropped), and is kept only when its re-verification
in fresh containers (success + checks) regressed nothing (`rig.graft.judge`: rates, ids,
counts, every sample graded). merge.json records each graft and what was withheld.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from rig import graft as graft_mod
from rig import ratchet, rubric, standings
from rig.sample import tree as tree_mod
from rig.sample.record import SampleRecord
from rig.sample.tree import Tree, UnsafeTreeError
from runner import contract, workspace
from runner.commands import sample_plan, sample_runs, services
from runner.commands import score as score_mod
from runner.containers.backend import ContainerEngine, Labels
from runner.containers.images.facts import ImageFacts
from runner.containers.images.prepared import Toolchain
from runner.containers.samples.tree import read_tree
from runner.errors import BadInputError
from runner.manifest import LoadedManifest
from runner.store import layout
from runner.store.records import (
    WITHHELD_KEPT,
    GraftResult,
    IdsFound,
    MergeRecord,
    RatchetMove,
    Withheld,
    load_merge,
    save_merge,
)
from runner.workspace import merge
from runner.workspace.git import GitError

Say = Callable[[str], None]
Records = dict[str, list[SampleRecord]]
PROTECTED = "protected (the success criterion's files are the base's, never an arm's)"
WINNER_HARNESS = ("the winner's change to harness: it was measured under the base's "
                  "harness, so the branch keeps the base's")
SHOWN = 5  # paths a line names


@dataclass(frozen=True)
class Never:
    """What a merge never grafts, before any tree is read: the protected files and
    harness by name or place. (A file a check's command names is the arm's code, measured
    as the arm's: graftable, and verified like any other; a grader's script is protected.)"""

    protected: frozenset[str] = frozenset()

    def why(self, path: str) -> str | None:
        if path in self.protected:
            return PROTECTED
        if merge.is_harness(path):
            return graft_mod.BY_NAME
        return None


def never(loaded: LoadedManifest, change: str, base: str) -> Never:
    """The stage's `Never`: its protected files."""
    return Never(frozenset(contract.protected_paths(loaded, change, base)))


def requested(loaded: LoadedManifest, change: str, asks: list[str], commits: dict[str, str],
              base: str, rules: Never = Never()
              ) -> tuple[list[merge.Candidate], list[tuple[str, str, str]]]:
    """`ARM:PATH` or `ARM:COMMIT` (every file that commit changed) as candidates, and
    what is withheld from them: a path a merge never grafts is refused (exit 2,
    `_graftable`); a commit's are left out (arm, path, why)."""
    found, withheld = [], []
    for ask in asks:
        arm, _, what = ask.partition(":")
        if arm not in commits or not what:
            raise BadInputError(f"--graft {ask!r}: expected ARM:PATH or ARM:COMMIT with an "
                                f"arm of {change!r}", hint=f"arms: {', '.join(commits)}")
        sha = workspace.commit_of(loaded.repo_path, what)
        if sha is None:
            _graftable(ask, what, rules.why(what),
                       merge.changed(loaded.repo_path, base, commits[arm]))
        paths = sorted(merge.changed(loaded.repo_path, f"{sha}^", sha)) if sha else [what]
        for path in paths:
            why = rules.why(path)
            if why is None:
                found.append(merge.Candidate(arm, commits[arm], path))
            else:
                withheld.append((arm, path, why))
    return found, withheld


def _graftable(ask: str, path: str, why: str | None, changed: set[str]) -> None:
    """An asked path a merge never grafts (`why`), or not the arm's change: exit 2,
    naming it and why."""
    shown = tree_mod.shown(path)
    if why is not None:
        raise BadInputError(
            f"--graft {ask!r}: {shown} is {why}: a merge never grafts it (every sample runs "
            "under the base's harness, and the branch is the next change's base)",
            hint="graft the arm's other files; change it by hand, outside the bake-off, if "
                 "you mean to")
    if path not in changed:
        raise BadInputError(f"--graft {ask!r}: the arm did not change {shown}: nothing to "
                            "graft", hint="name a file the arm changed, or one of its commits")


def verify(toolchain: Toolchain, loaded: LoadedManifest, change: str, commit: str, label: str,
           base: str, say: Say,
           settled: Callable[[list[SampleRecord]], bool] | None = None) -> Records:
    """Success + every check on `commit`, fresh containers each (a ratchet graded against
    the stage's frozen base value): the samples per check (with `settled`, those that ran
    until it held: `sample_runs.run_all`)."""
    stage = layout.merge_dir(sample_plan.stage_path(loaded, change))
    baselines = sample_plan.frozen_baselines(loaded, change)
    todo = [spec for plan in sample_plan.plans(loaded, change)
            for spec in sample_plan.plan_specs(loaded, change, label, plan, commit, base,
                                               baselines)]
    with sample_runs.executor_for(toolchain, base) as executor:
        records = sample_runs.run_all(executor, todo, stage, say,
                                      proofs=sample_plan.stage_path(loaded, change),
                                      settled=settled)
    grouped: Records = {}
    for record in records:
        grouped.setdefault(record.check, []).append(record)
    return grouped


def merge_stage(engine: ContainerEngine, loaded: LoadedManifest, change: str, say: Say, *,
                base_arm: str | None = None, grafts: list[str] | None = None,
                toolchain: Toolchain | None = None) -> dict[str, object]:
    """`merge_change`, its record as merge.json spells it (for callers that index it)."""
    return merge_change(engine, loaded, change, say, base_arm=base_arm, grafts=grafts,
                        toolchain=toolchain).model_dump(mode="json", by_alias=True)


def merge_change(engine: ContainerEngine, loaded: LoadedManifest, change: str, say: Say, *,
                 base_arm: str | None = None, grafts: list[str] | None = None,
                 toolchain: Toolchain | None = None) -> MergeRecord:
    """The winner (or `base_arm`) onto the branch, then the grafts; merge.json written."""
    toolchain = toolchain or Toolchain(engine, loaded, say)
    services.restore(engine, loaded, say)  # the graft verification's Postgres
    frozen = contract.require(toolchain, change)
    base = frozen.contract.base_commit
    arms = score_mod.stage_scores(loaded, change)
    commits = {a.arm: a.commit for a in arms}
    decision = standings.decide_winner(arms, loaded.manifest.contract.threshold)
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
    rules = never(loaded, change, base)
    asked, withheld = requested(loaded, change, grafts or [], commits, base, rules)
    by_arm = {a.arm: a for a in arms}
    merging = Merging(toolchain, loaded, change, base, say, _arm_rates(by_arm[winner]),
                      _records_of(by_arm[winner]), withheld)
    try:
        head = merging.winner(onto, winner, commits[winner])
    except UnsafeTreeError as error:
        raise BadInputError(f"{winner}'s tree cannot be merged: {error.message}",
                            hint="merge another arm (--base ARM)") from error
    head, results = merging.grafts(head, asked, _proposed(merging, arms, winner, rules))
    merge.advance(loaded.repo_path, branch, head)
    kept = sum(r.kept for r in results)
    note = (f"{winner} merged onto {branch}; {kept} of {len(results)} graft(s) kept; "
            f"head {head[:12]}" + _withheld_note(merging.withheld) + "".join(
                f"; not a graft source: {why}" for why in merging.excluded))
    moves = _moves(loaded, change, _merged_records(toolchain, loaded, change, head,
                                                   (winner, commits[winner]), base, say))
    return _write(loaded, change, winner, head, note, results, moves,
                  _grouped(merging.withheld))


def _proposed(merging: Merging, arms: Sequence[rubric.ArmScore], winner: str,
              rules: Never) -> list[merge.Candidate]:
    """The files a graft source (`_sources`) changed and the winner did not, minus what a
    merge never grafts (withheld, with why)."""
    commits = {a.arm: a.commit for a in arms}
    offered = merge.offered(merging.loaded.repo_path, merging.base, commits[winner],
                            _sources(merging, arms, winner, rules), set(rules.protected))
    merging.withheld += [(c.arm, c.path, why) for c in offered if (why := rules.why(c.path))]
    return [c for c in offered if rules.why(c.path) is None]


def _sources(merging: Merging, arms: Sequence[rubric.ArmScore], winner: str,
             rules: Never) -> dict[str, str]:
    """The arms a graft is proposed from: valid, every check passed, and no protected
    file changed (an arm that rewrote the success criterion's tests tried to cheat: none
    of its files is proposed; `merging.excluded` says so)."""
    found = {}
    for arm in arms:
        if arm.arm == winner or not arm.valid or any(
                c.rate.rate != 1.0 for c in arm.checks.values()):
            continue
        changed = merge.changed(merging.loaded.repo_path, merging.base, arm.commit)
        touched = sorted(changed & rules.protected)
        if touched:
            merging.excluded.append(f"{arm.arm} (it changed protected {_listed(touched)})")
        else:
            found[arm.arm] = arm.commit
    return found


@dataclass
class Merging:
    """One merge under way: what grafts are verified against, and what was withheld."""

    toolchain: Toolchain
    loaded: LoadedManifest
    change: str
    base: str
    say: Say
    floor: dict[str, float]  # the winner's pass-rates: no graft may go below
    before: Records          # the samples of the state the next graft goes onto
    withheld: list[tuple[str, str, str]] = field(default_factory=list)  # (arm, path, why)
    excluded: list[str] = field(default_factory=list)  # arms no graft is proposed from
    _importable: tuple[str, ...] | None = None

    def winner(self, onto: str, arm: str, commit: str) -> str:
        """The winner merged onto `onto`, then `onto`'s harness again where the winner
        changed it: the branch holds what was measured."""
        repo = self.loaded.repo_path
        head = merge.merge(repo, onto, commit, f"bakeoff: merge {arm} for {self.change}")
        self.say(f"merged {arm} ({commit[:12]}) onto {self.loaded.manifest.experiment.branch}")
        paths = sorted(self.harness(head, onto))
        if not paths:
            return head
        self.withheld += [(arm, path, WINNER_HARNESS) for path in paths]
        self.say(f"kept the base's harness over {arm}'s changes: {_listed(paths)}")
        return merge.restore(repo, head, onto, paths, "bakeoff: keep the base's harness "
                             f"(not {arm}'s: it was measured under the base's)") or head

    def harness(self, commit: str, onto: str) -> dict[str, str]:
        """The harness paths where `commit`'s tree differs from `onto`'s (`rig.graft`)."""
        repo = self.loaded.repo_path
        return graft_mod.harness_paths(read_tree(repo, commit), read_tree(repo, onto),
                                       self.importable())

    def importable(self) -> tuple[str, ...]:
        """The top-level module names the base image's python answers to (cached)."""
        if self._importable is None:
            name = self.loaded.manifest.experiment.name
            facts = ImageFacts(self.toolchain.engine, self.loaded.repo_path, name,
                               self.toolchain.for_commit(self.base),
                               Labels(name, "tool-check", "", secrets.token_hex(3)))
            self._importable = facts.python_modules()
        return self._importable

    def grafts(self, head: str, asked: list[merge.Candidate],
               proposed: list[merge.Candidate]) -> tuple[str, list[GraftResult]]:
        """Every graft in turn (the asked first), each onto the last kept one."""
        results = []
        for n, candidate in enumerate([*asked, *(c for c in proposed if c not in asked)], 1):
            head, result = self.graft(head, candidate, n, asked=candidate in asked)
            results += [] if result is None else [result]
        return head, results

    def graft(self, head: str, candidate: merge.Candidate, n: int, *, asked: bool
              ) -> tuple[str, GraftResult | None]:
        """One graft onto `head`: applied, refused when it would bring harness (withheld,
        no result), dropped unverified when it would change a test the branch has
        (`rig.graft.rewritten`), else re-verified and kept only when `rig.graft.judge`
        keeps it."""
        rationale = ("asked for with --graft" if asked else
                     f"{candidate.arm}'s checks all passed and it changed "
                     f"{tree_mod.shown(candidate.path)}, which the winner did not")
        try:
            grafted, onto, found = self._applied(head, candidate)
        except (GitError, UnsafeTreeError) as error:
            text = str(error).encode("utf-8", "replace").decode("utf-8")
            return head, self._dropped(candidate, rationale,
                                       f"could not be grafted: {text}"[:500])
        if grafted is None:
            return head, self._dropped(candidate, rationale, "nothing to graft: the branch "
                                                             "has it as the arm has it")
        if found:
            self.withheld += [(candidate.arm, path, why) for path, why in found.items()]
            self.say(f"graft {tree_mod.shown(candidate.path)}: withheld (harness: "
                     f"{_listed(list(found))})")
            return head, None
        rewrites = graft_mod.rewritten(candidate.path, onto, self.before)
        if rewrites is not None:
            return head, self._dropped(candidate, rationale, rewrites)
        return self._verified(head, grafted, candidate, n, rationale)

    def _applied(self, head: str, candidate: merge.Candidate
                 ) -> tuple[str | None, Tree, dict[str, str]]:
        """The graft's commit (None: nothing to graft), `head`'s tree, and the harness
        paths the graft would bring (`rig.graft.harness_paths`)."""
        repo = self.loaded.repo_path
        grafted = merge.graft(repo, head, candidate)
        if grafted is None:
            return None, {}, {}
        onto = read_tree(repo, head)
        return grafted, onto, graft_mod.harness_paths(read_tree(repo, grafted), onto,
                                                      self.importable())

    def _dropped(self, candidate: merge.Candidate, rationale: str, why: str) -> GraftResult:
        what = tree_mod.shown(candidate.path)
        self.say(f"graft {what}: dropped ({why})")
        return GraftResult(arm=candidate.arm, what=what, rationale=rationale, verified=False,
                           kept=False, why=why)

    def _verified(self, head: str, grafted: str, candidate: merge.Candidate, n: int,
                  rationale: str) -> tuple[str, GraftResult]:
        # A sample that lost a test decides the graft (dropped): the rest are not run.
        before = self.before
        after = verify(self.toolchain, self.loaded, self.change, grafted, f"graft-{n}",
                       self.base, self.say,
                       settled=lambda records: graft_mod.lost_already(before, records))
        judged = graft_mod.judge(self.floor, self.before, after)
        what = tree_mod.shown(candidate.path)
        result = GraftResult(arm=candidate.arm, what=what, rationale=rationale,
                             verified=True, kept=judged.kept, why=judged.why(),
                             by_id={check: IdsFound.of(found)
                                    for check, found in judged.ids.items()})
        self.say(f"graft {what}: " + ("kept (nothing regressed)" if judged.kept else
                                      f"dropped ({judged.why()})"))
        if not judged.kept:
            return head, result
        self.before = after
        return grafted, result


def _listed(paths: Sequence[str]) -> str:
    shown = ", ".join(tree_mod.shown(p) for p in paths[:SHOWN])
    return shown + (f" (+{len(paths) - SHOWN} more)" if len(paths) > SHOWN else "")


def _grouped(withheld: Sequence[tuple[str, str, str]]) -> list[Withheld]:
    """One record per (arm, why), paths in escaped form and bounded."""
    groups: dict[tuple[str, str], dict[str, None]] = {}
    for arm, path, why in withheld:
        groups.setdefault((arm, why), {})[path] = None
    return [Withheld(arm=arm, why=why, count=len(paths),
                     paths=[tree_mod.shown(p) for p in list(paths)[:WITHHELD_KEPT]])
            for (arm, why), paths in groups.items()]


def _withheld_note(withheld: Sequence[tuple[str, str, str]]) -> str:
    groups = _grouped(withheld)
    if not groups:
        return ""
    return ("; withheld from the branch (harness and protected files are never grafted): "
            + "; ".join(f"{g.arm}: {_listed(g.paths)}" for g in groups))


def _records_of(arm: rubric.ArmScore) -> Records:
    return {result.name: list(result.records) for result in arm.all_checks}


def _merged_records(toolchain: Toolchain, loaded: LoadedManifest, change: str, head: str,
                    winner: tuple[str, str], base: str, say: Say) -> Records | None:
    """The merged result's samples, per check (None without ratchets: nothing needs them):
    the winner's own when the merge left its tree as it was, else the last kept graft's
    re-verification, else a fresh verification of the head."""
    if not sample_plan.frozen_baselines(loaded, change):
        return None
    stage = sample_plan.stage_path(loaded, change)
    names = [p.name for p in sample_plan.plans(loaded, change)]
    def tree(ref: str) -> str:
        return workspace.run_git(loaded.repo_path, "rev-parse", f"{ref}^{{tree}}")
    if tree(head) == tree(winner[1]):
        return {name: score_mod.records_of(stage, winner[0], name) for name in names}
    folder = layout.merge_dir(stage)
    for label in layout.sample_arms(folder):
        found = {name: score_mod.records_of(folder, label, name) for name in names}
        if all(found.values()) and all(r.commit == head for rs in found.values() for r in rs):
            return found
    return verify(toolchain, loaded, change, head, f"merged-{head[:12]}", base, say)


def _moves(loaded: LoadedManifest, change: str,
           merged: Mapping[str, list[SampleRecord]] | None) -> dict[str, ratchet.Movement]:
    """Each ratchet's baseline for the next change (`rig.ratchet.move`); nothing merged:
    every baseline stays."""
    baselines = sample_plan.frozen_baselines(loaded, change)
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
    return {sample_plan.SUCCESS: arm.success.rate.rate,
            **{name: c.rate.rate for name, c in arm.checks.items()}}


def _write(loaded: LoadedManifest, change: str, winner: str | None, head: str, note: str,
           results: list[GraftResult], moves: dict[str, ratchet.Movement] | None = None,
           withheld: list[Withheld] | None = None) -> MergeRecord:
    """merge.json, then the scorecard (whose note adds where each ratchet went)."""
    moves = moves or {}  # the next change's ratchet baselines, and why each moved or stayed
    record = MergeRecord(change=change, winner=winner, head=head, note=note, grafts=results,
                         ratchets={name: RatchetMove.of(move) for name, move in moves.items()},
                         withheld=withheld or [])
    if moves:
        note += "\n\nRatchet baselines for the next change: " + "; ".join(
            move.text() for move in moves.values())
    save_merge(sample_plan.stage_path(loaded, change), record)
    score_mod.write_scorecard(loaded, change, note, [r.as_dict() for r in results])
    return record


def load(loaded: LoadedManifest, change: str) -> MergeRecord | None:
    """The stage's merge record, None before `merge` ran."""
    return load_merge(sample_plan.stage_path(loaded, change))
