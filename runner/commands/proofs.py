"""`up`'s proofs of a stage, before its contract is frozen (`prove`): the preflight passes,
the success criterion FAILS on the untouched base (principle 2) and, when a reference is
given, PASSES on it (principle 7); the ratchets' base values are measured. `record`
writes what they found as stage.json.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rig import contract as contract_mod
from rig import preflight, ratchet
from rig.contract import LockVersion
from rig.errors import RigError
from rig.sample import metric
from rig.sample.oracle import sample_dir
from rig.sample.record import SampleRecord
from rig.sample.verdict import Verdict
from rig.stats import PassRate, pass_rate
from runner import contract, workspace
from runner.commands import sample_plan, sample_runs
from runner.containers.samples.executor import DockerSampleExecutor
from runner.contract import RatchetBaseline
from runner.errors import BadInputError
from runner.manifest import LoadedManifest
from runner.store.records import BaselineProof, RatchetBase, ReferenceProof, StageRecord, save_stage

Progress = Callable[[str], None]
NO_SIGNAL = ("no signal: the task passes before any change; calibrate it until the "
             "control fails")


class BaselineError(BadInputError):
    """The base does not fail deterministically: there is no task to measure (exit 2)."""


@dataclass(frozen=True)
class Proof:
    baseline: PassRate
    baseline_verdicts: list[str]
    reference_commit: str | None
    reference: PassRate | None
    caveats: list[str]
    ratchets: dict[str, RatchetBaseline] = field(default_factory=dict)  # check -> its base value

    @property
    def baselines(self) -> dict[str, float]:
        """What the contract freezes as `ratchet_baselines`."""
        return {name: found.value for name, found in self.ratchets.items()}


def reference_commit(loaded: LoadedManifest, change: str, base: str) -> str | None:
    """The reference as a commit: a ref as is, or a patch applied onto the base in a
    private index (no branch, no working tree touched)."""
    reference = loaded.change(change).reference
    if not reference:
        return None
    repo = loaded.repo_path
    patch = contract_mod.reference_file(loaded, reference)
    if patch is None:
        return workspace.commit_of(repo, reference)
    try:
        commit = workspace.commit_patch(repo, base, patch, f"reference for {change}")
    except workspace.GitError as error:
        raise RigError(f"the reference patch {patch} does not apply to the base "
                       f"{base[:12]}: {error.message}",
                       hint="regenerate the patch against the base") from error
    workspace.run_git(repo, "update-ref", f"refs/bakeoff/reference/{change}", commit)
    return commit


def run_preflight(executor: DockerSampleExecutor, loaded: LoadedManifest, change: str) -> None:
    manifest = loaded.manifest
    commands = [preflight.Command(f"checks[{c.name}].run", c.run) for c in manifest.checks]
    run = loaded.change(change).success.run
    if run is not None:  # a browser criterion's command is the rig's own
        commands.append(preflight.Command(f"changes[{change}].success.run", run))
    preflight.check(manifest.toolchain.requires, commands, executor.image.tag,
                    executor.missing_tools)


def _samples(executor: DockerSampleExecutor, loaded: LoadedManifest, change: str,
             commit: str, base: str, who: str, stage: Path, say: Progress) -> list[SampleRecord]:
    """The success criterion's samples of `commit` in the proofs' sample root `stage`. The
    base's own run without diagnosis; the reference's graded as an arm's is, against the
    baseline's samples (its protected tests by id, the differential rules): a reference
    passes only where an honest arm's fix could."""
    plan = sample_plan.check_plan(loaded, change, sample_plan.SUCCESS)
    todo = sample_plan.specs(loaded, change, who, plan, commit, base,
                             loaded.manifest.contract.samples)
    of_base = commit == base
    return sample_runs.run_all(executor, todo, stage, say, diagnose=not of_base,
                               proofs=None if of_base else stage.parent.parent)


def prove(executor: DockerSampleExecutor, loaded: LoadedManifest, change: str, base: str,
          stage: Path, say: Progress, *, allow_passing_baseline: bool) -> Proof:
    """Preflight, then the baseline proof, then the reference proof; refuse on any doubt."""
    run_preflight(executor, loaded, change)
    say(f"baseline: the success criterion on the untouched base "
        f"({loaded.manifest.contract.samples} fresh containers)")
    records = _samples(executor, loaded, change, base, base, "baseline", stage, say)
    caveats = _judge_baseline(records, allow_passing_baseline,
                              sample_dir(stage, "baseline", sample_plan.SUCCESS))
    reference = reference_commit(loaded, change, base)
    reference_rate = None
    if reference is not None:
        say(f"reference: {reference[:12]} must pass every sample")
        done = _samples(executor, loaded, change, reference, base, "reference", stage, say)
        reference_rate = pass_rate(r.verdict for r in done)
        if any(r.verdict is not Verdict.PASS for r in done):
            shown = ", ".join(f"{r.verdict}({r.reason})" for r in done)
            raise RigError(f"the rig cannot pass this task: the reference {reference[:12]} "
                           f"gave {shown}", hint="fix the success criterion, the reference or "
                           "the toolchain until the reference passes every sample")
    ratchets = ratchet_baselines(executor, loaded, change, base, stage, say)
    return Proof(pass_rate(r.verdict for r in records), [str(r.verdict) for r in records],
                 reference, reference_rate, caveats, ratchets)


def ratchet_baselines(executor: DockerSampleExecutor, loaded: LoadedManifest, change: str,
                      base: str, stage: Path, say: Progress) -> dict[str, RatchetBaseline]:
    """Every ratchet's base value: a known one (frozen, or carried from the previous
    change: never re-measured, so a lowered value is never baked in) as it is; the others
    measured on the base in `samples` fresh containers that must all agree. No value or
    no agreement is the rig's problem: `RatchetError`, exit 3."""
    if not any(c.kind == "ratchet" for c in loaded.manifest.checks):
        return {}
    known = contract.known_baselines(loaded, change,
                                   contract.build_contract(loaded, change, base, executor.image))
    todo = [p for p in sample_plan.plans(loaded, change)[1:]
            if sample_plan.ratchet_of(loaded, p.name, None) is not None and p.name not in known]
    if not todo:
        return known
    say(f"ratchets: measuring {', '.join(p.name for p in todo)} on the untouched base "
        f"({loaded.manifest.contract.samples} fresh containers each)")
    records = sample_runs.run_all(executor, [
        spec for plan in todo
        for spec in sample_plan.plan_specs(loaded, change, "baseline", plan, base, base, None)],
        stage, say, diagnose=False)
    measured, problems = dict(known), []
    for plan in todo:
        mine = [r for r in records if r.check == plan.name]
        try:
            value = ratchet.baseline(plan.name, mine)
        except ratchet.RatchetError as error:
            problems.append(error)
            continue
        measured[plan.name] = RatchetBaseline(
            value, f"measured on the base ({len(mine)} samples agree)")
        say(f"ratchet {plan.name}: base value {metric.show(value)}")
    if problems:
        raise ratchet.RatchetError("; ".join(p.message for p in problems),
                                   hint=problems[0].hint)
    return measured


def _judge_baseline(records: list[SampleRecord], allow_passing: bool,
                    logs: Path) -> list[str]:
    """The baseline's caveats; `logs`: where its samples are (named when one broke)."""
    verdicts = [r.verdict for r in records]
    shown = ", ".join(f"{r.verdict}({r.reason})" if r.reason else str(r.verdict)
                      for r in records)
    if Verdict.RIG_ERROR in verdicts:
        why = next(r.detail for r in records if r.verdict is Verdict.RIG_ERROR)
        raise RigError(f"the baseline is a rig problem, not a task: {shown}"
                       + (f"; {why}" if why else ""),
                       hint="run `bakeoff-sandbox reproduce` on a baseline sample, or read its "
                            f"log under {logs}/")
    passed = verdicts.count(Verdict.PASS)
    if passed == 0:
        return []
    if passed < len(verdicts) and not allow_passing:
        raise BaselineError(f"flaky baseline: the untouched base passed {passed} of "
                            f"{len(verdicts)} samples ({shown})",
                            hint="make the success criterion deterministic first")
    if not allow_passing:
        raise BaselineError(NO_SIGNAL, hint="or pass --allow-passing-baseline, recorded as a "
                            "caveat of every result of this stage")
    return [f"baseline passed {passed} of {len(verdicts)} samples (--allow-passing-baseline)"]


def record(stage: Path, change: str, base: str, proof: Proof,
           version: LockVersion) -> StageRecord:
    """stage.json: what the proofs found, under the contract version they froze."""
    reference = None
    if proof.reference is not None and proof.reference_commit is not None:
        reference = ReferenceProof(commit=proof.reference_commit,
                                           pass_rate=proof.reference.rate)
    made = StageRecord(
        change=change, base_commit=base, contract_version=version.version,
        contract_sha256=version.sha256,
        baseline=BaselineProof(pass_rate=proof.baseline.rate,
                               verdicts=[Verdict(v) for v in proof.baseline_verdicts]),
        reference=reference, caveats=proof.caveats,
        ratchets={name: RatchetBase(value=found.value, source=found.source)
                  for name, found in proof.ratchets.items()})
    save_stage(stage, made)
    return made
