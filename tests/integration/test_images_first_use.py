"""A project image nobody built is built on first use, then reused (issue 12: `make setup`
builds only what the bundled example uses). Each test uses a throwaway image of its own,
`bakeoff/it-<hex>:latest` FROM the real base, in a temporary images/ directory: the real
images are never rebuilt or removed."""

from __future__ import annotations

import io
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from runner.cli.progress import ImageBuildView
from runner.containers import images
from runner.containers.backend import LABEL_IDENTITY, LABEL_IMAGE
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage, catalog, reporters
from runner.containers.images.identity import context_hash, identity_of
from runner.errors import ImageMissingError
from runner.manifest import load_manifest
from tests.integration.helpers import PlainReporter, cleanup, cli, git, make_target

DOCKERFILE = ("ARG BASE_IMAGE=bakeoff/base:bookworm\nFROM ${BASE_IMAGE}\n"
              "RUN echo first-use > /first-use\n")


@pytest.fixture
def tiny(engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path,
         monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """(name, its build directory) under a temporary BAKEOFF_IMAGES_DIR, build logs under
    a temporary cache; the image is removed afterwards (it carries our image label)."""
    name = f"it-{secrets.token_hex(4)}"
    context = tmp_path / "images" / name
    context.mkdir(parents=True)
    (context / "Dockerfile").write_text(DOCKERFILE)
    monkeypatch.setenv("BAKEOFF_IMAGES_DIR", str(context.parent))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    yield name, context
    images.remove_ours(engine, catalog.tag_for(name))


def test_a_missing_project_image_is_built_on_first_use_then_reused(
        engine: Engine, built_images: dict[str, BuiltImage], tiny: tuple[str, Path]) -> None:
    name, context = tiny
    tag = f"bakeoff/{name}:latest"
    assert images.inspect(engine, tag) is None
    printed = io.StringIO()
    with ImageBuildView(Console(file=printed, force_terminal=False, width=300)) as view, \
            reporters.reporting(view):
        first = images.resolve(engine, name)
    identity = identity_of(built_images["base"].identity, context_hash(context),
                           {"BASE_IMAGE": catalog.BASE_TAG})
    assert (first.name, first.tag, first.identity, first.cached) == (name, tag, identity, False)
    attrs = images.inspect(engine, tag)
    assert attrs is not None and attrs["Id"] == first.image_id
    assert attrs["Config"]["Labels"][LABEL_IMAGE] == name
    assert attrs["Config"]["Labels"][LABEL_IDENTITY] == identity
    [log] = (context.parents[1] / "cache" / "bakeoff-sandbox" / "logs").glob(f"{name}-*.log")
    start, end = printed.getvalue().splitlines()
    assert start == f"building {name}, log {log}"
    assert re.fullmatch(rf"built {name} in \d+\.\ds: {first.image_id[:19]}, log {log}", end)
    assert "Step 3/5 : RUN echo first-use > /first-use" in log.read_text().splitlines()

    second = images.resolve(engine, name)
    assert second == BuiltImage(name, tag, first.image_id, identity, cached=True)
    assert images.build(engine, [name], PlainReporter()) == [second]


def test_a_missing_image_not_built_from_images_dir_is_a_clear_error(
        engine: Engine, tiny: tuple[str, Path]) -> None:
    """Nothing is pulled and nothing is built: the error says how to get the image."""
    name, context = tiny
    ref = f"bakeoff-it/{name}:1"
    with pytest.raises(ImageMissingError) as caught:
        images.resolve(engine, ref)
    assert caught.value.exit_code == 3
    assert str(caught.value) == (
        f"image {ref} is not present locally (nothing is ever pulled)\n"
        f"  fix: build it with: `docker build -t {ref} DIR` or `docker load`: it is not "
        f"one of images/ (base, {name}), so `bakeoff-sandbox images build` cannot make it")
    with pytest.raises(ImageMissingError) as unnamed:
        images.resolve(engine, f"{name}-nodir")
    assert str(unnamed.value) == (
        f"image bakeoff/{name}-nodir:latest is not present locally (nothing is ever pulled)\n"
        f"  fix: build it with: bakeoff-sandbox images build {name}-nodir, after adding "
        f"{context.parent / (name + '-nodir')}/Dockerfile (FROM bakeoff/base:bookworm); "
        f"the images/ there are: base, {name}")
    assert images.inspect(engine, catalog.tag_for(name)) is None


def test_up_builds_a_missing_toolchain_image_and_shows_two_lines_for_it(
        engine: Engine, tiny: tuple[str, Path], tmp_path: Path) -> None:
    """Through the real command line: `up` builds the image it needs, prints one line when
    the build starts and one when it ends (both naming the log), none of its output."""
    name, _ = tiny
    manifest = make_target(tmp_path / "repo", ["A"], database=False)
    manifest.write_text(manifest.read_text().replace('image = "python"', f'image = "{name}"'))
    git(manifest.parent, "commit", "-qam", "a toolchain image nobody built yet")
    try:
        done = cli(manifest.parent, "up", timeout=300)
        lines = done.stderr.splitlines()
        assert re.fullmatch(rf"building {name}, log \S+/{name}-\d{{8}}-\d{{6}}-\d+\.log",
                            lines[0]), done.stderr
        assert re.fullmatch(rf"built {name} in \d+\.\ds: sha256:[0-9a-f]{{12}}, log \S+\.log",
                            lines[1]), done.stderr
        assert not any("first-use" in line or line.startswith("Step ") for line in lines)
        assert images.inspect(engine, catalog.tag_for(name)) is not None
        # The image is the one built (FROM the bare base): preflight refuses it, exit 3.
        assert done.returncode == 3, done.stderr
        assert f"error: preflight failed for image bakeoff/{name}:latest:" in lines
    finally:
        cleanup(engine, load_manifest(manifest))
