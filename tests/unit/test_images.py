"""Which images a manifest needs, and how `images build` chooses them (no docker)."""

from __future__ import annotations

import threading
import tomllib
from pathlib import Path
from typing import Any

import pytest

from runner.cli.app import _images_wanted, main
from runner.containers import images
from runner.containers.images import catalog
from runner.containers.images.identity import HOST_CA, context_hash, directory_context
from runner.errors import BadInputError
from runner.manifest import parse_manifest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "horizon" / "bakeoff.toml"


def example_data() -> dict[str, Any]:
    return tomllib.loads(EXAMPLE.read_text(encoding="utf-8"))


def test_the_bundled_example_needs_base_python_and_postgres_only() -> None:
    """`make setup` / `make demo` build these three, not go, node and rust (issue 12: the
    demo spent 90 s building images it never used)."""
    assert catalog.needed_by_file(EXAMPLE) == ["base", "postgres", "python"]


def test_a_go_manifest_without_a_database_needs_base_and_go() -> None:
    data = example_data()
    data["toolchain"]["image"] = "go"
    del data["database"]
    assert catalog.needed(parse_manifest(data, EXAMPLE)) == ["base", "go"]


def test_an_image_not_built_from_images_dir_needs_only_the_base() -> None:
    data = example_data()
    data["toolchain"]["image"] = "myorg/tool:1"
    data["database"]["image"] = "bakeoff/postgres:latest"  # our tag counts as ours
    assert catalog.needed(parse_manifest(data, EXAMPLE)) == ["base", "postgres"]
    assert catalog.not_built_here(parse_manifest(data, EXAMPLE)) == ["myorg/tool:1"]


def test_images_build_with_a_manifest_names_what_it_cannot_build(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Regression (issue 34): with a manifest, `images build` quietly built only `base`
    when the toolchain was not one of the bundled images; it says so now (a name that is
    not one of images/, as a local image of one's own)."""
    data = EXAMPLE.read_text(encoding="utf-8").replace(
        'image = "python"', 'image = "nosuchtool"', 1)
    assert data != EXAMPLE.read_text(encoding="utf-8")
    manifest = tmp_path / "bakeoff.toml"
    manifest.write_text(data)
    assert _images_wanted([], False, manifest) == ["base", "postgres"]  # no engine needed
    err = " ".join(capsys.readouterr().err.split())
    assert (f"images for {manifest}: base, postgres (--all builds every one; the others are "
            "built on first use) not built here: bakeoff/nosuchtool:latest is not one of the "
            "bundled images (a local image of your own: `docker build -t REF DIR` or `docker "
            "load`)") in err


def test_the_defaults_are_python_and_no_database() -> None:
    data = example_data()
    del data["toolchain"]["image"], data["database"]
    assert catalog.needed(parse_manifest(data, EXAMPLE)) == ["base", "python"]


@pytest.mark.parametrize(("given", "project"), [
    ("go", "go"), ("bakeoff/go:latest", "go"), ("bakeoff/redis", "redis"), ("base", "base"),
    ("bakeoff/base:bookworm", "base"), ("bakeoff/go:1.19", None), ("nosuchtool", None),
    ("myorg/go:latest", None), ("bakeoff/prepared:0123456789abcdef", None)])
def test_project_name_is_a_directory_under_images_or_none(given: str,
                                                          project: str | None) -> None:
    assert catalog.project_name(given) == project


def test_a_manifest_that_is_not_toml_is_bad_input_naming_it(tmp_path: Path) -> None:
    broken = tmp_path / "bakeoff.toml"
    broken.write_text("[toolchain\n")
    with pytest.raises(BadInputError) as caught:
        catalog.needed_by_file(broken)
    assert str(caught.value).startswith(f"{broken}: cannot read the manifest: ")
    assert caught.value.hint == "pass -f FILE, name the images, or use --all"


def test_images_build_refuses_names_with_all(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["images", "build", "go", "--all"]) == 2
    err = capsys.readouterr().err
    assert "name images, or give --all or -f FILE, not both" in err
    assert "Traceback" not in err


def test_missing_other_images_name_how_to_get_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name with no images/ directory, and a reference that is not ours: each hint says
    what to do (nothing is ever pulled), and never to edit the installed package's own
    folder (issue 34: the hint told a user to add a Dockerfile inside site-packages)."""
    monkeypatch.delenv("BAKEOFF_IMAGES_DIR", raising=False)
    known = ", ".join(catalog.known_names())
    assert known == "base, browser, engine, go, node, postgres, python, redis, registry, rust"
    assert images._how_to_get("nosuchtool", "bakeoff/nosuchtool:latest") == (
        "name a local image in [toolchain] image (`docker build -t myorg/nosuchtool DIR`, "
        'then image = "myorg/nosuchtool"), or put a build context of your own in '
        "DIR/nosuchtool/ (a Dockerfile FROM bakeoff/base:bookworm), set "
        "BAKEOFF_IMAGES_DIR=DIR (it replaces the bundled images: copy the ones you use "
        "there too) and run `bakeoff-sandbox images build nosuchtool`; the bundled images "
        f"are: {known}")
    assert str(catalog.images_dir()) not in images._how_to_get("nosuchtool",
                                                                "bakeoff/nosuchtool:latest")
    assert images._how_to_get("myorg/tool:1", "myorg/tool:1") == (
        "`docker build -t myorg/tool:1 DIR` or `docker load`: it is not one of images/ "
        f"({known}), so `bakeoff-sandbox images build` cannot make it")



def test_a_missing_image_with_an_images_folder_of_ones_own_names_that_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """BAKEOFF_IMAGES_DIR set: the Dockerfile goes in the user's own folder, named."""
    (tmp_path / "go").mkdir()
    (tmp_path / "go" / "Dockerfile").write_text("FROM bakeoff/base:bookworm\n")
    monkeypatch.setenv("BAKEOFF_IMAGES_DIR", str(tmp_path))
    assert images._how_to_get("nosuchtool", "bakeoff/nosuchtool:latest") == (
        f"bakeoff-sandbox images build nosuchtool, after adding {tmp_path}/nosuchtool/"
        "Dockerfile (FROM bakeoff/base:bookworm); the images/ there are: base, go")


def test_a_second_build_of_a_tag_waits_for_the_first(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workers needing the same missing image: the second waits (then finds it
    cached) instead of building it beside the first; another tag does not wait."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    order: list[str] = []
    with images.build_lock("bakeoff/go:latest"):
        waiting = threading.Thread(target=lambda: _locked("bakeoff/go:latest", order))
        waiting.start()
        _locked("bakeoff/node:latest", order)
        waiting.join(0.5)
        assert waiting.is_alive()
        order.append("first done")
    waiting.join(5)
    assert order == ["bakeoff/node:latest", "first done", "bakeoff/go:latest"]


def _locked(tag: str, order: list[str]) -> None:
    with images.build_lock(tag):
        order.append(tag)


def test_an_images_build_context_holds_its_files_with_modes_and_the_hosts_ca(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """images/ builds that fetch over TLS (pip behind an intercepting proxy) get the host's
    CA bundle as `host-ca.crt`, like a prepared image's setup; an entrypoint keeps its mode.
    The bundle is the host's: the identity (the directory's hash) does not include it."""
    import io
    import tarfile

    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    context = tmp_path / "img"
    (context / "sub").mkdir(parents=True)
    (context / "Dockerfile").write_text("FROM x\n")
    (context / "sub" / "entry.sh").write_text("#!/bin/sh\n")
    (context / "sub" / "entry.sh").chmod(0o755)
    before = context_hash(context)
    with tarfile.open(fileobj=io.BytesIO(directory_context(context))) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert sorted(members) == ["Dockerfile", HOST_CA, "sub/entry.sh"]
        assert members["sub/entry.sh"].mode & 0o777 == 0o755
        handle = tar.extractfile(members[HOST_CA])
        assert handle is not None and handle.read().startswith(ca.read_bytes())
    assert context_hash(context) == before
