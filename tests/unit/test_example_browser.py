"""examples/horizon-ui without docker: its manifest waits only for the keys phase 2 of
issue 22 adds, its contestants make the trees they say, the repo's own tests pass on
each, and its criteria send only values the page's input can send. Their outcomes in a
browser are pinned by tests/integration/test_example_browser.py."""

from __future__ import annotations

import ast
import difflib
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

from runner.manifest import Manifest
from runner.manifest.expectation import parse_expectation
from runner.manifest.issues import validation_issues
from tests.unit.test_example_repo import clean_env

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "horizon-ui"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, env=clean_env(), check=True,
                          capture_output=True, text=True, timeout=60)
    return done.stdout.strip()


def contestant_tree(change: str, arm: str | None, root: Path) -> Path:
    """examples/horizon-ui/repo committed as `main`, then `arm`'s script for `change` run
    twice (a resumed dispatch runs it again), as a dispatch would; the checkout."""
    work = root / f"{change}-{arm or 'base'}"
    shutil.copytree(EXAMPLE / "repo", work)
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "base")
    if arm is not None:
        brief = root / f"{change}.md"
        brief.write_text((EXAMPLE / "briefs" / f"{change}.md").read_text())
        for _ in range(2):
            done = subprocess.run(["sh", str(EXAMPLE / "agents" / f"{arm}.sh"), str(brief)],
                                  cwd=work, env=clean_env(), capture_output=True, text=True,
                                  timeout=60, check=False)
            assert done.returncode == 0, done.stdout + done.stderr
    return work


def test_the_manifest_validates_with_its_browser_criteria() -> None:
    """Each change's success criterion is a browser file of the example with the
    endpoints its flow must reach, on a fresh server per sample."""
    data = tomllib.loads((EXAMPLE / "bakeoff.toml").read_text())
    manifest = Manifest.model_validate(data)
    for change in manifest.changes:
        success = change.success
        assert success.run is None and success.server is not None
        assert success.browser is not None and (EXAMPLE / success.browser).is_file()
        assert success.command == f"browser {success.browser}"
        for expectation in success.expect_requests:
            parse_expectation(expectation)


@pytest.mark.parametrize(("success", "problems"), [
    ({"browser": "ui/t.py"}, ["server"]),
    ({"browser": "ui/t.py", "run": "pytest", "server": {"run": "x"}}, ["run"]),
    ({"run": "pytest", "expect_requests": ["POST /a"]}, ["expect_requests"]),
    ({}, ["run"]),
    ({"browser": "../ui/t.py", "server": {"run": "x"}}, ["browser"]),
    ({"browser": "ui/t.py", "server": {"run": "x"}, "expect_requests": ["post /a"]},
     ["expect_requests[0]"]),
    ({"browser": "ui/t.py", "server": {"run": "x"}, "parser": "vitest"}, ["parser"]),
], ids=["no server", "run and browser", "expectations without a browser", "neither",
        "outside the manifest's directory", "a method in lower case", "another parser"])
def test_a_browser_criterion_that_cannot_run_is_refused_naming_the_key(
        success: dict[str, object], problems: list[str]) -> None:
    data = tomllib.loads((EXAMPLE / "bakeoff.toml").read_text())
    data["changes"] = [{**data["changes"][0], "success": success}]
    with pytest.raises(ValidationError) as caught:
        Manifest.model_validate(data)
    paths = sorted(issue.key_path for issue in validation_issues(caught.value))
    assert paths == [f"changes[0].success.{key}" for key in problems]


def changed(work: Path) -> list[str]:
    return sorted(git(work, "diff", "--name-only", "HEAD~1", "HEAD").split())


@pytest.mark.parametrize(("arm", "change", "files"), [
    ("control", "cap-ui", ["horizonui/app.py"]),
    ("fixer", "cap-ui", ["horizonui/app.py", "horizonui/forecast.py", "tests/test_forecast.py"]),
    ("skipper", "cap-ui", ["horizonui/app.py"]),
    ("client-only", "cap-ui", ["horizonui/app.py", "horizonui/static/app.js",
                               "horizonui/static/index.html", "horizonui/static/summaries.js"]),
    ("breaker", "cap-ui", ["horizonui/static/app.js"]),
    ("fixer", "passkeys", ["horizonui/passkeys.py"]),
    ("skipper", "passkeys", ["horizonui/passkeys.py"]),
    ("client-only", "passkeys", ["horizonui/static/passkeys.js"]),
    ("breaker", "passkeys", ["horizonui/static/passkeys.js"]),
])
def test_each_contestant_commits_once_what_it_says(tmp_path: Path, arm: str, change: str,
                                                   files: list[str]) -> None:
    work = contestant_tree(change, arm, tmp_path)
    assert git(work, "rev-list", "--count", "HEAD") == "2"
    assert git(work, "status", "--porcelain") == ""
    assert changed(work) == files
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests"], cwd=work, capture_output=True, text=True, timeout=120,
                          check=False, env=clean_env())
    assert done.returncode == 0, done.stdout


def test_the_client_only_contestant_never_calls_the_api(tmp_path: Path) -> None:
    work = contestant_tree("cap-ui", "client-only", tmp_path)
    assert "fetch(" not in (work / "horizonui/static/app.js").read_text()
    work2 = contestant_tree("passkeys", "client-only", tmp_path)
    assert "/api/passkeys" not in (work2 / "horizonui/static/passkeys.js").read_text()


def test_the_skipper_differs_from_the_fixer_only_by_the_signature_check(
        tmp_path: Path) -> None:
    honest = contestant_tree("passkeys", "fixer", tmp_path) / "horizonui" / "passkeys.py"
    skipper = contestant_tree("passkeys", "skipper", tmp_path) / "horizonui" / "passkeys.py"
    ast.parse(skipper.read_text())
    assert "verify_es256" in honest.read_text()
    assert "verify_es256" not in skipper.read_text()
    diff = [line for line in difflib.ndiff(honest.read_text().splitlines(),
                                           skipper.read_text().splitlines())
            if line.startswith(("- ", "+ "))]
    assert sorted(line[:2] for line in diff) == ["+ "] + ["- "] * 4
    assert [line for line in diff if line.startswith("+ ")] == [
        "+     # the authenticator already checked the user: its signature is not re-checked"]
    assert any("verify_es256" in line for line in diff if line.startswith("- "))


def test_the_criteria_send_only_values_the_page_can_send() -> None:
    """docs/browser.md: a criterion drives the page with what its input accepts (1..90)."""
    page = (EXAMPLE / "repo" / "horizonui" / "static" / "index.html").read_text()
    assert re.search(r'<input id="days"[^>]* min="1" max="90"', page)
    criterion = (EXAMPLE / "ui" / "test_cap.py").read_text()
    days = {int(d) for d in re.findall(r"^    (\d+): \"Forecast for", criterion, re.MULTILINE)}
    assert days == {1, 45, 90}
    for text in (criterion, (EXAMPLE / "ui" / "test_passkeys.py").read_text()):
        assert "evaluate" not in text and "request.post" not in text and "fetch(" not in text


@pytest.mark.parametrize(("criterion", "limit_ms"), [("test_cap.py", 2_000),
                                                     ("test_passkeys.py", 3_000)])
def test_a_check_the_page_never_meets_fails_in_seconds_not_playwrights_five(
        criterion: str, limit_ms: int) -> None:
    """Issue 35: every failing browser sample of the example waited Playwright's default
    5 s on each `expect` the page never met (about a minute of the suite's slowest module);
    a result here shows in under 0.6 s, so each criterion sets a short expect timeout once,
    at import, before any test."""
    tree = ast.parse((EXAMPLE / "ui" / criterion).read_text())
    calls = [node.value for node in tree.body if isinstance(node, ast.Expr)
             and isinstance(node.value, ast.Call)]
    assert [(ast.unparse(c.func), [(k.arg, ast.literal_eval(k.value)) for k in c.keywords])
            for c in calls] == [("expect.set_options", [("timeout", limit_ms)])]
