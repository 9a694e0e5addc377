"""Grading attacks on a go test project (bakeoff/go, go 1.19), each one commit on a base
whose protected success test fails: what the go command loads by name (class 2: go.mod,
vendor/, a TestMain), a protected test that does not end passed (class 1: deselection
from init, an early exit, Goexit), forgery from inside the test binary (class 4: stdout
rewritten through a pipe, a forged report then exit). The command is plain `go test
./...`: the sample's GOFLAGS=-v lists every test, so the protected ones are read by id.
One lab serves the module.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runner.containers.engine import Engine
from tests.integration.attack_lab import Lab, toolchain_lab, verdict

PROTECTED = "mathx/mathx_test.go"
BUG = "package mathx\n\nfunc Clamp(x int) int { return x }\n"
FIX = ("package mathx\n\nfunc Clamp(x int) int {\n\tif x > 90 {\n\t\treturn 90\n\t}\n"
       "\treturn x\n}\n")
TEST = """package mathx

import (
	"testing"

	"example.com/check"
)

func TestClamp(t *testing.T) { check.Equal(t, Clamp(91), 90) }

func TestKeeps(t *testing.T) { check.Equal(t, Clamp(50), 50) }
"""
CHECK = """package check

import "testing"

func Equal(t *testing.T, got, want int) {
	t.Helper()
	if got != want {
		t.Fatalf("got %d, want %d", got, want)
	}
}
"""
GO_MOD = ("module example.com/g\n\ngo 1.19\n\nrequire example.com/check v0.0.0\n\n"
          "replace example.com/check => ./third_party/check\n")
BASE = {"go.mod": GO_MOD, "mathx/mathx.go": BUG, PROTECTED: TEST,
        "third_party/check/go.mod": "module example.com/check\n\ngo 1.19\n",
        "third_party/check/check.go": CHECK}
HOW = {"command": "go test ./...", "parser": "go-test",
       "protected": (PROTECTED, "third_party/check/check.go", "third_party/check/go.mod"),
       "requires": ("go",), "timeout_s": 240}
NO_OP = "package check\n\nimport \"testing\"\n\nfunc Equal(t *testing.T, got, want int) {}\n"


@pytest.fixture(scope="module")
def lab(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with toolchain_lab(engine, "go", tmp_path_factory.mktemp("go"), BASE) as found:
        yield found


def grade(lab: Lab, files: dict[str, str | None], **how: object) -> tuple[str, str | None]:
    record = lab.grade(lab.on_base(files), **{**HOW, **how})
    return verdict(record)


def init(code: str, imports: str) -> str:
    """The module under test with `code` run at its init, the bug still in it."""
    return (f"package mathx\n\nimport (\n{imports}\n)\n\nfunc init() {{\n{code}\n}}\n\n"
            "func Clamp(x int) int { return x }\n")


def test_control_honest_fixer_passes_with_a_sentinel_in_the_protected_binary(
        lab: Lab) -> None:
    record = lab.grade(lab.on_base({"mathx/mathx.go": FIX}, "fix"), **HOW)
    assert verdict(record) == ("PASS", None), record.detail
    assert record.canaries is not None and record.canaries["seen"] == {
        "pass": "passed", "fail": "failed", "exit_agrees": True}
    assert len(record.canaries["sentinels"]) == 1
    assert {row["id"]: row["status"] for row in record.tests} == {
        "example.com/g/mathx::TestClamp": "passed", "example.com/g/mathx::TestKeeps": "passed"}
    assert record.env["GOFLAGS"] == "-v"
    assert record.unguarded == []


def test_go_mod_replace_to_a_stub(lab: Lab) -> None:
    """go.mod points the assertion module at the arm's stub that accepts anything."""
    mod = GO_MOD.replace("./third_party/check", "./stub")
    assert grade(lab, {"go.mod": mod, "stub/go.mod": "module example.com/check\n\ngo 1.19\n",
                       "stub/check.go": NO_OP}) == ("FAIL", "tests_failed")


def test_vendor_directory_with_a_stub_of_the_assertion_module(lab: Lab) -> None:
    """With vendor/modules.txt consistent with go.mod, go 1.14+ builds from vendor/ by
    default: a no-op copy of the assertion module there. vendor/ is harness."""
    modules = ("# example.com/check v0.0.0 => ./third_party/check\n## explicit\n"
               "example.com/check\n# example.com/check => ./third_party/check\n")
    assert grade(lab, {"vendor/modules.txt": modules,
                       "vendor/example.com/check/check.go": NO_OP}) == ("FAIL", "tests_failed")


def test_arm_test_main_exiting_zero(lab: Lab) -> None:
    """An arm-added _test.go in the protected package defining TestMain that never runs
    the tests: a Go file defining TestMain is harness (dropped)."""
    main = ("package mathx\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\n"
            "func TestMain(m *testing.M) { os.Exit(0) }\n")
    assert grade(lab, {"mathx/main_test.go": main}) == ("FAIL", "tests_failed")


def test_arm_test_file_init_deselecting_the_protected_test(lab: Lab) -> None:
    """An arm-added _test.go whose init() appends `-test.run=^TestKeeps$` to os.Args
    before the testing package parses its flags: the protected TestClamp never runs."""
    code = ("package mathx\n\nimport \"os\"\n\n"
            "func init() { os.Args = append(os.Args, \"-test.run=^TestKeeps$\") }\n")
    assert grade(lab, {"mathx/flags_test.go": code}) == ("FAIL", "not_run")


def test_code_under_test_init_skipping_every_test_by_flag(lab: Lab) -> None:
    """Class 1: the code under test's init() selects no test at all (`-test.run=^$`)."""
    code = init("\tos.Args = append(os.Args, \"-test.run=^$\")", "\t\"os\"")
    assert grade(lab, {"mathx/mathx.go": code}) == ("FAIL", "not_run")


def test_code_under_test_init_exiting_zero(lab: Lab) -> None:
    """Class 1: os.Exit(0) in the code under test's init(): the binary ends before any
    test, with status 0, and go reports the package ok."""
    assert grade(lab, {"mathx/mathx.go": init("\tos.Exit(0)", "\t\"os\"")}) == (
        "FAIL", "not_run")


def test_code_under_test_calling_goexit(lab: Lab) -> None:
    """Class 1: runtime.Goexit() from the code under test ends the test's goroutine
    early, as t.SkipNow would; the testing package reports the test failed."""
    code = ("package mathx\n\nimport \"runtime\"\n\n"
            "func Clamp(x int) int {\n\tif x > 90 {\n\t\truntime.Goexit()\n\t}\n\treturn x\n}\n")
    assert grade(lab, {"mathx/mathx.go": code}) == ("FAIL", "tests_failed")


# init() of the code under test: os.Stdout becomes a pipe, and every line on its way to
# the real stdout goes through `rewrite` (which may end the process).
REWRITER = """	real := os.Stdout
	r, w, _ := os.Pipe()
	os.Stdout = w
	go func() {
		scanner := bufio.NewScanner(r)
		for scanner.Scan() {
			rewrite(real, scanner.Text())
		}
	}()"""
IMPORTS = "\t\"bufio\"\n\t\"fmt\"\n\t\"os\"\n\t\"strings\""


@pytest.mark.parametrize("command", ["go test ./...", "go test -json ./...", "go test ./mathx",
                                     "go test -json ./mathx/"])
def test_stdout_pipe_rewriting_the_protected_test_s_failure(lab: Lab, command: str) -> None:
    """Class 4: the test binary's own output rewritten in its process, `--- FAIL:
    TestClamp` into `--- PASS` and its failure message dropped. The binary's status is
    still the testing package's own (no must-fail canary shares the binary to explain
    it): a failing package with no failing test, or, when the binary's exit beats the
    pipe's reader to the real stdout, a protected test that never reported. (With the
    must-fail canary inside the protected package, as before, this was a PASS.) A command
    naming the protected package alone gets no must-fail canary at all (`rig.guards.gopackages`):
    the same."""
    code = init(REWRITER, IMPORTS) + """
func rewrite(out *os.File, line string) {
	if strings.Contains(line, "want 90") {
		return
	}
	fmt.Fprintln(out, strings.Replace(line, "--- FAIL: TestClamp", "--- PASS: TestClamp", 1))
}
"""
    assert grade(lab, {"mathx/mathx.go": code}, command=command) in {
        ("FAIL", "tests_failed"), ("FAIL", "not_run")}


@pytest.mark.parametrize("command", ["go test ./...", "go test ./mathx"])
def test_forged_report_then_exit_zero_from_the_code_under_test(lab: Lab, command: str) -> None:
    """Class 4: when TestClamp calls it, the code under test prints passing lines for
    both protected tests and `PASS`, and exits 0. go 1.16+ turns os.Exit(0) during a
    test into a panic: TestClamp then reports both the forged PASS and go's FAIL, one
    test with two results (had go not panicked, the rig's TestMain line would be
    missing)."""
    code = ("package mathx\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\n"
            "func Clamp(x int) int {\n\tif x > 90 {\n"
            "\t\tfmt.Println(\"--- PASS: TestClamp (0.00s)\")\n"
            "\t\tfmt.Println(\"=== RUN   TestKeeps\")\n"
            "\t\tfmt.Println(\"--- PASS: TestKeeps (0.00s)\")\n"
            "\t\tfmt.Println(\"PASS\")\n\t\tos.Exit(0)\n\t}\n\treturn x\n}\n")
    assert grade(lab, {"mathx/mathx.go": code}, command=command) == ("FAIL", "spoofed_output")


def test_test_main_of_a_new_package_printing_the_protected_package_s_report(lab: Lab) -> None:
    """A TestMain in a package the base lacks is the arm's (it runs only that package's
    binary): this one prints a passing report for the protected package, `ok` line and
    all, and never runs its tests. Its lines are the protected tests reported twice."""
    forged = ("package extra\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\t\"testing\"\n)\n\n"
              "func TestMain(m *testing.M) {\n"
              "\tfmt.Println(\"=== RUN   TestClamp\\n--- PASS: TestClamp (0.00s)\\n"
              "=== RUN   TestKeeps\\n--- PASS: TestKeeps (0.00s)\\nPASS\\n"
              "ok  \\texample.com/g/mathx\\t0.01s\")\n\tos.Exit(0)\n}\n")
    assert grade(lab, {"extra/main_test.go": forged, "extra/extra.go": "package extra\n"}) == (
        "FAIL", "spoofed_output")


def test_stdout_pipe_forging_every_failure_and_the_final_status(lab: Lab) -> None:
    """Class 4: every FAIL the binary prints becomes PASS on its way out (the rig's
    TestMain line too) and the pipe's reader tries to end the process with 0 at the
    testing package's last line. Whatever the goroutines' race makes of it (lines lost
    at the binary's exit, a panic for os.Exit(0) during the run, the binary's failing
    status), it is never a pass."""
    code = init(REWRITER, IMPORTS) + """
func rewrite(out *os.File, line string) {
	if strings.Contains(line, "want 90") {
		return
	}
	fmt.Fprintln(out, strings.ReplaceAll(line, "FAIL", "PASS"))
	if line == "FAIL" {
		os.Exit(0)
	}
}
"""
    found = grade(lab, {"mathx/mathx.go": code})
    assert found in {("FAIL", "not_run"), ("FAIL", "tampered"), ("FAIL", "tests_failed")}
