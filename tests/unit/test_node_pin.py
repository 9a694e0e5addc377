"""Which Node a node toolchain runs (issue 21 item 4): `[toolchain] node`, else the
repository's `.nvmrc`, `.node-version` or `engines.node`, as nvm and setup-node read them."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from runner.manifest.node import BUILDS, NodeChoice, NodePinError, choose, satisfies

ROOT = Path(__file__).resolve().parents[2]


def package(engines: str) -> bytes:
    return json.dumps({"name": "x", "engines": {"node": engines}}).encode()


@pytest.mark.parametrize(("pin", "major"), [
    ("22", "22"), ("v22.11.0\n", "22"), ("20.x", "20"), ("lts/jod", "22"),
    ("lts/iron", "20"), ("lts/*", "24"), ("node", "24"), ("# a comment\n\n  24.1  \n", "24"),
    ("18.20.4", "18")])
def test_an_nvmrc_picks_its_major(pin: str, major: str) -> None:
    choice = choose(None, {".nvmrc": pin.encode(), "package.json": package(">=18")})
    assert (choice.major, choice.version, choice.source) == (major, BUILDS[major], ".nvmrc")


def test_the_order_is_configured_then_nvmrc_then_node_version_then_engines() -> None:
    files = {".nvmrc": b"20\n", ".node-version": b"24\n", "package.json": package("^22")}
    assert choose("18", files) == NodeChoice("18", BUILDS["18"], "[toolchain] node", "18")
    assert choose(None, files).source == ".nvmrc"
    del files[".nvmrc"]
    assert (choose(None, files).major, choose(None, files).source) == ("24", ".node-version")
    del files[".node-version"]
    assert choose(None, files) == NodeChoice("22", BUILDS["22"], "package.json engines.node",
                                             "^22")
    assert choose(None, {}) == NodeChoice("18", BUILDS["18"], "nothing pinned: Debian's Node",
                                          "")


@pytest.mark.parametrize(("engines", "major"), [
    (">=20", "24"), (">=18 <23", "22"), ("^20.9.0 || ^22.11.0", "22"), ("~20.18", "20"),
    ("18 - 22", "22"), ("20.x || 22.x", "22"), ("*", "24"), (">=20.19.0 <21", None),
    ("^23", None), (">20", "24"), ("<=20", "20"), ("22.20.0", "22"), (">=v18.0.0", "24")])
def test_an_engines_range_picks_the_newest_line_it_admits(engines: str,
                                                         major: str | None) -> None:
    files = {"package.json": package(engines)}
    if major is None:
        with pytest.raises(NodePinError) as refused:
            choose(None, files)
        assert str(refused.value).startswith(f"package.json engines.node {engines!r} is "
                                             "satisfied by none of the Node builds")
        assert str(refused.value).endswith("set [toolchain] node")
    else:
        assert choose(None, files).major == major


def test_a_pin_no_build_honours_is_refused_naming_the_file_and_the_fix() -> None:
    with pytest.raises(NodePinError) as refused:
        choose(None, {".node-version": b"23.1.0\n"})
    assert str(refused.value) == (
        ".node-version pins Node '23.1.0', and the rig has Node 18, 20, 22, 24 only "
        "(18.19.0, 20.18.0, 22.20.0, 24.19.0); pin one of those, or set [toolchain] node")


@pytest.mark.parametrize(("version", "spec", "expected"), [
    ((20, 18, 0), "^20.9.0", True), ((20, 8, 0), "^20.9.0", False),
    ((22, 20, 0), ">=18.17.0 <21 || >=22", True), ((20, 18, 0), "~20.18.1", False),
    ((20, 18, 0), "=20.18.0", True), ((0, 3, 9), "^0.3.1", True), ((0, 4, 0), "^0.3.1", False),
    ((22, 0, 0), "not a range", False)])
def test_satisfies_follows_node_semver(version: tuple[int, int, int], spec: str,
                                       expected: bool) -> None:
    assert satisfies(version, spec) is expected


def test_the_builds_are_the_node_images_variants_and_wheels() -> None:
    """BUILDS, images/node/variants.toml and wheels.txt name the same Node lines."""
    variants = tomllib.loads((ROOT / "images/node/variants.toml").read_text())
    assert variants["values"] == list(BUILDS) and variants["default"] == "18"
    wheels = [line.split() for line in (ROOT / "images/node/wheels.txt").read_text()
              .splitlines() if line and not line.startswith("#")]
    assert sorted({(w[0], f"-{BUILDS[w[0]]}-" in w[2]) for w in wheels}) == [
        ("20", True), ("22", True), ("24", True)]
