"""The docker SDK's edge: how a client reaches the engine (DOCKER_HOST: unix, tcp, or ssh
through this machine's own `ssh`), and where docker's exceptions end: `translated` maps
each to the project's own (`runner.errors`: a 404 is `NotFoundError`, a 409
`ConflictError`, another refusal `EngineRefusedError`, a broken or absent engine
`SandboxUnavailableError` / `EngineUnreachableError`; the engine's own failures named
first, `failures.named`), each naming the engine, so no command imports `docker.errors`.
Also the end of a container's stdin over any transport (`end_of_input`) and a stream
whose dropped connection is the project's error (`iter_stream`)."""

from __future__ import annotations

import contextlib
import io
import os
import select
import shutil
import socket
import threading
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

import docker
import docker.errors
import requests

from runner.containers import failures
from runner.errors import (
    ConflictError,
    EngineError,
    EngineFailedError,
    EngineRefusedError,
    EngineUnreachableError,
    NotFoundError,
)

T = TypeVar("T")
SSH_REAP_S = 6 * 3600  # an ssh attach outliving this is ended (no sample lasts that)
ENGINE_HINT = ("check that `docker info` answers (`bakeoff-sandbox doctor --fix` starts an "
               "engine when none does)")
LOCAL_ENGINE = "unix:///var/run/docker.sock"
REFUSALS: dict[int, type[EngineRefusedError]] = {404: NotFoundError, 409: ConflictError}
DOCKER_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)


def address() -> str:
    """The address a client from the environment talks to: DOCKER_HOST, else the socket."""
    return os.environ.get("DOCKER_HOST") or LOCAL_ENGINE


def client_options(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """How the SDK reaches DOCKER_HOST: `ssh://` through this machine's own `ssh` (its
    config, keys, agent and known hosts, as the docker CLI and Compose do), not through
    paramiko; tcp and the socket as the SDK does by itself."""
    host = (os.environ if environ is None else environ).get("DOCKER_HOST", "")
    if not host.startswith("ssh://"):
        return {}
    if shutil.which("ssh") is None:
        raise EngineUnreachableError(f"DOCKER_HOST is {host}, but there is no ssh client here",
                                     hint="install openssh-client (apt-get install "
                                          "openssh-client), or use tcp://")
    return {"use_ssh_client": True}


def translated(error: Exception, what: str, where: str | None = None) -> EngineError:
    """docker's (or its HTTP library's) exception as the project's own: the one mapping.
    A refusal keeps the engine's words and status; anything else means the engine (or
    the connection to it) broke. `where`: the engine's address (else the environment's)."""
    where = where or address()
    named = failures.named(error, what, where)
    if named is not None:
        return named
    if isinstance(error, docker.errors.NotFound):
        return NotFoundError(where, what, str(error.explanation or error),
                             status=error.status_code or 404)
    if isinstance(error, docker.errors.APIError) and error.is_client_error():
        status = int(error.status_code or 400)
        return REFUSALS.get(status, EngineRefusedError)(
            where, what, str(error.explanation or error), status=status)
    return EngineFailedError(f"the engine at {where} failed to {what}: {error}",
                             hint=ENGINE_HINT)


@contextlib.contextmanager
def mapped(what: str, where: str | None = None) -> Iterator[None]:
    """docker's exceptions raised in the block, as the project's own (`translated`)."""
    try:
        yield
    except DOCKER_ERRORS as error:
        raise translated(error, what, where) from error


def is_transient(error: Exception) -> bool:
    if isinstance(error, requests.exceptions.ConnectionError | requests.exceptions.Timeout):
        return True
    return isinstance(error, docker.errors.APIError) and error.is_server_error()


def end_of_input(raw: Any) -> None:
    """Tell the engine a container's stdin has ended, keeping what was sent. A socket is
    half-closed. Over `ssh://` the SDK's socket is an `ssh` process (`docker system
    dial-stdio` on the far side): its stdin closed is the end of input, and it must not
    be terminated (its close() would: the bytes still in flight would be lost); it ends
    by itself when the engine closes the attach, and a thread of ours reaps it."""
    proc = getattr(raw, "proc", None)
    if proc is None:
        raw.shutdown(socket.SHUT_WR)
        return
    proc.stdin.close()
    threading.Thread(target=_reap, args=(proc,), daemon=True).start()


def await_output(raw: Any, file: io.BufferedIOBase, timeout_s: float) -> None:
    """Before a read of `file` (what `raw`, a hijacked connection, sends): a socket's
    read is bounded by its timeout. Over `ssh://` the output is the `ssh` process's pipe,
    which no socket timeout reaches: wait up to `timeout_s` for it to hold something (or
    its end), unless the buffered file already does (looked at without waiting, the
    pipe non-blocking for that one look); else `TimeoutError`."""
    if getattr(raw, "proc", None) is None or not isinstance(file, io.BufferedReader):
        return
    fd = file.fileno()
    os.set_blocking(fd, False)
    try:
        buffered = file.peek(1)  # b"" when nothing came yet (or at the end)
    finally:
        os.set_blocking(fd, True)
    if not buffered and not select.select([fd], [], [], timeout_s)[0]:
        raise TimeoutError


def _reap(proc: Any) -> None:
    try:
        proc.wait(timeout=SSH_REAP_S)
    except Exception:  # still attached long past any sample: end it
        with contextlib.suppress(Exception):
            proc.terminate()
            proc.wait(timeout=10)


def iter_stream(stream: Iterator[T], what: str = "stream its answer",
                where: str | None = None) -> Iterator[T]:
    """Wrap a docker stream so a dropped connection becomes the project's error."""
    with mapped(what, where):
        yield from stream
