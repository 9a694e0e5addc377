"""The newcomer's errors of issue 34, each with its exact message: `up` refuses the
template's placeholders and a missing script before anything starts; a `{breif}` typo is
a manifest error at load; a scripted arm needs no identity and is not
effort_confounded; dispatch exits 3 when no arm's agent started."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from rig.rubric import score_arm
from rig.standings import flags
from runner.commands.dispatch.agents import ADAPTERS, render_template
from runner.commands.dispatch.record import ArmState
from runner.commands.dispatch.run import ArmOutcome, DispatchReport, NoAgentStartedError
from runner.errors import ManifestError
from runner.manifest import Arm, load_manifest, write_init
from runner.manifest.answers import Answers, ArmAnswer
from runner.manifest.arms import PLACEHOLDERS
from runner.manifest.placeholders import require_ready
from runner.manifest.scaffold import write_setup
from tests.unit.test_dispatch_units import record
from tests.unit.test_score import WEIGHTS, result

IDENTITY = ("-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false")
ARMS = (ArmAnswer("control", control=True), ArmAnswer("fixer"))


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *IDENTITY, *args], cwd=repo, check=True, capture_output=True)


def _repo(root: Path) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "tests" / "test_calc.py").write_text("from calc import add\n")
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "base")
    return root


def _ready(tmp_path: Path, **changes: object) -> Path:
    """A manifest beside a committed repository, as init writes it; `changes` edit the
    answers."""
    _repo(tmp_path / "repo")
    answers = Answers(name="calc", repo="../repo", success="pytest -q tests/test_calc.py",
                      test="pytest -q", protected=("tests/test_calc.py",), arms=ARMS)
    written = write_setup(tmp_path / "setup", replace(answers, **changes), "# brief\n")
    return written[0]


def _refusal(manifest: Path) -> str:
    with pytest.raises(ManifestError) as caught:
        require_ready(load_manifest(manifest))
    assert caught.value.exit_code == 2
    return str(caught.value)


def test_init_s_manifest_is_ready_as_it_is(tmp_path: Path) -> None:
    require_ready(load_manifest(_ready(tmp_path)))


def test_the_unedited_template_is_refused_key_by_key(tmp_path: Path) -> None:
    """Regression: `up` accepted the unedited template; each placeholder failed later."""
    write_init(tmp_path)
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "template")
    manifest = tmp_path / "bakeoff.toml"
    model_fix = ('name the model the arm runs (e.g. model = "claude-sonnet-4-5"); a '
                 "scripted command arm may leave model out")
    assert _refusal(manifest) == (
        f"{manifest}: arms[0].model: is the template's placeholder (found "
        f"'your-control-model')\n  fix: {model_fix}\n"
        f"{manifest}: arms[1].model: is the template's placeholder (found "
        f"'your-candidate-model')\n  fix: {model_fix}\n"
        f"{manifest}: changes[0].brief: is still the template's brief (found "
        f"'briefs/first-change.md')\n  fix: write the symptom and the acceptance criteria in "
        f"{tmp_path / 'briefs' / 'first-change.md'}\n"
        f"{manifest}: arms[0].command: runs /agents/C0.sh: {tmp_path / 'agents' / 'C0.sh'} "
        "does not exist (found 'sh /agents/C0.sh {brief}')\n"
        f"  fix: write the script at {tmp_path / 'agents' / 'C0.sh'}, or correct the command\n"
        f"{manifest}: arms[1].command: runs /agents/C1.sh: {tmp_path / 'agents' / 'C1.sh'} "
        "does not exist (found 'sh /agents/C1.sh {brief}')\n"
        f"  fix: write the script at {tmp_path / 'agents' / 'C1.sh'}, or correct the command")


def test_an_empty_protected_is_refused_when_the_success_command_runs_test_files(
        tmp_path: Path) -> None:
    manifest = _ready(tmp_path, protected=())
    assert _refusal(manifest) == (
        f"{manifest}: changes[0].protected: is empty, and the success command runs "
        "tests/test_calc.py: an arm could pass by rewriting its own test (found [])\n"
        '  fix: protected = ["tests/test_calc.py"]')


def test_a_script_inside_the_checkout_that_the_base_lacks_is_refused(tmp_path: Path) -> None:
    """Regression: the template's `agents/control.sh` showed as each arm's exit 127 at
    dispatch, after `up` had built every sandbox."""
    manifest = _ready(tmp_path)
    text = manifest.read_text().replace("sh /agents/control.sh {brief}",
                                        "agents/control.sh {brief}")
    manifest.write_text(text)
    assert _refusal(manifest) == (
        f"{manifest}: arms[0].command: runs agents/control.sh, which the base commit does "
        "not have (the command runs in the arm's checkout) (found 'agents/control.sh "
        "{brief}')\n"
        f"  fix: put the script in {tmp_path / 'setup' / 'agents'}/ and run it as "
        "sh /agents/control.sh {brief}")


def test_a_script_under_agents_without_agents_dir_is_refused(tmp_path: Path) -> None:
    manifest = _ready(tmp_path)
    manifest.write_text(manifest.read_text().replace('agents_dir = "agents"', ""))
    assert _refusal(manifest).splitlines()[:2] == [
        f"{manifest}: arms[0].command: runs /agents/control.sh, and /agents is mounted only "
        "from [experiment] agents_dir, which is not set (found 'sh /agents/control.sh "
        "{brief}')",
        '  fix: set agents_dir = "agents" (relative to the manifest) and put control.sh there']


@pytest.mark.parametrize("command", ["true", "sh -c 'echo {brief}'", "python3 -m agent",
                                     "/usr/bin/env", "sh calc.py {brief}",
                                     "FOO=1 ./calc.py"])
def test_programs_on_path_inline_scripts_and_files_of_the_base_pass(
        tmp_path: Path, command: str) -> None:
    manifest = _ready(tmp_path)
    literal = "'''" + command + "'''"  # a TOML literal string: no escapes
    manifest.write_text(manifest.read_text().replace('"sh /agents/control.sh {brief}"', literal))
    assert literal in manifest.read_text()
    require_ready(load_manifest(manifest))


def test_an_unknown_placeholder_is_a_manifest_error_at_load(tmp_path: Path) -> None:
    """Regression: a `{breif}` typo was caught at dispatch, after `up` built every sandbox."""
    manifest = _ready(tmp_path)
    manifest.write_text(manifest.read_text().replace("control.sh {brief}",
                                                     "control.sh {breif}"))
    with pytest.raises(ManifestError) as caught:
        load_manifest(manifest)
    assert str(caught.value) == (
        f"{manifest}: arms[0].command: unknown placeholder {{breif}}; the known ones are "
        "{brief}, {model}, {effort}, {arm} (found 'sh /agents/control.sh {breif}')\n"
        "  fix: write one of {brief}, {model}, {effort}, {arm} (a shell variable is written "
        "${NAME})")


def test_shell_variables_and_every_known_placeholder_load(tmp_path: Path) -> None:
    arm = Arm.model_validate({"id": "a", "command": "run ${HOME} $X {brief} {model} "
                              "{effort} {arm}"})
    assert arm.model == "scripted"


def test_every_adapter_template_fills_only_what_its_adapter_gives() -> None:
    """An adapter's own template is checked as an arm's command is: each name in it is
    a placeholder or one of the values its adapter renders raw."""
    arm = Arm.model_validate({"id": "a", "agent": "claude-code", "agent_version": "1",
                              "model": "m", "effort": "high", "effort_normalized": "high",
                              "effort_provenance": "experiment_config",
                              "effort_evidence": "e", "mode": "single_agent"})
    for name, adapter in ADAPTERS.items():
        if adapter.template is None:
            continue
        cli_arm = arm.model_copy(update={"agent": name})
        assert adapter.render(cli_arm, "/b", program="cli").strip(), name
    with pytest.raises(Exception, match=r"arms\.agent: unknown placeholder\(s\) \{nope\}"):
        render_template("{nope}", dict.fromkeys(PLACEHOLDERS, "x"), "arms.agent")


def test_a_scripted_arm_needs_only_its_id_and_command() -> None:
    arm = Arm.model_validate({"id": "s", "command": "sh /agents/s.sh {brief}"})
    assert (arm.model, arm.effort, arm.effort_normalized, arm.effort_provenance,
            arm.mode, arm.control) == ("scripted", "none", "none", "experiment_config",
                                       "single_agent", False)
    assert arm.effort_evidence == ("scripted contestant (a command arm without a model): a "
                                   "fixed program, no model and no reasoning budget")


def test_an_arm_stating_part_of_an_identity_must_state_it_all() -> None:
    """The defaults are for a scripted arm only: a model named without its effort is
    refused as before (never an effort made up for a real model)."""
    with pytest.raises(Exception, match="effort_normalized"):
        Arm.model_validate({"id": "s", "command": "x", "model": "m", "effort": "high"})
    with pytest.raises(Exception, match="model"):
        Arm.model_validate({"id": "s", "command": "x", "effort": "high"})


def test_an_all_scripted_round_is_not_effort_confounded_and_an_unknown_effort_still_is(
) -> None:
    scripted = [Arm.model_validate({"id": i, "command": "x", "control": i == "c"})
                for i in ("c", "s")]
    arms = [score_arm(arm, result(arm.id, "success", letters), {}, None, WEIGHTS)
            for arm, letters in zip(scripted, ("FFF", "PPP"), strict=True)]
    assert "effort_confounded" not in flags(arms)
    real = Arm.model_validate({"id": "r", "command": "x", "model": "m", "effort": "?",
                               "effort_normalized": "unknown", "effort_provenance": "unknown",
                               "effort_evidence": "none recorded", "mode": "single_agent"})
    arms.append(score_arm(real, result("r", "success", "PPP"), {}, None, WEIGHTS))
    assert "effort_confounded" in flags(arms)


def _report(*records: tuple[str, ArmState, int | None, bool]) -> DispatchReport:
    return DispatchReport("c", "s", [ArmOutcome(record(arm=arm, state=state, exit_code=code),
                                                skipped) for arm, state, code, skipped
                                     in records], 1.0)


def test_dispatch_exits_3_when_no_arm_s_agent_started(tmp_path: Path) -> None:
    """Regression: every arm's script missing showed as each arm's exit 127 while the
    command exited 0."""
    report = _report(("a", ArmState.FAILED, 127, False), ("b", ArmState.FAILED, 126, False))
    assert report.none_started
    with pytest.raises(NoAgentStartedError) as caught:
        report.require_started(tmp_path / "bakeoff.toml")
    assert caught.value.exit_code == 3
    assert str(caught.value) == (
        "no arm's agent started (126: cannot execute, 127: not found): a (exit 127), b "
        f"(exit 126)\n  fix: correct each arm's command in {tmp_path / 'bakeoff.toml'} (its "
        "dispatch log says what the shell could not run), then `bakeoff-sandbox down -f "
        f"{tmp_path / 'bakeoff.toml'}` and run again")


@pytest.mark.parametrize("records", [
    [("a", ArmState.FAILED, 127, False), ("b", ArmState.FINISHED, 0, False)],
    [("a", ArmState.FAILED, 127, False), ("b", ArmState.FAILED, 1, False)],
    [("a", ArmState.FAILED, 127, False), ("b", ArmState.TIMED_OUT, None, False)],
    [("a", ArmState.FAILED, 127, True)],
    [],
])
def test_one_arm_that_started_makes_the_others_127_their_own_result(
        records: list[tuple[str, ArmState, int | None, bool]]) -> None:
    report = _report(*records)
    assert not report.none_started
    report.require_started(Path("m.toml"))


def test_a_manifest_missing_where_init_wrote_one_beside_the_repository_names_it(
        tmp_path: Path) -> None:
    """`up` in the repository with no -f: the default ./bakeoff.toml is absent, and the
    error names the manifest `init` wrote beside it (`<repo>-bakeoff/`), not `init`."""
    repo = tmp_path / "calc"
    repo.mkdir()
    with pytest.raises(ManifestError) as raised:
        load_manifest(repo / "bakeoff.toml")
    assert raised.value.hint == ("write one with `bakeoff-sandbox init`, or pass -f FILE (the "
                                 "default is ./bakeoff.toml)")
    beside = tmp_path / "calc-bakeoff" / "bakeoff.toml"
    beside.parent.mkdir()
    beside.write_text("")
    with pytest.raises(ManifestError) as raised:
        load_manifest(repo / "bakeoff.toml")
    assert raised.value.hint == f"`init` wrote one beside the repository: pass -f {beside}"
