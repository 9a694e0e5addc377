"""In-tree symlinks laid out as what they lead to (`rig.sample.links`, issue 20 class 9): what a
tool that skips links sees is what a runtime that follows them sees, or the tree is
refused. Each test is one layout a tree can hold, with the exact result."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest

from rig.guards import harness
from rig.sample import links
from rig.sample.links import LayoutCaps, Where
from rig.sample.spec import SampleSpec
from rig.sample.tree import Entry, Kind, Tree, UnsafeTreeError, directories
from runner.containers.samples.tree import build

BROKEN = b"def clamp(x:\n    return x\n"


def f(data: bytes = b"x = 1\n") -> Entry:
    return Entry(Kind.FILE, data)


def ln(target: str) -> Entry:
    return Entry(Kind.SYMLINK, target.encode())


def laid(tree: Tree, base: Tree | None = None, caps: LayoutCaps = links.DEFAULT_CAPS) -> Tree:
    """`tree` laid out as an arm's (against `base`, none by default)."""
    links.lay_out(tree, base, caps)
    return tree


def where(tree: Tree, link: str) -> tuple[Where, str]:
    found = links.resolve(tree, directories(tree), link)
    return found.where, found.path


def test_a_package_linked_to_a_directory_elsewhere_becomes_a_copy_of_it() -> None:
    """`src/horizon -> ../lib/horizon`: the runtime imports lib's code through src; a
    compile check of `src` skipped the link. Now src/horizon holds lib's files."""
    tree = {"lib/horizon/__init__.py": f(BROKEN), "lib/horizon/core.py": f(),
            "src/horizon": ln("../lib/horizon")}
    done = links.lay_out(tree)
    assert tree == {"lib/horizon/__init__.py": f(BROKEN), "lib/horizon/core.py": f(),
                    "src/horizon/__init__.py": f(BROKEN), "src/horizon/core.py": f()}
    assert done.materialized == ("src/horizon -> lib/horizon",)


def test_a_linked_file_becomes_a_regular_file_with_its_bytes_and_mode() -> None:
    tool = Entry(Kind.EXECUTABLE, b"#!/bin/sh\n", "ab" * 20, 10)
    tree = {"bin/tool": tool, "src/horizon.py": ln("../lib/real.py"), "lib/real.py": f(BROKEN),
            "run": ln("bin/tool")}
    laid(tree)
    assert tree["src/horizon.py"] == f(BROKEN)
    assert tree["run"] is tool


def test_a_chain_of_links_through_directories_and_files_is_followed_to_its_end() -> None:
    tree = {"a": ln("b/x.py"), "b": ln("c/"), "c": ln("/work/d"), "d/x.py": f(BROKEN)}
    assert where(tree, "a") == (Where.FILE, "d/x.py")
    laid(tree)
    assert tree["a"] == f(BROKEN)
    assert tree["b/x.py"] == tree["c/x.py"] == f(BROKEN)


@pytest.mark.parametrize("tree", [
    {"a": ln("b"), "b": ln("a")},
    {"a": ln("a")},
    {"a": ln("./d/../a"), "d/x.py": f()},
    {"a": ln("b/c"), "b": ln("a")},
], ids=["two-links", "itself", "dots", "through-a-directory"])
def test_a_link_loop_is_refused(tree: Tree) -> None:
    with pytest.raises(UnsafeTreeError, match=r"a loop|holds it|cannot lay out"):
        laid(tree)


@pytest.mark.parametrize("tree", [
    {"src/x": ln(".."), "src/horizon.py": f()},
    {"src/x": ln("."), "src/horizon.py": f()},
    {"a/x": ln("../b"), "b/y": ln("../a"), "a/f.py": f()},
    {"a": ln("lib"), "lib/x": ln("../a")},
], ids=["parent", "itself", "mutual", "back-through-the-copy"])
def test_a_linked_directory_that_would_hold_its_own_copy_is_refused(tree: Tree) -> None:
    with pytest.raises(UnsafeTreeError, match="holds it"):
        laid(tree)


def test_a_loop_the_base_has_identically_is_kept_as_it_is() -> None:
    """The project's own layout: its tools saw it so on the base too."""
    base = {"src/x": ln(".."), "src/horizon.py": f()}
    tree = {**base, "src/horizon.py": f(b"y = 2\n")}
    done = links.lay_out(tree, base)
    assert tree["src/x"] == ln("..")
    assert done.kept == ("src/x (it leads to the tree's root, which holds it; the base's "
                         "own link)",)
    with pytest.raises(UnsafeTreeError):  # the same loop at another path is the arm's
        laid({**tree, "src/y": ln("..")}, base)


@pytest.mark.parametrize(("target", "expected"), [
    ("../../work/lib/horizon.py", (Where.FILE, "lib/horizon.py")),
    ("../../../../work/lib", (Where.DIR, "lib")),
    ("/work/lib/../lib/horizon.py", (Where.FILE, "lib/horizon.py")),
    ("../../usr/lib/python3/dist-packages", (Where.OUTSIDE, "/usr/lib/python3/dist-packages")),
    ("/usr/share/zoneinfo/UTC", (Where.OUTSIDE, "/usr/share/zoneinfo/UTC")),
    ("/dev/null", (Where.OUTSIDE, "/dev/null")),
    ("/proc/self/cwd/lib", (Where.UNSAFE, "")),
    ("/proc/1/root/work/lib", (Where.UNSAFE, "")),
    ("/dev/fd/3", (Where.UNSAFE, "")),
    ("/lib/../work/lib", (Where.UNSAFE, "")),
    ("../nothing/here.py", (Where.MISSING, "/work/nothing/here.py")),
    ("../lib/horizon.py/more", (Where.MISSING, "/work/lib/horizon.py/more")),
])
def test_where_a_link_leads_as_the_kernel_resolves_it_in_work(
        target: str, expected: tuple[Where, str]) -> None:
    tree = {"src/link": ln(target), "lib/horizon.py": f()}
    assert where(tree, "src/link") == expected


@pytest.mark.parametrize("target", ["/proc/self/cwd/lib", "/proc/thread-self/root/work/lib",
                                    "/dev/stdin", "/usr/../work/lib", ""])
def test_a_link_whose_end_depends_on_the_process_or_the_image_is_refused(target: str) -> None:
    """`/proc/self/cwd` is /work for the command: out of the tree by its text, back in by
    the kernel's; a `..` out of an image directory depends on the image's own links."""
    with pytest.raises(UnsafeTreeError, match="cannot lay out"):
        laid({"src/horizon": ln(target), "lib/horizon.py": f(BROKEN)})


def test_links_out_of_the_tree_and_to_nothing_are_kept() -> None:
    """Nothing of the tree is behind them: the image's files, or whatever the rig or the
    base's setup puts there."""
    tree = {"etc/tz": ln("/usr/share/zoneinfo/UTC"), "up": ln("../../usr/lib"),
            "gen": ln("build/gen.py"), "null": ln("/dev/null")}
    before = dict(tree)
    done = links.lay_out(tree)
    assert tree == before
    assert done.materialized == ()
    assert len(done.kept) == 4


def test_links_inside_a_linked_directory_resolve_from_where_they_really_are() -> None:
    """In `lib/`, `sub -> ../other` is `other`; a link out of the tree or to nothing keeps
    its meaning in the copy (an absolute target), whatever the copy's depth."""
    tree = {"a/b/c": ln("../../lib"), "lib/sub": ln("../other"), "other/m.py": f(BROKEN),
            "lib/out": ln("../../usr/share"), "lib/gone": ln("nothing")}
    laid(tree)
    assert tree["a/b/c/sub/m.py"] == tree["lib/sub/m.py"] == f(BROKEN)
    assert tree["a/b/c/out"] == ln("/usr/share")
    assert tree["a/b/c/gone"] == ln("/work/lib/nothing")
    assert tree["lib/out"] == ln("../../usr/share")  # a committed one is kept as it is


def test_a_link_named_like_a_harness_place_lays_out_harness_paths() -> None:
    """`node_modules -> lib`: node would load lib's code as a dependency; laid out, its
    files are `node_modules/...`, which pinning sees as harness."""
    tree = {"node_modules": ln("lib"), "lib/left-pad/index.js": f()}
    laid(tree)
    assert "node_modules/left-pad/index.js" in tree


def test_link_copies_count_against_the_entry_cap() -> None:
    """A link farm: 200 links to a 1,000-file directory would be 200,000 entries."""
    tree: Tree = {f"big/{n}.py": f() for n in range(1000)}
    tree.update({f"farm/{n}": ln("../big") for n in range(200)})
    began = time.monotonic()
    with pytest.raises(UnsafeTreeError, match="more than 50000 entries"):
        laid(tree, caps=LayoutCaps(entries=50_000))
    assert time.monotonic() - began < 2


def test_link_copies_count_against_the_byte_cap() -> None:
    tree: Tree = {"big.bin": Entry(Kind.FILE, b"", "ab" * 20, 600_000_000),
                  "copy.bin": ln("big.bin")}
    with pytest.raises(UnsafeTreeError, match="1000000000 bytes"):
        laid(tree, caps=LayoutCaps(bytes=1_000_000_000))


def test_doubling_links_are_stopped_by_the_cap_not_by_memory() -> None:
    """`d1/{a,b} -> ../d0`, `d2/{a,b} -> ../d1`, ...: 2^30 copies; refused at the cap."""
    tree: Tree = {"d0/x.py": f()}
    for n in range(1, 31):
        tree[f"d{n}/a"] = ln(f"../d{n - 1}")
        tree[f"d{n}/b"] = ln(f"../d{n - 1}")
    began = time.monotonic()
    with pytest.raises(UnsafeTreeError, match=r"entries|nests"):
        laid(tree, caps=LayoutCaps(entries=10_000))
    assert time.monotonic() - began < 2


def test_a_tree_deeper_than_tools_walk_is_refused() -> None:
    deep = "/".join(["a"] * (links.MAX_DEPTH + 1)) + "/x.py"
    with pytest.raises(UnsafeTreeError, match="directories deep"):
        laid({deep: f()})


def test_a_tree_without_links_is_left_as_it_is() -> None:
    tree = {"src/horizon.py": f()}
    assert links.lay_out(tree) == links.Laid()
    assert tree == {"src/horizon.py": f()}


def test_the_record_names_at_most_a_hundred_materialized_links() -> None:
    tree: Tree = {"lib/x.py": f()}
    tree.update({f"l{n:03}": ln("lib/x.py") for n in range(150)})
    done = links.lay_out(tree)
    assert len(done.materialized) == links.MAX_NOTED + 1
    assert done.materialized[-1] == "... and 50 more links"


# -- with the rest of the rig's layer (`build`) ------------------------------


TEST = b"from horizon import clamp\n\n\ndef test_horizon():\n    assert clamp(91) == 90\n"
BASE: Tree = {"src/horizon.py": f(b"def clamp(x):\n    return x\n"),
              "tests/test_horizon.py": f(TEST), "pyproject.toml": f(b"[project]\n")}


def built(arm: Tree, base: Tree = BASE, protected: tuple[str, ...] = ("tests/test_horizon.py",),
          ) -> tuple[Tree, dict[str, list[str]]]:
    """The arm's tree as a success sample receives it (no canaries), and its record."""
    spec = SampleSpec(change="c", arm="a", check="success", n=1, commit="c" * 40,
                      base_commit="b" * 40, command="pytest -q tests", parser="pytest",
                      timeout_s=10, protected=protected, harness="base")
    tree = dict(arm)  # every blob held: the tar never reads the (absent) repository
    made = build(spec, tree, base, io.BytesIO(), Path("/nonexistent"),
                             canaries=False)
    return tree, made.pinned.as_record()


def test_a_symlink_named_like_a_harness_file_is_pinned_like_one() -> None:
    """`tests/conftest.py -> ../src/plugin.py` (the arm's forcing hook): laid out, then
    removed like any conftest the base does not have."""
    tree, record = built({**BASE, "src/plugin.py": f(b"def pytest_runtest_call(): pass\n"),
                          "tests/conftest.py": ln("../src/plugin.py")})
    assert "tests/conftest.py" not in tree
    assert record["removed"] == ["tests/conftest.py"]
    assert record["materialized"] == ["tests/conftest.py -> src/plugin.py"]


def test_a_protected_test_behind_a_linked_directory_is_the_base_s_among_the_arm_s() -> None:
    """`tests -> elsewhere`: tests/ is a copy of elsewhere/ (the arm's new tests in it),
    and the protected test in it is the base's, as a regular file."""
    arm = {"src/horizon.py": BASE["src/horizon.py"], "pyproject.toml": BASE["pyproject.toml"],
           "elsewhere/test_horizon.py": f(b"def test_horizon():\n    pass\n"),
           "elsewhere/test_new.py": f(b"def test_new():\n    pass\n"), "tests": ln("elsewhere")}
    tree, _ = built(arm)
    assert tree["tests/test_horizon.py"] == f(TEST)
    assert tree["tests/test_new.py"] == arm["elsewhere/test_new.py"]


def test_a_base_s_linked_protected_file_is_restored_as_the_bytes_it_led_to() -> None:
    """The base's protected test is a link to a shared body: restored as the BASE's bytes,
    whatever the arm made of the body."""
    base = {**BASE, "tests/test_horizon.py": ln("../common/body.py"), "common/body.py": f(TEST)}
    tree, _ = built({**base, "common/body.py": f(b"def test_horizon():\n    pass\n")}, base)
    assert tree["tests/test_horizon.py"] == f(TEST)


def test_a_base_s_linked_harness_file_is_pinned_as_the_bytes_it_led_to() -> None:
    """`pytest.ini -> ci/pytest.cfg` in the base: the arm's ci/pytest.cfg (which selects
    nothing real) does not become the harness through the base's own link."""
    base = {**BASE, "pytest.ini": ln("ci/pytest.cfg"), "ci/pytest.cfg": f(b"[pytest]\n")}
    arm = {**base, "ci/pytest.cfg": f(b"[pytest]\naddopts = -k nothing\n")}
    tree, record = built(arm, base)
    assert tree["pytest.ini"] == f(b"[pytest]\n")
    assert record["restored"] == ["pytest.ini"]


def test_a_link_to_a_protected_test_holds_the_arm_s_bytes_under_a_name_of_its_own() -> None:
    """`src/helper.py -> ../tests/test_horizon.py`: a module with the arm's version of the
    test's text, which it could have committed as a file; the protected test is the base's."""
    mine = f(b"def test_horizon():\n    pass\n")
    tree, _ = built({**BASE, "tests/test_horizon.py": mine,
                     "src/helper.py": ln("../tests/test_horizon.py")})
    assert (tree["src/helper.py"], tree["tests/test_horizon.py"]) == (mine, f(TEST))


# -- what a tool would read instead of the tree's files ---------------------------------


def test_tool_caches_cargo_targets_and_shadowing_extensions_are_dropped() -> None:
    """A mypy or ruff cache calls a broken file checked; cargo's fingerprints call a
    changed crate fresh (every mtime of a sample's tree is 0); `horizon.cpython-311-...so`
    beside `horizon.py` is what the runtime imports while a check compiles the .py."""
    tree: Tree = {".mypy_cache/3.11/horizon.meta.json": f(), ".ruff_cache/0.5/x": f(),
                  "sub/.dmypy.json": f(), "Cargo.toml": f(), "target/debug/.fingerprint/x": f(),
                  "crates/a/Cargo.toml": f(), "crates/a/target/debug/a": f(),
                  "src/horizon.py": f(), "src/horizon.cpython-311-x86_64-linux-gnu.so": f(),
                  "src/_speedups.so": f(), "src/target/__init__.py": f()}
    dropped = harness.drop_bytecode(tree)
    assert set(tree) == {"Cargo.toml", "crates/a/Cargo.toml", "src/horizon.py",
                         "src/_speedups.so", "src/target/__init__.py"}
    assert len(dropped) == 6


def test_an_ignore_file_the_arm_adds_is_the_harness() -> None:
    """`src/.gitignore` listing `broken.py` (force-added): ruff would never read it."""
    tree, record = built({**BASE, "src/.gitignore": f(b"broken.py\n"),
                          "src/broken.py": f(BROKEN)})
    assert "src/.gitignore" not in tree
    assert record["removed"] == ["src/.gitignore"]
