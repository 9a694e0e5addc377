"""Adversarial grading, the host never trusts the tree (issue 11): trees that aim at a host
directory (duplicate entries, a symlinked `tests`, a protected path turned into a
directory) and code that goes for the protected test in the sample. Every test creates
the host directory the attack aims at under tmp_path and proves it is unchanged; the
tree attacks also go through the real command line (`bakeoff-sandbox oracle`).
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

from rig.sample.spec import ServerSpec
from tests.integration.attack_lab import (
    BUG,
    HONEST,
    PASSING_VARIANT,
    PROTECTED,
    TEST,
    Files,
    Lab,
    Link,
    attacking,
    blob,
    cli_target,
    commit,
    commit_tree,
    counts,
    host_target,
    oracle,
    snapshot,
    tree_object,
    verdict,
)
from tests.integration.helpers import git


def both_ways(lab: Lab, root: Path, files: Files) -> list[tuple[str, str | None]]:
    """The attack's verdicts through the executor and through `bakeoff-sandbox oracle`,
    each checked to have restored the protected file from the base."""
    record = lab.grade(lab.attack(files))
    repo = cli_target(root / "cli")
    commit(repo, files, "attack")
    [through_cli] = oracle(repo)
    for found in (record, through_cli):
        assert found.protected == {PROTECTED: hashlib.sha256(TEST.encode()).hexdigest()}
        assert counts(found) == (0, 1)
    return [verdict(record), verdict(through_cli)]


def duplicate_tests(repo: Path, parent: str, target: Path) -> str:
    """A commit on `parent` whose root tree has two `tests` entries: a symlink to
    `target` and a directory holding a passing test and a file the arm wants written."""
    rows = [line.split(None, 3) for line in git(repo, "ls-tree", parent).splitlines()]
    entries = [(mode.lstrip("0"), kind, sha, name) for mode, kind, sha, name in rows
               if name != "tests"]
    inner = tree_object(repo, [
        ("100644", "blob", blob(repo, b"written on the host\n"), "pwned.txt"),
        ("100644", "blob", blob(repo, PASSING_VARIANT.encode()), "test_horizon.py")])
    entries += [("120000", "blob", blob(repo, str(target).encode()), "tests"),
                ("40000", "tree", inner, "tests")]
    head = commit_tree(repo, tree_object(repo, entries), parent, "attack: two `tests`")
    git(repo, "update-ref", "refs/heads/duplicate", head)
    return head


def test_duplicate_tree_entries_a_symlink_to_the_host_and_a_directory(lab: Lab,
                                                                       tmp_path: Path) -> None:
    """A tree with two entries named `tests` (a symlink to a host directory, and a
    directory), built with `hash-object --literally`: an extraction that follows the
    link would write `pwned.txt` on the host. Refused: FAIL unsafe_work, both ways."""
    target, before = host_target(tmp_path)
    lab.attack({})
    record = lab.grade(duplicate_tests(lab.repo, lab.base, target))
    repo = cli_target(tmp_path / "cli")
    [through_cli] = oracle(repo, duplicate_tests(repo, git(repo, "rev-parse", "main"), target))
    why = "unsafe path tests/pwned.txt in the tree: tests is both a file and a directory"
    for found in (record, through_cli):
        assert verdict(found) == ("FAIL", "unsafe_work"), found.detail
        assert found.detail == why
        assert found.exit_code is None
    assert snapshot(target) == before


def test_tests_committed_as_a_symlink_to_a_host_directory(lab: Lab, tmp_path: Path) -> None:
    """`tests` committed as a symlink to a host directory: restoring the protected file
    through it would write on the host. It is restored as a regular file in the sample
    instead; the honest failure, both ways."""
    target, before = host_target(tmp_path)
    assert both_ways(lab, tmp_path, {"tests": Link(str(target))}) == [HONEST, HONEST]
    assert snapshot(target) == before


def test_tests_committed_as_a_dangling_symlink(lab: Lab, tmp_path: Path) -> None:
    """`tests` committed as a symlink to a host path that does not exist (the oracle
    once crashed on it with FileExistsError): no crash, nothing created there."""
    absent = tmp_path / "absent"
    link = Link(str(absent / "tests"))
    assert both_ways(lab, tmp_path, {"tests": link}) == [HONEST, HONEST]
    assert not absent.exists()


def test_protected_path_committed_as_a_directory(lab: Lab, tmp_path: Path) -> None:
    """The protected path committed as a directory holding a passing test (the oracle
    once crashed on it with IsADirectoryError): restored as the base's file."""
    target, before = host_target(tmp_path)
    files: Files = {PROTECTED: None, f"{PROTECTED}/test_x.py": PASSING_VARIANT}
    assert both_ways(lab, tmp_path, files) == [HONEST, HONEST]
    assert snapshot(target) == before


TAMPER = '''import os
from pathlib import Path

PASSING = "def test_horizon():\\n    assert True\\n"
TARGET = Path("tests/test_horizon.py")


def _attempt(name, action):
    try:
        action()
        print(f"attempt {name}: done", flush=True)
    except OSError as error:
        print(f"attempt {name}: {type(error).__name__}", flush=True)


def _swap():
    Path("tests/new.py").write_text(PASSING)
    os.replace("tests/new.py", TARGET)


_attempt("write", lambda: TARGET.write_text(PASSING))
_attempt("chmod", lambda: TARGET.chmod(0o666))
_attempt("rename", lambda: TARGET.rename("tests/old.py"))
_attempt("unlink", TARGET.unlink)
_attempt("replace", _swap)
_attempt("chmod tests", lambda: Path("tests").chmod(0o777))
_attempt("rename tests", lambda: Path("tests").rename("elsewhere"))
'''
FIRST = {"tests/test_a.py": "import horizon\n\n\ndef test_a():\n    assert horizon\n"}
TREE = "pytest -q -s -p no:cacheprovider tests"


def test_code_under_test_modifying_renaming_deleting_the_protected_test(lab: Lab) -> None:
    """The code under test, imported by `tests/test_a.py` (collected first), tries to
    write, chmod, rename, delete or replace the protected test, and to chmod or rename
    `tests`, before pytest imports the protected test: root-owned in root-owned sticky
    directories, every attempt is refused; the honest failure."""
    record = lab.grade(lab.attack({"src/horizon.py": attacking(TAMPER), **FIRST}),
                       command=TREE)
    assert verdict(record) == HONEST, record.detail
    assert counts(record) == (1, 1)
    log = lab.log(record)
    for name in ("write", "chmod", "rename", "unlink", "replace", "chmod tests",
                 "rename tests"):
        assert f"attempt {name}: PermissionError" in log, log


PLANT = """import base64
import os
from pathlib import Path

cache = Path("/work/tests/__pycache__")
cache.mkdir(parents=True, exist_ok=True)
# The header of the restored file as it is now (its mtime is the sample's extraction's)
mtime = int(os.stat("/work/tests/test_horizon.py").st_mtime) & 0xFFFFFFFF
for name, data in {planted!r}.items():
    pyc = base64.b64decode(data)
    (cache / name).write_bytes(pyc[:8] + mtime.to_bytes(4, "little") + pyc[12:])
print("planted", flush=True)
"""
SERVE = """import http.server
import os

http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])),
                       http.server.SimpleHTTPRequestHandler).serve_forever()
"""


def test_planting_bytecode_for_the_protected_test_at_run_time(lab: Lab) -> None:
    """Bytecode of a passing variant of the protected test, its header matching the
    restored file, written into `tests/__pycache__/` (pytest's rewritten name and the
    import system's) by the code under test imported first, or by the criterion's server
    before pytest starts. pytest never reads its own cache (the rig's plugin), and the
    protected module is imported as it is: the hook sees bytecode read from a file the
    sandbox user wrote, and the module's code never compiled from its pinned bytes (FAIL
    tampered). The server runs in a container of its own: the honest failure."""
    planted = {name: base64.b64encode(pyc).decode()
               for name, pyc in (lab.forged_pyc(), lab.forged_plain_pyc())}
    plant = PLANT.format(planted=planted)
    at_import = lab.grade(lab.attack({"src/horizon.py": attacking(plant), **FIRST}),
                          command=TREE)
    by_server = lab.grade(lab.commit({"src/horizon.py": BUG, "serve.py": plant + SERVE},
                                     "the server plants it"),
                          server=ServerSpec("python3 serve.py", "/", "PORT", 10))
    assert "planted" in lab.log(at_import)
    assert "planted" in (lab.stage / "samples" / by_server.arm / "success" /
                         "1.server.log").read_text()
    assert verdict(at_import) == ("FAIL", "tampered"), at_import.detail
    assert ("flag:bytecode: bytecode read from /work/tests/__pycache__/test_horizon.cpython-"
            "311.pyc, which the sandbox can write") in at_import.detail
    assert verdict(by_server) == HONEST, by_server.detail
    assert counts(by_server) == (0, 1)
