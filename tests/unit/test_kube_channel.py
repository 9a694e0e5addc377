"""Exec and attach over the Kubernetes API's channel protocol (issue 36, step 4), against
the emulator on loopback: every byte of stdin in (megabytes, compared by digest: an
anchor's large writes were silently truncated), every byte out, the exit code from the
status channel, a deadline that cuts a stream that never ends, and an API that offers
only v4 (which cannot close stdin and keep reading) refused."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.containers.kube.channel import ExecCommand, Streamed, exit_code, in_dir, stream
from runner.containers.kube.config import KubeTarget
from runner.errors import EngineFailedError, EngineRefusedError
from tests.unit.kube_emulator import Emulator, emulated

NS = "bakeoff"


@pytest.fixture()
def emulator() -> Iterator[Emulator]:
    with emulated() as found:
        yield found


@pytest.fixture()
def target(emulator: Emulator) -> KubeTarget:
    return KubeTarget("test", emulator.url, NS)


def test_megabytes_of_stdin_go_in_whole_and_come_back_whole(
        target: KubeTarget, emulator: Emulator) -> None:
    data = os.urandom(4 * 1024 * 1024 + 3)
    done = stream(target, "p", "main", command=["cat"], stdin=io.BytesIO(data), deadline_s=60)
    assert (done.exit_code, len(done.stdout), done.stderr) == (0, len(data), b"exec cat\n")
    assert hashlib.sha256(done.stdout).digest() == hashlib.sha256(data).digest()
    assert emulator.received[("p", "exec")] == data
    assert emulator.requests == [("GET", f"/api/v1/namespaces/{NS}/pods/p/exec",
                                  "container=main&stdout=true&stderr=true&stdin=true&"
                                  "command=cat")]


def test_an_attach_sends_the_inputs_and_ends_with_the_containers_status(
        target: KubeTarget, emulator: Emulator) -> None:
    done = stream(target, "p", "driver", command=None, stdin=io.BytesIO(b"5\nhello"),
                  deadline_s=10)
    assert done == Streamed(0, b"5\nhello", b"attach cat\n")
    assert emulator.received[("p", "attach")] == b"5\nhello"
    assert emulator.requests[-1][1] == f"/api/v1/namespaces/{NS}/pods/p/attach"


def test_the_exit_code_is_the_status_channels_and_output_is_kept_whole(
        target: KubeTarget) -> None:
    assert stream(target, "p", "main", command=["exit", "3"], stdin=None,
                  deadline_s=10) == Streamed(3, b"", b"exec exit 3\n")
    emitted = stream(target, "p", "main", command=["emit", str(5 * 1024 * 1024)], stdin=None,
                     deadline_s=60)
    assert (emitted.exit_code, emitted.stdout) == (0, b"x" * (5 * 1024 * 1024))


def test_a_stream_past_its_deadline_is_cut_and_the_engine_declared_stuck(
        target: KubeTarget) -> None:
    with pytest.raises(EngineFailedError) as stuck:
        stream(target, "p", "main", command=["hang"], stdin=io.BytesIO(b"x"), deadline_s=0.5)
    assert stuck.value.message == "the stream of exec in p/main outlived its deadline"


def test_an_api_that_offers_only_v4_is_refused(target: KubeTarget,
                                              emulator: Emulator) -> None:
    emulator.protocols = ("v4.channel.k8s.io",)
    with pytest.raises(EngineRefusedError) as refused:
        stream(target, "p", "main", command=["cat"], stdin=io.BytesIO(b"x"), deadline_s=10)
    assert refused.value.message == (f"the engine at {emulator.url} refused to open a stream: "
                                     "the API offers v4.channel.k8s.io, not v5.channel.k8s.io")
    assert refused.value.hint == "use a cluster whose API speaks v5 (Kubernetes 1.30+)"


def test_the_status_message_says_the_exit_code_or_why_nothing_ran() -> None:
    assert exit_code({"status": "Success"}) == 0
    assert exit_code({"status": "Failure", "reason": "NonZeroExitCode", "details": {
        "causes": [{"reason": "ExitCode", "message": "137"}]}}) == 137
    with pytest.raises(EngineFailedError) as failed:
        exit_code({"status": "Failure", "reason": "InternalError",
                   "message": 'container "main" not found'})
    assert failed.value.message == 'the command did not run: container "main" not found'


def test_an_execs_variables_go_on_its_stdin_and_the_real_shell_sets_them_exactly(
        tmp_path: Path) -> None:
    """`in_dir`'s command run by this machine's sh and coreutils, as a Pod's would: every
    value exactly (quotes, `$(...)`, newlines, a trailing one, `=`, empty, unicode), the
    program in its directory with its arguments as given, and its stdin what follows the
    variables; none of them in the command."""
    env = {"PLAIN": "sk-ant-1", "SPACED": "  a b  ", "QUOTES": "'\"`$(touch pwned)`\\",
           "LINES": "one\ntwo\n", "EQUALS": "a=b=c", "EMPTY": "", "UNICODE": "é✓"}
    command = in_dir(["python3", "-c", DUMP, "an arg"], str(tmp_path), env)
    assert not any(value in part for value in env.values() if value
                   for part in command.argv)
    done = subprocess.run(command.argv, input=command.preamble + b"the rest\n",
                          capture_output=True, timeout=30, check=True, env={
                              "PATH": os.environ["PATH"]})
    seen = json.loads(done.stdout)
    assert {key: seen["env"][key] for key in env} == env
    assert (seen["cwd"], seen["argv"], seen["stdin"]) == (str(tmp_path), ["an arg"],
                                                           "the rest\n")
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()
    assert in_dir(["true"], "/", {}) == ExecCommand(["env", "-C", "/", "--", "true"], b"")
    with pytest.raises(ValueError, match=r"^not a variable's name: '1X', 'A;B'$"):
        in_dir(["true"], "/", {"A;B": "1", "1X": "2"})


DUMP = ("import json, os, sys; print(json.dumps({'env': dict(os.environ), 'cwd': os.getcwd(),"
        " 'argv': sys.argv[1:], 'stdin': sys.stdin.read()}))")
