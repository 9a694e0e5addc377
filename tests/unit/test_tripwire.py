"""Tripwires, the exit-code check's canary (`rig.guards.tripwire`, issue 20 class 9): where a
file that must make the tool fail is planted for each command, what two runs of it say,
and the verdict rule that reads it (`rig.sample.verdict` rule 7b)."""

from __future__ import annotations

import dataclasses
import hashlib
import posixpath

import pytest

from rig.guards import tripwire
from rig.guards.tripwire import Finding, Run, Tripwire
from rig.sample.oracle import assess, record_of
from rig.sample.spec import Execution, SampleSpec
from rig.sample.tree import Entry, Kind
from rig.sample.verdict import FailReason, Verdict
from runner.commands.reproduce import spec_of

T = "c0ffee00"


def f(text: str = "x = 1\n") -> Entry:
    return Entry(Kind.FILE, text.encode())


PY = {"src/horizon.py": f(), "src/pkg/__init__.py": f(), "tests/test_h.py": f(),
      "setup.py": f(), ".venv/lib/site.py": f(), "node_modules/x/y.py": f()}
GO = {"go.mod": f("module m\n"), "cmd/app/main.go": f("package main\n\nfunc main() {}\n"),
      "pkg/clamp/clamp.go": f("package clamp\n"),
      "pkg/clamp/clamp_linux.go": f("//go:build linux\n\npackage clamp\n"),
      "vendor/x/x.go": f("package x\n")}
TS = {"tsconfig.json": f("{}"), "src/index.ts": f(), "src/types.d.ts": f(),
      "node_modules/a/index.ts": f()}
RUST = {"Cargo.toml": f("[workspace]\nmembers = ['a', 'b']\n"),
        "a/Cargo.toml": f('[package]\nname = "alpha"\n'),
        "b/Cargo.toml": f('[package]\nname = "beta"\n'), "a/src/lib.rs": f()}


def planted(command: str, tree: dict[str, Entry]) -> str:
    found = tripwire.plan(command, tree, T)
    assert isinstance(found, Tripwire), found
    return found.paths[0]


def name(directory: str, prefix: str = "") -> str:
    digest = hashlib.sha1(directory.encode()).hexdigest()[:6]
    return posixpath.join(directory, f"{prefix}bakeoff_{T}_{digest}.py")


@pytest.mark.parametrize(("command", "dirs"), [
    ("python -m compileall -q src", ["src", "src/pkg"]),
    ("python3 -I -m compileall -q -j 0 ./src/", ["src", "src/pkg"]),
    ("python -m compileall -q -l src", ["src"]),
    ("python -m compileall -q .", ["", "src", "src/pkg", "tests"]),
    ("python -m compileall -q", [""]),
    ("python -m compileall -q -d /srv src", ["src", "src/pkg"]),
    ("python -m compileall -q gone", ["gone"]),
    ("python -m compileall -q tests src", ["src", "src/pkg", "tests"]),
    ("ruff check src", ["src", "src/pkg"]),
    ("ruff check --select E9 .", ["", "src", "src/pkg", "tests"]),
    ("uv run ruff check", ["", "src", "src/pkg", "tests"]),
    ("flake8 src/pkg", ["src/pkg"]),
    ("python -m pyflakes src", ["src", "src/pkg"]),
    ("mypy --strict src", ["src"]),
    ("python -m compileall -q .venv/lib", [".venv/lib"]),
    ("pip install -e . && python -m compileall -q src", ["src", "src/pkg"]),
    ("cd /work && PYTHONWARNINGS=error python -m compileall -q src", ["src", "src/pkg"]),
    ("sh -ec 'python3 -m compileall -q src'", ["src", "src/pkg"]),
])
def test_a_python_tool_gets_a_syntax_error_in_every_directory_it_looks_in(
        command: str, dirs: list[str]) -> None:
    """One per directory holding Python (a tool kept out of one misses that one's), named
    by the directory; none where tools skip by default (`.venv/`, `node_modules/`)."""
    found = tripwire.plan(command, PY, T)
    assert isinstance(found, Tripwire), found
    assert found.paths == tuple(name(d) for d in dirs)


def test_pytest_and_py_compile_tripwires_are_named_as_their_tool_collects() -> None:
    assert planted("python -m pytest -q tests", PY) == name("tests", "test_")
    assert planted("python -m py_compile src/*.py", PY) == "src/" + name("")


def test_the_python_tripwire_does_not_compile() -> None:
    found = tripwire.plan("python -m compileall -q src", PY, T)
    assert isinstance(found, Tripwire)
    with pytest.raises(SyntaxError):
        compile(found.content, found.paths[0], "exec")


@pytest.mark.parametrize(("command", "path"), [
    ("go vet ./...", f"cmd/app/zz_bakeoff_{T}.go"),
    ("go build ./pkg/...", f"pkg/clamp/zz_bakeoff_{T}.go"),
    ("go vet -tags x ./pkg/clamp", f"pkg/clamp/zz_bakeoff_{T}.go"),
])
def test_go_gets_a_type_error_in_a_package_the_command_names(command: str, path: str) -> None:
    """In the package clause of a sibling without build constraints; never in vendor/."""
    assert planted(command, GO) == path
    found = tripwire.plan(command, GO, T)
    assert isinstance(found, Tripwire)
    package = "main" if path.startswith("cmd/") else "clamp"
    assert found.content.startswith(f"package {package}\n".encode())


@pytest.mark.parametrize(("command", "path"), [
    ("tsc --noEmit", f"src/bakeoff_{T}.ts"),
    ("npx --no-install tsc --noEmit -p tsconfig.json", f"src/bakeoff_{T}.ts"),
    ("node --check src/*.js", f"src/bakeoff_{T}.js"),
    ("cargo check", f"a/src/bin/bakeoff_{T}.rs"),
    ("cargo build -p beta --release", f"b/src/bin/bakeoff_{T}.rs"),
])
def test_typescript_node_and_cargo_tripwires(command: str, path: str) -> None:
    assert planted(command, {**TS, **RUST, "src/app.js": f()}) == path


@pytest.mark.parametrize(("command", "why"), [
    ("python -m py_compile src/horizon.py", "no argument is a glob"),
    ("ruff check src/horizon.py", "names files"),
    ("node --check src/app.js", "no argument is a glob"),
    ("tsc --noEmit src/index.ts", "files it is given"),
    ("cargo check --lib", "selects its cargo targets"),
    ("make lint", "no step of the command"),
    ("./scripts/check.sh", "no step of the command"),
    ("python scripts/lint.py src", "no step of the command"),
    ("python -c 'import horizon'", "no step of the command"),
])
def test_where_no_tripwire_can_be_planted_the_plan_says_why(command: str, why: str) -> None:
    found = tripwire.plan(command, {**PY, "src/app.js": f(), **TS}, T)
    assert isinstance(found, str)
    assert why in found


A, B = frozenset({"bakeoff_a.py"}), frozenset({"bakeoff_b.py"})


def run(exit_code: int | None, named: frozenset[str] = A | B, **how: bool) -> Run:
    return Run("c/a/compile/1", exit_code, A | B, named, **how)


def base(exit_code: int, named: frozenset[str] = A) -> Run:
    """The base's tree holds the directory of `a` only."""
    return Run("c/@base/compile/1", exit_code, A, named)


@pytest.mark.parametrize(("arm", "against", "expected"), [
    (run(1), None, "as planted"),
    (run(1, named=A, truncated=True), None, "as planted"),
    (run(0), None, None),
    (run(1, named=A), None, None),
    (run(0), base(1), "blind"),
    (run(1, named=B), base(1), "blind"),
    (run(1, named=A), base(1), "as planted"),  # b's directory: the base says nothing of it
    (run(1, named=frozenset()), base(1, named=frozenset()), "as planted"),
    (run(0), base(0, named=frozenset()), "unguarded"),
    (run(None, usable=False), None, "unguarded"),
])
def test_what_a_tripwire_run_shows_against_the_base(arm: Run, against: Run | None,
                                                   expected: str | None) -> None:
    found = tripwire.finding(arm, against)
    if expected is None:
        assert found is None
        return
    assert found is not None
    assert (found.blind is not None, found.unguarded is not None) == {
        "as planted": (False, False), "blind": (True, False), "unguarded": (False, True)
    }[expected], found


SPEC = SampleSpec(change="c", arm="a", check="compile", n=1, commit="a" * 40,
                  base_commit="b" * 40, command="python -m compileall -q src",
                  parser="exit-code", timeout_s=10)
BLIND = Finding("c/a/compile/1", blind="with a file that must make it fail planted, ...")


def judged(exit_code: int, guard: Finding | None) -> tuple[object, ...]:
    graded = assess(dataclasses.replace(SPEC, guard=guard),
                    Execution(exit_code=exit_code, log="", duration_s=1))
    return graded.outcome.verdict, graded.outcome.reason, graded.unguarded


def test_a_check_whose_tool_was_made_blind_is_tampered_when_it_would_pass() -> None:
    assert judged(0, BLIND)[:2] == (Verdict.FAIL, FailReason.tampered)


def test_a_failing_sample_of_a_blind_tool_keeps_its_own_fail() -> None:
    assert judged(1, BLIND)[:2] == (Verdict.FAIL, FailReason.check_failed)


def test_a_tripwire_failing_as_planted_changes_nothing() -> None:
    assert judged(0, Finding("c/a/compile/1")) == (Verdict.PASS, None, ())


def test_a_tripwire_that_says_nothing_marks_the_sample_unguarded() -> None:
    note = "a file that must make the check fail did not, on the base either"
    assert judged(0, Finding("c/a/compile/1", unguarded=note)) == (Verdict.PASS, None, (note,))


def test_a_tripwire_after_steps_that_run_code_is_as_planted_but_unguarded() -> None:
    """`PYTHONPATH=src python -c 'import horizon' && python -m compileall -q src`: the
    import runs the arm's code first; `cd` does not."""
    after = tripwire.plan("PYTHONPATH=src python -c 'import horizon' && python -m compileall"
                          " -q src", PY, T)
    first = tripwire.plan("cd /work && python -m compileall -q src", PY, T)
    assert isinstance(after, Tripwire) and isinstance(first, Tripwire)
    assert (after.after, first.after) == (True, False)
    found = tripwire.finding(Run("c/a/compile/1", 1, A, A, after=True), None)
    assert found == Finding("c/a/compile/1", unguarded=tripwire.AFTER)


@pytest.mark.parametrize(("command", "dirs"), [
    ("python -m compileall -q -r 0 .", [""]),
    ("python -m compileall -q -r 1 .", ["", "src", "tests"]),
    ("python -m compileall -q -x pkg src", ["src"]),
    ("python -m compileall -q -x '^\\./src' ./src .", ["", "tests"]),
])
def test_compileall_tripwires_honour_the_command_s_own_scope(command: str,
                                                             dirs: list[str]) -> None:
    """`-r N` levels and `-x REGEX`: a tripwire compileall would skip is not planted."""
    found = tripwire.plan(command, PY, T)
    assert isinstance(found, Tripwire), found
    assert found.paths == tuple(name(d) for d in dirs)


def test_compileall_must_name_every_tripwire_when_it_named_all_of_the_base_s() -> None:
    """A directory the base does not hold, hidden from compileall (made unreadable by a
    step before it): its tripwire unnamed is blind, as compileall has no configuration
    that could skip it; for a configurable tool (ruff) it says nothing."""
    arm = Run("c/a/compile/1", 1, A | B, A, strict=True)
    found = tripwire.finding(arm, base(1))
    assert found is not None and found.blind is not None
    assert "without naming bakeoff_b.py" in found.blind
    configurable = dataclasses.replace(arm, strict=False)
    assert tripwire.finding(configurable, base(1)) == Finding("c/a/compile/1")
    quiet = base(1, named=frozenset())  # -qq: compileall names nothing, on the base too
    assert tripwire.finding(arm, quiet) == Finding("c/a/compile/1")


def test_a_record_keeps_the_finding_and_a_replay_is_graded_with_it() -> None:
    """Execute, persist, then grade: the finding is in the sample's record, and
    `reproduce`/`rescore` grade a replay with it again (FAIL tampered stays)."""
    spec = dataclasses.replace(SPEC, guard=BLIND)
    execution = Execution(exit_code=0, log="", duration_s=1)
    record = record_of(spec, execution, assess(spec, execution), "2024-01-01", "1.log")
    assert (record.verdict, record.reason) == (Verdict.FAIL, "tampered")
    assert record.canaries == {"tripwire": BLIND.as_record()}
    again = spec_of(record, None)
    assert again.guard == BLIND
    assert assess(again, execution).outcome.reason is FailReason.tampered


def test_a_tripwire_run_s_record_says_what_its_output_named() -> None:
    planted = tripwire.plan("python -m compileall -q src", PY, T)
    assert isinstance(planted, Tripwire)
    spec = dataclasses.replace(SPEC, tripwire=planted)
    log = f"*** Error compiling '{planted.paths[0]}'...\nSyntaxError: invalid syntax\n"
    execution = Execution(exit_code=1, log=log, duration_s=1)
    record = record_of(spec, execution, assess(spec, execution), "2024-01-01", "1.log")
    assert tripwire.run_of(record) == Run(
        record.sample, 1, frozenset(planted.names), frozenset(planted.names[:1]), strict=True)
