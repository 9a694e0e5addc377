"""Tars to and from the engine (`runner.containers.archive`): what goes in carries its
owner, mode and mtime; what comes back lands under one folder of the host, or nowhere."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from runner.containers import archive, gateway
from runner.errors import InfraError


def chunked(data: bytes, size: int = 7) -> list[bytes]:
    """The engine streams an archive in chunks that cut members anywhere."""
    return [data[i:i + size] for i in range(0, len(data), size)]


def members(data: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: m for m in tar.getmembers()}


def test_a_packed_entry_carries_its_owner_mode_and_a_fractional_mtime() -> None:
    data = archive.pack([archive.Member("records", None, 0o755, 1000),
                         archive.Member("config.json", b"{}", 0o644, 0, 1700000000.25)])
    found = members(data)
    assert (found["records"].isdir(), found["records"].uid, found["records"].gid,
            found["records"].mode) == (True, 1000, 1000, 0o755)
    assert (found["config.json"].uid, found["config.json"].mode) == (0, 0o644)
    assert found["config.json"].mtime == pytest.approx(1700000000.25)


def test_the_gateway_s_state_is_its_config_root_s_and_records_the_sandbox_user_s() -> None:
    """What replaced the host's chown: the gateway can write records/ and nothing else."""
    found = members(gateway.state_archive({"tokens": {}}))
    assert set(found) == {"config.json", "records"}
    assert (found["config.json"].uid, found["config.json"].mode) == (0, 0o644)
    assert (found["records"].uid, found["records"].mode) == (1000, 0o755)
    with tarfile.open(fileobj=io.BytesIO(gateway.state_archive({"tokens": {}}))) as tar:
        config = tar.extractfile("config.json")
        assert config is not None and json.loads(config.read()) == {"tokens": {}}


def test_what_comes_back_lands_under_its_folder_and_unchanged_files_are_left_alone(
        tmp_path: Path) -> None:
    data = archive.pack([archive.Member("records", None, 0o755, 1000),
                         archive.Member("records/s1", None, 0o755, 1000),
                         archive.Member("records/s1/requests.jsonl", b'{"seq": 1}\n', 0o600,
                                        1000, 1700000000)])
    assert archive.unpack(chunked(data), tmp_path, "records", "the test") == 1
    lines = tmp_path / "records" / "s1" / "requests.jsonl"
    assert lines.read_bytes() == b'{"seq": 1}\n'
    assert int(lines.stat().st_mtime) == 1700000000
    os.utime(lines, (1700000000, 1700000000))
    assert archive.unpack(chunked(data), tmp_path, "records", "the test") == 0
    grown = archive.pack([archive.Member("records/s1/requests.jsonl",
                                         b'{"seq": 1}\n{"seq": 2}\n', 0o600, 1000, 1700000000)])
    assert archive.unpack(chunked(grown), tmp_path, "records", "the test") == 1
    assert lines.read_bytes().count(b"\n") == 2
    assert sorted(p.name for p in lines.parent.iterdir()) == ["requests.jsonl"]  # no .part


@pytest.mark.parametrize("name", ["../escape", "records/../../escape", "/etc/escape",
                                  "other/file", "records/../other"])
def test_a_member_outside_the_folder_is_refused_and_nothing_is_written(
        tmp_path: Path, name: str) -> None:
    data = archive.pack([archive.Member(name, b"x")])
    destination = tmp_path / "run"
    destination.mkdir()
    with pytest.raises(InfraError, match="which is not under records/"):
        archive.unpack(chunked(data), destination, "records", "the test")
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_a_link_is_refused(tmp_path: Path) -> None:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        link = tarfile.TarInfo("records/link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    with pytest.raises(InfraError, match="is not a regular file"):
        archive.unpack(chunked(out.getvalue()), tmp_path, "records", "the test")
    assert not (tmp_path / "records" / "link").exists()


def test_a_broken_stream_is_an_infra_error(tmp_path: Path) -> None:
    data = archive.pack([archive.Member("records/a", b"y" * 2000)])
    with pytest.raises(InfraError, match="does not read"):
        archive.unpack(chunked(data[:700]), tmp_path, "records", "the test")
