"""The one place every docker call goes through.

It adds our labels, a client timeout, and a bounded retry for transient engine errors
(idempotent reads only), and turns a broken engine into `SandboxUnavailableError`.
Nothing is ever removed here unless it carries our labels (`remove_labelled`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import docker
import docker.errors
import requests

from runner.errors import LeftoverError, SandboxUnavailableError

T = TypeVar("T")

LABEL_EXPERIMENT = "io.bakeoff.experiment"
LABEL_ARM = "io.bakeoff.arm"
LABEL_ROLE = "io.bakeoff.role"
LABEL_RUN = "io.bakeoff.run"
LABEL_IMAGE = "io.bakeoff.image"
LABEL_IDENTITY = "io.bakeoff.identity"
KINDS = ("container", "network", "volume")  # the order of removal: a network holds containers

API_TIMEOUT_S = 120
# Transient engine errors (a daemon restarting, a socket hiccup) are retried this many
# times, with linear backoff, for calls that are safe to repeat. Creates are not retried:
# a create that timed out may have happened, and a duplicate would escape our bookkeeping.
RETRIES = 2
RETRY_BACKOFF_S = 0.5
SWEEPS = 2
ENGINE_HINT = "check that `docker info` answers (make setup starts an engine when none does)"


@dataclass(frozen=True)
class Labels:
    """The labels that mark a resource as ours; every container, network and volume has them."""

    experiment: str
    role: str
    arm: str = ""
    run: str = ""

    def as_dict(self) -> dict[str, str]:
        labels = {LABEL_EXPERIMENT: self.experiment, LABEL_ROLE: self.role, LABEL_ARM: self.arm}
        if self.run:
            labels[LABEL_RUN] = self.run
        return labels


def _is_transient(error: Exception) -> bool:
    if isinstance(error, requests.exceptions.ConnectionError | requests.exceptions.Timeout):
        return True
    return isinstance(error, docker.errors.APIError) and error.is_server_error()


class Engine:
    """A docker client behind one choke point."""

    def __init__(self, client: docker.DockerClient | None = None) -> None:
        self._client = client

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            try:
                self._client = docker.from_env(timeout=API_TIMEOUT_S)
                self._client.ping()
            except docker.errors.DockerException as error:
                raise SandboxUnavailableError(
                    f"no Docker engine answers ({error})", hint=ENGINE_HINT
                ) from error
        return self._client

    def call(self, what: str, fn: Callable[..., T], *args: Any, retry: bool = False,
             **kwargs: Any) -> T:
        """Run one docker call; `what` names it in errors. NotFound propagates as is."""
        attempts = 1 + (RETRIES if retry else 0)
        for attempt in range(attempts):
            try:
                return fn(*args, **kwargs)
            except docker.errors.NotFound:
                raise
            except (docker.errors.DockerException, requests.exceptions.RequestException) as error:
                if attempt + 1 < attempts and _is_transient(error):
                    time.sleep(RETRY_BACKOFF_S * (attempt + 1))
                    continue
                if isinstance(error, docker.errors.APIError) and not error.is_server_error():
                    raise
                raise SandboxUnavailableError(
                    f"docker engine failed during {what}: {error}", hint=ENGINE_HINT
                ) from error
        raise AssertionError("unreachable")

    def labelled(self, kind: str, filters: dict[str, str]) -> list[Any]:
        """Containers/networks/volumes whose labels match every `filters` item."""
        label_filters = [f"{k}={v}" if v else k for k, v in filters.items()]
        collection: Any = {"container": self.client.containers,
                           "network": self.client.networks, "volume": self.client.volumes}[kind]
        query: dict[str, Any] = {"filters": {"label": label_filters}}
        if kind == "container":
            # One-shot rig containers come and go: one removed between the listing and
            # its inspection is simply not listed.
            query.update(all=True, ignore_removed=True)
        result: list[Any] = self.call(f"list {kind}s", collection.list, retry=True, **query)
        return result

    def remove_labelled(self, filters: dict[str, str],
                        keep: Callable[[dict[str, str]], bool] | None = None) -> dict[str, int]:
        """Remove our containers, then networks, then volumes matching `filters`.

        `filters` must name LABEL_EXPERIMENT (or at least the label key): we never remove
        anything that does not carry our labels. `keep(labels)` spares a resource. A network
        is emptied first (every container still attached is disconnected, not removed: a
        kept container of a live run goes on running). One resource that vanished meanwhile
        is skipped, one the engine refuses does not stop the sweep; if anything of ours is
        still there at the end, `LeftoverError` names each with the engine's answer.
        """
        if not any(key.startswith("io.bakeoff.") for key in filters):
            raise ValueError("refusing to remove resources without a bakeoff label filter")
        removed = {kind: 0 for kind in KINDS}
        refused: dict[str, str] = {}
        # A second sweep catches what the first could not yet remove (a container still
        # being removed holds its network); both sweeps are bounded, and idempotent.
        for _ in range(SWEEPS):
            for kind, item in self._ours(filters, keep):
                try:
                    if _remove(self, kind, item):
                        removed[kind] += 1
                except (docker.errors.APIError, SandboxUnavailableError) as error:
                    refused[f"{kind} {item.name}"] = str(error)
            left = [f"{kind} {item.name}" for kind, item in self._ours(filters, keep)]
            if not left:
                return removed
            time.sleep(RETRY_BACKOFF_S)
        raise LeftoverError(left, refused)

    def _ours(self, filters: dict[str, str],
              keep: Callable[[dict[str, str]], bool] | None) -> Iterator[tuple[str, Any]]:
        for kind in KINDS:
            for item in self.labelled(kind, filters):
                if keep is None or not keep(_labels_of(kind, item)):
                    yield kind, item


def _labels_of(kind: str, item: Any) -> dict[str, str]:
    if kind == "container":
        return dict(item.labels or {})
    return dict(item.attrs.get("Labels") or {})


def _remove(engine: Engine, kind: str, item: Any) -> bool:
    """Remove one resource; False when it was already gone."""
    try:
        if kind == "container":
            engine.call("remove container", item.remove, force=True, v=True)
        elif kind == "network":
            _empty_network(engine, item)
            engine.call("remove network", item.remove)
        else:
            engine.call(f"remove {kind}", item.remove)
    except docker.errors.NotFound:
        return False
    return True


def _empty_network(engine: Engine, network: Any) -> None:
    """Disconnect every container still attached (a network with endpoints is refused with
    403 "has active endpoints"): e.g. the experiment's Postgres, kept for the live run,
    still on a sample network of a run that was killed."""
    engine.call("inspect network", network.reload, retry=True)  # a listing has no endpoints
    for container_id in network.attrs.get("Containers") or {}:
        try:
            engine.call("disconnect from network", network.disconnect, container_id,
                        force=True)
        except docker.errors.NotFound:  # the container went meanwhile
            continue


def iter_stream(stream: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Wrap a decoded docker stream so a dropped connection becomes SandboxUnavailableError."""
    try:
        yield from stream
    except (docker.errors.DockerException, requests.exceptions.RequestException) as error:
        raise SandboxUnavailableError(f"docker stream broke: {error}", hint=ENGINE_HINT) from error

