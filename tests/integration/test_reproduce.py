"""`reproduce` and `rescore`: a recorded sample's exact container, re-created from its
record alone; re-scoring in the same or in freshly rebuilt images (issue 7).

Samples are recorded the way `score` records them (the oracle, into stages/<change>/
samples/), then the commands run as a user runs them, in a subprocess (`--shell` on a
real pseudo-terminal). Images built here are throwaway ones with unique tags, removed
by ID afterwards; nothing else is ever removed.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from rig.sample.metric import Ratchet
from rig.sample.oracle import run_sample
from rig.sample.record import SampleRecord
from rig.sample.spec import Execution, SampleSpec
from rig.sample.verdict import Verdict
from runner.commands import rescore, sample_plan, sample_runs
from runner.containers import images, sandbox
from runner.containers.backend import LABEL_EXPERIMENT
from runner.containers.engine import Engine
from runner.containers.images import catalog
from runner.containers.images.prepared import ResolvedImages
from runner.containers.samples.executor import DockerSampleExecutor
from runner.manifest import LoadedManifest, load_manifest
from tests.integration.helpers import PlainReporter, cli, git, make_target

RUN = "pytest -q -p no:cacheprovider tests/test_app.py"
TEST = '''from pathlib import Path


def test_value():
    assert Path("value.txt").read_text().strip() == "2"
'''
PROBE = ("USER root\nRUN printf '#!/bin/sh\\nexec \"$@\"\\n' > /usr/local/bin/rtprobe "
         "&& chmod 755 /usr/local/bin/rtprobe\nUSER agent\n")



def target(root: Path, *, image: str = "python", run: str = RUN,
           database: bool = False) -> tuple[LoadedManifest, str]:
    """Arms A and B; the base's value.txt is 1 (the test fails); returns the base commit."""
    manifest = make_target(root, ["A", "B"], database=database)
    text = manifest.read_text().replace('image = "python"', f'image = "{image}"')
    text = text.replace('requires = ["python3", "pytest", "git"]', 'requires = ["python3"]')
    text = text.replace(f'run = "{RUN}"', f'run = "{run}"')
    manifest.write_text(text)
    (root / "tests" / "test_app.py").write_text(TEST)
    (root / "value.txt").write_text("1\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "a value test")
    return load_manifest(manifest), git(root, "rev-parse", "HEAD")


def commit_value(repo: Path, value: str) -> str:
    (repo / "value.txt").write_text(f"{value}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", f"value {value}")
    return git(repo, "rev-parse", "HEAD")


def record(engine: Engine, loaded: LoadedManifest, base: str,
           commits: dict[str, str]) -> dict[str, SampleRecord]:
    """One success sample per arm, recorded where `score` records it."""
    plan = sample_plan.check_plan(loaded, "first", "success")
    todo = [spec for arm, commit in commits.items()
            for spec in sample_plan.specs(loaded, "first", arm, plan, commit, base, 1)]
    stage = sample_plan.stage_path(loaded, "first")
    with sample_runs.executor_for(ResolvedImages(engine, loaded), base) as executor:
        done = sample_runs.run_all(executor, todo, stage, lambda _: None)
    return {r.arm: r for r in done}


@pytest.fixture
def throwaway(engine: Engine, tmp_path: Path,
              monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path, list[str]]]:
    """A toolchain image of our own under BAKEOFF_IMAGES_DIR: (name, Dockerfile, ids to
    remove). Everything made with it is removed by label/ID afterwards."""
    name = f"rt{secrets.token_hex(4)}"
    dockerfile = tmp_path / "images" / name / "Dockerfile"
    dockerfile.parent.mkdir(parents=True)
    dockerfile.write_text("ARG BASE_IMAGE\nFROM bakeoff/python:latest\n")
    monkeypatch.setenv("BAKEOFF_IMAGES_DIR", str(tmp_path / "images"))
    made: list[str] = []
    yield name, dockerfile, made
    for image_id in {*made, *_tagged(engine, name)}:
        try:
            engine.client.images.remove(image_id, force=True)
        except Exception:  # already gone (the test removed it)
            continue


def _tagged(engine: Engine, name: str) -> list[str]:
    attrs = images.inspect(engine, catalog.tag_for(name))
    return [] if attrs is None else [str(attrs["Id"])]


def build(engine: Engine, name: str, made: list[str]) -> images.BuiltImage:
    built = next(b for b in images.build(engine, [name], PlainReporter()) if b.name == name)
    made.append(built.image_id)
    return built


def removed_labelled(engine: Engine, loaded: LoadedManifest) -> None:
    engine.remove_labelled({LABEL_EXPERIMENT: loaded.manifest.experiment.name})


def test_tool_missing_reproduces_and_rescore_rebuild_turns_it_into_a_verdict(
        engine: Engine, built_images: dict[str, images.BuiltImage], tmp_path: Path,
        throwaway: tuple[str, Path, list[str]]) -> None:
    """A RIG_ERROR tool_missing is the image's fault: reproduced as is, then gone (a real
    FAIL) once the image is rebuilt with the tool, and RESCORE.md / RESULTS.md say so."""
    name, dockerfile, made = throwaway
    old = build(engine, name, made)
    loaded, base = target(tmp_path / "repo", image=name, run=f"rtprobe {RUN}")
    try:
        recorded = record(engine, loaded, base, {"A": base})["A"]
        assert (recorded.verdict, recorded.reason) == (Verdict.RIG_ERROR, "tool_missing")
        again = cli(loaded.repo_path, "reproduce", "first/A/success/1")
        assert again.returncode == 0, again.stdout + again.stderr
        assert again.stdout.count("RIG_ERROR tool_missing") == 2
        assert "reproduced: the same verdict, counts and exit code" in again.stdout

        dockerfile.write_text(dockerfile.read_text() + PROBE)
        done = cli(loaded.repo_path, "rescore", "--rebuild", "--change", "first")
        made.extend(_tagged(engine, name))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "1 sample re-scored: 1 verdict changed." in done.stdout
        row = re.search(r"first/A/success/1\s+RIG_ERROR tool_missing\s+FAIL tests_failed\s+"
                        r"(\S+) -> (\S+)\s+the image changed", done.stdout)
        assert row is not None, done.stdout
        assert old.image_id.startswith(row.group(1)) and row.group(1) != row.group(2)
        [card] = (sample_plan.stage_path(loaded, "first") / "rescore").glob("*/RESCORE.md")
        assert ("| first/A/success/1 | RIG_ERROR tool_missing | FAIL tests_failed | "
                in card.read_text())
        assert ("first/A/success/1: RIG_ERROR tool_missing -> FAIL tests_failed: the image "
                "changed") in rescore.results_section(loaded)
        kept = SampleRecord.model_validate_json(
            (sample_plan.stage_path(loaded, "first") / "samples/A/success/1.json").read_text())
        assert kept == recorded  # the old record is never overwritten
    finally:
        removed_labelled(engine, loaded)


def test_reproduce_gives_the_recorded_verdict_and_counts_for_pass_and_fail(
        engine: Engine, built_images: dict[str, images.BuiltImage], tmp_path: Path) -> None:
    loaded, base = target(tmp_path / "repo")
    repo = loaded.repo_path
    fixed = commit_value(repo, "2")
    try:
        recorded = record(engine, loaded, base, {"A": fixed, "B": base})
        assert [recorded[a].verdict for a in "AB"] == [Verdict.PASS, Verdict.FAIL]
        by_path = sample_plan.stage_path(loaded, "first") / "samples/B/success/1.json"
        for sample, arm in (("first/A/success/1", "A"), (str(by_path), "B")):
            done = cli(repo, "reproduce", sample)
            assert done.returncode == 0, done.stdout + done.stderr
            new_log = Path(done.stderr.split("reproduced ")[-1].strip())
            new = SampleRecord.model_validate_json(new_log.with_suffix(".json").read_text())
            old = recorded[arm]
            assert (new.verdict, new.reason, new.counts, new.exit_code) == (
                old.verdict, old.reason, old.counts, old.exit_code)
            assert (new.image_id, new.commit, new.protected, new.limits) == (
                old.image_id, old.commit, old.protected, old.limits)
        listing = cli(repo, "reproduce", "first/A/success/1", "--", "cat", "value.txt")
        assert (listing.returncode, listing.stdout.strip()) == (0, "2"), listing.stderr

        tampered = json.loads(by_path.read_text())
        tampered["ran"]["protected"]["tests/test_app.py"] = "0" * 64
        forged = repo / ".bakeoff" / loaded.manifest.experiment.name / "forged" / "1.json"
        forged.parent.mkdir(parents=True)
        forged.write_text(json.dumps(tampered))
        refused = cli(repo, "reproduce", str(forged))
        assert refused.returncode == 3 and "protected files" in refused.stderr
    finally:
        removed_labelled(engine, loaded)


def test_reproduce_shell_lands_in_work_at_the_commit_with_the_samples_env(
        engine: Engine, built_images: dict[str, images.BuiltImage], tmp_path: Path) -> None:
    """A real pseudo-terminal: /work holds the sample's commit, BAKEOFF_SAMPLE is the
    record's, and DATABASE_URL names a FRESH database with a live password (never ***)."""
    loaded, base = target(tmp_path / "repo", database=True)
    repo = loaded.repo_path
    marker = f"commit-{secrets.token_hex(6)}"
    (repo / "marker.txt").write_text(marker + "\n")
    fixed = commit_value(repo, "2")
    try:
        recorded = record(engine, loaded, base, {"A": fixed})["A"]
        assert recorded.verdict is Verdict.PASS and recorded.db_schema
        child = pexpect.spawn(sys.executable, ["-m", "runner.cli", "reproduce",
                                               "first/A/success/1", "--shell"],
                              cwd=str(repo), env={**os.environ, "TERM": "dumb"},
                              encoding="utf-8", timeout=120)
        child.expect("what you change here is discarded")
        for command, answer in (('echo "P=$(pwd)"', r"P=/work\r"),
                                ('echo "M=$(cat marker.txt)"', f"M={marker}"),
                                ('echo "S=$BAKEOFF_SAMPLE"', r"S=first/A/success/1\r")):
            child.sendline(command)
            child.expect(answer)
        child.sendline('echo "U=$DATABASE_URL"')
        child.expect(r"U=postgresql://(\w+):([^@\s]+)@db:5432/(\w+)")
        assert child.match.group(3) == child.match.group(1)  # the role's own database
        schema, password = child.match.group(1), child.match.group(2)
        assert schema != recorded.db_schema and "***" not in password
        child.sendline('python3 -c "import os, psycopg; print(\'D=\' + psycopg.connect('
                       'os.environ[\'DATABASE_URL\']).execute(\'select current_database()\')'
                       '.fetchone()[0])"')
        child.expect(f"D={schema}")
        child.sendline("exit 0")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0
    finally:
        removed_labelled(engine, loaded)


def test_reproduce_refuses_in_one_line_when_the_image_is_gone(
        engine: Engine, built_images: dict[str, images.BuiltImage], tmp_path: Path,
        throwaway: tuple[str, Path, list[str]]) -> None:
    name, _, made = throwaway
    gone = build(engine, name, made)
    loaded, base = target(tmp_path / "repo", image=name)
    try:
        record(engine, loaded, base, {"A": base})
        engine.client.images.remove(gone.image_id, force=True)  # our throwaway image
        done = cli(loaded.repo_path, "reproduce", "first/A/success/1")
        assert done.returncode == 3
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert f"bakeoff/{name}:latest ({gone.image_id})" in lines[0]
        assert f"`bakeoff-sandbox images build {name}`" in lines[0]
    finally:
        removed_labelled(engine, loaded)


def test_secrets_come_from_the_environment_never_from_the_record(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A redacted value is re-read from our environment (refused when unset); the
    database URL is left to the fresh schema; a new record redacts the secret again."""
    from runner.commands import reproduce
    from runner.errors import BadInputError

    recorded = SampleRecord.model_validate({
        **FAKE, "env": {"HOME": "/home/agent", "API_TOKEN": "***",
                        "DATABASE_URL": "postgresql://s1:***@db:5432/bakeoff"}})
    assert reproduce.url_env_of(recorded, None) == "DATABASE_URL"
    monkeypatch.delenv("API_TOKEN", raising=False)
    with pytest.raises(BadInputError, match="API_TOKEN is a secret"):
        reproduce.recorded_env(recorded, "DATABASE_URL")
    monkeypatch.setenv("API_TOKEN", "live-token")
    assert reproduce.recorded_env(recorded, "DATABASE_URL") == {
        "HOME": "/home/agent", "API_TOKEN": "live-token"}
    assert reproduce.secret_keys(recorded) == ["API_TOKEN", "DATABASE_URL"]

    class Echo:  # an executor that reports the env it was given
        def execute(self, spec: object, env: dict[str, str]) -> Execution:
            return Execution(exit_code=0, log="", duration_s=0.0, env=dict(env))

    env = reproduce.recorded_env(recorded, "DATABASE_URL")
    wrapped = reproduce.RecordedEnvExecutor(Echo(), env,  # type: ignore[arg-type]
                                            reproduce.secret_keys(recorded), recorded.env)
    assert wrapped.execute(reproduce.spec_of(recorded, None)).env["API_TOKEN"] == "***"


FAKE: dict[str, object] = {
    "sample": "first/A/success/1", "change": "first", "arm": "A", "check": "success", "n": 1,
    "commit": "c" * 40, "base_commit": "b" * 40, "image": "bakeoff/python:latest",
    "image_id": "sha256:" + "0" * 64, "image_identity": "sha256:" + "1" * 64,
    "command": RUN, "parser": "pytest", "mounts": [], "network": "none",
    "limits": {"cpus": 1.0, "memory_mb": 256, "pids": 128}, "db_schema": "s1",
    "protected": {}, "requires": [], "exit_code": 1, "timed_out": False, "oom_killed": False,
    "program_present": True, "counts": None, "tests_ran": 0, "verdict": "FAIL",
    "reason": "tests_failed", "rig_error": None, "detail": "", "started_at": "now",
    "duration_s": 1.0, "log": "1.log"}


RATCHET = '''
[[checks]]
name = "lint"
kind = "ratchet"
run = "python3 lint.py"
metric = 'lint: (?P<value>\\d+) findings'
better = "lower"
'''


def test_a_ratchet_sample_is_reproduced_against_its_recorded_base(
        engine: Engine, built_images: dict[str, images.BuiltImage], tmp_path: Path) -> None:
    """A ratchet is graded on its metric, not a parser: reproduce rebuilds it from the
    manifest and the base value the record kept (2 findings > base 0: regressed)."""
    manifest = make_target(tmp_path / "repo", ["A"], database=False, name="rt-ratchet")
    text = manifest.read_text().replace("\n[[changes]]", RATCHET + "\n[[changes]]", 1)
    manifest.write_text(text)
    repo = manifest.parent
    (repo / "lint.py").write_text("print('lint: 2 findings')\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a lint ratchet")
    head = git(repo, "rev-parse", "HEAD")
    stage = repo / ".bakeoff" / "rt-ratchet" / "stages" / "first"
    spec = SampleSpec(change="first", arm="A", check="lint", n=1, commit=head, base_commit=head,
                command="python3 lint.py", parser="metric", timeout_s=60,
                ratchet=Ratchet(r"lint: (?P<value>\d+) findings", "lower", 0.0, 0.0))
    with DockerSampleExecutor(engine, repo, "rt-ratchet", built_images["python"],
                              sandbox.SandboxLimits()) as executor:
        recorded = run_sample(executor, spec, stage)
    assert (recorded.verdict.value, recorded.reason) == ("FAIL", "ratchet_regressed")
    done = cli(repo, "reproduce", "first/A/lint/1", timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ratchet_regressed" in done.stdout
