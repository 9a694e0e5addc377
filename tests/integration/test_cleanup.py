"""Issue 34, item 5: `down` removes the experiment's prepared image (and the build stage
its build left) unless `--keep-images`, and lists the branches it leaves; `gc --images`
removes an older identity of an image of ours, keeps one in use and one of the current
identity, and never touches an image that is not ours. The real engine, the real CLI."""

from __future__ import annotations

import contextlib
import io
import secrets
from pathlib import Path

import docker
import pytest

from runner.commands import cleanup
from runner.commands import up as up_mod
from runner.commands.reproduce import ImageGoneError, recorded_image
from runner.containers import gateway, images
from runner.containers.backend import LABEL_BUILD_OF, LABEL_EXPERIMENT, LABEL_IDENTITY, LABEL_IMAGE
from runner.containers.engine import Engine
from runner.manifest import load_manifest
from tests.integration.helpers import CORE, cli, git, make_target
from tests.integration.helpers import cleanup as sweep
from tests.unit.test_cleanup_units import sample_record

SETUP = 'setup = ["mkdir -p generated && cp requirements.txt generated/deps.copy"]'


def _image(engine: Engine, ref: str) -> dict[str, object] | None:
    return images.inspect(engine, ref)


def _stage_of(engine: Engine, tag: str) -> list[str]:
    """The build stages (dangling) the prepared build of `tag` left, by its label."""
    found = engine.client.api.images(all=True, filters={
        "dangling": True, "label": f"{LABEL_BUILD_OF}={tag}"})
    return [str(entry["Id"]) for entry in found]


def _own(engine: Engine, image_id: str, below: str) -> int:
    """An image's size less the image it was built on (`below`): what removing it frees."""
    size = int(engine.client.images.get(image_id).attrs["Size"])
    return size - int(engine.client.images.get(below).attrs["Size"])


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line]


def test_down_removes_the_prepared_image_unless_kept_and_lists_the_branches(
        engine: Engine, tmp_path: Path, built_images: dict[str, images.BuiltImage]) -> None:
    manifest = make_target(tmp_path / "repo", ["A"], database=False)
    repo = manifest.parent
    manifest.write_text(manifest.read_text().replace(
        'requires = ["python3", "pytest", "git"]', f'requires = ["python3", "pytest"]\n{SETUP}'))
    (repo / "requirements.txt").write_text(f"unique {secrets.token_hex(8)}\n")  # its own image
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a setup of its own")
    loaded = load_manifest(manifest)
    name = loaded.manifest.experiment.name
    for branch in (f"bakeoff/{name}", f"bakeoff-arms/{name}/first/A"):
        git(repo, "branch", branch)
    python = built_images["python"].image_id
    made: list[str] = []  # the test's own prepared image and build stage, whatever happens
    try:
        state = up_mod.up(engine, loaded, options=CORE)
        tag, prepared_id = state.image, state.image_id
        made += [tag, *_stage_of(engine, tag)]
        assert tag.startswith("bakeoff/prepared:")
        (stage,) = _stage_of(engine, tag)
        branches = [
            f"branches left in {repo} (their commits are what the records name: kept so "
            "the result can be audited, re-scored and reproduced):",
            f"  bakeoff-arms/{name}/first/A: arm A's commits for change first",
            f"  bakeoff/{name}: the experiment branch: the merged result of every change",
            "delete them when you are done: bakeoff-sandbox down --branches, or "
            f"git -C {repo} branch -D "
            f"bakeoff-arms/{name}/first/A bakeoff/{name}"]
        kept = cli(repo, "down", "--keep-images", timeout=300)
        assert kept.returncode == 0, kept.stderr
        assert _lines(kept.stderr)[-7:] == [
            f"kept image <none> ({stage[7:19]}): --keep-images",
            f"kept image {tag} ({prepared_id[7:19]}): --keep-images",
            "images: removed 0, freed 0.0 MB", *branches]
        assert _image(engine, tag) is not None and _stage_of(engine, tag) == [stage]

        up_mod.up(engine, loaded, options=CORE)  # the kept image: no build
        sizes = (_own(engine, prepared_id, python), _own(engine, stage, python))
        down = cli(repo, "down", timeout=300)
        assert down.returncode == 0, down.stderr
        shown = _lines(down.stderr)
        assert sorted(shown[-7:-5]) == sorted([
            f"removed image {tag} ({prepared_id[7:19]}), {cleanup.size_text(sizes[0])}",
            f"removed image <none> ({stage[7:19]}), {cleanup.size_text(sizes[1])}"])
        assert shown[-5:] == [f"images: removed 2, freed {cleanup.size_text(sum(sizes))}",
                              *branches]
        assert _image(engine, tag) is None and _stage_of(engine, tag) == []
        assert _image(engine, python) is not None  # the shared toolchain stays

        # Item 4: a record of the gone image says how to get it back, in one line.
        record = sample_record(tag, prepared_id)
        with pytest.raises(ImageGoneError) as gone:
            recorded_image(engine, record)
        assert str(gone.value).splitlines()[0] == (
            f"sample first/A/success/1 ran in image {tag} ({prepared_id}), which no longer "
            "exists and is never pulled: rebuild with `bakeoff-sandbox rescore --change "
            "first --arm A --rebuild`; the exact container cannot be re-created, so "
            "reproduce a record of the rebuilt image instead")
    finally:
        sweep(engine, loaded)
        for ref in made:
            with contextlib.suppress(docker.errors.NotFound):
                engine.client.images.remove(ref, force=True)


def _build(engine: Engine, tag: str, labels: dict[str, str]) -> str:
    """A tiny image (FROM scratch, labels only) at `tag`: the test's own."""
    dockerfile = "FROM scratch\n" + "".join(f'LABEL "{k}"="{v}"\n' for k, v in labels.items())
    built, _ = engine.client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag,
                                          rm=True, pull=False)
    return str(built.id)


def test_gc_images_removes_an_old_identity_and_keeps_one_in_use_one_current_and_theirs(
        engine: Engine, built_images: dict[str, images.BuiltImage]) -> None:
    token = secrets.token_hex(6)
    current = gateway.image_identity(built_images["python"].image_id, gateway.package_files())
    old = f"bakeoff/gateway:old{token}"
    used = f"bakeoff/gateway:used{token}"
    now = f"bakeoff/gateway:now{token}"
    theirs = f"example/theirs:{token}"
    made = {
        old: _build(engine, old, {LABEL_IMAGE: "gateway", LABEL_IDENTITY: f"sha256:old{token}"}),
        used: _build(engine, used, {LABEL_IMAGE: "gateway",
                                    LABEL_IDENTITY: f"sha256:used{token}"}),
        now: _build(engine, now, {LABEL_IMAGE: "gateway", LABEL_IDENTITY: current,
                                  "test.token": token}),
        theirs: _build(engine, theirs, {"test.token": token}),
    }
    user = engine.client.containers.create(used, command=["/none"], name=f"it-gc-{token}",
                                           labels={LABEL_EXPERIMENT: f"it-gc-{token}"})
    mine = set(made.values())
    try:
        listed = cli(Path.cwd(), "gc", "--images", "--dry-run", timeout=300)
        assert listed.returncode == 0, listed.stderr
        shown = _lines(listed.stderr)
        assert f"would remove image {old} ({made[old][7:19]}), 0.0 MB" in shown
        assert (f"kept image {used} ({made[used][7:19]}): in use by it-gc-{token} "
                f"(experiment it-gc-{token})") in shown
        assert f"kept image {now} ({made[now][7:19]}): what this version builds" in shown
        assert not [line for line in shown if theirs in line or made[theirs][7:19] in line]
        assert all(_image(engine, ref) is not None for ref in made)  # a dry run

        report = cleanup.gc_images(engine, dry_run=False, within=lambda i: i.id in mine)
        assert cleanup.image_lines(report) == [
            f"removed image {old} ({made[old][7:19]}), 0.0 MB",
            f"kept image {now} ({made[now][7:19]}): what this version builds",
            f"kept image {used} ({made[used][7:19]}): in use by it-gc-{token} "
            f"(experiment it-gc-{token})",
            "images: removed 1, freed 0.0 MB"]
        assert [ref for ref in made if _image(engine, ref) is None] == [old]
    finally:
        user.remove(force=True)
        for ref in made:
            with contextlib.suppress(docker.errors.NotFound):
                engine.client.images.remove(ref, force=True)
