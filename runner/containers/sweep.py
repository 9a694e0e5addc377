"""Removal by label, the docker backend's: one of our containers, networks or volumes, or
every one matching some of our labels (`remove_labelled`, the sweep `down` and `gc` make).
Nothing without our labels is ever removed; a network is emptied before it goes."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from runner.containers import failures
from runner.containers.backend import LABEL_EXPERIMENT, LABEL_PREFIX
from runner.errors import EngineError, LeftoverError, NotFoundError

if TYPE_CHECKING:
    from runner.containers.engine import Engine

KINDS = ("container", "network", "volume")  # the order of removal: a network holds containers
SWEEPS = 2
SWEEP_PAUSE_S = 0.5  # between two sweeps: a container still being removed holds its network


def remove_labelled(engine: Engine, filters: dict[str, str],
                    keep: Callable[[dict[str, str]], bool] | None = None) -> dict[str, int]:
    """Remove our containers, then networks, then volumes matching `filters`.

    `filters` must name LABEL_EXPERIMENT (or at least the label key): we never remove
    anything that does not carry our labels. `keep(labels)` spares a resource. A network
    is emptied first (every container still attached is disconnected, not removed: a
    kept container of a live run goes on running). One resource that vanished meanwhile
    is skipped, one the engine refuses does not stop the sweep; if anything of ours is
    still there at the end, `LeftoverError` names each with the engine's answer, or,
    when the engine itself failed under a removal (going down, gone, its disk full),
    that failure (`runner.containers.failures`) is raised instead: the one line that says why.
    """
    if not any(key.startswith(LABEL_PREFIX) for key in filters):
        raise ValueError("refusing to remove resources without a bakeoff label filter")
    removed = {kind: 0 for kind in KINDS}
    refused: dict[str, str] = {}
    outage: EngineError | None = None  # the engine's own failure: said instead
    # A second sweep catches what the first could not yet remove (a container still
    # being removed holds its network); both sweeps are bounded, and idempotent.
    for _ in range(SWEEPS):
        for kind, item in _ours(engine, filters, keep):
            try:
                if _remove(engine, kind, item):
                    removed[kind] += 1
            except EngineError as error:
                refused[f"{kind} {item.name}"] = str(error)
                if outage is None and isinstance(error, failures.NAMED):
                    outage = error
        left = [f"{kind} {item.name}" for kind, item in _ours(engine, filters, keep)]
        if not left:
            return removed
        time.sleep(SWEEP_PAUSE_S)
    if outage is not None:
        raise outage
    raise LeftoverError(left, refused)


def _ours(engine: Engine, filters: dict[str, str],
          keep: Callable[[dict[str, str]], bool] | None) -> Iterator[tuple[str, Any]]:
    for kind in KINDS:
        for item in engine.labelled(kind, filters):
            if keep is None or not keep(_labels_of(kind, item)):
                yield kind, item


def remove_volume(engine: Engine, name: str) -> None:
    """Remove one of our volumes by name (one without our labels is never touched; one
    already gone is fine)."""
    try:
        volume = engine.call(f"inspect volume {name}", engine.client.volumes.get, name)
    except NotFoundError:
        return
    if LABEL_EXPERIMENT not in ((volume.attrs or {}).get("Labels") or {}):
        raise ValueError(f"volume {name} does not carry our labels: never removed")
    with contextlib.suppress(NotFoundError):
        engine.call(f"remove volume {name}", volume.remove, force=True)


def remove_network(engine: Engine, network_id: str) -> None:
    """Remove ONE network of ours (a sample's own), emptied first; one without our
    labels is refused, one already gone is fine."""
    try:
        network = engine.call("find network", engine.client.networks.get, network_id,
                              retry=True)
        if LABEL_EXPERIMENT not in (network.attrs.get("Labels") or {}):
            raise ValueError(f"refusing to remove network {network.name}: it is not ours")
        _remove(engine, "network", network)
    except NotFoundError:
        return


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
    except NotFoundError:
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
        except NotFoundError:  # the container went meanwhile
            continue
