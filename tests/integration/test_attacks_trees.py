"""Adversarial grading, the orchestrator's resources (issue 20, class 6): trees built to
make the orchestrator slow or huge. Each commit is graded in a fresh orchestrator process
(`Lab.grade_apart`: its peak RSS and CPU measured, stopped after a deadline): a tree past
`[limits].max_files` entries, `disk_mb` bytes or the caps of names is FAIL unsafe_work
within seconds, refused while git lists it (git is stopped at the first entry past the
caps); a legal tree of large or many files is graded honestly, its large blobs streamed
from the object store into the sample's tar, never held. The orchestrator's peak RSS grows
by less than 200 MB in every case.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.containers import sandbox
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from tests.integration.attack_lab import (
    CHECK,
    HONEST,
    Lab,
    Usage,
    counts,
    lab_for,
    verdict,
)
from tests.integration.tree_lab import FILE, TREE, blob, chain, commit_with, fan, tree

MB = 1024  # ru_maxrss is in KiB
RSS_GROWTH = 200 * MB
UNSAFE = ("FAIL", "unsafe_work")


@pytest.fixture
def lab(engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path) -> Iterator[Lab]:
    limits = sandbox.SandboxLimits(cpus=1.0, memory_mb=1024, pids=128, disk_mb=512)
    with lab_for(engine, built_images["python"], tmp_path, limits) as found:
        yield found


@pytest.fixture
def small_disk(engine: Engine, built_images: dict[str, BuiltImage],
               tmp_path: Path) -> Iterator[Lab]:
    limits = sandbox.SandboxLimits(cpus=1.0, memory_mb=512, pids=128, disk_mb=64)
    with lab_for(engine, built_images["python"], tmp_path, limits) as found:
        yield found


def based(lab: Lab) -> str:
    """The lab's base commit (made once)."""
    if not lab.base:
        lab.attack({})
    return lab.base


def bounded(used: Usage, seconds: float) -> None:
    print(f"usage: {used}")  # the numbers docs/benchmarks.md quotes (pytest -rP)
    assert used.grew_kb < RSS_GROWTH, used
    assert used.peak_kb < 400 * MB, used  # imports, docker client, executor and grading
    assert used.wall_s < seconds, used


def test_a_million_empty_files_in_a_thousand_directories(lab: Lab) -> None:
    """1000 directories of 1000 empty files each: two tree objects and one blob (60 KB of
    objects), 1.1 GB and 71 s of the orchestrator's before. Refused as git lists it:
    FAIL unsafe_work, the max_files cap named, in seconds, RSS growth < 200 MB."""
    empty = blob(lab.repo, b"")
    bomb = fan(lab.repo, (FILE, empty), [1000, 1000])
    head = commit_with(lab.repo, based(lab), {b"bomb": (TREE, bomb)})
    record, used = lab.grade_apart(head, 120)
    assert verdict(record) == UNSAFE, record.detail
    assert "more than 100000 files ([limits].max_files)" in record.detail
    bounded(used, 30)


def test_a_million_files_in_one_directory(lab: Lab) -> None:
    """One tree object of a million entries (another route to the same count: no nesting
    at all): refused at the cap as well, nothing of it held."""
    flat = fan(lab.repo, (FILE, blob(lab.repo, b"")), [1_000_000])
    head = commit_with(lab.repo, based(lab), {b"flat": (TREE, flat)})
    record, used = lab.grade_apart(head, 120)
    assert verdict(record) == UNSAFE, record.detail
    assert "more than 100000 files" in record.detail
    bounded(used, 30)


def test_two_hundred_thousand_directories_of_a_shared_deep_chain(lab: Lab) -> None:
    """1000 directories that each hold the same chain of 200 nested directories and one
    file at its end: a thousand files, but 200,000 directories (each a tmpfs inode, each
    an ancestor a planner would walk). Directories count as entries: refused."""
    deep = chain(lab.repo, {b"leaf.py": (FILE, blob(lab.repo, b"x = 1\n"))},
                 [b"d"] * 200)
    roots = tree(lab.repo, {b"r%04d" % i: (TREE, deep) for i in range(1000)})
    head = commit_with(lab.repo, based(lab), {b"deep": (TREE, roots)})
    record, used = lab.grade_apart(head, 120)
    assert verdict(record) == UNSAFE, record.detail
    assert "more than 100000 files" in record.detail
    bounded(used, 30)


def test_long_names_past_the_cap_of_names(lab: Lab) -> None:
    """78,000 files of 250-byte names in directories of 250-byte names (under max_files,
    NAME_MAX and PATH_MAX, yet 40 MB of paths, past the 32 MB cap of a listing's names):
    refused before the listing is held."""
    empty = blob(lab.repo, b"")
    inner = tree(lab.repo, {b"%06d" % i + b"n" * 244: (FILE, empty) for i in range(600)})
    outer = tree(lab.repo, {b"%06d" % i + b"d" * 244: (TREE, inner) for i in range(130)})
    head = commit_with(lab.repo, based(lab), {b"names": (TREE, outer)})
    record, used = lab.grade_apart(head, 120)
    assert verdict(record) == UNSAFE, record.detail
    assert "bytes of names" in record.detail
    bounded(used, 30)


def test_a_250_megabyte_file_past_the_disk_limit(small_disk: Lab) -> None:
    """One blob of 250 MB (zeros: 250 KB in git) in a sample of 64 MB of disk: refused
    from the listing's sizes, never read."""
    lab = small_disk
    big = blob(lab.repo, bytes(250 * 1024 * 1024))
    head = commit_with(lab.repo, based(lab), {b"big.bin": (FILE, big)})
    record, used = lab.grade_apart(head, 120)
    assert verdict(record) == UNSAFE, record.detail
    assert "more than 67108864 bytes" in record.detail
    bounded(used, 20)


def test_a_250_megabyte_file_a_sample_can_hold(lab: Lab) -> None:
    """The same 250 MB file within `disk_mb` (512): a legal tree, graded honestly; the blob
    streams from the object store into the sample's tar and is never held (0.8 GB of the
    orchestrator's before)."""
    big = blob(lab.repo, bytes(250 * 1024 * 1024))
    head = commit_with(lab.repo, based(lab), {b"big.bin": (FILE, big)})
    record, used = lab.grade_apart(head, 300)
    assert verdict(record) == HONEST, record.detail
    assert counts(record) == (0, 1)
    bounded(used, 240)


def test_many_medium_files(lab: Lab) -> None:
    """300 distinct files of 1 MiB (300 MB; each just at `rig.sample.tree.INLINE`): more than
    the bytes a tree's reader holds (24 MiB), so most stream at tar time; graded honestly,
    RSS growth < 200 MB."""
    files = {b"m%04d.bin" % i: (FILE, blob(lab.repo, b"%08d\n" % i * (1024 * 1024 // 9)
                                              + bytes(1024 * 1024 % 9)))
             for i in range(300)}
    head = commit_with(lab.repo, based(lab), {b"medium": (TREE, tree(lab.repo, files))})
    record, used = lab.grade_apart(head, 300)
    assert verdict(record) == HONEST, record.detail
    bounded(used, 240)


MANY_TESTS = '''import pytest


@pytest.mark.parametrize("n", range(20000))
def test_many(n):
    print("x" * 200)
'''


def test_twenty_thousand_printing_tests_flooding_the_observer(lab: Lab) -> None:
    """A check runs 20,000 tests that print beside the failing protected one: the
    observer's records pass their 16 MB cap (the reader keeps that much, then marks an
    overflow) and the record would hold 20,000 rows. The overflow is FAIL tampered (the
    base's run of the check has none); the record keeps at most 20,000 tests; the
    orchestrator reads and parses all of it with RSS growth < 200 MB."""
    head = lab.attack({"tests/test_many.py": MANY_TESTS})
    record, used = lab.grade_apart(head, 600, command=CHECK, check="tests")
    assert verdict(record) == ("FAIL", "tampered"), record.detail
    assert record.observer is not None and record.observer["overflow"] is True
    assert "overflow" in record.detail
    assert 0 < len(record.tests) <= 20000
    bounded(used, 500)


def test_thirty_thousand_directories_of_conftests_and_ini_files(lab: Lab) -> None:
    """30,000 new directories each with a conftest.py and a pytest.ini (90,000 entries:
    under max_files): each ini file is harness the base has not and is removed, each
    conftest is the arm's own (a new directory: `rig.guards.harness.own_conftests`). Pinning was
    a scan of the tree per file (minutes); now linear: the honest failure, the record
    naming the first 1000 removed and a count, RSS growth < 200 MB."""
    directory = tree(lab.repo, {b"conftest.py": (FILE, blob(lab.repo, b"import os\n")),
                                b"pytest.ini": (FILE, blob(lab.repo, b"[pytest]\n"))})
    many = tree(lab.repo, {b"c%05d" % i: (TREE, directory) for i in range(30_000)})
    head = commit_with(lab.repo, based(lab), {b"many": (TREE, many)})
    record, used = lab.grade_apart(head, 300)
    assert verdict(record) == HONEST, record.detail
    assert len(record.pinned["removed"]) == 1001
    assert record.pinned["removed"][:2] == ["many/c00000/pytest.ini", "many/c00001/pytest.ini"]
    assert record.pinned["removed"][-1] == "[and 29000 more]"
    bounded(used, 120)


def test_thirty_thousand_test_directories_each_an_import_root(lab: Lab) -> None:
    """30,000 test directories (no package marker), each with its own `test_x.py` and a
    `json.py` stub: 30,000 import roots for the layout rule, which compared each root's
    modules with every other root's (quadratic: half an hour); now linear: every stub
    (a standard-library name at an import root) removed, the honest failure, in bounded
    time."""
    directory = tree(lab.repo, {
        b"json.py": (FILE, blob(lab.repo, b"def loads(text):\n    return {}\n")),
        b"test_x.py": (FILE, blob(lab.repo, b"def test_x():\n    pass\n"))})
    many = tree(lab.repo, {b"t%05d" % i: (TREE, directory) for i in range(30_000)})
    head = commit_with(lab.repo, based(lab), {b"pkgs": (TREE, many)})
    record, used = lab.grade_apart(head, 300)
    assert verdict(record) == HONEST, record.detail
    assert record.pinned["removed"][:2] == ["pkgs/t00000/json.py", "pkgs/t00001/json.py"]
    assert record.pinned["removed"][-1] == "[and 29000 more]"
    bounded(used, 120)


def test_twenty_thousand_symlinks_of_long_targets(lab: Lab) -> None:
    """Symlink targets are always held (the tar needs each): 20,000 links with targets of
    4000 bytes (80 MB held, within disk_mb) count against the cap of names: refused."""
    target = blob(lab.repo, b"t" * 4000)
    links = fan(lab.repo, ("120000", target), [20, 1000])
    head = commit_with(lab.repo, based(lab), {b"links": (TREE, links)})
    record, used = lab.grade_apart(head, 120)
    assert verdict(record) == UNSAFE, record.detail
    assert "bytes of names" in record.detail
    bounded(used, 30)
