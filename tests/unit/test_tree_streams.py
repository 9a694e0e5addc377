"""Trees read streamed and capped from git (issue 20, class 6), with real git and no
docker: a listing stopped at the cap (git killed, not read to its end), blobs held only
when small, the rest streamed into the sample's tar and hashed on the way, and every
other listing of an arm's tree bounded; the driver's outputs decoded as they stream."""

from __future__ import annotations

import base64
import hashlib
import io
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from rig.sample.tree import Caps, UnsafeTreeError
from runner import workspace
from runner.containers.images import prepared
from runner.containers.samples.driver import MARK, parse_outputs, read_outputs
from runner.containers.samples.tree import HELD_BYTES, read_tree, sha256_of, write_tar
from runner.workspace import merge
from tests.integration.tree_lab import FILE, TREE, blob, commit_with, fan, tree

MIB = 1024 * 1024


def repo_at(path: Path, files: dict[str, bytes]) -> str:
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    for name, data in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(data)
    subprocess.run(["git", "add", "-A"], cwd=path, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"],
                   cwd=path, check=True)
    return workspace.run_git(path, "rev-parse", "HEAD")


def test_a_million_file_listing_is_stopped_at_the_cap(tmp_path: Path) -> None:
    """1000 x 1000 empty files: `read_tree` stops git at entry 100,001, in a second or
    two (the whole listing takes git over ten)."""
    base = repo_at(tmp_path, {"app.py": b"V = 1\n"})
    bomb = fan(tmp_path, (FILE, blob(tmp_path, b"")), [1000, 1000])
    head = commit_with(tmp_path, base, {b"bomb": (TREE, bomb)})
    started = time.monotonic()
    with pytest.raises(UnsafeTreeError, match="more than 100000 files"):
        read_tree(tmp_path, head, Caps(100_000, 2048 * MIB))
    assert time.monotonic() - started < 8


def test_directories_count_as_entries(tmp_path: Path) -> None:
    base = repo_at(tmp_path, {"app.py": b"V = 1\n"})
    dirs = fan(tmp_path, (TREE, tree(tmp_path, {b"f": (FILE, blob(tmp_path, b""))})), [60])
    head = commit_with(tmp_path, base, {b"d": (TREE, dirs)})
    assert len(read_tree(tmp_path, head, Caps(122, MIB))) == 61  # 61 files, 61 dirs
    with pytest.raises(UnsafeTreeError, match="more than 121 files"):
        read_tree(tmp_path, head, Caps(121, MIB))


def test_a_name_of_a_megabyte_is_cut_and_refused(tmp_path: Path) -> None:
    """git takes a tree entry of any length: the listing's record is cut, never held,
    and the path is refused as too long."""
    base = repo_at(tmp_path, {"app.py": b"V = 1\n"})
    head = commit_with(tmp_path, base, {b"n" * MIB: (FILE, blob(tmp_path, b"x"))})
    with pytest.raises(UnsafeTreeError, match="over PATH_MAX"):
        read_tree(tmp_path, head)
    records = list(workspace.records(io.BytesIO(b"a\0" + b"b" * 5000 + b"\0c"), longest=100))
    assert records == [b"a", b"b" * 100, b"c"]


def test_large_blobs_are_not_held_and_stream_into_the_tar(tmp_path: Path) -> None:
    """A 3 MiB blob and 30 x 1 MiB blobs (past the 24 MiB held): what is not held is
    streamed from git into the tar file, byte for byte, its sha256 taken on the way."""
    files = {"big.bin": bytes(range(256)) * (3 * MIB // 256),
             **{f"m/{i:02d}.bin": bytes([i]) * MIB for i in range(30)}, "small.py": b"x = 1\n"}
    head = repo_at(tmp_path / "r", files)
    found = read_tree(tmp_path / "r", head)
    held = sorted(p for p, e in found.items() if e.held)
    assert "big.bin" not in held and "small.py" in held
    assert sum(found[p].length for p in held) <= HELD_BYTES
    out = tmp_path / "tree.tar"
    assert any(not found[f"m/{i:02d}.bin"].held for i in range(30))
    digests = write_tar(out, found, tmp_path / "r", ["big.bin", "m/29.bin"])
    with tarfile.open(out) as tar:
        got = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]
    assert got == files
    assert digests == {p: hashlib.sha256(files[p]).hexdigest() for p in ("big.bin", "m/29.bin")}
    assert sha256_of(tmp_path / "r", {"b": found["big.bin"]}) == {
        "b": hashlib.sha256(files["big.bin"]).hexdigest()}


def test_names_that_are_not_utf8_are_bytes_both_ways(tmp_path: Path) -> None:
    name = "caf\udce9/new\nline.txt"
    head = repo_at(tmp_path / "r", {name: b"data\n", "ok.txt": b"ok\n"})
    found = read_tree(tmp_path / "r", head)
    assert sorted(found) == [name, "ok.txt"]
    assert workspace.files_at(tmp_path / "r", head) == [name, "ok.txt"]
    write_tar(tmp_path / "t.tar", found, tmp_path / "r")
    with tarfile.open(tmp_path / "t.tar", encoding="utf-8", errors="surrogateescape") as tar:
        assert sorted(tar.getnames()) == [name, "ok.txt"]
    assert workspace.grep_files(tmp_path / "r", head, ["data"]) == [name]


def test_the_diff_of_a_tree_bomb_is_listed_capped(tmp_path: Path) -> None:
    base = repo_at(tmp_path, {"app.py": b"V = 1\n"})
    head = commit_with(tmp_path, base, {b"bomb": (TREE, fan(
        tmp_path, (FILE, blob(tmp_path, b"")), [100, 1000]))})
    paths, cut = merge.listed(tmp_path, base, head, limit=5000)
    assert (len(paths), cut) == (5000, True)
    assert merge.listed(tmp_path, base, head, limit=200_000)[1] is False


def test_a_stream_past_its_time_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    repo_at(tmp_path, {"app.py": b"V = 1\n"})
    monkeypatch.setattr(workspace.git, "GIT_TIMEOUT_S", 0.5)
    started = time.monotonic()
    with pytest.raises(workspace.GitError, match=r"took over 0\.5s"), workspace.git_stream(
            tmp_path, "-c", "alias.wait=!sleep 3", "wait") as out:
        out.read()
    assert time.monotonic() - started < 2.5


def test_the_dependency_hash_is_the_one_keys_were_made_with(tmp_path: Path) -> None:
    """Streamed now; the same digest as `ls-tree -r` held whole gave (prepared images
    and the contracts that name them stay valid)."""
    head = repo_at(tmp_path, {"pyproject.toml": b"[project]\n", "sub/package.json": b"{}",
                              "app.py": b"V = 1\n", "sub/requirements.txt": b"x\n"})
    listing = workspace.run_git(tmp_path, "ls-tree", "-r", head)
    digest = hashlib.sha256()
    for line in sorted(listing.splitlines()):
        meta, _, path = line.partition("\t")
        if path.rsplit("/", 1)[-1] in prepared.DEPENDENCY_FILES:
            digest.update(f"{path}\0{meta.split()[2]}\n".encode())
    assert prepared.dependency_hash(tmp_path, head) == digest.hexdigest()


# -- the driver's outputs ----------------------------------------------------------------

def _outputs_line(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return MARK + base64.b64encode(out.getvalue())


@pytest.mark.parametrize("log", [
    b"", b"no mark\n", b"bakeoff-out:!!\n", b"bak",
    b"noise\n" + _outputs_line({"ready": b"", "log": b"x\n" * 5000}) + b"\n",
    _outputs_line({"log": b"first"}) + b"\n" + _outputs_line({"log": b"last"}),
    _outputs_line({"log": b"x"}) + b"\nbakeoff-out:zz!\n",
])
def test_outputs_stream_as_they_decode_whole(log: bytes) -> None:
    """Decoded as the log streams, in pieces of any size, the driver's outputs are what the
    whole log gives: the last MARK line, nothing when it does not decode."""
    whole = parse_outputs(log)
    for size in (1, 3, 4096):
        assert read_outputs([log[i:i + size] for i in range(0, len(log), size)]) == whole


def test_outputs_past_the_limit_are_not_the_drivers() -> None:
    line = _outputs_line({"log": bytes(100_000)})
    assert read_outputs([line]).files["log"] == bytes(100_000)
    assert read_outputs([line], limit=50_000).files == {}


def test_a_tree_naming_objects_the_repository_has_not_is_refused(tmp_path: Path) -> None:
    """A tree written with `--literally` whose blob or subtree does not exist (`ls-tree`
    says `BAD`, or fails): refused as unsafe work, never a ValueError or a GitError that
    stops the command."""
    base = repo_at(tmp_path, {"app.py": b"V = 1\n"})
    missing = "12" * 20
    for mode in (FILE, TREE):
        head = commit_with(tmp_path, base, {b"x": (mode, missing)})
        with pytest.raises(UnsafeTreeError, match=r"does not have|git cannot list it"):
            read_tree(tmp_path, head)


def test_symlink_targets_count_as_names(tmp_path: Path) -> None:
    """Targets are always held (the tar needs them): 20,000 symlinks of 4000-byte targets
    (80 MB, well within disk_mb) are past the cap of names, not 80 MB held."""
    base = repo_at(tmp_path, {"app.py": b"V = 1\n"})
    links = fan(tmp_path, ("120000", blob(tmp_path, b"t" * 4000)), [20, 1000])
    head = commit_with(tmp_path, base, {b"links": (TREE, links)})
    with pytest.raises(UnsafeTreeError, match="bytes of names"):
        read_tree(tmp_path, head)


def test_what_the_rig_reads_is_held_first(tmp_path: Path) -> None:
    """Thirty files of 1 MiB of data and a Go test file and a conftest of 900 KB: the two
    the rig's planning reads are held though the data alone would use up the budget."""
    files = {**{f"data/{i:02d}.bin": bytes([i]) * (MIB - 1) for i in range(30)},
             "pkg/x_test.go": b"package pkg\n" + b"// x\n" * 180_000,
             "tests/conftest.py": b"#" * 900_000}
    head = repo_at(tmp_path, files)
    found = read_tree(tmp_path, head)
    assert found["pkg/x_test.go"].held and found["tests/conftest.py"].held
    assert sum(found[p].held for p in files if p.startswith("data/")) == 22
