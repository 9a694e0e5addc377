"""Trees bounded and names handled (issue 20, classes 6 and 7), the pure parts: what the
sample's filesystem cannot hold (`rig.sample.tree.checked`), the caps a listing is counted
against (`Caps`), names in git's quoted form (`shown`, `clean`, `unshown`), equality of
held and unheld entries, the directory index that keeps pinning linear, and the bounds
of what a record keeps. No git, no docker."""

from __future__ import annotations

import fnmatch
import itertools
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rig.guards import harness
from rig.guards.harness import Pinned
from rig.sample import tree as tree_mod
from rig.sample.metric import JSON_PARSED, extract
from rig.sample.oracle import PINNED_KEPT, _pinned
from rig.sample.record import SampleRecord
from rig.sample.tree import Caps, Entry, Indexed, Kind, UnsafeTreeError, clean, shown, unshown


def file(data: bytes = b"x") -> Entry:
    return Entry(Kind.FILE, data)


def link(target: bytes) -> Entry:
    return Entry(Kind.SYMLINK, target)


# -- what the sample's filesystem cannot hold ---------------------------------------------

@pytest.mark.parametrize(("path", "why"), [
    ("a/" + "n" * 256, "component over NAME_MAX (255 bytes)"),
    ("a/" + "\u00e9" * 128, "component over NAME_MAX"),  # 128 characters, 256 bytes
    ("a/" + "\udcff" * 256, "component over NAME_MAX"),  # 256 bytes that are not UTF-8
    ("/".join(["d" * 200] * 20) + "/f" * 45, "over PATH_MAX (4095 bytes)"),
])
def test_a_name_no_filesystem_of_the_sample_can_hold_is_refused(path: str, why: str) -> None:
    with pytest.raises(UnsafeTreeError, match=why.replace("(", r"\(").replace(")", r"\)")):
        tree_mod.checked([(path, file())])


def test_the_limits_themselves_are_laid_out() -> None:
    """A 255-byte name and a path of 4089 bytes (/work/PATH: 4095) are legal; a byte more
    of either is not."""
    longest = "/".join(["p" * 254] * 16) + "/qqqqq.txt"
    assert len(longest) == 4089
    assert tree_mod.checked([("n" * 255, file()), (longest, file())])
    with pytest.raises(UnsafeTreeError, match="is 4090 bytes long"):
        tree_mod.checked([(longest + "x", file())])


@pytest.mark.parametrize(("target", "why"), [
    (b"", "empty or holds a NUL"), (b"a\0b", "empty or holds a NUL"),
    (b"t" * 4096, "4096 bytes, over PATH_MAX")])
def test_a_symlink_no_symlink_call_takes_is_refused(target: bytes, why: str) -> None:
    with pytest.raises(UnsafeTreeError, match=why):
        tree_mod.checked([("l", link(target))])


def test_a_symlink_target_too_large_to_be_held_is_refused() -> None:
    unheld = Entry(Kind.SYMLINK, b"", "ab" * 20, 2 * 1024 * 1024)
    with pytest.raises(UnsafeTreeError, match="over PATH_MAX"):
        tree_mod.checked([("l", unheld)])
    assert tree_mod.checked([("l", link(b"t" * 4095))])


@pytest.mark.parametrize(("paths", "both"), [
    (["a", "a-b", "a/c"], ("a", "a/c")),  # "-" sorts before "/": not next to each other
    (["x/y", "x/y/z/w", "x/y!"], ("x/y", "x/y/z/w")),
    (["tests", "tests/t.py"], ("tests", "tests/t.py")),
])
def test_a_path_that_is_both_a_file_and_a_directory_is_found(paths: list[str],
                                                              both: tuple[str, str]) -> None:
    assert tree_mod.file_and_directory(paths) == both
    with pytest.raises(UnsafeTreeError, match="is both a file and a directory"):
        tree_mod.checked([(p, file()) for p in paths])


def test_checking_a_deep_tree_is_not_quadratic_in_its_depth() -> None:
    """4000 paths 1000 directories deep (2 KB each): no parent list is built per path."""
    deep = "/".join(["d"] * 1000)
    started = time.process_time()
    tree = tree_mod.checked((f"{deep}/f{i}", file()) for i in range(4000))
    assert len(tree) == 4000 and len(tree.children) == 1001
    assert time.process_time() - started < 2.0


# -- caps --------------------------------------------------------------------------------

def test_caps_name_the_limit_a_tree_is_past() -> None:
    caps = Caps(files=10, bytes=1000, names=100)
    assert caps.problem(10, 1000, 100) is None
    assert caps.problem(11, 0, 0) == ("it holds more than 10 files ([limits].max_files): a "
                                      "tree that large is refused unread")
    assert caps.problem(1, 1001, 0) == ("its files add up to more than 1000 bytes, more than "
                                        "a sample can hold ([limits].disk_mb)")
    assert caps.problem(1, 1, 101) == "its paths add up to more than 100 bytes of names"


# -- names in records --------------------------------------------------------------------

NAMES = ["plain.py", "caf\u00e9.py", "caf\udce9.py", "a\nb", 'q"uote', "back\\slash",
         "tab\there", "ctl\x01x", "bidi\u202eevil", '"quoted"', "\udcff" * 3, "sp ace",
         *(chr(c) for c in range(1, 128)), *(chr(0xDC80 + b) for b in range(128))]


@pytest.mark.parametrize("name", NAMES)
def test_every_name_is_shown_printable_and_read_back(name: str) -> None:
    """`shown` is printable ASCII or printable UTF-8, JSON-encodable, and `unshown` gives
    the name back; a name that is printable UTF-8 without quotes is itself."""
    text = shown(name)
    assert text.isprintable()
    json.dumps(text, ensure_ascii=False).encode("utf-8")
    assert unshown(text) == name
    plain = name.isprintable() and '"' not in name and "\\" not in name
    assert (text == name) == plain


def test_shown_is_git_s_quoted_form() -> None:
    assert shown("caf\udce9.py") == '"caf\\351.py"'
    assert shown("a\nb\tc") == '"a\\nb\\tc"'
    assert shown('q"\\') == '"q\\"\\\\"'
    assert shown("caf\u00e9") == "caf\u00e9"
    assert shown("x" * 1000, 20) == "xxxxxxx[...]xxxxxxx"


def test_clean_escapes_only_text_that_is_not_utf8() -> None:
    assert clean("tests/t.py::test[a\nb]") == "tests/t.py::test[a\nb]"
    assert clean("tests/caf\udce9.py::t") == '"tests/caf\\351.py::t"'


def test_a_record_holding_names_that_are_not_utf8_is_written_and_read_back() -> None:
    """What crashed the oracle: a surrogate-escaped name in a record's JSON."""
    record = SampleRecord.model_validate(json.loads(MINIMAL) | {
        "protected": {"tests/caf\udce9.py": "absent"},
        "tests": [{"id": "tests/caf\udce9.py::test_x", "status": "passed"}],
        "detail": "unsafe path names/\udcff in the tree"})
    text = record.model_dump_json()
    again = SampleRecord.model_validate_json(text)
    assert again == record
    assert again.protected == {'"tests/caf\\351.py"': "absent"}
    assert again.tests[0]["id"] == '"tests/caf\\351.py::test_x"'
    assert unshown(next(iter(again.protected))) == "tests/caf\udce9.py"


MINIMAL = json.dumps({
    "sample": "c/a/success/1", "change": "c", "arm": "a", "check": "success", "n": 1,
    "commit": "0" * 40, "base_commit": "0" * 40, "image": "i", "image_id": "sha256:0",
    "image_identity": "sha256:0", "command": "pytest", "parser": "pytest", "env": {},
    "mounts": [], "limits": {}, "network": "none", "db_schema": None, "protected": {},
    "requires": [], "exit_code": 1, "timed_out": False, "oom_killed": False,
    "program_present": True, "counts": None, "tests_ran": 0, "verdict": "FAIL",
    "reason": "unsafe_work", "rig_error": None, "detail": "", "started_at": "now",
    "duration_s": 0.1, "log": "1.log"})


def test_a_record_names_at_most_a_thousand_pinned_paths_per_list() -> None:
    removed = tuple(f"c{i:05d}/conftest.py" for i in range(45_000))
    kept = _pinned(Pinned(removed=removed))
    assert kept["removed"][:2] == ["c00000/conftest.py", "c00001/conftest.py"]
    assert len(kept["removed"]) == PINNED_KEPT + 1
    assert kept["removed"][-1] == "[and 44000 more]"
    assert kept["restored"] == [] and kept["bytecode"] == []


# -- held and unheld entries -------------------------------------------------------------

def test_entries_of_one_blob_are_equal_held_or_not() -> None:
    oid = "ab" * 20
    assert Entry(Kind.FILE, b"x", oid, 1) == Entry(Kind.FILE, b"", oid, 1)
    assert Entry(Kind.FILE, b"x", oid, 1) != Entry(Kind.FILE, b"x", "cd" * 20, 1)
    assert Entry(Kind.FILE, b"x", oid, 1) != Entry(Kind.EXECUTABLE, b"x", oid, 1)
    assert Entry(Kind.FILE, b"x") == Entry(Kind.FILE, b"x", oid, 1)  # rig-made: by bytes
    assert Entry(Kind.FILE, b"") != Entry(Kind.FILE, b"", oid, 5)  # unheld: unknown bytes
    assert not Entry(Kind.FILE, b"", oid, 5).held and Entry(Kind.FILE, b"", oid, 5).length == 5


# -- the directory index -----------------------------------------------------------------

def test_an_indexed_tree_places_and_removes_as_a_plain_one_does() -> None:
    """Random places and removes on an `Indexed` tree and on a plain dict end the same."""
    names = ["a", "b", "a/b", "a/c", "a/b/c", "b/x", "a/b/d/e", "c"]
    rng = random.Random(7)
    for _ in range(300):
        plain: dict[str, Entry] = {}
        indexed = Indexed()
        for _ in range(12):
            path, data = rng.choice(names), bytes([rng.randrange(3)])
            if rng.random() < 0.6:
                tree_mod.place(plain, path, data)
                tree_mod.place(indexed, path, data)
            else:
                tree_mod.remove(plain, path)
                tree_mod.remove(indexed, path)
            assert dict(indexed) == plain
            assert tree_mod.file_and_directory(indexed) is None


def test_pinning_ninety_thousand_harness_files_is_linear() -> None:
    """45,000 conftests the base has not (removed: vendored, never the arm's own), 45,000
    vendored files of the base the arm deleted (restored), 45,000 more it turned into
    directories (restored over them): each was a scan of the whole tree per file
    (minutes)."""
    base = Indexed({"tests/test_h.py": file(b"def test_h(): pass\n"),
                    **{f"vendor/m{i:05d}.go": file() for i in range(45_000)},
                    **{f"vendor/d{i:05d}.go": file() for i in range(45_000)}})
    arm = Indexed({"tests/test_h.py": file(b"def test_h(): pass\n"),
                   **{f"vendor/c{i:05d}/conftest.py": file() for i in range(45_000)},
                   **{f"vendor/d{i:05d}.go/x": file() for i in range(45_000)}})
    started = time.process_time()
    pinned = harness.pin(arm, base)
    assert (len(pinned.removed), len(pinned.restored)) == (45_000, 90_000)
    assert time.process_time() - started < 15.0
    assert tree_mod.file_and_directory(arm) is None and len(arm) == 90_001


def test_is_harness_is_the_globs_it_compiles() -> None:
    """The compiled patterns say what NAMES and DIRS matched one glob at a time said."""
    def globbed(path: str) -> bool:
        parts = path.split("/")
        return (any(fnmatch.fnmatchcase(parts[-1], p) for p in harness.NAMES)
                or parts[-1].endswith(harness.SUFFIXES)
                or any(fnmatch.fnmatchcase(d, p) for d in parts[:-1] for p in harness.DIRS))
    words = ["a", "node_modules", "vendor", "x.dist-info", ".cargo", "__pycache__",
             "conftest.py", "tsconfig.base.json", "jest.config.ts", "Makefile", "m.pth",
             "vendorx", "dist-info", ".mocharc.yml", "a.pyc", "x\nvendor", ".dist-info"]
    for k in (1, 2, 3):
        for path in map("/".join, itertools.product(words, repeat=k)):
            assert harness.is_harness(path) == globbed(path), path


# -- what is read back -------------------------------------------------------------------

def test_a_coverage_file_past_the_parsed_size_is_read_by_its_totals() -> None:
    """A coverage JSON of a million tiny objects would be a gigabyte of them parsed; one
    past JSON_PARSED is read by its last `totals` object alone."""
    bomb = '{"files": [' + ",".join(["{}"] * 1_500_000) + '], "totals": {"percent_covered": 81.5}}'
    assert len(bomb) > JSON_PARSED
    assert extract("coverage-json:cov.json", "", {"cov.json": bomb}) == 81.5
    small = json.dumps({"totals": {"percent_covered": 3}})
    assert extract("coverage-json:cov.json", "", {"cov.json": small}) == 3.0


def test_the_default_max_files_leaves_a_contract_s_hash_as_it_was() -> None:
    """Contracts frozen before `[limits].max_files` existed still verify; another value
    is a changed contract."""
    from rig.contract.content import ContractLimits
    limits = {"cpus": 1.0, "memory_mb": 2048, "pids": 512, "dispatch_timeout_s": 1800.0,
              "check_timeout_s": 600.0, "disk_mb": 2048}
    assert ContractLimits(**limits).model_dump() == limits
    assert ContractLimits(**limits, max_files=100_000).model_dump() == limits
    assert ContractLimits(**limits, max_files=5000).model_dump() == {**limits, "max_files": 5000}


COVERAGE_BOMB = r"""
import sys
from pathlib import Path
from rig.sample.metric import extract

def hwm():
    status = Path("/proc/self/status").read_text()
    return int(next(l for l in status.splitlines() if l.startswith("VmHWM:")).split()[1])

text = '{"files": [' + ",".join(["{}"] * 10_000_000) + '], "totals": {"percent_covered": 81.5}}'
before = hwm()
value = extract("coverage-json:cov.json", "", {"cov.json": text})
print(value, (hwm() - before) // 1024)
"""


def test_a_coverage_json_bomb_costs_no_memory_to_read() -> None:
    """30 MB of `{}` (the size a sample reads back) parsed whole was ten million dicts,
    about a gigabyte: read by its totals, the orchestrator's peak RSS grows by < 20 MB."""
    done = subprocess.run([sys.executable, "-c", COVERAGE_BOMB], capture_output=True, text=True,
                          check=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    value, grew_mb = done.stdout.split()
    assert value == "81.5" and int(grew_mb) < 20, done.stdout
