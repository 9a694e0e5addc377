"""Adversarial grading, names (issue 20, class 7): every name git allows reaches the
executor, the record and the command line without crashing anything. A name that is not
UTF-8 (which crashed the oracle while it wrote the sample record), one with a newline,
quotes, backslashes or control characters is laid out and graded honestly, and recorded
in git's quoted form (`rig.sample.tree.shown`); a name the sample's filesystem cannot hold (a
component over NAME_MAX, a path over PATH_MAX, a symlink `symlink()` refuses) is FAIL
unsafe_work, the name shown escaped in the detail. Through the real executor, and through
`bakeoff-sandbox oracle` (exit 0, a record for every tree).
"""

from __future__ import annotations

import time
from pathlib import Path

from rig.sample.record import SampleRecord
from rig.sample.tree import shown
from tests.integration.attack_lab import (
    CHECK,
    HONEST,
    Lab,
    cli_target,
    counts,
    oracle,
    verdict,
)
from tests.integration.helpers import git
from tests.integration.tree_lab import FILE, LINK, TREE, blob, commit_with, fan, nested

UNSAFE = ("FAIL", "unsafe_work")
PASSING = "def test_ok():\n    assert True\n"
NOT_UTF8 = "names/caf\udce9.txt"  # b"caf\xe9": Latin-1, not UTF-8
# an ini file the base has not: removed (a conftest in a new directory is the arm's own)
HARNESS_NOT_UTF8 = "names/\udcff\udcfe/pytest.ini"
ODD = ["names/new\nline.txt", 'names/q"uote\\back\x01ctl.txt', "names/tab\there.txt",
       "names/caf\u00e9 ok.txt", "names/\u202eevil.txt"]


def based(lab: Lab) -> str:
    if not lab.base:
        lab.attack({})
    return lab.base


def stored(lab: Lab, record: SampleRecord) -> SampleRecord:
    """The record as it was written to disk, read back."""
    found = sorted(lab.stage.glob(f"samples/{record.arm}/*/{record.n}.json"))
    assert len(found) == 1, found
    return SampleRecord.model_validate_json(found[0].read_text(encoding="utf-8"))


def test_file_names_that_are_not_utf8_are_graded_and_recorded_escaped(lab: Lab) -> None:
    """A data file and an ini file under a directory whose names are not UTF-8: the tree
    is laid out (the names are bytes both ways), the ini file is the arm's harness and is
    removed, the honest failure stands, and the record (which crashed while it was
    written before) names the ini file as git quotes it."""
    head = lab.attack({NOT_UTF8: "data\n", HARNESS_NOT_UTF8: "import sys\n"})
    record = lab.grade(head)
    assert verdict(record) == HONEST, record.detail
    assert counts(record) == (0, 1)
    assert record.pinned["removed"] == ['"names/\\377\\376/pytest.ini"']
    assert stored(lab, record).pinned == record.pinned


def test_a_test_module_whose_name_is_not_utf8_runs_and_its_ids_are_escaped(lab: Lab) -> None:
    """A check runs the arm's passing test in `tests/test_caf\\xe9.py` beside the failing
    protected one: the honest failure, and the test's id in the record in quoted form."""
    head = lab.attack({"tests/test_caf\udce9.py": PASSING})
    record = lab.grade(head, command=CHECK, check="tests")
    assert verdict(record) == HONEST, record.detail
    assert counts(record) == (1, 1)
    ids = sorted(str(row["id"]) for row in record.tests)
    assert ids == ['"tests/test_caf\\351.py::test_ok"', "tests/test_horizon.py::test_horizon"]
    assert stored(lab, record).tests == record.tests


def test_names_with_newlines_quotes_backslashes_and_controls(lab: Lab) -> None:
    """Data files named with a newline, a quote, a backslash, a control character, a tab,
    a bidi override, and a test module with a newline in its name: all laid out, the
    honest failure; the module's id is recorded in quoted form."""
    head = lab.attack({**dict.fromkeys(ODD, "data\n"), "tests/test_new\nline.py": PASSING})
    record = lab.grade(head, command=CHECK, check="tests")
    assert verdict(record) == HONEST, record.detail
    assert counts(record) == (1, 1)
    assert "tests/test_new\nline.py::test_ok" in {row["id"] for row in record.tests}
    assert stored(lab, record).tests == record.tests


def test_a_component_of_256_bytes_is_unsafe_work(lab: Lab) -> None:
    """A file name of 256 bytes (git takes it; no Linux filesystem does): FAIL
    unsafe_work, the name in the detail."""
    name = b"n" * 256
    head = nested(lab.repo, based(lab), b"long/" + name, (FILE, blob(lab.repo, b"x\n")))
    record = lab.grade(head)
    assert verdict(record) == UNSAFE, record.detail
    assert record.detail == (
        f"unsafe path long/{'n' * 256} in the tree: has a component over NAME_MAX (255 "
        "bytes): no filesystem of the sample can hold it")


def test_a_component_of_255_bytes_and_a_path_of_4089_bytes_are_laid_out(lab: Lab) -> None:
    """The limits themselves: a 255-byte name, and a path of 4089 bytes (/work/PATH is
    4095 bytes, PATH_MAX less its NUL), are laid out: the honest failure."""
    longest = b"/".join([b"p" * 254] * 16) + b"/qqqqq.txt"
    assert len(longest) == 4089
    with_name = nested(lab.repo, based(lab), b"edge/" + b"n" * 255, (FILE, blob(lab.repo, b"1\n")))
    head = nested(lab.repo, with_name, longest, (FILE, blob(lab.repo, b"2\n")))
    record = lab.grade(head)
    assert verdict(record) == HONEST, record.detail


def test_a_path_of_5000_bytes_is_unsafe_work(lab: Lab) -> None:
    """Twenty directories of 249 bytes and a file: a 5000-byte path (over PATH_MAX):
    FAIL unsafe_work; the detail cuts the name in the middle."""
    path = b"/".join([b"d" * 249] * 20) + b"/" + b"f" * 19
    assert len(path) == 5019
    head = nested(lab.repo, based(lab), path, (FILE, blob(lab.repo, b"x\n")))
    record = lab.grade(head)
    assert verdict(record) == UNSAFE, record.detail
    assert "over PATH_MAX (4095 bytes)" in record.detail
    assert "[...]" in record.detail and len(record.detail) < 600


def test_symlinks_no_symlink_call_takes_are_unsafe_work(lab: Lab) -> None:
    """A symlink whose target is 5000 bytes, and one whose target is empty (git stores
    both): FAIL unsafe_work each."""
    for target, why in ((b"t" * 5000, "over PATH_MAX"), (b"", "empty or holds a NUL")):
        head = commit_with(lab.repo, based(lab), {b"link": (LINK, blob(lab.repo, target))})
        record = lab.grade(head)
        assert verdict(record) == UNSAFE, record.detail
        assert why in record.detail


def test_names_git_allows_through_bakeoff_sandbox_oracle(tmp_path: Path) -> None:
    """Through the real command line: a commit with names that are not UTF-8, newlines
    and quotes, an ini file under a name that is not UTF-8; a tree bomb of a million empty
    files; a 256-byte name. `bakeoff-sandbox oracle` exits 0 with a record for each: the
    honest failure (the ini file removed, named escaped), FAIL unsafe_work twice."""
    repo = cli_target(tmp_path / "repo")
    files = {NOT_UTF8: "data\n", HARNESS_NOT_UTF8: "import sys\n", ODD[0]: "x\n", ODD[1]: "y\n"}
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "names")
    (record,) = oracle(repo)
    assert verdict(record) == HONEST, record.detail
    assert record.pinned["removed"] == [shown(HARNESS_NOT_UTF8)]

    bomb = fan(repo, (FILE, blob(repo, b"")), [1000, 1000])
    git(repo, "update-ref", "refs/heads/bomb",
        commit_with(repo, git(repo, "rev-parse", "main"), {b"bomb": (TREE, bomb)}))
    began = time.monotonic()
    (record,) = oracle(repo, "bomb")
    assert verdict(record) == UNSAFE, record.detail
    assert "more than 100000 files" in record.detail
    assert time.monotonic() - began < 120  # the whole command: images, base proof, sample

    git(repo, "update-ref", "refs/heads/long", nested(
        repo, git(repo, "rev-parse", "main"), b"long/" + b"n" * 256, (FILE, blob(repo, b"x"))))
    (record,) = oracle(repo, "long")
    assert verdict(record) == UNSAFE, record.detail
    assert "NAME_MAX" in record.detail


def test_a_tree_naming_a_blob_the_repository_does_not_have(lab: Lab) -> None:
    """A commit made with plumbing whose tree names a blob that is not in the repository
    (the oracle reads commits made in the repository itself, never fsck'd): FAIL
    unsafe_work, the path named; it crashed the reader before (`int('BAD')`)."""
    head = commit_with(lab.repo, based(lab), {b"ghost.py": (FILE, "12" * 20)})
    record = lab.grade(head)
    assert verdict(record) == UNSAFE, record.detail
    assert record.detail == ("unsafe path ghost.py in the tree: names a blob the repository "
                             "does not have (a broken tree)")
