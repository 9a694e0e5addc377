"""The judges of `score`: the four subjective dims of every arm, by a judge that is not a
contestant (`[contract] judge`, read by `runner.manifest.judge`).

A command judge runs on the host (`rig.judge.run_judge`). An agent judge
(``"claude-code:<model>@<effort>"``, ``"codex:..."``) runs its pinned CLI in a container
whose only door is a model gateway of its own (`runner.containers.judge`): the judge's
real key stays in the gateway, and the gateway's records of each judge's requests (role
``judge``, under the stage's ``judge/gateway/``) are its usage, reported apart from the
arms'. Each answer is kept in ``judge/<arm>.json`` (its wire beside it, in
``<arm>.wire.json``); an arm already judged is not asked again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rig import judge as judge_mod
from rig import wire
from rig.persist import write_text_atomic
from rig.rubric import SUBJECTIVE, DimScore, JudgeScores
from rig.sample.tree import shown
from runner import contract, workspace
from runner.commands.dispatch.agents import CLI_ENV, gateway_env, judge_command
from runner.containers import judge as judge_box
from runner.containers import sandbox
from runner.containers.images import agent_cli
from runner.containers.images.prepared import ResolvedImages
from runner.errors import BadInputError
from runner.manifest import LoadedManifest
from runner.manifest.judge import JudgeSpec, spec_of
from runner.store import layout

Say = Callable[[str], None]
JUDGE_TIMEOUT_S = 300
JUDGE_ATTEMPTS = 2
JUDGE_FAILED = "judge_failed"
JUDGE_DIFF_LIMIT = 1024 * 1024  # the arm's diff as the judge reads it; the rest is cut
JUDGE_DIFF_COUNTED = 16 * 1024 * 1024  # bytes of the rest counted; then git is stopped
OUTPUT_TAIL = 4000


def run_judges(toolchain: ResolvedImages, change: str, commits: dict[str, str], base: str,
               stage: Path, checks: list[str], say: Say) -> None:
    """Judge every arm of `commits` not judged yet (`checks`: the names whose first
    sample's log tail the judge reads)."""
    loaded = toolchain.loaded
    spec = spec_of(loaded.manifest.contract)
    todo = {arm: commit for arm, commit in commits.items()
            if not layout.judge_answer(stage, arm).exists()}
    if spec.kind == "none" or not todo:
        return
    docs = {arm: _document(loaded, change, arm, commit, base, stage, checks)
            for arm, commit in todo.items()}
    if spec.kind == "command":
        def by_command(arm: str) -> None:
            scores = judge_mod.run_judge(spec.template, docs[arm], loaded.root, JUDGE_TIMEOUT_S)
            _keep(stage, arm, scores, say)

        failed = _each(by_command, list(docs), max(1, os.cpu_count() or 1))  # on this machine
    else:
        failed = _by_agent(toolchain, spec, change, stage, docs, say)
    _settle(stage, failed, judged=len(commits) - len(failed), say=say)


def _each(work: Callable[[str], None], arms: list[str],
          workers: int) -> dict[str, judge_mod.JudgeError]:
    """Judges are independent (one arm each, blind to the others): ask them concurrently,
    each twice at most (a model's answer can be a fluke); the arms still without an
    answer, with the judge's last error."""
    def attempt(arm: str) -> judge_mod.JudgeError | None:
        error: judge_mod.JudgeError | None = None
        for _ in range(JUDGE_ATTEMPTS):
            try:
                work(arm)
                return None
            except judge_mod.JudgeError as caught:
                error = caught
        return error

    with ThreadPoolExecutor(max_workers=workers) as pool:
        outcomes = dict(zip(arms, pool.map(attempt, arms), strict=True))
    return {arm: error for arm, error in outcomes.items() if error is not None}


def _settle(stage: Path, failed: dict[str, judge_mod.JudgeError], judged: int,
            say: Say) -> None:
    """The differential rule, for the judge: when it judged no arm at all, the judge is
    broken (the rig's fault, exit 3); when it judged others and not this one, this arm's
    own work (its diff, its outputs: the only input that differs) kept the judge from
    answering, and the arm loses the subjective dims (0, the reason as evidence). A
    contestant can lose; it can never void a round."""
    if not failed:
        return
    if judged == 0:
        raise next(iter(failed.values()))
    for arm, error in failed.items():
        why = (f"{JUDGE_FAILED}: the judge answered every other arm and gave no judgement "
               f"of this arm's work after {JUDGE_ATTEMPTS} attempts: "
               + str(error).splitlines()[0][:400])
        _keep(stage, arm, JudgeScores(**{dim: DimScore(0.0, why) for dim in SUBJECTIVE}),
              say)


def _document(loaded: LoadedManifest, change: str, arm: str, commit: str, base: str,
              stage: Path, checks: list[str]) -> dict[str, Any]:
    brief = loaded.brief_path(change).read_text(encoding="utf-8")
    protected = [shown(p) for p in contract.protected_paths(loaded, change, base)]
    diff, more = workspace.work_diff(loaded.repo_path, base, commit, limit=JUDGE_DIFF_LIMIT,
                                     count=JUDGE_DIFF_COUNTED)
    if more:
        omitted = f"{more}" if more <= JUDGE_DIFF_COUNTED else f"more than {JUDGE_DIFF_COUNTED}"
        diff += f"\n[bakeoff: diff truncated: {omitted} bytes omitted]\n"
    outputs = {name: _log_tail(stage, arm, name) for name in checks}
    return judge_mod.judge_input(change, arm, brief, diff, protected, outputs)


def _log_tail(stage: Path, arm: str, check: str) -> str:
    log = layout.sample_log(stage, arm, check, 1)
    return log.read_text(encoding="utf-8")[-OUTPUT_TAIL:] if log.exists() else ""


def _keep(stage: Path, arm: str, scores: JudgeScores, say: Say) -> None:
    write_text_atomic(layout.judge_answer(stage, arm), json.dumps(
        {d: {"score": s.score, "evidence": s.evidence} for d, s in scores.dims().items()},
        indent=2) + "\n")
    say(f"judge: {arm} " + ", ".join(f"{d}={s.score:g}" for d, s in scores.dims().items()))


def judge_key(loaded: LoadedManifest, environ: Mapping[str, str]) -> str | None:
    """The agent judge's real key, from the orchestrator's environment (for its gateway);
    None for any other judge. `score` asks before its first sample."""
    spec = spec_of(loaded.manifest.contract)
    if spec.kind != "agent":
        return None
    value = environ.get(spec.key, "")
    if not value.strip():
        raise BadInputError(f"[contract] judge {spec.cli}:{spec.model} needs its key in "
                            f"${spec.key}, which is not set (or empty)",
                            hint=f"export {spec.key} before `score`: the judge's gateway "
                                 "holds it, the judge never sees it")
    return value


def _by_agent(toolchain: ResolvedImages, spec: JudgeSpec, change: str, stage: Path,
              docs: dict[str, dict[str, Any]], say: Say) -> dict[str, judge_mod.JudgeError]:
    loaded, engine = toolchain.loaded, toolchain.engine
    manifest = loaded.manifest
    key = judge_key(loaded, os.environ) or ""
    image = agent_cli.layer(engine, toolchain.gateway_image, agent_cli.cli_for(spec.cli),
                            spec.version)
    session = judge_box.SessionSpec(
        manifest.experiment.name, change, manifest.gateway, toolchain.gateway_image.image_id,
        layout.judge_gateway_dir(stage), spec.model, spec.provider, spec.key, key)
    command = judge_command(spec.cli, agent_cli.cli_for(spec.cli).program_path(), spec.model,
                            spec.effort)
    with judge_box.session(engine, session, list(docs)) as judges:
        say(f"judge: {spec.cli} {spec.model}@{spec.effort} through its gateway, "
            f"{len(docs)} arm(s)")

        def by_agent(arm: str) -> None:
            job = judge_box.JudgeRun(image.image_id, command,
                                     {**CLI_ENV[spec.cli], **gateway_env(judges.tokens[arm])},
                                     arm, JUDGE_TIMEOUT_S)
            code, out, err = judge_box.run(engine, judges, manifest.experiment.name, job,
                                           judge_mod.judge_prompt(docs[arm]))
            judges.read_records(engine)
            _keep_wire(stage, change, arm, spec)
            if code != 0:
                raise judge_mod.JudgeError(
                    [f"the {spec.cli} judge of {arm} exited {code}"], output=err or out,
                    hint=f"see the judge's requests in {layout.judge_wire(stage, arm)}")
            _keep(stage, arm, judge_mod.parse_judgement(judge_mod.agent_answer(spec.cli, out)),
                  say)

        return _each(by_agent, list(docs), sandbox.workers(engine))


def _keep_wire(stage: Path, change: str, arm: str, spec: JudgeSpec) -> None:
    """What the judge of `arm` really ran, from its gateway's records."""
    records = layout.gateway_requests(layout.judge_dir(stage), change)
    lines = wire.read_lines(records, arm, role="judge")
    seen = wire.observe(spec.model, spec.effort, lines)
    summary = wire.summarize(lines, str(records.relative_to(stage)))
    write_text_atomic(layout.judge_wire(stage, arm), json.dumps({
        "arm": arm, "judge": f"{spec.cli}:{spec.model}@{spec.effort}", "version": spec.version,
        "model_observed": seen.model_observed, "effort_observed": seen.effort_observed,
        "evidence": seen.evidence, "marks": list(seen.marks),
        "usage": summary.model_dump(mode="json")}, indent=2) + "\n")
