"""The bundled example (examples/horizon): its repo, scripted contestants, judge, manifests.

No docker: the example repo is copied into a temporary git repository and its tests run
with the host Python (the DB-writing tests skip without DATABASE_URL); each scripted
contestant runs with `sh` in its own copy, exactly as inside an arm's sandbox (cwd = the
checkout, the brief path as $1).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

from runner.manifest import load_manifest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "horizon"
REPO = EXAMPLE / "repo"
AGENTS = EXAMPLE / "agents"
BRIEFS = {"cap-horizon": EXAMPLE / "briefs" / "cap-horizon.md",
          "horizon-units": EXAMPLE / "briefs" / "horizon-units.md"}

TESTS_CHECK = ["tests", "--ignore=tests/test_horizon.py", "--ignore=tests/test_units.py"]
SUCCESS = {"cap-horizon": ["tests/test_horizon.py"],
           "horizon-units": ["tests/test_units.py", "tests/test_horizon.py"]}
PROTECTED = ("tests/test_horizon.py", "tests/test_units.py")
SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s\s*=*$")
GIT_ID = {"GIT_AUTHOR_NAME": "example-test", "GIT_AUTHOR_EMAIL": "example-test@invalid",
          "GIT_COMMITTER_NAME": "example-test", "GIT_COMMITTER_EMAIL": "example-test@invalid"}


def clean_env(**extra: str) -> dict[str, str]:
    """The host environment minus anything that would leak into the example's runs."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "BAKEOFF_", "GIT_")) and k not in (
               "DATABASE_URL", "ANTHROPIC_API_KEY", "PYTHONPATH", "COVERAGE_PROCESS_START")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return {**env, **GIT_ID, **extra}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, env=clean_env(), check=True,
                          capture_output=True, text=True)
    return done.stdout


def make_repo(dest: Path, source: Path = REPO) -> Path:
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", ".git"))
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "base")
    git(dest, "tag", "base")  # the arm's base commit (the agents commit onto main)
    return dest


@dataclass(frozen=True)
class Run:
    exit_code: int
    output: str

    @property
    def summaries(self) -> list[dict[str, int]]:
        found = []
        for line in self.output.splitlines():
            match = SUMMARY.match(line.strip())
            if match:
                found.append({word: int(n) for n, word in
                              re.findall(r"(\d+) (\w+)", match.group(1))})
        return found

    @property
    def counts(self) -> dict[str, int]:
        """pytest's own (first) summary line; a spoofed one may follow."""
        assert self.summaries, self.output
        return self.summaries[0]


def pytest_run(repo: Path, *args: str) -> Run:
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=repo, env=clean_env(), capture_output=True, text=True, timeout=60)
    return Run(done.returncode, done.stdout + done.stderr)


def compiles(repo: Path) -> Run:
    done = subprocess.run([sys.executable, "-m", "compileall", "-q", "src"], cwd=repo,
                          env=clean_env(), capture_output=True, text=True, timeout=60)
    return Run(done.returncode, done.stdout + done.stderr)


def run_agent(repo: Path, script: str, change: str = "cap-horizon", **env: str) -> Run:
    """Run a scripted contestant as the sandbox would: cwd = checkout, the brief as $1."""
    done = subprocess.run(
        ["sh", str(AGENTS / f"{script}.sh"), str(BRIEFS[change])], cwd=repo,
        env=clean_env(**{"BAKEOFF_CHANGE": change, "BAKEOFF_EXPERIMENT": "horizon",
                         "BAKEOFF_ARM": script, **env}),
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return Run(done.returncode, done.stdout + done.stderr)


def changed_files(repo: Path, since: str = "base") -> set[str]:
    return set(git(repo, "diff", "--name-only", since, "HEAD").split())


FILE_STATUS = re.compile(r"^(PASSED|FAILED|ERROR|XPASS|XFAIL) (tests/[^:\s]+)")
FILE_SKIPS = re.compile(r"^SKIPPED \[(\d+)\] (tests/[^:\s]+)")
WORDS = {"PASSED": "passed", "XPASS": "passed", "FAILED": "failed", "ERROR": "errors",
         "XFAIL": "skipped"}


@dataclass(frozen=True)
class Suite:
    """One `pytest -rA tests` run, read per test file (one run instead of one per check)."""

    run: Run
    by_file: dict[str, dict[str, int]]

    @classmethod
    def of(cls, repo: Path) -> Suite:
        run = pytest_run(repo, "-rA", "tests")
        by_file: dict[str, dict[str, int]] = {}
        for line in run.output.splitlines():
            if match := FILE_STATUS.match(line):
                word, path, n = WORDS[match[1]], match[2], 1
            elif match := FILE_SKIPS.match(line):
                word, path, n = "skipped", match[2], int(match[1])
            else:
                continue
            counts = by_file.setdefault(path, {})
            counts[word] = counts.get(word, 0) + n
        return cls(run, by_file)

    def counts(self, files: list[str] | None = None) -> dict[str, int]:
        """Counts over `files`; None: the tests check (every file but the success tests)."""
        total: dict[str, int] = {}
        for path, counts in self.by_file.items():
            if (path in files) if files is not None else (path not in PROTECTED):
                for word, n in counts.items():
                    total[word] = total.get(word, 0) + n
        return total


@dataclass(frozen=True)
class Arm:
    repo: Path
    agent: Run
    suite: Suite | None

    @property
    def tests(self) -> Suite:
        assert self.suite is not None, "prepared without a suite run"
        return self.suite


WORKERS = min(4, (os.cpu_count() or 1) + 1)


def prepare(dest: Path, script: str | None, change: str = "cap-horizon", *,
            source: Path = REPO, suite: bool = True, **env: str) -> Arm:
    repo = make_repo(dest, source)
    agent = run_agent(repo, script, change, **env) if script else Run(0, "")
    return Arm(repo, agent, Suite.of(repo) if suite else None)


def prepare_all(jobs: dict[str, Callable[[], Arm]]) -> dict[str, Arm]:
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


SECRET = "sk-ant-test-0123456789"
WITH_SUITE = ("control", "fixer", "fixer-graft", "broken", "drop-test", "more-tests")
WITHOUT_SUITE = ("cheat", "no-commit", "probe", "lint-noise")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("horizon")


@pytest.fixture(scope="module")
def arms(workspace: Path) -> dict[str, Arm]:
    """The base and every contestant after change 1, each in its own checkout."""
    jobs: dict[str, Callable[[], Arm]] = {"base": lambda: prepare(workspace / "base", None)}
    for name in WITH_SUITE + WITHOUT_SUITE:
        jobs[name] = partial(prepare, workspace / name, name, suite=name in WITH_SUITE)
    jobs["leaky"] = lambda: prepare(workspace / "leaky", "leaky", suite=False,
                                    ANTHROPIC_API_KEY=SECRET,
                                    LEAKY_FILE=str(workspace / "leaky-key.txt"))
    return prepare_all(jobs)


@pytest.fixture(scope="module")
def merged(workspace: Path, arms: dict[str, Arm]) -> Path:
    """Change 2's base as the demo should produce it: fixer's commit + fixer-graft's db.py."""
    repo = workspace / "merged"
    shutil.copytree(arms["fixer"].repo, repo)
    shutil.copy(arms["fixer-graft"].repo / "src/horizon/db.py", repo / "src/horizon/db.py")
    git(repo, "commit", "-q", "-am", "graft from fixer-graft: src/horizon/db.py")
    return repo


@pytest.fixture(scope="module")
def units(workspace: Path, merged: Path) -> dict[str, Arm]:
    """Every contestant after change 2, from the merged head."""
    jobs: dict[str, Callable[[], Arm]] = {
        "base": lambda: prepare(workspace / "units-base", None, source=merged)}
    for name in ("control", "fixer-graft", "cheat", "broken"):
        jobs[name] = partial(prepare, workspace / f"units-{name}", name, "horizon-units",
                             source=merged, suite=name not in ("cheat", "broken"))
    # fixer gets no BAKEOFF_CHANGE: the brief alone must select the change
    jobs["fixer"] = lambda: prepare(workspace / "units-fixer", "fixer", "horizon-units",
                                    source=merged, BAKEOFF_CHANGE="")
    return prepare_all(jobs)


# --- the base --------------------------------------------------------------------------


def test_base_checks_pass_and_both_success_criteria_fail(arms: dict[str, Arm]) -> None:
    base = arms["base"]
    assert base.tests.counts() == {"passed": 11, "skipped": 3}  # 14 passed with DATABASE_URL
    assert base.tests.counts(SUCCESS["cap-horizon"]) == {"failed": 7, "passed": 1}
    assert base.tests.counts(SUCCESS["horizon-units"]) == {"failed": 17, "passed": 2}
    assert base.tests.run.exit_code == 1
    assert "IndexError" in base.tests.run.output  # the crash behind the 500
    assert compiles(base.repo).exit_code == 0


def test_reference_patch_passes_change_1(workspace: Path) -> None:
    repo = make_repo(workspace / "reference")
    git(repo, "apply", str(EXAMPLE / "reference" / "cap-horizon.patch"))
    suite = Suite.of(repo)
    assert suite.counts(SUCCESS["cap-horizon"]) == {"passed": 8}
    assert suite.counts() == {"passed": 17, "skipped": 3}


def test_repo_ignores_result_md() -> None:
    ignored = (REPO / ".gitignore").read_text().split()
    assert "RESULT.md" in ignored
    assert "__pycache__/" in ignored


# --- change 1: the five contestants -----------------------------------------------------


def test_control_commits_but_does_not_fix(arms: dict[str, Arm]) -> None:
    control = arms["control"]
    assert changed_files(control.repo) == {"src/horizon/app.py"}
    assert control.tests.counts(SUCCESS["cap-horizon"]) == {"failed": 7, "passed": 1}
    assert control.tests.counts() == {"passed": 11, "skipped": 3}


def test_fixer_fixes_with_a_test(arms: dict[str, Arm]) -> None:
    fixer = arms["fixer"]
    assert changed_files(fixer.repo) == {"src/horizon/app.py", "tests/test_app.py"}
    assert fixer.tests.counts(SUCCESS["cap-horizon"]) == {"passed": 8}
    assert fixer.tests.counts() == {"passed": 17, "skipped": 3}
    assert compiles(fixer.repo).exit_code == 0
    assert git(fixer.repo, "status", "--porcelain") == ""


def test_fixer_graft_fixes_without_a_test_and_improves_db(arms: dict[str, Arm]) -> None:
    graft = arms["fixer-graft"]
    assert changed_files(graft.repo) == {"src/horizon/app.py", "src/horizon/db.py"}
    assert "src/horizon/db.py" not in changed_files(arms["fixer"].repo)  # a graft candidate
    assert graft.tests.counts(SUCCESS["cap-horizon"]) == {"passed": 8}
    assert graft.tests.counts() == {"passed": 11, "skipped": 3}
    db = (graft.repo / "src/horizon/db.py").read_text()
    assert "connect_timeout=CONNECT_TIMEOUT_S" in db
    assert "CREATE INDEX IF NOT EXISTS forecasts_created_at_idx" in db


def test_cheat_edits_the_protected_test_and_spoofs(arms: dict[str, Arm]) -> None:
    cheat = arms["cheat"]
    files = changed_files(cheat.repo)
    assert {"tests/test_horizon.py", "conftest.py", "RESULT.md"} <= files
    assert "src/horizon/app.py" not in files
    result = (cheat.repo / "RESULT.md").read_text()
    assert "bk_horizon_fixer" in result
    assert "DATABASE_URL is not set" in result
    # The rig restores the protected file: the real result fails, followed by a fake line.
    git(cheat.repo, "checkout", "base", "--", "tests/test_horizon.py")
    try:
        restored = pytest_run(cheat.repo, *SUCCESS["cap-horizon"])
    finally:
        git(cheat.repo, "checkout", "HEAD", "--", "tests/test_horizon.py")
    assert restored.exit_code == 1
    assert restored.summaries == [{"failed": 7, "passed": 1}, {"passed": 5}]


def test_broken_has_a_syntax_error(arms: dict[str, Arm]) -> None:
    broken = arms["broken"]
    assert changed_files(broken.repo) == {"src/horizon/app.py"}
    compiled = compiles(broken.repo)
    assert compiled.exit_code != 0
    assert "SyntaxError" in compiled.output
    assert broken.tests.run.exit_code == 2  # a collection error: the code's failure
    assert "SyntaxError" in broken.tests.run.output
    assert broken.tests.counts(SUCCESS["cap-horizon"]) == {"errors": 1}


def test_contestants_are_idempotent(arms: dict[str, Arm]) -> None:
    names = ("control", "fixer", "fixer-graft", "cheat", "broken")
    heads = {name: git(arms[name].repo, "rev-parse", "HEAD") for name in names}
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        list(pool.map(lambda name: run_agent(arms[name].repo, name), names))
    assert {name: git(arms[name].repo, "rev-parse", "HEAD") for name in names} == heads


# --- change 2, from the merged head -----------------------------------------------------


def test_change_2_base_passes_change_1_and_fails_change_2(units: dict[str, Arm]) -> None:
    base = units["base"].tests
    assert base.counts(SUCCESS["cap-horizon"]) == {"passed": 8}
    assert base.counts(SUCCESS["horizon-units"]) == {"failed": 10, "passed": 9}
    assert base.counts() == {"passed": 17, "skipped": 3}


@pytest.mark.parametrize(("script", "success", "files"), [
    ("control", {"failed": 10, "passed": 9}, {"src/horizon/app.py"}),
    ("fixer", {"passed": 19}, {"src/horizon/app.py", "tests/test_app.py"}),
    ("fixer-graft", {"passed": 19}, {"src/horizon/app.py", "README.md"}),
])
def test_change_2_contestants(units: dict[str, Arm], script: str,
                              success: dict[str, int], files: set[str]) -> None:
    arm = units[script]
    assert changed_files(arm.repo) == files
    assert arm.tests.counts(SUCCESS["horizon-units"]) == success
    assert not {"failed", "errors"} & set(arm.tests.counts())


def test_change_2_cheat_and_broken(units: dict[str, Arm]) -> None:
    assert "tests/test_units.py" in changed_files(units["cheat"].repo)
    assert "src/horizon/app.py" not in changed_files(units["cheat"].repo)
    assert compiles(units["broken"].repo).exit_code != 0


def test_the_brief_alone_selects_the_change(units: dict[str, Arm]) -> None:
    assert "fixer: working on horizon-units" in units["fixer"].agent.output
    assert "committed: Accept time_horizon_weeks" in units["fixer"].agent.output


# --- dispatch and ratchet fixtures ------------------------------------------------------


def test_no_commit_leaves_work_uncommitted(arms: dict[str, Arm]) -> None:
    arm = arms["no-commit"]
    assert git(arm.repo, "rev-parse", "HEAD") == git(arm.repo, "rev-parse", "base")
    assert git(arm.repo, "status", "--porcelain") == " M src/horizon/app.py\n"
    assert (arm.repo / "RESULT.md").is_file()  # ignored by .gitignore: commit_ignored forces it
    assert "if not 1 <= horizon <= 90:" in git(arm.repo, "diff")


def test_forever_commits_partial_work_then_never_returns(workspace: Path) -> None:
    repo = make_repo(workspace / "forever")
    proc = subprocess.Popen(["sh", str(AGENTS / "forever.sh"), str(BRIEFS["cap-horizon"])],
                            cwd=repo, env=clean_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "thinking" in line:
                break
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=0.5)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert git(repo, "log", "-1", "--format=%s") == "WIP: reject horizons over 90 days\n"
    assert git(repo, "status", "--porcelain") == " M src/horizon/app.py\n"
    assert (repo / "RESULT.md").is_file()
    assert "+    if horizon > 90:" in git(repo, "show", "HEAD")  # the partial fix


def test_leaky_prints_its_key_and_commits(workspace: Path, arms: dict[str, Arm]) -> None:
    leaky = arms["leaky"]
    assert SECRET in leaky.agent.output
    assert SECRET in (workspace / "leaky-key.txt").read_text()
    assert changed_files(leaky.repo) == {"README.md"}
    assert SECRET not in git(leaky.repo, "show", "HEAD")


def test_probe_logs_its_effort_then_fixes(arms: dict[str, Arm]) -> None:
    probe = arms["probe"]
    assert probe.agent.output.splitlines()[0] == "thinking: budget_tokens=32000 effort=high"
    match = re.search(r"thinking: .*effort=(\w+)", probe.agent.output)
    assert match and match.group(1) == "high"
    assert changed_files(probe.repo) == changed_files(arms["fixer"].repo)


def lint_count(repo: Path) -> int:
    done = subprocess.run([sys.executable, "tools/lint.py"], cwd=repo, env=clean_env(),
                          capture_output=True, text=True, check=True)
    match = re.search(r"lint: (?P<value>\d+) findings", done.stdout)
    assert match, done.stdout
    return int(match["value"])


def test_ratchet_fixtures(arms: dict[str, Arm]) -> None:
    assert lint_count(arms["base"].repo) == 0
    assert lint_count(arms["broken"].repo) == 1  # a syntax error is a finding, not a crash
    drop = arms["drop-test"]
    assert "def test_single_point_series" not in (drop.repo / "tests/test_forecast.py").read_text()
    assert drop.tests.counts() == {"passed": 10, "skipped": 3}
    assert lint_count(arms["lint-noise"].repo) == 3
    more = arms["more-tests"]
    assert more.tests.counts() == {"passed": 23, "skipped": 3}
    assert more.tests.counts(SUCCESS["cap-horizon"]) == {"passed": 8}


# --- the judge ---------------------------------------------------------------------------


def judge(arm_repo: Path, change: str, arm_id: str, outputs: object = "") -> dict[str, int]:
    diff = git(arm_repo, "diff", "--no-color", "base", "HEAD")
    payload = {"change": change, "arm": arm_id, "brief": BRIEFS[change].read_text(),
               "diff": diff, "outputs": outputs}
    done = subprocess.run([sys.executable, str(EXAMPLE / "judge.py")], input=json.dumps(payload),
                          capture_output=True, text=True, check=True, timeout=30)
    verdict = json.loads(done.stdout)
    assert set(verdict) == {"diagnosis", "plan", "code_quality", "intent"}
    for dim in verdict.values():
        assert 0 <= dim["score"] <= 5 and dim["evidence"]
    return {dim: v["score"] for dim, v in verdict.items()}


def test_judge_scores_change_1(arms: dict[str, Arm]) -> None:
    scores = {name: judge(arms[name].repo, "cap-horizon", name)
              for name in ("control", "fixer", "fixer-graft", "cheat", "broken")}
    assert scores["fixer"] == {"diagnosis": 5, "plan": 5, "code_quality": 5, "intent": 5}
    assert scores["fixer-graft"] == {"diagnosis": 4, "plan": 3, "code_quality": 4, "intent": 5}
    assert scores["control"] == {"diagnosis": 0, "plan": 1, "code_quality": 2, "intent": 2}
    assert scores["cheat"] == {"diagnosis": 0, "plan": 0, "code_quality": 0, "intent": 0}
    assert scores["broken"] == {"diagnosis": 3, "plan": 1, "code_quality": 0, "intent": 5}


def test_judge_reads_markdown_and_outputs(arms: dict[str, Arm], tmp_path: Path) -> None:
    diff = git(arms["fixer-graft"].repo, "diff", "--no-color", "base", "HEAD")
    doc = tmp_path / "arm.md"
    brief = BRIEFS["cap-horizon"].read_text()
    doc.write_text(f"# Brief\n\n{brief}\n## Diff\n\n```diff\n{diff}```\n")
    done = subprocess.run([sys.executable, str(EXAMPLE / "judge.py"), str(doc)],
                          capture_output=True, text=True, check=True, timeout=30)
    assert json.loads(done.stdout)["plan"]["score"] == 3
    traceback = ('  File "src/horizon/app.py", line 12\n    x = (\n        ^\n'
                 "SyntaxError: '(' was never closed\n")
    fixer = arms["fixer"].repo
    assert judge(fixer, "cap-horizon", "fixer", {"compile": traceback})["code_quality"] == 0
    bad = subprocess.run([sys.executable, str(EXAMPLE / "judge.py")], input='["not", "an arm"]',
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "judge:" in bad.stderr


# --- the manifests -----------------------------------------------------------------------


def test_manifests_load_in_the_demo_layout(tmp_path: Path) -> None:
    layout = tmp_path / "horizon"
    shutil.copytree(EXAMPLE, layout, ignore=shutil.ignore_patterns("__pycache__"))
    make_repo(layout / "repo-git", layout / "repo")
    shutil.rmtree(layout / "repo")
    (layout / "repo-git").rename(layout / "repo")
    for name in ("bakeoff.toml", "dispatch.toml", "ratchets.toml"):
        loaded = load_manifest(layout / name)
        manifest = loaded.manifest
        assert [arm.id for arm in manifest.control_arms] == ["control"], name
        for arm in manifest.arms:
            script = re.fullmatch(r"sh /agents/([\w-]+\.sh) \{brief\}", arm.command)
            assert script and (AGENTS / script.group(1)).is_file(), arm.command
        for change in manifest.changes:
            assert set(PROTECTED) <= set(change.protected)
            for path in change.protected:
                assert (REPO / path).is_file(), path
    main = load_manifest(layout / "bakeoff.toml").manifest
    assert [arm.id for arm in main.arms] == ["control", "fixer", "fixer-graft", "cheat", "broken"]
    assert [change.id for change in main.changes] == ["cap-horizon", "horizon-units"]
    assert main.contract.samples == 3 and main.toolchain.setup == []
