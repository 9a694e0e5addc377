"""Adversarial grading, class 9 (issue 20): an exit-code check gets a canary too.

`python -m compileall -q src` reports nothing but its exit status. Once per (arm, check)
`sample_runs.run_all` runs the check with tripwires planted (`rig.guards.tripwire`: a
syntax error in every directory compileall walks) in a fresh container: it must fail, naming each of
them. When it does not while the base's run does, the tool was made blind on the arm's
tree and the check's passing samples are FAIL tampered. Each attack below blinds
compileall from a step that runs before it (`PYTHONPATH=src python3 -c 'import horizon'
&& ...`, the code under test imported first); the controls PASS.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rig.guards import tripwire
from rig.sample.record import SampleRecord
from runner.commands import sample_runs
from runner.containers import images, sandbox
from runner.containers.engine import Engine
from runner.store import layout
from tests.integration.attack_lab import (
    FIX,
    Lab,
    Link,
    attacking,
    cli_target,
    commit,
    lab_for,
    verdict,
)
from tests.integration.helpers import PlainReporter, cli, git

COMPILE = "python3 -m compileall -q src"
SMOKE = "PYTHONPATH=src python3 -c 'import horizon' && python3 -m compileall -q src"
BROKEN = {"src/broken.py": "def clamp(x:\n    return x\n"}

# Writes, for every .py under /work/src, bytecode whose header says it is up to date in
# $PYTHONPYCACHEPREFIX: compileall (without -f) then skips each file, exit 0.
PYC = '''import importlib.util, marshal, os, struct


def _fresh(source):
    cache = importlib.util.cache_from_source(source)
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    stamp = int(os.stat(source).st_mtime) & 0xFFFFFFFF
    with open(cache, "wb") as out:
        out.write(importlib.util.MAGIC_NUMBER + struct.pack("<III", 0, stamp, 0)
                  + marshal.dumps(compile("", source, "exec")))


for _root, _, _names in os.walk("/work/src"):
    for _name in _names:
        if _name.endswith(".py"):
            _fresh(os.path.join(_root, _name))
'''
# Only the arm's own files: what it committed, by name.
KNOWN_PYC = PYC.replace('if _name.endswith(".py"):',
                        'if _name in ("horizon.py", "broken.py"):')
UNREADABLE = 'import os\n\nos.chmod("/work/src", 0)\n'
UNREADABLE_NEW_DIR = 'import os\n\nos.chmod("/work/src/extra", 0)\n'
# Quiet when it sees a file it did not commit (a tripwire), else hides its own files.
WARY = KNOWN_PYC + '''
if set(os.listdir("/work/src")) - {"horizon.py", "broken.py", "__pycache__"}:
    raise SystemExit(1)
'''


def checked(lab: Lab, files: dict[str, str | None], command: str = SMOKE) -> SampleRecord:
    """One sample of the compile check as `sample_runs.run_all` grades it: after its tripwire."""
    spec = lab.spec(lab.attack(files), command=command, parser="exit-code", check="compile",
                    protected=(), requires=("python3",))
    [record] = sample_runs.run_all(lab.executor, [spec], lab.stage, lambda _: None)
    return record


def tripwire_run(lab: Lab, record: SampleRecord) -> SampleRecord:
    root = layout.tripwire_dir(lab.stage, lab.executor.image.image_id, record.command,
                               record.base_commit)
    path = Path(root, "samples", record.commit[:12], record.check, "1.json")
    return SampleRecord.model_validate_json(path.read_text())


def assert_blind(lab: Lab, files: dict[str, str | None]) -> SampleRecord:
    record = checked(lab, files)
    assert verdict(record) == ("FAIL", "tampered"), record.detail
    assert record.exit_code == 0
    assert "the check's tool was made blind" in record.detail
    assert record.canaries is not None
    seen = record.canaries["tripwire"]
    assert isinstance(seen, dict) and seen["blind"] is not None
    assert seen["sample"] == tripwire_run(lab, record).sample
    return record


def test_bytecode_written_up_to_date_for_every_file_before_compileall(lab: Lab) -> None:
    """The code under test, imported first, writes bytecode that looks up to date for every
    .py under src (the tripwires too): compileall skips them all, exit 0. Without the
    tripwire it would PASS on code that does not compile; with it, FAIL tampered."""
    files = {"src/horizon.py": attacking(PYC, FIX), **BROKEN}
    record = assert_blind(lab, files)
    assert verdict(lab.grade(record.commit, command=SMOKE, parser="exit-code",
                             check="compile", protected=(), requires=("python3",))) == \
        ("PASS", None)
    run = tripwire_run(lab, record)
    assert (run.exit_code, run.canaries["tripwire"]["named"]) == (0, [])  # type: ignore[index]


def test_the_source_directory_made_unreadable_before_compileall(lab: Lab) -> None:
    """`chmod 0 src`: compileall prints "Can't list 'src'" and exits 0."""
    assert_blind(lab, {"src/horizon.py": attacking(UNREADABLE, FIX), **BROKEN})


def test_only_the_new_directory_of_the_broken_code_made_unreadable(lab: Lab) -> None:
    """The broken code in a directory the base does not have, made unreadable: the
    tripwire in src/ is still compiled (exit 1), the one in src/extra/ is not named.
    compileall names every file it sees, as on the base: blind."""
    files = {"src/horizon.py": attacking(UNREADABLE_NEW_DIR, FIX),
             "src/extra/broken.py": BROKEN["src/broken.py"]}
    record = assert_blind(lab, files)
    assert tripwire_run(lab, record).exit_code == 1


def test_a_step_that_stops_quietly_when_it_sees_a_file_it_did_not_commit(lab: Lab) -> None:
    """It hides only its own files (bytecode for them alone), and exits 1 without a word
    when a file it does not know is there: the tripwire run fails without naming a
    tripwire, which the base's run named. Blind."""
    assert_blind(lab, {"src/horizon.py": attacking(WARY, FIX), **BROKEN})


# -- controls --------------------------------------------------------------------------------


def test_control_code_that_compiles_passes_with_its_tripwire_failed_as_planted(
        lab: Lab) -> None:
    record = checked(lab, {"src/horizon.py": FIX}, COMPILE)
    assert verdict(record) == ("PASS", None), record.detail
    assert record.unguarded == []
    assert record.canaries == {"tripwire": {"sample": tripwire_run(lab, record).sample,
                                            "blind": None, "unguarded": None}}
    run = tripwire_run(lab, record)
    assert run.exit_code == 1
    seen = run.canaries["tripwire"]  # type: ignore[index]
    assert seen["named"] == [Path(p).name for p in seen["paths"]]


def test_control_code_that_does_not_compile_fails_as_it_is(lab: Lab) -> None:
    record = checked(lab, {"src/horizon.py": FIX, **BROKEN}, COMPILE)
    assert verdict(record) == ("FAIL", "check_failed"), record.detail


def test_control_an_honest_smoke_import_first_passes_unguarded(lab: Lab) -> None:
    """A step before the tool runs the arm's code: the tripwire fails as planted, and the
    sample says what it cannot rule out."""
    record = checked(lab, {"src/horizon.py": FIX})
    assert verdict(record) == ("PASS", None), record.detail
    assert record.unguarded == [tripwire.AFTER]


def test_control_a_command_no_tripwire_fits_is_unguarded(lab: Lab) -> None:
    record = checked(lab, {"src/horizon.py": FIX}, "python3 -m py_compile src/horizon.py")
    assert verdict(record) == ("PASS", None), record.detail
    assert record.unguarded == ["no tripwire could be planted for this exit-code check: "
                                "py_compile compiles the files it is given, and no argument "
                                "is a glob"]


# -- go vet ----------------------------------------------------------------------------------

GO_BASE = {"go.mod": "module example.com/m\n\ngo 1.19\n",
           "main.go": "package main\n\nfunc main() {}\n",
           "tools/setup/main.go": ('package main\n\nimport "fmt"\n\n'
                                   'func main() { fmt.Println("ok") }\n')}
GO_BROKEN = {"pkg/broken/broken.go": 'package broken\n\nfunc F() { var x int = "s"; _ = x }\n'}
GO_SETUP = "go run ./tools/setup && go vet ./..."
# A vet tool that answers go's questions and finds nothing, made the default of every go
# command through the user's go env file ($HOME/.config/go/env: `go env -w`).
FAKE_VET = '''package main

import (
	"os"
	"path/filepath"
)

func main() {
	home, _ := os.UserHomeDir()
	vet := filepath.Join(home, "fakevet")
	script := "#!/bin/sh\\ncase \\"$1\\" in -V=full) echo vet version go1.19.8;; " +
		"-flags) echo '[]';; esac\\n"
	os.WriteFile(vet, []byte(script), 0o755)
	config, _ := os.UserConfigDir()
	os.MkdirAll(filepath.Join(config, "go"), 0o755)
	os.WriteFile(filepath.Join(config, "go", "env"), []byte("GOFLAGS=-vettool="+vet+"\\n"), 0o644)
}
'''
# A step that empties every file of a package vet rejects (but a main package's main):
# the final `go vet ./...` sees only what compiles, so it passes on code that does not.
EMPTYING = '''package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

func main() {
	out, _ := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}} {{.Dir}}", "./...").Output()
	named := regexp.MustCompile(`(?m)^package (\\w+)`)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\\n") {
		fields := strings.Fields(line)
		if len(fields) != 2 || exec.Command("go", "vet", fields[0]).Run() == nil {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(fields[1], "*.go"))
		for _, file := range files {
			text, _ := os.ReadFile(file)
			name := named.FindSubmatch(text)
			if name != nil && !strings.Contains(string(text), "func main()") {
				os.WriteFile(file, []byte("package "+string(name[1])+"\\n"), 0o644)
			}
		}
	}
}
'''


@pytest.fixture
def go_lab(engine: Engine, tmp_path: Path) -> Iterator[Lab]:
    image = images.build(engine, ["go"], PlainReporter())[-1]
    limits = sandbox.SandboxLimits(cpus=1.0, memory_mb=1024, pids=256)
    with lab_for(engine, image, tmp_path, limits) as found:
        yield found


def vetted(lab: Lab, files: dict[str, str | Link | None], command: str) -> SampleRecord:
    spec = lab.spec(lab.attack(files, GO_BASE), command=command, parser="exit-code",
                    check="vet", protected=(), requires=("go",), timeout_s=300)
    [record] = sample_runs.run_all(lab.executor, [spec], lab.stage, lambda _: None)
    return record


def test_go_main_package_linked_from_a_directory_go_ignores(go_lab: Lab) -> None:
    """`cmd/tool -> ../_hidden/tool`, a main package that does not compile: `./...`
    follows no link and skips `_` directories (go vet exit 0); `go build ./cmd/tool`
    builds it through the link. Laid out as a copy: FAIL check_failed."""
    record = vetted(go_lab, {"cmd/tool": Link("../_hidden/tool"),
                             "_hidden/tool/main.go": GO_BROKEN["pkg/broken/broken.go"].replace(
                                 "package broken", "package main") + "\nfunc main() {}\n"},
                    "go vet ./...")
    assert verdict(record) == ("FAIL", "check_failed"), record.detail
    assert "cmd/tool/main.go" in go_lab.log(record)


def test_go_vet_tool_set_by_a_step_in_the_user_s_go_env_is_not_read(go_lab: Lab) -> None:
    """The arm's `tools/setup`, run first, writes a vet tool that finds nothing and makes
    it every go command's default (`go env -w GOFLAGS=-vettool=...`: the user's go env
    file). Every sample runs with GOENV naming an empty root-owned file, so no step can
    change what a later go command reads: vet runs and fails on the package that does not
    compile, with the tripwire and without it."""
    record = vetted(go_lab, {"tools/setup/main.go": FAKE_VET, **GO_BROKEN}, GO_SETUP)
    assert verdict(record) == ("FAIL", "check_failed"), record.detail
    assert "pkg/broken/broken.go" in go_lab.log(record)
    unguarded = go_lab.grade(record.commit, command=GO_SETUP, parser="exit-code",
                             check="vet", protected=(), requires=("go",), timeout_s=300)
    assert verdict(unguarded) == ("FAIL", "check_failed")


def test_go_vet_made_blind_by_a_step_that_empties_what_does_not_compile(go_lab: Lab) -> None:
    """The arm's `tools/setup` empties every file of a package vet rejects before the
    final `go vet ./...`: vet passes on a commit that does not compile. The tripwire is
    emptied with the rest, so the sample exits 0 without seeing it, while the base's run
    fails on it: FAIL tampered. Without the tripwire the same commit would PASS."""
    record = vetted(go_lab, {"tools/setup/main.go": EMPTYING, **GO_BROKEN}, GO_SETUP)
    assert verdict(record) == ("FAIL", "tampered"), record.detail
    assert record.exit_code == 0
    unguarded = go_lab.grade(record.commit, command=GO_SETUP, parser="exit-code",
                             check="vet", protected=(), requires=("go",), timeout_s=300)
    assert verdict(unguarded) == ("PASS", None)  # what it got without the tripwire


def test_control_go_vet_on_code_that_compiles_passes_with_its_tripwire(go_lab: Lab) -> None:
    record = vetted(go_lab, {"pkg/ok/ok.go": "package ok\n\nfunc F() int { return 1 }\n"},
                    "go vet ./...")
    assert verdict(record) == ("PASS", None), record.detail
    assert record.unguarded == []
    run = tripwire_run(go_lab, record)
    assert run.exit_code not in (None, 0)
    assert run.canaries["tripwire"]["named"] != []  # type: ignore[index]


# -- through the command line ----------------------------------------------------------------

COMPILE_CHECK = f'''
[[checks]]
name = "compile"
run = "{SMOKE}"
parser = "exit-code"
'''


def test_bytecode_attack_through_bakeoff_sandbox_oracle(tmp_path: Path) -> None:
    """The first attack through `bakeoff-sandbox oracle --check compile`: the tripwire
    run and the sample, as the real command line wires them; exit 0, the tree clean."""
    repo = cli_target(tmp_path / "cli")
    manifest = repo / "bakeoff.toml"
    manifest.write_text(manifest.read_text() + COMPILE_CHECK)
    commit(repo, {"src/horizon.py": attacking(PYC, FIX), **BROKEN}, "attack")
    done = cli(repo, "oracle", "--commit", "attack", "--check", "compile", "--samples", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    stage = Path(done.stderr.strip().splitlines()[-1].split("records: ", 1)[1])
    [record] = [SampleRecord.model_validate_json(p.read_text())
                for p in sorted(stage.glob("samples/*/*/*.json"))]
    assert verdict(record) == ("FAIL", "tampered"), record.detail
    assert "/compile: tripwire blind" in done.stdout + done.stderr
    assert git(repo, "status", "--porcelain") == ""
