"""`runner.workspace.bundle`: an arm's bundle is imported only when every object passes fsck and
its tip descends from the base (real git, no docker)."""

from __future__ import annotations

import binascii
import os
import subprocess
import threading
from pathlib import Path

import pytest

from runner.commands.dispatch import work
from runner.containers.checkout import ArmBox, Taken
from runner.workspace import bundle
from runner.workspace.bundle import WorkRefusedError, fsck_reason, read_header


def git(cwd: Path, *args: str, data: bytes | None = None) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", *args],
                          cwd=cwd, input=data, capture_output=True, check=True)
    return done.stdout.decode().strip()


@pytest.fixture
def repos(tmp_path: Path) -> tuple[Path, Path, str]:
    """(main repo, an arm's clone of it, the base commit)."""
    main = tmp_path / "main"
    main.mkdir()
    git(main, "init", "-q", "-b", "main")
    (main / "app.py").write_text("VALUE = 1\n")
    git(main, "add", "app.py")
    git(main, "commit", "-qm", "base")
    arm = tmp_path / "arm"
    git(tmp_path, "clone", "-q", str(main), str(arm))
    return main, arm, git(main, "rev-parse", "HEAD")


def make_bundle(arm: Path, tip: str, base: str | None, out: Path) -> Path:
    git(arm, "update-ref", "refs/heads/work", tip)
    git(arm, "bundle", "create", "-q", str(out), "refs/heads/work",
        *([f"^{base}"] if base else []))
    return out


def duplicate_tree_commit(arm: Path, base: str) -> str:
    blob = git(arm, "hash-object", "-w", "--stdin", data=b"stolen\n")
    entry = b"100644 app.py\0" + binascii.unhexlify(blob)
    tree = git(arm, "hash-object", "-t", "tree", "-w", "--literally", "--stdin",
               data=entry + entry)
    return git(arm, "commit-tree", tree, "-p", base, "-m", "two entries of one name")


def objects_in(repo: Path, oid: str) -> bool:
    return subprocess.run(["git", "cat-file", "-e", oid], cwd=repo, check=False).returncode == 0


def test_an_honest_bundle_is_imported_as_the_arms_branch(repos: tuple[Path, Path, str],
                                                        tmp_path: Path) -> None:
    main, arm, base = repos
    (arm / "app.py").write_text("VALUE = 2\n")
    git(arm, "commit", "-qam", "fix")
    tip = git(arm, "rev-parse", "HEAD")
    path = make_bundle(arm, tip, base, tmp_path / "work.bundle")
    header = read_header(path)
    assert (header.version, header.prerequisites, header.refs) == (
        2, [base], [(tip, "refs/heads/work")])
    imported = bundle.import_work(main, path, base, "bakeoff-arms/x/first/A",
                                  tmp_path / "scratch", 1024 * 1024)
    assert imported == tip == git(main, "rev-parse", "bakeoff-arms/x/first/A")
    assert git(main, "show", f"{tip}:app.py") == "VALUE = 2"
    assert list((tmp_path / "scratch").iterdir()) == []  # the quarantine is gone


def test_duplicate_entries_are_refused_and_never_reach_the_main_repo(
        repos: tuple[Path, Path, str], tmp_path: Path) -> None:
    """Pins: `git fetch <bundle>` accepted a tree with two entries of one name (git 2.39
    does not fsck bundles); index-pack --strict in quarantine refuses it."""
    main, arm, base = repos
    forged = duplicate_tree_commit(arm, base)
    path = make_bundle(arm, forged, base, tmp_path / "work.bundle")
    with pytest.raises(WorkRefusedError) as refused:
        bundle.import_work(main, path, base, "bakeoff-arms/x/first/A", tmp_path / "s", 1 << 20)
    assert refused.value.reason == "fsck: duplicateEntries: contains duplicate file entries"
    assert not objects_in(main, forged)
    assert git(main, "branch", "--list", "bakeoff-arms/*") == ""


def test_work_that_does_not_descend_from_the_base_is_refused(
        repos: tuple[Path, Path, str], tmp_path: Path) -> None:
    main, arm, base = repos
    tree = git(arm, "rev-parse", "HEAD^{tree}")
    orphan = git(arm, "commit-tree", tree, "-m", "a history of its own")
    path = make_bundle(arm, orphan, None, tmp_path / "work.bundle")
    with pytest.raises(WorkRefusedError, match=r"^the work does not descend from the base$"):
        bundle.import_work(main, path, base, "b", tmp_path / "s", 1 << 20)
    assert not objects_in(main, orphan)


@pytest.mark.parametrize(("content", "reason"), [
    (b"PACK\0\0\0\2", "the bundle has no git bundle v2/v3 header"),
    (b"# v2 git bundle\nnot-a-sha refs/heads/work\n\nPACK", "the bundle's header is malformed"),
    (b"# v3 git bundle\n@filter=blob:none\n\nPACK",
     "the bundle needs a capability we do not accept"),
])
def test_a_malformed_header_is_refused(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "work.bundle"
    path.write_bytes(content)
    with pytest.raises(WorkRefusedError) as refused:
        read_header(path)
    assert refused.value.reason == reason


def test_a_v3_header_is_read(tmp_path: Path) -> None:
    sha = "a" * 40
    path = tmp_path / "work.bundle"
    path.write_bytes(f"# v3 git bundle\n@object-format=sha1\n-{sha}\n{sha} refs/heads/w\n\n"
                     "PACK".encode())
    header = read_header(path)
    assert (header.version, header.prerequisites, header.refs, header.pack_offset) == (
        3, [sha], [(sha, "refs/heads/w")], len(path.read_bytes()) - 4)


def test_a_bundle_over_the_cap_is_refused_unread(repos: tuple[Path, Path, str],
                                                 tmp_path: Path) -> None:
    main, arm, base = repos
    (arm / "big.bin").write_bytes(os.urandom(2 * 1024 * 1024))  # incompressible
    git(arm, "add", "big.bin")
    git(arm, "commit", "-qm", "big")
    path = make_bundle(arm, git(arm, "rev-parse", "HEAD"), base, tmp_path / "work.bundle")
    with pytest.raises(WorkRefusedError, match=r"^bundle over 1 MiB$"):
        bundle.import_work(main, path, base, "b", tmp_path / "s", 1024 * 1024)


def test_fsck_reason_keeps_gits_message_and_nothing_of_the_arms() -> None:
    stderr = ("error: object 0123abcd: gitmodulesUrl: disallowed submodule url: "
              "-\x1b[31mhttps://evil.example/" + "x" * 300
              + "\nfatal: fsck error in packed object\n")
    reason = fsck_reason(stderr)
    assert reason.startswith("fsck: gitmodulesUrl: disallowed submodule url: -?[31mhttps://")
    assert len(reason) == bundle.REASON_MAX and reason.endswith("...")
    assert fsck_reason("fatal: pack has bad object at offset 12\n") == (
        "the bundle's pack was refused: fatal: pack has bad object at offset 12")


def box() -> ArmBox:
    return ArmBox("x", "A", "r", "img", "vol", None, disk_mb=1, memory_mb=64)


def keeping(main: Path, base: str, scratch: Path, *, on_base: bool = True) -> work.Keeping:
    return work.Keeping(main, box(), "cid", base, "bakeoff-arms/x/first/A", "msg", [],
                        scratch, threading.Lock(), branch_on_base=on_base)


def test_refused_or_absent_work_stands_on_the_base(repos: tuple[Path, Path, str],
                                                   tmp_path: Path) -> None:
    """A refused bundle, or no work at all: the arm's branch is the base, and the record
    says why (work_refused / no_work), never a rig error."""
    main, arm, base = repos
    forged = make_bundle(arm, duplicate_tree_commit(arm, base), base, tmp_path / "w.bundle")
    refused = work._import(keeping(main, base, tmp_path / "s"),
                           Taken(head=base, tip="f" * 40, bundle=forged))
    assert (refused.commit, refused.commits, refused.no_work) == (base, 0, None)
    assert refused.work_refused == "fsck: duplicateEntries: contains duplicate file entries"
    assert git(main, "rev-parse", "bakeoff-arms/x/first/A") == base
    assert not forged.exists()  # the bundle is not kept around
    none = work._import(keeping(main, base, tmp_path / "s"),
                        Taken(no_work="the checkout has no .git directory"))
    assert (none.commit, none.work_refused, none.no_work) == (
        base, None, "the checkout has no .git directory")
