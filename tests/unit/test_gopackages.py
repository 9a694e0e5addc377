"""`rig.guards.gopackages`: the Go packages a `go test` command builds, read from the tree (where
the go canaries go), and where `rig.guards.inprocess` plants them for each command shape."""

from __future__ import annotations

import pytest

from rig.guards import canary, gopackages, harness, inprocess, plant
from rig.sample.tree import Entry, Kind

PATHS = ["go.mod", "calc/calc.go", "calc/calc_test.go", "calc/deep/deep.go",
         "other/other.go", "other/other_test.go", "calc/testdata/x.go", "_tools/t.go",
         "vendor/v/v.go", "svc/go.mod", "svc/calc/calc.go", "svc/calc/calc_test.go",
         "cmd/.hidden/h.go", "docs/readme.md"]
TEXT = {"go.mod": "module example.com/m\n\ngo 1.19\n", "svc/go.mod": "module example.com/svc\n",
        "calc/calc.go": "package calc\n", "other/other.go": "package other\n",
        "calc/calc_test.go": "package calc\n\nimport \"testing\"\n\n"
                             "func TestCapAbove(t *testing.T) {}\n",
        "svc/calc/calc_test.go": "package calc\n\nfunc TestSvc(t *testing.T) {}\n"}
ROOT = {"calc", "calc/deep", "other"}


@pytest.mark.parametrize(("command", "dirs", "walked"), [
    ("go test ./...", ROOT, ("",)),
    ("go test -json ./... | tee log", ROOT, ("",)),
    ("go test all", ROOT, ("",)),
    ("go test example.com/m/...", ROOT, ("",)),
    ("go test ./calc", {"calc"}, ()),
    ("go test -v ./calc/", {"calc"}, ()),
    ("go test -count=1 ./calc", {"calc"}, ()),
    ("go test -run TestCap ./calc", {"calc"}, ()),
    ("go test -run=TestCap -timeout 30s ./calc -args -x", {"calc"}, ()),
    ("GOFLAGS=-mod=mod go test ./calc", {"calc"}, ()),
    ("cd calc && go test .", {"calc"}, ()),
    ("cd calc && go test", {"calc"}, ()),
    ("cd /work/calc && go test -v", {"calc"}, ()),
    ("go test example.com/m/calc", {"calc"}, ()),
    ("go test ./calc ./other", {"calc", "other"}, ()),
    ("go test ./calc/...", {"calc", "calc/deep"}, ("calc",)),
    ("go test -v ./calc 2>&1 > out.txt", {"calc"}, ()),
    ("go test -v ./calc >out.txt", {"calc"}, ()),
    ("cd svc && go test ./...", {"svc/calc"}, ("svc",)),
    ("go vet ./... && cd calc && go test ../other", {"other"}, ()),
])
def test_the_packages_a_command_builds(command: str, dirs: set[str],
                                       walked: tuple[str, ...]) -> None:
    found = gopackages.select(command, PATHS, TEXT)
    assert found is not None
    assert (set(found.dirs), found.walked) == (dirs, walked)


@pytest.mark.parametrize("command", [
    "go test calc/calc_test.go calc/calc.go",  # files named: one ad-hoc package
    "go test ./calc/.../x",
    "go test ...",
    "go test golang.org/x/tools/...",
    "cd /tmp && go test ./...",
    "cd .. && go test ./...",
    "make test",
])
def test_a_command_it_cannot_read_selects_nothing(command: str) -> None:
    assert gopackages.select(command, PATHS, TEXT) is None


def test_no_go_mod_selects_nothing() -> None:
    assert gopackages.select("go test ./...", ["calc/calc.go"], {}) is None


def test_a_go_work_root_naming_its_modules_directories() -> None:
    """go 1.19 refuses `./...` at a go.work root (no module there) but builds `./a`,
    `./b/...` and `cd a && go test ./...`."""
    paths = ["go.work", "a/go.mod", "a/a_test.go", "b/go.mod", "b/b.go", "b/in/in.go"]
    def dirs(command: str) -> set[str] | None:
        found = gopackages.select(command, paths, {})
        return None if found is None else set(found.dirs)
    assert dirs("go test ./a ./b/...") == {"a", "b", "b/in"}
    assert dirs("cd a && go test ./...") == {"a"}
    assert dirs("go test ./...") is None


def plan(command: str, protected: tuple[str, ...] = ("calc/calc_test.go",)) -> canary.Canary:
    found = plant.plan("go-test", "ab12cd34", PATHS, command, protected, TEXT)
    assert found is not None
    return found


def test_a_walking_pattern_gets_a_canary_package_of_its_own_beside_the_tests() -> None:
    found = plan("go test ./...")
    package = f"t{inprocess.suffix('ab12cd34', 'package')}"
    assert found.path == f"calc/{package}/{package}_test.go" and found.fail_name
    assert [p for p, _ in found.files] == [
        f"calc/calc_{inprocess.suffix('ab12cd34', 'main')}_test.go"]


def test_a_module_in_a_subdirectory_gets_its_canaries_in_that_module() -> None:
    found = plan("cd svc && go test ./...", ("calc/calc_test.go", "svc/calc/calc_test.go"))
    assert found.path.startswith("svc/calc/t") and found.fail_name
    assert len(found.sentinels) == 1 and found.files[0][0].startswith("svc/calc/")


@pytest.mark.parametrize("command", ["go test ./calc", "cd calc && go test .",
                                     "go test -json ./calc/", "go test example.com/m/calc"])
def test_one_protected_package_gets_the_sentinel_and_a_must_pass_canary_only(
        command: str) -> None:
    """No package of its own can be added to a command that names one package, and a
    must-fail canary in the protected binary would explain its failing status."""
    found = plan(command)
    assert found.path == f"calc/calc_{inprocess.suffix('ab12cd34', 'file')}_test.go"
    assert found.content.startswith(b"package calc\n") and b"t.Fatal" not in found.content
    assert (found.fail_name, len(found.sentinels)) == (None, 1)


def test_a_named_package_without_protected_tests_takes_the_must_fail_canary() -> None:
    found = plan("go test ./calc ./other")
    assert found.path == f"other/other_{inprocess.suffix('ab12cd34', 'file')}_test.go"
    assert found.content.startswith(b"package other\n") and found.fail_name
    assert len(found.sentinels) == 1


def test_a_protected_package_the_command_does_not_build_gets_no_sentinel() -> None:
    found = plan("go test ./other")
    assert found.path.startswith("other/") and (found.sentinels, found.files) == ((), ())


def test_the_sentinel_reprints_the_package_s_status_for_test2json() -> None:
    (_, main), = plan("go test -json ./calc/").files
    assert b'\\n--- %s: ' in main and b'(0.00s)\\n%s\\n", mark, mark)' in main


def test_a_command_it_cannot_read_gets_no_canaries() -> None:
    assert plant.plan("go-test", "ab12cd34", PATHS, "go test calc/calc_test.go",
                       ["calc/calc_test.go"], TEXT) is None


def file(text: str) -> Entry:
    return Entry(Kind.FILE, text.encode())


MAIN = "package clamp\n\nfunc TestMain(m *testing.M) { os.Exit(m.Run()) }\n"


def test_a_test_main_in_a_package_the_base_lacks_is_the_arm_s() -> None:
    base = {"go.mod": file("module x\n"), "calc/calc.go": file("package calc\n")}
    arm = {**base, "clamp/clamp.go": file("package clamp\n"), "clamp/main_test.go": file(MAIN)}
    assert harness.pin(arm, dict(base)).removed == ()
    assert harness.go_test_main_is_harness("clamp/main_test.go", arm["clamp/main_test.go"],
                                           None, harness.go_packages(base)) is False
    arm["calc/main_test.go"] = file(MAIN.replace("clamp", "calc"))
    assert harness.pin(arm, dict(base)).removed == ("calc/main_test.go",)


def test_a_go_run_whose_canaries_a_filter_spared_reads_absent_on_the_base_too() -> None:
    """`-run '^TestCapAbove$'` skips the canary file's test; the sentinel mirrors the
    binary's status (FAIL on the failing base, PASS on the fix): both read `absent`, so
    the differential finds them alike (it read the base's as a failed must-pass)."""
    from rig.parsers.base import TestCase, TestStatus
    found = plan("go test -run '^TestCapAbove$' ./calc")
    def seen(status: TestStatus) -> str:
        cases = [TestCase(f"example.com/m/calc::{found.sentinels[0]}", status)]
        return str(canary.observe(found, cases, 0).pass_seen)
    assert (seen(TestStatus.FAILED), seen(TestStatus.PASSED)) == ("absent", "absent")


def test_a_generator_file_behind_an_ignore_constraint_does_not_name_the_package() -> None:
    paths = [*PATHS, "other/a_gen.go"]
    text = {**TEXT, "other/a_gen.go": "//go:build ignore\n\npackage main\n"}
    assert set(inprocess.sources_needed("go-test", paths, ["calc/calc_test.go"])) >= {
        "other/a_gen.go", "other/other.go"}
    found = plant.plan("go-test", "ab12cd34", paths, "go test ./calc ./other",
                        ["calc/calc_test.go"], text)
    assert found is not None and found.content.startswith(b"package other\n")
