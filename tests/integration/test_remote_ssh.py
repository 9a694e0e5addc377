"""`DOCKER_HOST=ssh://...` (issue 24): the second engine of tests/integration/remote_engine.py
reached over ssh, as a user reaches a bigger box: the SDK through this machine's `ssh`
(runner.containers.engine.client_options), the docker CLI the same way.

sshd runs inside the second engine's container (its image has openssh-server; started
here by exec, with a key made for this test); this machine's `ssh` is given a config of
the test's own (the key, the engine's address, no known-hosts file of the user's) through
an `ssh` first on PATH that adds `-F CONFIG`. Traffic: to the second engine's address on
the internal network the fixture made, nothing else."""

from __future__ import annotations

import io
import os
import secrets
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from runner.containers.backend import LABEL_EXPERIMENT
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.errors import SandboxUnavailableError
from tests.integration.helpers import flat_record, make_target
from tests.integration.remote_engine import RemoteEngine, copy_image

SSH_CONFIG = """Host remote-engine
  HostName {address}
  User root
  IdentityFile {key}
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
  BatchMode yes
  ConnectTimeout 10
"""


def authorized(public_key: bytes) -> bytes:
    """/root/.ssh/authorized_keys as a tar for put_archive (0700 dir, 0600 file)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        folder = tarfile.TarInfo(".ssh")
        folder.type, folder.mode = tarfile.DIRTYPE, 0o700
        tar.addfile(folder)
        entry = tarfile.TarInfo(".ssh/authorized_keys")
        entry.size, entry.mode = len(public_key), 0o600
        tar.addfile(entry, io.BytesIO(public_key))
    return out.getvalue()


def ssh_environment(engine: Engine, remote: RemoteEngine, tmp_path: Path) -> dict[str, str]:
    """sshd up in the second engine's container with this test's key; the environment
    whose `ssh` reaches it as `remote-engine`."""
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
                   check=True, timeout=30)
    outer = engine.client.containers.get(remote.container_id)
    assert outer.put_archive("/root", authorized(key.with_suffix(".pub").read_bytes()))
    started = outer.exec_run(["sh", "-c", "[ -e /run/sshd.pid ] || { ssh-keygen -A && "
                              "mkdir -p /run/sshd && /usr/sbin/sshd -o "
                              "PasswordAuthentication=no; }"])  # once per engine
    assert started.exit_code == 0, started.output
    config = tmp_path / "ssh_config"
    config.write_text(SSH_CONFIG.format(address=remote.address, key=key))
    wrapper = tmp_path / "bin" / "ssh"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec /usr/bin/ssh -F {config} "$@"\n')
    wrapper.chmod(0o755)
    return {**os.environ, "PATH": f"{wrapper.parent}:{os.environ['PATH']}",
            "DOCKER_HOST": "ssh://remote-engine"}


def test_an_oracle_sample_runs_on_an_engine_reached_over_ssh(
        engine: Engine, built_images: dict[str, BuiltImage], remote_engine: RemoteEngine,
        tmp_path: Path) -> None:
    """The SDK (the oracle's sample: create, start, stdin, logs, remove; its Postgres
    administered by a held psql through exec) and the docker
    CLI both reach the second engine through ssh; the record names it by its address
    and its own ID; nothing of the sample is left there."""
    for name in ("base", "python", "postgres"):
        copy_image(engine, remote_engine.engine, built_images[name].tag)
    environ = ssh_environment(engine, remote_engine, tmp_path)
    info = remote_engine.info()
    cli = subprocess.run(["docker", "info", "--format", "{{.ID}}"], env=environ,
                         capture_output=True, text=True, timeout=120, check=False)
    assert (cli.returncode, cli.stdout.strip()) == (0, info["ID"]), cli.stderr

    repo = tmp_path / "repo"
    name = f"ssh-{secrets.token_hex(3)}"
    make_target(repo, ["A"], name=name)  # with Postgres: administered by psql over ssh
    done = subprocess.run([sys.executable, "-m", "runner.cli", "oracle", "--commit", "HEAD",
                           "--check", "success", "--samples", "1"], cwd=repo, env=environ,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "first/oracle/success/1: FAIL tests_failed (0 passed, 1 failed)" in done.stderr \
        + done.stdout
    [record] = repo.glob(f".bakeoff/{name}/oracle/*/samples/oracle/success/1.json")
    assert flat_record(record)["engine"] == {
        "host": "ssh://remote-engine", "id": info["ID"], "name": info["Name"]}
    assert remote_engine.engine.labelled("container", {LABEL_EXPERIMENT: name}) == []


def test_a_held_exec_that_stops_answering_over_ssh_ends_at_its_deadline(
        engine: Engine, built_images: dict[str, BuiltImage], remote_engine: RemoteEngine,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over ssh:// an exec's output is the ssh process's pipe, which a socket's timeout
    never reaches: a held exec (psql's, the database's administration) whose program
    stops answering is `SandboxUnavailableError` at its deadline, as over tcp or the local
    socket, never a wait without end. Its twin: what the program says is read."""
    copy_image(engine, remote_engine.engine, built_images["base"].tag)
    environ = ssh_environment(engine, remote_engine, tmp_path)
    for key in ("PATH", "DOCKER_HOST"):
        monkeypatch.setenv(key, environ[key])
    over_ssh = Engine()
    name = f"ssh-held-{secrets.token_hex(3)}"
    container = remote_engine.engine.client.containers.run(
        built_images["base"].tag, ["sleep", "300"], detach=True, network_mode="none",
        labels={LABEL_EXPERIMENT: name})
    try:
        with over_ssh.hold_exec(container.id, ["sh", "-c", "echo ready; cat >/dev/null"],
                                user="root", what="a silent exec") as held:
            assert held.until(b"ready", 60).stdout == b""  # what came is read
            started = time.monotonic()
            with pytest.raises(SandboxUnavailableError,
                               match="a silent exec: no answer in time"):
                held.until(b"never", 3)
            assert 3 <= time.monotonic() - started < 10
    finally:
        remote_engine.engine.remove_labelled({LABEL_EXPERIMENT: name})
