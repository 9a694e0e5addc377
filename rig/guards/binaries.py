"""The canaries of go test and cargo planted in the protected tests' own test binary
(class 4; `rig.guards.inprocess` says why, and plants node's and the JS runners').

- go test: a TestMain (unless the protected package has its own) that runs the tests and
  then prints one test line of its own, PASS or FAIL as `m.Run()` returned, under a
  per-sample name derived from a protected test's; the must-fail canary file is a
  package of its own beside the protected one, in a package the command builds
  (`rig.guards.gopackages`).
- cargo: each protected integration test (`tests/NAME.rs`) is built from a rig root that
  `include!`s the protected file beside must-fail twins (with `--no-fail-fast`) and a
  must-pass sentinel: one binary, one `running N tests` header that counts them all.

Pure: planning needs the tree's paths and the text of a few files, never docker.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import tomllib
from collections.abc import Mapping, Sequence

from rig.guards import gopackages
from rig.guards.canary import Canary
from rig.guards.inprocess import MAX_TWINS, join, suffix

# -- go test -------------------------------------------------------------------------------

_GO_PACKAGE = re.compile(r"^package\s+(\w+)", re.MULTILINE)
_GO_TEST = re.compile(r"^func\s+(Test[A-Z0-9_]\w*)\s*\(\s*\w+\s+\*testing\.T\s*\)",
                      re.MULTILINE)
_GO_TEST_MAIN = re.compile(r"^func\s+TestMain\s*\(", re.MULTILINE)
_GO_IGNORED = re.compile(r"^//\s*(?:go:build|\+build)\s+ignore\b", re.MULTILINE)


def go(token: str, anchor: str, paths: Sequence[str], command: str,
        protected: Sequence[str], text_of: Mapping[str, str], failing: bool) -> Canary | None:
    """A canary file in a package the command builds (`rig.guards.gopackages`), and a sentinel
    in each protected package it builds. The must-fail canary needs a package of its
    own: a new one under a `/...` pattern, else a package the command names that holds
    no protected test; a command that names protected packages only gets none."""
    chosen = gopackages.select(command, paths, text_of)
    if chosen is None:
        return None
    present = frozenset(paths)
    every = [p for p in protected if p in present and p.endswith("_test.go")]
    files = [p for p in every if posixpath.dirname(p) in chosen.dirs]
    tests = [n for p in every for n in _GO_TEST.findall(text_of.get(p, ""))]
    first = tests[0] if tests else "TestRun"
    home = _go_home(token, anchor, present, chosen, every, text_of)
    if home is None:
        return None
    path, package, own = home
    failing = failing and own
    passing, fail_name = f"{first}_{suffix(token, 'pass')}", f"{first}_{suffix(token, 'fail')}"
    content = f"package {package}\n\nimport \"testing\"\n\nfunc {passing}(t *testing.T) {{}}\n"
    if failing:
        content += f"\nfunc {fail_name}(t *testing.T) {{\n\tt.Fatal(\"want 1, got 2\")\n}}\n"
    sentinels, extra, notes = [], [], []
    for directory in sorted({posixpath.dirname(p) for p in files}):
        mains = [p for p in paths if posixpath.dirname(p) == directory and
                 p.endswith("_test.go") and _GO_TEST_MAIN.search(text_of.get(p, ""))]
        if mains:
            notes.append(f"no sentinel in go package {directory or '.'}: its own TestMain "
                         f"({mains[0]}) runs the tests")
            continue
        here = [p for p in files if posixpath.dirname(p) == directory]
        clause = _GO_PACKAGE.search(text_of.get(here[0], ""))
        if clause is None:
            continue
        named = [n for p in here for n in _GO_TEST.findall(text_of.get(p, ""))] or [first]
        sentinel = f"{named[0]}_{suffix(token, 'sentinel:' + directory)}"
        stem = posixpath.basename(here[0]).removesuffix("_test.go")
        extra.append((join(directory, f"{stem}_{suffix(token, 'main')}_test.go"),
                      _test_main(clause.group(1), sentinel)))
        sentinels.append(sentinel)
    return Canary("go-test", token, path, content.encode(), passing,
                  fail_name if failing else None, sentinels=tuple(sentinels),
                  files=tuple(extra), notes=tuple(notes))


def _go_home(token: str, anchor: str, paths: frozenset[str], chosen: gopackages.PackageSelection,
             protected: Sequence[str], text_of: Mapping[str, str]
             ) -> tuple[str, str, bool] | None:
    """(the canary file, its package clause, whether it is a package of its own)."""
    if chosen.walked:
        beside = [anchor, *sorted(posixpath.dirname(p) for p in protected)]
        where = next((d for d in beside if chosen.walks(d, paths)), chosen.walked[0])
        package = f"t{suffix(token, 'package')}"
        return join(where, f"{package}/{package}_test.go"), package, True
    guarded = {posixpath.dirname(p) for p in protected}
    for directory in sorted(chosen.dirs - guarded) + sorted(chosen.dirs & guarded):
        clause = _go_package_of(directory, paths, text_of)
        if clause is not None:
            name = f"{clause.removesuffix('_test')}_{suffix(token, 'file')}_test.go"
            return join(directory, name), clause, directory not in guarded
    return None


def _go_package_of(directory: str, paths: frozenset[str],
                   text_of: Mapping[str, str]) -> str | None:
    """The package a test file in `directory` may declare: its non-test files' package,
    else its test files' clause."""
    here = sorted((p.endswith("_test.go"), p) for p in paths
                  if posixpath.dirname(p) == directory and p.endswith(".go"))
    for _, path in here:
        text = text_of.get(path, "")
        clause = _GO_PACKAGE.search(text)
        if clause is not None and not _GO_IGNORED.search(text[:clause.start()]):
            return clause.group(1)
    return None


def _test_main(package: str, sentinel: str) -> bytes:
    """m.Run() has printed PASS or FAIL already: the sentinel is announced (`=== RUN`, as
    go announces every test: `rig.parsers.go_test` counts no result line of a test never
    announced) and after its line comes the same word again, so that test2json (`go test
    -json`) gives the package's own result line and event to the package, not to the
    sentinel (its last test line)."""
    return (f"package {package}\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\t\"testing\"\n)\n\n"
            "func TestMain(m *testing.M) {\n\tcode := m.Run()\n\tmark := \"PASS\"\n"
            "\tif code != 0 {\n\t\tmark = \"FAIL\"\n\t}\n"
            f"\tfmt.Printf(\"=== RUN   {sentinel}\\n--- %s: {sentinel} (0.00s)\\n%s\\n\", "
            "mark, mark)\n"
            "\tos.Exit(code)\n}\n").encode()


# -- cargo ---------------------------------------------------------------------------------

_RUST_TEST = re.compile(r"#\[test\]\s*(?:#\[[^\]\n]*\]\s*)*(?:pub\s+)?(?:async\s+)?fn\s+"
                        r"([A-Za-z_]\w*)")


# `cargo test -q` (passed on to libtest) and libtest's `-q` / `--format terse`: dots, no
# test names, except the failed tests' in the list after `failures:`. So with
# --no-fail-fast the must-fail canaries (twins, canary binary) are planted and read
# there; a passing test is never named, so there is no sentinel (the twins make the
# header count more than a forger's report of the protected tests) and no must-pass
# canary. Without --no-fail-fast nothing that fails is planted: the sentinel stays in
# the protected binary, counted but unread (a forged result line for the protected
# tests alone does not add up), at the cost of one passed test in the counts.
# A planted failure that prints nothing: `resume_unwind` skips the panic hook, whose
# message goes to stderr in pieces and, merged (`2>&1`) under --nocapture, splits
# libtest's `test NAME ... ` from its `ok` (one run in a hundred lost a test's status).
_SILENT_FAILURE = 'std::panic::resume_unwind(Box::new("planted to fail"));'
_TERSE = re.compile(r"(?<!\S)(?:-q|--quiet|--format[= ]terse)(?!\S)")
_TERSE_NOTE = ("libtest's terse output (`-q`, `--format terse`) names no test: the canaries "
               "cannot be read, nor the protected tests by id; the protected binary's "
               "sentinel is counted among the passed tests")
_TERSE_FAILED_NOTE = ("libtest's terse output (`-q`, `--format terse`) names only failed "
                      "tests: the must-fail canaries are read from its failures list, no "
                      "must-pass canary is, nor the protected tests by id")


def cargo(token: str, anchor: str, paths: Sequence[str], command: str,
           protected: Sequence[str], text_of: Mapping[str, str],
           failing: bool) -> Canary | None:
    crate = _crate_of(anchor, paths, text_of)
    if crate is None:
        return None
    terse = _TERSE.search(command) is not None
    # Without --no-fail-fast cargo stops at the first failing test binary: a must-fail
    # canary would keep later binaries (the doc-tests) from running.
    failing = failing and "--no-fail-fast" in command.split()
    first = next((n for p in protected for n in _RUST_TEST.findall(text_of.get(p, ""))),
                 "runs")
    passing, fail_name = f"{first}_{suffix(token, 'pass')}", f"{first}_{suffix(token, 'fail')}"
    content = "// no test: terse output\n" if terse else f"#[test]\nfn {passing}() {{}}\n"
    if failing:
        content += f"\n#[test]\nfn {fail_name}() {{\n    {_SILENT_FAILURE}\n}}\n"
    # zz: cargo runs test binaries in name order; the canary binary goes last.
    path = join(crate, f"tests/zz{suffix(token, 'binary')}.rs")
    files, twins, sentinels, notes = _cargo_roots(token, paths, protected, text_of, failing,
                                                  sentinel=not (terse and failing))
    if terse:
        passing = "" if failing else passing  # a passing test is not named: nothing to read
        notes = (_TERSE_FAILED_NOTE if failing else _TERSE_NOTE, *notes)
    return Canary("cargo", token, path, content.encode(), passing,
                  fail_name if failing else None, twins=twins, sentinels=sentinels,
                  files=files, notes=notes)


def _cargo_roots(token: str, paths: Sequence[str], protected: Sequence[str],
                 text_of: Mapping[str, str], failing: bool, sentinel: bool = True
                 ) -> tuple[tuple[tuple[str, bytes], ...], tuple[str, ...], tuple[str, ...],
                            tuple[str, ...]]:
    """A rig root per protected integration test (its binary keeps its name), appended
    to its crate's pinned Cargo.toml: (files, twins, sentinels, notes). No sentinel
    where it cannot be read (terse output) and twins make the header count more."""
    manifests: dict[str, str] = {}
    twins: list[str] = []
    sentinels: list[str] = []
    files: list[tuple[str, bytes]] = []
    notes: list[str] = []
    for path in sorted(p for p in protected if p in paths and p.endswith(".rs")):
        crate, found = _integration_test(path, paths, text_of)
        if crate is None:
            if found:
                notes.append(f"canaries for {path} in another binary: {found}")
            continue
        source = text_of.get(path, "")
        name = posixpath.basename(path).removesuffix(".rs")
        tests = _RUST_TEST.findall(source)[:MAX_TWINS]
        mine = [f"{t}_{suffix(token, 'twin:' + path)}" for t in tests] if failing else []
        mine_sentinel = [] if mine and not sentinel else [
            f"{(tests or ['runs'])[0]}_{suffix(token, 'sentinel:' + path)}"]
        stable = hashlib.sha256(path.encode()).hexdigest()[:6]  # the same in the base's
        root = f"tests/{name}_{stable}/{name}.rs"
        files.append((join(crate, root), _rust_root(name, mine, mine_sentinel)))
        manifest = join(crate, "Cargo.toml")
        manifests[manifest] = manifests.get(manifest, text_of[manifest].rstrip("\n") + "\n") + (
            f"\n[[test]]\nname = {json.dumps(name)}\npath = {json.dumps(root)}\n")
        twins += mine
        sentinels += mine_sentinel
    files += [(p, text.encode()) for p, text in manifests.items()]
    return tuple(files), tuple(twins), tuple(sentinels), tuple(notes)


def _integration_test(path: str, paths: Sequence[str],
                      text_of: Mapping[str, str]) -> tuple[str | None, str]:
    """(the crate directory, "") when `path` is an integration test cargo finds by itself
    and the rig can root (no explicit target for it, no inner attribute `include!` would
    refuse); else (None, why not, or "" when it is no integration test)."""
    parts = path.split("/")
    if len(parts) < 2 or parts[-2] != "tests":
        return None, ""
    crate = "/".join(parts[:-2])
    manifest = join(crate, "Cargo.toml")
    if manifest not in paths or "[package]" not in text_of.get(manifest, ""):
        return None, ""
    try:
        config = tomllib.loads(text_of[manifest])
    except tomllib.TOMLDecodeError:
        return None, "its Cargo.toml does not parse"
    name = parts[-1].removesuffix(".rs")
    declared = config.get("test", [])
    if config.get("package", {}).get("autotests") is False or any(
            isinstance(t, dict) and (t.get("name") == name or t.get("path") ==
                                     f"tests/{name}.rs") for t in declared):
        return None, "Cargo.toml declares its target"
    if "#![" in text_of.get(path, ""):
        return None, "it has inner attributes (`#![...]`), which `include!` refuses"
    return crate, ""


def _rust_root(name: str, twins: Sequence[str], sentinels: Sequence[str]) -> bytes:
    body = f"include!(\"../{name}.rs\");\n"
    for twin in twins:
        body += f"\n#[test]\nfn {twin}() {{\n    {_SILENT_FAILURE}\n}}\n"
    for sentinel in sentinels:
        body += f"\n#[test]\nfn {sentinel}() {{}}\n"
    return body.encode()


def _crate_of(anchor: str, paths: Sequence[str], text_of: Mapping[str, str]) -> str | None:
    """The directory of the package (a Cargo.toml with [package]) holding `anchor`, else
    the first package's."""
    packages = sorted(posixpath.dirname(p) for p in paths if posixpath.basename(p) ==
                      "Cargo.toml" and "[package]" in text_of.get(p, ""))
    here = anchor
    while True:
        if here in packages:
            return here
        if not here:
            break
        here = posixpath.dirname(here)
    return packages[0] if packages else None
