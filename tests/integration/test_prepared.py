"""Prepared images: `setup` runs at build time (a sample never has the network), keyed by
the dependency files, so a code-only commit reuses the image and a dependency change
builds its own; what setup generated in /work survives, stale tracked files do not."""

from __future__ import annotations

from pathlib import Path

from rig.verdict import Verdict
from runner.commands import score as score_mod
from runner.containers import images, prepared
from runner.containers.engine import Engine
from runner.manifest import load_manifest
from tests.integration.helpers import cleanup, git, make_target

TEST = '''from pathlib import Path


def test_setup_output_is_there_and_stale_files_are_not():
    assert Path("generated/deps.copy").read_text() == Path("requirements.txt").read_text()
    assert not Path("old.py").exists()
'''
SETUP = 'setup = ["mkdir -p generated && cp requirements.txt generated/deps.copy"]'


def test_prepared_image_is_reused_for_code_changes_and_rebuilt_for_dependency_changes(
        engine: Engine, tmp_path: Path, built_images: dict[str, images.BuiltImage]) -> None:
    manifest = make_target(tmp_path / "repo", ["A"], database=False)
    repo = manifest.parent
    manifest.write_text(manifest.read_text().replace(
        'requires = ["python3", "pytest", "git"]', f'requires = ["python3", "pytest"]\n{SETUP}'))
    (repo / "tests" / "test_app.py").write_text(TEST)
    (repo / "requirements.txt").write_text("dependency v1\n")
    (repo / "old.py").write_text("STALE = True\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "deps v1, a test of setup's output")
    first = git(repo, "rev-parse", "HEAD")
    git(repo, "rm", "-q", "old.py")
    git(repo, "commit", "-qm", "code only: delete old.py")
    code_only = git(repo, "rev-parse", "HEAD")
    loaded = load_manifest(manifest)
    toolchain = built_images["python"]
    made: list[images.BuiltImage] = []
    try:
        made.append(prepared.prepare(engine, repo, first, toolchain, loaded.manifest.toolchain
                                     .setup, print))
        made.append(prepared.prepare(engine, repo, code_only, toolchain,
                                     loaded.manifest.toolchain.setup, print))
        assert [m.cached for m in made] == [False, True]
        assert made[0].image_id == made[1].image_id
        records, _, _ = score_mod.oracle(engine, loaded, "HEAD", "success", 1, None, print)
        assert (records[0].verdict, records[0].image_id) == (Verdict.PASS, made[0].image_id)

        (repo / "requirements.txt").write_text("dependency v2\n")
        git(repo, "commit", "-qam", "deps v2")
        records, _, _ = score_mod.oracle(engine, loaded, "HEAD", "success", 1, None, print)
        assert records[0].verdict is Verdict.PASS, records[0].detail
        assert records[0].image_id != made[0].image_id
        assert records[0].image_identity != made[0].identity
        made.append(images.resolve(engine, f"bakeoff/prepared:{records[0].image_identity[7:23]}"))
    finally:
        for image in {m.tag for m in made}:
            engine.client.images.remove(image, force=True)
        cleanup(engine, loaded)
