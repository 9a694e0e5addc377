"""An exec's output is whole however late we read it (the real engine).

docker sends an exec's output on the connection right after its `101 UPGRADED` headers.
On a loaded machine our reading thread may run late: the headers and the first output
then come in one read, into the buffered file http.client reads headers from, and the
SDK, which reads the frames from the socket under that file, never saw them (CI: a
sandbox's `echo ok` read as nothing; an agent's log without its first line). Here the
reader is made late on purpose (http.client's header read waits 0.3 s first), and every
exec path of ours reads all of it."""

from __future__ import annotations

import http.client
import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from runner.containers.backend import LABEL_EXPERIMENT, ContainerSpec, Labels, Resources
from runner.containers.engine import Engine
from runner.containers.held_exec import exec_with_input
from runner.containers.images import BuiltImage

LATE_S = 0.3
SAY = ["sh", "-c", "echo ok; echo err >&2"]


@pytest.fixture
def container(engine: Engine, built_images: dict[str, BuiltImage]) -> Iterator[str]:
    name = f"it-{secrets.token_hex(4)}"
    spec = ContainerSpec(image=built_images["python"].image_id, command=("sleep", "300"),
                         labels=Labels(name, "exec-output", "A", "r1"),
                         resources=Resources(0.5, 256, 64), user="1000:1000",
                         purpose="the exec output probe")
    container_id = engine.create(spec)
    engine.start(container_id)
    yield container_id
    engine.remove_labelled({LABEL_EXPERIMENT: name})


@pytest.fixture
def late(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every HTTP answer's headers read LATE_S late: the exec has printed by then."""
    begin: Callable[[Any], None] = http.client.HTTPResponse.begin

    def late_begin(self: Any) -> None:
        time.sleep(LATE_S)
        begin(self)
    monkeypatch.setattr(http.client.HTTPResponse, "begin", late_begin)


def test_the_late_read_loses_the_sdk_s_own_exec_output(engine: Engine, container: str,
                                                       late: None) -> None:
    """The condition is real: the SDK's `exec_start` reads nothing of the same exec."""
    api = engine.client.api
    exec_id = api.exec_create(container, SAY, user="1000:1000")["Id"]
    assert api.exec_start(exec_id, demux=True) == (None, None)


@pytest.mark.parametrize("read_late", [False, True], ids=["on-time", "late"])
def test_an_exec_s_output_is_whole_read_on_time_or_late(
        engine: Engine, container: str, request: pytest.FixtureRequest,
        read_late: bool) -> None:
    if read_late:
        request.getfixturevalue("late")
    for _ in range(3):
        done = engine.exec(container, SAY, user="1000:1000", workdir="/tmp", deadline_s=60)
        assert (done.exit_code, done.stdout, done.stderr) == (0, "ok\n", "err\n")
    # A stream (an agent's log): its first line, then what comes later.
    running = engine.exec_stream(container, ["sh", "-c", "echo first; sleep 0.5; echo second"],
                                 user="1000:1000", workdir="/tmp", env={})
    assert b"".join(running.output) == b"first\nsecond\n"
    running.close()
    # A held exec (psql's way): a banner printed before any input, then the input's echo.
    held = exec_with_input(engine, container, ["sh", "-c", "echo banner; cat"], b"line\n",
                           user="1000:1000", timeout_s=30)
    assert (held.exit_code, held.stdout, held.stderr) == (0, b"banner\nline\n", b"")
