"""The engine's own failures, named (issue 31): its disk full, no engine answering at its
address, and the engine stopping under a call, each an `runner.errors.EngineError` that
names the engine and the fix (exit 3). `runner.containers.dockerclient.translated`, the one
mapping of docker's exceptions, asks `named` first. The rules read what docker-py,
requests and urllib3 really raise (and the engine's own words), as measured on the
tests' second engine stopped, restarted and filled (tests/integration/remote_engine.py).
"""

from __future__ import annotations

import errno
import http.client
import re
import socket
from collections.abc import Iterator

import docker.errors
import requests
import urllib3

from runner import errors

# The engine's own failures (`named`), as docker-py, requests and urllib3 raise them.
# Its disk full: its answer's words. No engine at the address: the connection never
# opened. The engine stopping under a call: the connection cut mid-answer, or its answer
# while it goes down (containerd already gone: "transport is closing"; its volume store
# closed: "get VOLUME: database not open").
DISK_FULL = "no space left on device"
NO_POOL = "non-overlapping ipv4 address pool"  # its networks used every pool it has
SHUTTING_DOWN = ("transport is closing", "database not open", "shutting down")
UNREACHABLE = (ConnectionRefusedError, FileNotFoundError, socket.gaierror, socket.timeout,
               urllib3.exceptions.NewConnectionError, urllib3.exceptions.ConnectTimeoutError,
               requests.exceptions.ConnectTimeout)
NAMED = (errors.EngineDiskFullError, errors.EngineNetworksExhaustedError,
         errors.EngineNotAnsweringError, errors.EngineRestartedError)  # what `named` says
NO_ROUTE = (errno.EHOSTUNREACH, errno.ENETUNREACH)
CUT = (http.client.RemoteDisconnected, http.client.IncompleteRead, ConnectionResetError,
       ConnectionAbortedError, BrokenPipeError, urllib3.exceptions.ProtocolError,
       requests.exceptions.ChunkedEncodingError)


def named(error: Exception, what: str, where: str) -> errors.EngineError | None:
    """The engine's own failures, named (issue 31), else None: its disk full (its answer
    says "no space left on device"), no engine answering at `where` (refused, no route,
    timed out, no socket), or the engine stopping under the call (the connection cut in
    the middle of an answer, or the engine saying it is going down)."""
    if isinstance(error, docker.errors.APIError):
        answer = str(error.explanation or error)
        if DISK_FULL in answer.lower():
            return errors.EngineDiskFullError(where, what, answer)
        if NO_POOL in answer.lower():
            return errors.EngineNetworksExhaustedError(where, what, answer)
        if error.is_server_error() and any(s in answer.lower() for s in SHUTTING_DOWN):
            return errors.EngineRestartedError(where, what, f"it answered: {answer}")
        return None
    causes = list(_causes(error))
    if any(isinstance(c, requests.exceptions.ReadTimeout) for c in causes):
        return errors.EngineNotAnsweringError(where, what, "no answer in time")
    if any(isinstance(c, UNREACHABLE) or getattr(c, "errno", None) in NO_ROUTE
           for c in causes):
        return errors.EngineNotAnsweringError(where, what, _why(causes))
    if any(isinstance(c, CUT) for c in causes):
        return errors.EngineRestartedError(where, what,
                                           f"the connection was cut: {_why(causes)}")
    return None


def _causes(error: BaseException) -> Iterator[BaseException]:
    """`error` and what it wraps: requests and urllib3 keep the cause in their arguments
    (a MaxRetryError's `reason`, a ProtocolError's second argument), not only in
    `__cause__`."""
    seen: set[int] = set()
    todo: list[BaseException] = [error]
    while todo:
        found = todo.pop(0)
        if id(found) in seen:
            continue
        seen.add(id(found))
        yield found
        wrapped = (*found.args, getattr(found, "reason", None), found.__cause__,
                   found.__context__)
        todo.extend(item for item in wrapped if isinstance(item, BaseException))


def _why(causes: list[BaseException]) -> str:
    """The innermost cause in a few words: an OSError's own (`connection refused`), else
    the words of urllib3's message after its last colon, else the type's name."""
    for cause in reversed(causes):
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror.lower()
    for cause in reversed(causes):
        said = re.search(r"\[Errno -?\d+\] ([^'\")]+)", str(cause))
        if said:
            return said.group(1).lower()
    last = causes[-1]
    text = str(last).rsplit(": ", 1)[-1].strip(" '\"()")
    return text.lower() if 0 < len(text) < 120 else type(last).__name__
