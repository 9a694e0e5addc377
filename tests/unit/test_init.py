"""`init` on the user's own repository (issue 34): every question has a flag and a
guess; without a terminal (or with --yes) it asks nothing; it writes beside the
repository and never touches it; what it writes loads and passes `up`'s refusals."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import jsonschema
import pytest

from runner.cli.app import main
from runner.commands.init import InitFlags, Question, init, must_answer
from runner.errors import BadInputError
from runner.manifest import json_schema, load_manifest
from runner.manifest.guess import guess_image, guess_parser, guess_protected
from runner.manifest.placeholders import require_ready

IDENTITY = ("-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *IDENTITY, *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout


def _commit(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "base")
    return root


@pytest.fixture
def python_repo(tmp_path: Path) -> Path:
    return _commit(tmp_path / "calc", {
        "pyproject.toml": "[project]\nname = 'calc'\n", "calc.py": "def add(a, b): ...\n",
        "tests/test_calc.py": "def test_add(): ...\n", "tests/test_io.py": ""})


@pytest.fixture
def node_repo(tmp_path: Path) -> Path:
    return _commit(tmp_path / "Web App", {
        "package.json": '{"name": "web"}\n', "index.js": "",
        "test/sum.test.js": "", "test/helpers.js": ""})


def test_a_python_repository_with_only_the_success_command(
        python_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    setup = python_repo.parent / "calc-bakeoff"
    exclude = (python_repo / ".git" / "info" / "exclude").read_text()
    assert main(["init", str(python_repo), "--success",
                 "pytest -q tests/test_calc.py::test_add"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"wrote {setup / 'bakeoff.toml'}", f"wrote {setup / 'briefs' / 'first-change.md'}",
        f"wrote {setup / 'agents' / 'control.sh'}", f"wrote {setup / 'agents' / 'scripted.sh'}",
        f"next: bakeoff-sandbox up -f {setup / 'bakeoff.toml'}"]
    loaded = load_manifest(setup / "bakeoff.toml")
    manifest = loaded.manifest
    assert (manifest.experiment.name, manifest.experiment.repo, manifest.experiment.base,
            manifest.experiment.agents_dir) == ("calc", "../calc", "main", "agents")
    assert (manifest.toolchain.image, manifest.toolchain.setup,
            manifest.toolchain.requires) == ("python", [], ["python3", "pytest", "git"])
    assert [(c.name, c.run, c.parser) for c in manifest.checks] == [
        ("tests", "pytest -q -p no:cacheprovider", "pytest")]
    (change,) = manifest.changes
    assert (change.id, change.protected, change.success.run, change.success.parser) == (
        "first-change", ["tests/test_calc.py"], "pytest -q tests/test_calc.py::test_add",
        "pytest")
    assert [(a.id, a.agent, a.command, a.model, a.control) for a in manifest.arms] == [
        ("control", "command", "sh /agents/control.sh {brief}", "scripted", True),
        ("scripted", "command", "sh /agents/scripted.sh {brief}", "scripted", False)]
    assert (setup / "agents" / "control.sh").stat().st_mode & 0o111
    assert "`pytest -q tests/test_calc.py::test_add` passes." in (
        setup / "briefs" / "first-change.md").read_text()
    require_ready(loaded)
    jsonschema.validate(tomllib.loads((setup / "bakeoff.toml").read_text()), json_schema())
    # The repository: not one file added, changed or excluded.
    assert _git(python_repo, "status", "--porcelain", "--ignored") == ""
    assert (python_repo / ".git" / "info" / "exclude").read_text() == exclude
    assert not (python_repo / "bakeoff.toml").exists()


def test_a_node_repository_guesses_node_its_test_and_its_parser(
        node_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = node_repo.parent / "elsewhere"
    assert main(["init", str(node_repo), "--yes", "--out", str(out), "--success",
                 "node --test test/sum.test.js", "--brief", "Sums are wrong."]) == 0
    manifest = load_manifest(out / "bakeoff.toml").manifest
    assert (manifest.experiment.name, manifest.experiment.repo) == ("web-app", "../Web App")
    assert (manifest.toolchain.image, manifest.toolchain.setup,
            manifest.toolchain.requires) == ("node", ["npm install"], ["node", "npm", "git"])
    assert [(c.run, c.parser) for c in manifest.checks] == [("npm test", "exit-code")]
    assert (manifest.changes[0].protected, manifest.changes[0].success.parser) == (
        ["test/sum.test.js"], "node-test")
    assert (out / "briefs" / "first-change.md").read_text() == "Sums are wrong.\n"


def test_every_flag_overrides_its_guess(python_repo: Path) -> None:
    flags = InitFlags(test="make check", success="sh check.sh", parser="junit",
                      image="bakeoff/mine:1", arms=("command", "claude-code", "codex"),
                      models=("claude-sonnet-4-5", "gpt-5"), protected=("tests/test_io.py",),
                      brief="b")
    done = init(python_repo, flags, must_answer)
    manifest = load_manifest(done.manifest).manifest
    assert (manifest.toolchain.image, manifest.toolchain.requires) == (
        "bakeoff/mine:1", ["git"])
    assert [(c.run, c.parser) for c in manifest.checks] == [("make check", "junit")]
    assert (manifest.changes[0].protected, manifest.changes[0].success.parser) == (
        ["tests/test_io.py"], "junit")
    assert [(a.id, a.agent, a.model, a.effort, a.effort_normalized, a.agent_version,
             a.secrets, a.network, a.control) for a in manifest.arms] == [
        ("control", "command", "scripted", "none", "none", None, [], "none", True),
        ("claude-code", "claude-code", "claude-sonnet-4-5", "high", "high", "2.1.328",
         ["ANTHROPIC_API_KEY"], "gateway", False),
        ("codex", "codex", "gpt-5", "high", "high", "0.169.0", ["OPENAI_API_KEY"], "gateway",
         False)]
    assert [p.name for p in done.written[2:]] == ["control.sh"]


def test_on_a_terminal_each_question_is_asked_with_its_guess(python_repo: Path) -> None:
    asked: list[tuple[str, str | None]] = []
    answers = {"the project's test command": "pytest -x",
               "the command that runs the failing test defining success (it FAILS now and "
               "PASSES once solved)": "pytest tests/test_calc.py"}

    def ask(question: Question) -> str:
        asked.append((question.text, question.default))
        return answers.get(question.text, question.default or "")

    done = init(python_repo, InitFlags(), ask)
    assert asked == [
        ("the image (python, node, rust, go, or yours)", "python"),
        ("the project's test command", "pytest -q -p no:cacheprovider"),
        ("the command that runs the failing test defining success (it FAILS now and "
         "PASSES once solved)", None),
        ("its parser (pytest, cargo, go-test, node-test, jest, vitest, junit, exit-code)",
         "pytest"),
        ("the test files to protect (restored before every sample)", "tests/test_calc.py"),
        ("the arms, the control first (command, claude-code, codex, opencode, gemini-cli, "
         "qwen-code, mini-swe-agent)", "command command"),
        ("the brief: the symptom, and what must hold once solved (Enter: one written from "
         "the commands)", "")]
    assert load_manifest(done.manifest).manifest.checks[0].run == "pytest -x"


def test_without_a_terminal_a_question_with_no_guess_names_its_flag(
        python_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(python_repo), "--yes"]) == 2
    assert capsys.readouterr().err == (
        "error: init: no answer for 'the command that runs the failing test defining "
        "success (it FAILS now and PASSES once solved)' and no terminal to ask\n"
        "  fix: pass --success CMD\n")
    assert not (python_repo.parent / "calc-bakeoff").exists()
    with pytest.raises(BadInputError, match="pass --model MODEL"):
        init(python_repo, InitFlags(success="x", arms=("command", "codex")), must_answer)


@pytest.mark.parametrize(("flags", "message"), [
    (InitFlags(success="x", arms=("command", "cursor")),
     "init: unknown agent(s) cursor\n  fix: use command, claude-code, codex, opencode, "
     "gemini-cli, qwen-code, mini-swe-agent"),
    (InitFlags(success="x", arms=("command",)),
     "init: a bake-off needs two arms at least (the control first)\n  fix: pass --arm "
     "twice, e.g. --arm command --arm claude-code"),
    (InitFlags(success="x", parser="tap"),
     "init: unknown parser 'tap'\n  fix: use one of: pytest, cargo, go-test, node-test, "
     "jest, vitest, junit, exit-code"),
])
def test_wrong_answers_are_refused_before_anything_is_written(
        python_repo: Path, flags: InitFlags, message: str) -> None:
    with pytest.raises(BadInputError) as caught:
        init(python_repo, flags, must_answer)
    assert str(caught.value) == message
    assert not (python_repo.parent / "calc-bakeoff").exists()


def test_init_needs_a_repository_root_with_a_commit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path), "--success", "x"]) == 2
    assert capsys.readouterr().err.startswith(
        f"error: init: {tmp_path} is not the root of a git repository\n")
    _git(tmp_path, "init", "-q", "-b", "main")
    assert main(["init", str(tmp_path), "--success", "x"]) == 2
    assert capsys.readouterr().err == (
        f"error: init: {tmp_path} has no commit yet\n  fix: commit your project first: "
        f"git -C {tmp_path} add -A && git -C {tmp_path} commit -m 'initial'\n")


def test_init_never_overwrites(python_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(python_repo), "--success", "x"]) == 0
    manifest = python_repo.parent / "calc-bakeoff" / "bakeoff.toml"
    manifest.write_text("# mine\n")
    assert main(["init", str(python_repo), "--success", "x"]) == 2
    assert f"{manifest}: already exists; init never overwrites anything" in (
        capsys.readouterr().err)
    assert manifest.read_text() == "# mine\n"


@pytest.mark.parametrize(("files", "image"), [
    ({"pyproject.toml"}, "python"), ({"setup.py"}, "python"), ({"package.json"}, "node"),
    ({"Cargo.toml"}, "rust"), ({"go.mod"}, "go"), ({"README.md"}, "python"),
    ({"package.json", "pyproject.toml"}, "python")])
def test_the_image_is_guessed_from_the_repository_s_files(files: set[str], image: str) -> None:
    assert guess_image(files) == image


@pytest.mark.parametrize(("command", "parser"), [
    ("pytest -q", "pytest"), ("python3 -m pytest tests", "pytest"), ("cargo test", "cargo"),
    ("go test ./...", "go-test"), ("node --test", "node-test"),
    ("npx vitest run", "vitest"), ("npx jest --ci", "jest"), ("npm test", "exit-code"),
    ("make check", "exit-code")])
def test_the_parser_is_guessed_from_the_command(command: str, parser: str) -> None:
    assert guess_parser(command) == parser


def test_the_protected_files_are_the_test_files_the_success_command_names() -> None:
    files = {"tests/test_a.py", "tests/helpers.py", "svc/x_test.go", "app.py"}
    assert guess_protected("pytest tests/test_a.py::t tests/helpers.py app.py", files) == [
        "tests/test_a.py"]
    assert guess_protected("cd svc && go test ./x_test.go", files) == ["svc/x_test.go"]
    assert guess_protected("pytest tests/test_missing.py", files) == []


def test_on_a_terminal_the_command_line_prompts_and_yes_asks_nothing(
        python_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from runner.cli import init as init_cli
    from runner.cli.app import app

    monkeypatch.setattr(init_cli, "on_terminal", lambda: True)
    answers = ["", "", "pytest -q tests/test_calc.py", "", "", "command claude-code",
               "claude-sonnet-4-5", "The sum is wrong."]
    done = CliRunner().invoke(app, ["init", str(python_repo)], input="\n".join(answers) + "\n")
    assert done.exit_code == 0, done.output
    assert "the image (python, node, rust, go, or yours) [python]: " in done.output
    assert "the test files to protect (restored before every sample) [tests/test_calc.py]: " \
        in done.output
    manifest = load_manifest(python_repo.parent / "calc-bakeoff" / "bakeoff.toml").manifest
    assert [(a.id, a.model) for a in manifest.arms] == [
        ("control", "scripted"), ("claude-code", "claude-sonnet-4-5")]
    assert manifest.changes[0].protected == ["tests/test_calc.py"]
    assert (python_repo.parent / "calc-bakeoff" / "briefs" / "first-change.md").read_text() \
        == "The sum is wrong.\n"
    again = CliRunner().invoke(app, ["init", str(python_repo), "--yes", "--out",
                                     str(python_repo.parent / "other")], input="")
    # --yes: nothing asked; the success command has no guess (main() makes it exit 2)
    assert isinstance(again.exception, BadInputError)
    assert "pass --success CMD" in str(again.exception)
