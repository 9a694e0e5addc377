"""A Kubernetes engine's execs (issue 36): a command run to its end, streamed as it comes,
or held with its stdin open, each over the channel protocol (`channel`) in one container
of a Pod. The API keeps no record of an exec: a streamed one's state is kept here,
running until its output ended, then its exit code."""

from __future__ import annotations

import contextlib
import io
import secrets
import threading
import time
from collections.abc import Iterator

from runner.containers.backend import Completed, ExecState, ExecStream, HeldProcess
from runner.containers.kube import channel
from runner.containers.kube.config import KubeTarget
from runner.errors import NotFoundError


class PodExecs:
    """The execs of one engine on `cluster` (`address` names it in errors); a stream's
    connection and a held one's wait `deadline_s` at most to open."""

    def __init__(self, cluster: KubeTarget, address: str, deadline_s: float) -> None:
        self.cluster, self.address, self.deadline_s = cluster, address, deadline_s
        self._states: dict[str, ExecState] = {}
        self._lock = threading.Lock()

    def run(self, pod: str, container: str, command: channel.ExecCommand,
            deadline_s: float) -> Completed:
        """`command` to its end (or its deadline): its code and both streams."""
        started = time.monotonic()
        done = channel.stream(self.cluster, pod, container, command=command.argv,
                              stdin=io.BytesIO(command.preamble) if command.preamble else None,
                              deadline_s=deadline_s)
        return Completed(done.exit_code, done.stdout.decode(errors="replace"),
                         done.stderr.decode(errors="replace"),
                         round(time.monotonic() - started, 3))

    def stream(self, pod: str, container: str, command: channel.ExecCommand) -> ExecStream:
        """Both streams of `command` as they come; its state kept (`state`)."""
        connection = channel.opened(self.cluster, pod, container, command,
                                    deadline_s=self.deadline_s)
        exec_id = f"{pod}/{container}/exec-{secrets.token_hex(4)}"
        with self._lock:
            self._states[exec_id] = ExecState(True, None)

        def ended(code: int | None) -> None:
            with self._lock:
                self._states[exec_id] = ExecState(False, code)
        return ExecStream(exec_id, channel.output(connection, f"an exec in {pod}/{container}",
                                                  ended), connection.close)

    def state(self, exec_id: str) -> ExecState:
        with self._lock:
            found = self._states.get(exec_id)
        if found is None:
            raise NotFoundError(self.address, "inspect an exec", f"no exec {exec_id} was "
                                "started here", status=None)
        return found

    @contextlib.contextmanager
    def held(self, pod: str, container: str, command: channel.ExecCommand,
             what: str) -> Iterator[HeldProcess]:
        """`command` with its stdin held open for the block (`channel.Held`)."""
        held = channel.Held(channel.opened(self.cluster, pod, container, command,
                                           deadline_s=self.deadline_s, stdin=True), what)
        try:
            yield held
        finally:
            held.close()
