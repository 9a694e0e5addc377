"""`bakeoff-sandbox oracle`: fresh containers, fresh databases, records a reproducer needs."""

from __future__ import annotations

from pathlib import Path

from runner.containers.backend import LABEL_EXPERIMENT
from runner.containers.engine import Engine
from runner.manifest import LoadedManifest
from tests.integration.helpers import cli, flat_record, git

DB_TEST = '''import os
import psycopg


def test_database_is_its_own_and_starts_empty_and_is_writable():
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        assert conn.execute("select current_database() = current_user").fetchone()[0]
        tables = conn.execute("select count(*) from pg_class c join pg_namespace n"
                              " on n.oid = c.relnamespace where n.nspname not in"
                              " ('pg_catalog', 'information_schema', 'pg_toast')").fetchone()[0]
        assert tables == 0
        conn.execute("create table seen (n int)")
        conn.execute("insert into seen values (1)")
'''


def records(stage_line: str) -> list[dict[str, object]]:
    stage = Path(stage_line.split("records: ", 1)[1].strip())
    return [flat_record(p) for p in sorted(stage.glob("samples/*/*/*.json"))]


def test_same_commit_scored_twice_gives_identical_verdicts_and_full_records(
        engine: Engine, target: LoadedManifest) -> None:
    repo = target.repo_path
    (repo / "tests" / "test_db.py").write_text(DB_TEST)
    (repo / "tests" / "test_app.py").write_text("def test_app():\n    assert 1 + 1 == 2\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a DB-writing test; the app test passes")
    runs = [cli(repo, "oracle", "--commit", "HEAD", "--check", "success", "--samples", "3")
            for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr
    found = [records(r.stderr.splitlines()[-1]) for r in runs]
    shape = [[(r["verdict"], r["counts"], r["exit_code"]) for r in rs] for rs in found]
    assert shape[0] == shape[1] == [("PASS", {"passed": 1, "failed": 0, "skipped": 0,
                                              "errors": 0}, 0)] * 3
    sample = found[0][0]
    head = git(repo, "rev-parse", "HEAD")
    image = engine.client.images.get("bakeoff/python:latest")
    assert sample["commit"] == head
    assert sample["image_id"] == image.id
    assert sample["image_identity"] == image.labels["io.bakeoff.identity"]
    assert sample["command"] == "pytest -q -p no:cacheprovider tests/test_app.py"
    assert sample["limits"] == {"cpus": 1.0, "memory_mb": 256, "pids": 128, "disk_mb": 2048,
                               "max_files": 100_000}
    assert "***" in sample["env"]["DATABASE_URL"]
    assert len({r["db_schema"] for rs in found for r in rs}) == 6  # a fresh database each
    assert engine.labelled("container", {LABEL_EXPERIMENT: target.manifest.experiment.name}) == []


def test_every_db_sample_gets_a_fresh_empty_database_of_its_own(
        engine: Engine, target: LoadedManifest) -> None:
    repo = target.repo_path
    (repo / "tests" / "test_db.py").write_text(DB_TEST)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a DB-writing test")
    text = (repo / "bakeoff.toml").read_text().replace(
        'run = "pytest -q -p no:cacheprovider tests/test_app.py"',
        'run = "pytest -q -p no:cacheprovider tests/test_db.py"')
    (repo / "bakeoff.toml").write_text(text)
    git(repo, "commit", "-qam", "score the DB test")
    done = cli(repo, "oracle", "--commit", "HEAD", "--check", "success", "--samples", "3")
    assert done.returncode == 0, done.stderr
    assert "pass-rate 1.00 [0.44, 1.00] (3/3)" in done.stdout
