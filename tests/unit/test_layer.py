"""What the rig lays over a sample's tree (`rig.sample.layer`, issue 35): a pure function
of the spec and the trees, out of the docker wing; every case here runs without git or
docker, and the wing only writes what it returns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from rig.sample import layer
from rig.sample.spec import SampleSpec
from rig.sample.tree import Entry, Kind, Tree


def spec(parser: str = "pytest", command: str = "pytest -q tests",
         protected: tuple[str, ...] = ("tests/test_calc.py",)) -> SampleSpec:
    return SampleSpec(change="c", arm="a", check="tests", n=1, commit="1" * 40,
                      base_commit="0" * 40, command=command, parser=parser, timeout_s=60,
                      protected=protected)


def file(text: str) -> Entry:
    return Entry(Kind.FILE, text.encode())


def no_heads(paths: Sequence[str]) -> Mapping[str, str]:
    raise AssertionError(f"nothing unheld to read, asked for {paths}")


BASE = {"calc.py": file("def add(a, b):\n    return a + b\n"),
        "tests/test_calc.py": file("def test_add():\n    assert True\n"),
        "conftest.py": file("# the base's\n")}


def arm() -> Tree:
    return {"calc.py": file("def add(a, b):\n    return 4\n"),
            "tests/test_calc.py": file("def test_add():\n    pass  # the arm's rewrite\n"),
            "conftest.py": file("# the arm's hook\n"),
            "calc.pyc": file("bytecode")}


def test_the_base_s_protected_files_harness_and_canaries_are_laid_and_owned() -> None:
    tree = arm()
    laid = layer.lay(spec(), tree, dict(BASE), "ab12cd34", no_heads)
    assert tree["tests/test_calc.py"].data == BASE["tests/test_calc.py"].data
    assert tree["conftest.py"].data == BASE["conftest.py"].data
    assert "calc.pyc" not in tree and tree["calc.py"].data.endswith(b"return 4\n")
    assert laid.canary is not None and laid.canary.path == "tests/bakeoff_ab12cd34.py"
    assert laid.canary.path in tree
    assert set(laid.owned) == {"conftest.py", "tests/test_calc.py", laid.canary.path}
    assert laid.dirs == ("", "tests")


def test_no_canary_when_asked_for_none_and_a_protected_file_the_base_lacks_goes() -> None:
    tree = arm()
    laid = layer.lay(spec(protected=("tests/test_new.py",)), {**tree,
                     "tests/test_new.py": file("x")}, dict(BASE), "ab12cd34", no_heads,
                     canaries=False)
    assert laid.canary is None and "tests/test_new.py" not in laid.owned


@pytest.mark.parametrize("path", ["conftest.py", "pytest.ini", "go/calc_test.go"])
def test_what_the_layer_reads_is_what_the_wing_holds_first(path: str) -> None:
    assert layer.reads(path)


def test_files_too_large_to_hold_are_read_through_the_wing_s_heads() -> None:
    tree: Tree = {"go.mod": file("module example.com/m\n"),
                  "calc/calc_test.go": Entry(Kind.FILE, b"", oid="f" * 40, size=10),
                  "calc/calc.go": file("package calc\n")}
    asked: list[str] = []

    def heads(paths: Sequence[str]) -> Mapping[str, str]:
        asked.extend(paths)
        return {p: "package calc\n\nimport \"testing\"\n" for p in paths}

    laid = layer.lay(spec("go-test", "go test ./calc", ("calc/calc_test.go",)), tree,
                     dict(tree), "ab12cd34", heads)
    assert asked == ["calc/calc_test.go"]
    assert laid.canary is not None
