"""What the brief states of the harness (`rig.guards.harness_stated.stated`, issue 30):
concretely, for the base's own tree, what every sample will take from the base, from the
very predicates `rig.guards.harness.pin` applies; and every rule that decides a verdict
is in it."""

from __future__ import annotations

from rig.guards import harness, harness_stated
from rig.sample.tree import Entry, Kind, Tree


def file(text: str) -> Entry:
    return Entry(Kind.FILE, text.encode())


SMALL: Tree = {
    "app.py": file("def f():\n    return 1\n"),
    "pytest.ini": file("[pytest]\naddopts = -p tools.plug\n"),
    "tools/plug.py": file("# a pytest plugin the ini loads\n"),
    "tests/__init__.py": file(""),
    "tests/conftest.py": file("import pytest\n"),
    "tests/test_app.py": file("def test_f():\n    pass\n"),
    "tests/__pycache__/test_app.cpython-311.pyc": file("x"),
    "calc/main_test.go": file("package calc\n\nfunc TestMain(m *testing.M) {}\n"),
    "calc/calc_test.go": file("package calc\n"),
    "go.mod": file("module calc\n\ngo 1.19\n"),
}


def test_the_statement_for_a_small_tree() -> None:
    """Exactly what a brief says for a small python + go base: its protected file, its
    harness files by path (pytest.ini, the conftest, the plugin the ini names, the Go
    TestMain file, go.mod; never bytecode, nor the test package's marker, whose content
    is code), then the rules."""
    text = harness_stated.stated(SMALL, ("tests/test_app.py",))
    assert text.startswith(
        "## What is the base's at scoring\n\n"
        "Your last commit is scored in fresh containers. What is listed here is the base's "
        "there,\nwhatever your commits hold:\n\n"
        "- Protected (restored to the base's version): `tests/test_app.py`.\n"
        "- The base's harness files here: `calc/main_test.go`, `go.mod`, `pytest.ini`,\n"
        "  `tests/conftest.py`, `tools/plug.py`.\n"
        "- Harness, by file name or place anywhere in the tree: ")
    said = harness_stated
    rules = [said.RULE_BY_NAME, said.RULE_NAMED, said.RULE_GO_TEST_MAIN, said.RULE_LAYOUT,
             said.RULE_RUNTIME, said.RULE_DEPENDENCIES, said.RULE_BYTECODE, said.RULE_COMMANDS]
    # every rule sentence of the module: a new one must be stated (and listed here)
    assert set(rules) == {v for k, v in vars(harness_stated).items() if k.startswith("RULE_")}
    flat = " ".join(text.split())
    assert [flat.find(" ".join(rule.split())) > 0 for rule in rules] == [True] * len(rules)
    assert harness_stated.stated(dict(SMALL), ("tests/test_app.py",)) == text  # deterministic


def test_every_rule_that_decides_a_verdict_is_stated() -> None:
    """Each thing `pin` and `drop_bytecode` take from the base or drop, named in words an
    agent can act on (a conftest fixture, a pytest marker in pyproject.toml, a Go
    TestMain, go.mod's language version, a new dependency, a test package marker, a
    shadowing module, a file a config names, bytecode and caches, a cargo target/),
    and that a file a check's command names is the arm's unless protected."""
    flat = " ".join(harness_stated.stated(SMALL).split())
    for words in ("`conftest.py`", "a fixture or hook added to a conftest.py the base has",
                  "conftest.py of a new test directory", "pytest marker",
                  "declared in pyproject.toml", "`TestMain`", "removed whole",
                  "language version in go.mod", "New dependencies are not installed",
                  "no network", "`__init__.py`", "standard-library",
                  "`setupFiles`", "`pytest_plugins`", "`__pycache__/`", "`*.pyc`",
                  "`.pytest_cache/`", "cargo `target/`", "`package.json`", "`Cargo.toml`",
                  "`go.sum`", "`Makefile`", "`.gitignore`", "`node_modules/`",
                  "`sitecustomize.py`", "`*.pth`", "your code writes while the tests run",
                  "(tampered)",
                  "a file a check's command names", "unless it is protected"):
        assert words in flat, words


def test_language_rules_appear_only_where_the_base_has_the_language() -> None:
    js: Tree = {"package.json": file("{}"), "src/a.js": file("1"), "test/a.test.js": file("")}
    text = harness_stated.stated(js)
    assert "TestMain" not in text and "Python:" not in text
    assert "Protected" not in text  # nothing protected: no line for it
    assert "- The base's harness files here: `package.json`.\n" in text


def test_a_long_list_is_grouped_by_directory() -> None:
    """A committed node_modules/ of 500 files and 40 configs at the root: the big
    directory is one entry with its count, then at most 30 entries, then how many more."""
    tree: Tree = {f"node_modules/p{i}/package.json": file("{}") for i in range(500)}
    tree.update({f"tsconfig.{i:02}.json": file("{}") for i in range(40)})
    shown = harness_stated.grouped(harness.harness_of(tree))
    entries = shown.split(", ")
    assert entries[0] == "`node_modules/` (500 files)"
    assert entries[1:3] == ["`tsconfig.00.json`", "`tsconfig.01.json`"]
    assert entries[-1] == "and 11 more" and len(entries) == 31


def test_a_short_list_is_every_path() -> None:
    assert harness_stated.grouped(["b/conftest.py", "a/conftest.py", "a/conftest.py"]) == (
        "`a/conftest.py`, `b/conftest.py`")
    many = [f"pkg{i}/conftest.py" for i in range(3)] + [f"tests/t{i}/conftest.py"
                                                         for i in range(40)]
    assert harness_stated.grouped(many) == ("`pkg0/conftest.py`, `pkg1/conftest.py`, "
                                     "`pkg2/conftest.py`, `tests/` (40 files)")


def test_the_files_stated_are_exactly_what_pin_takes_from_the_base() -> None:
    """The statement cannot drift from the rule: an arm that rewrites every file of the
    base gets back, from `pin`, exactly the files `harness_of` names."""
    base: Tree = {**SMALL, "package.json": file('{"name": "x"}'),
                  "vitest.config.ts": file("export default { test: { setupFiles: "
                                           "['./test/setup.ts'] } }\n"),
                  "test/setup.ts": file("// setup\n"), "src/a.ts": file("export {}\n"),
                  "crate/Cargo.toml": file('[package]\nname = "c"\nbuild = "gen.rs"\n'),
                  "crate/gen.rs": file("fn main() {}\n"), "crate/src/lib.rs": file("\n")}
    del base["tests/__pycache__/test_app.cpython-311.pyc"]
    rewritten = {path: file(f"// rewritten {path}\n") for path in base}
    pinned = harness.pin(rewritten, base)
    assert (list(pinned.restored), pinned.removed) == (harness.harness_of(base), ())
    assert "crate/gen.rs" in pinned.restored and "test/setup.ts" in pinned.restored
