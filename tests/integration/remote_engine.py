"""A second Docker engine in a container (issue 24): an engine that shares no disk with
this machine, for the tests and benchmarks of "the work travels to the engine".

`images/engine` (Debian's docker.io FROM the local base) runs dockerd on tcp 2375, no TLS,
reachable ONLY over an internal network this module makes; the host reaches it at its
address there (`DOCKER_HOST=tcp://IP:2375`, `RemoteEngine.url`). Nothing of this machine
is shared with it but what dockerd strictly needs from the kernel: the cgroup tree
(`/sys/fs/cgroup`, read-write, in the host's cgroup namespace: without it every inner
container fails with "mkdir /sys/fs/cgroup/cpuset/docker: read-only file system").
/var/lib/docker is a tmpfs; the inner engine's cgroup parent is a child of its own
container's cgroup, so what it runs stays within that container and goes with it.

Why the docker SDK here and not `runner.containers.engine.Engine.create` /
`create_network` (docs/scale-out.md, "A second engine"): the choke point cannot express
what dockerd needs, by design. It drops every capability and adds back only
`ADDABLE_CAPS` (dockerd needs SYS_ADMIN and NET_ADMIN beside docker's default set: we
give all but SYS_RESOURCE, which this machine's bounding set lacks); its security
options are exactly `no-new-privileges` (dockerd needs `seccomp=unconfined`: under the
default profile runc fails "unable to join session keyring"; and `apparmor=unconfined`
on an AppArmor host); it has no cgroup namespace field (dockerd needs `host`); and
`create_network(egress=False)` sets `inhibit_ipv4`, so the bridge has no address on this
machine and nothing here could reach the engine, while `egress=True` is not internal.
So this one container and its network are made here, in the tests only, with our labels
(role `remote-engine`), and removed by them (`Engine.remove_labelled`). Everything
INSIDE the second engine goes through the choke point (`RemoteEngine.engine`).

An outage of the second engine (issue 31): the entrypoint supervises dockerd, so a test
can stop it (`stop_dockerd`: SIGTERM, as a daemon upgrade or `systemctl stop docker` does)
and start it again (`start_dockerd`) while the container, and so the store on its tmpfs,
stays. Measured here (docker.io 20.10, no live-restore):
- stopping takes ~11 s: dockerd stops every container it runs (SIGTERM, 10 s, SIGKILL)
  and exits; starting answers again in ~2 s;
- every container is stopped, not removed, and not started again (no restart policy):
  `exited` with 143 under docker's init (ours all are), 137 for a PID 1 that ignores
  SIGTERM, its own code for one that traps it; a created one stays `created`;
- named volumes, networks (our internal ones too) and images are all still there;
- calls under way when it stops: a `wait` returns the container's exit code (137), a
  followed log simply ends, an exec's output ends EMPTY with no error (only the exec's
  inspect after it fails); a start in flight is 500 "transport is closing: unavailable";
  every call while it is down is "connection refused"; after the start an exec of before
  is unknown (404 "No such exec instance").
A full engine disk (`fill_store`): the tmpfs remounted (the container has SYS_ADMIN) at
just above what it holds and the rest filled with a small file; a container's create
is then 500 "write /var/lib/docker/overlay2/<id>-init/link: no space left on device", a
start "write /var/lib/docker/containers/<id>/hash…: no space left on device"; a volume's
create still works. `free_store` gives the space back.
"""

from __future__ import annotations

import contextlib
import ipaddress
import secrets
import socket
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import docker
import docker.errors
import requests
from docker.types import Mount

from runner.containers.backend import LABEL_EXPERIMENT, LABEL_RUN, Labels
from runner.containers.dockerclient import iter_stream
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage, buildlog, rootfs

IMAGE = "engine"  # images/engine
PORT = 2375
ROLE = "remote-engine"
READY_S = 60.0  # dockerd answers in ~2 s here; a bounded wait, never a hang
POLL_S = 0.2
API_TIMEOUT_S = 300  # an image load or a build through the inner engine's API
STORE_MB = 8192  # the tmpfs at /var/lib/docker (images, layers, containers)
MEMORY_MB = 12288  # the container's, tmpfs pages included; the inner containers' too
PIDS = 8192
CGROUP = "/sys/fs/cgroup"
# Every capability but SYS_RESOURCE (this machine's bounding set lacks it: --privileged
# fails "unable to apply caps"). Checked: SYS_ADMIN + NET_ADMIN + docker's default set
# suffice for plain containers; swarm's overlay networks were only tried with all.
CAP_ADD, CAP_DROP = ["ALL"], ["SYS_RESOURCE"]
SECURITY_OPT = ["seccomp=unconfined", "apparmor=unconfined"]


class EngineNotReadyError(AssertionError):
    """The second engine did not answer in time; the message says why and what to do."""


@dataclass(frozen=True)
class RemoteEngine:
    """A running second engine: its container (on the host engine), its network, its
    address there and a client of its own API."""

    container_id: str
    network: str
    address: str
    client: docker.DockerClient
    labels: Labels

    @property
    def url(self) -> str:
        return f"tcp://{self.address}:{PORT}"

    @property
    def engine(self) -> Engine:
        """The project's choke point on the second engine."""
        return Engine(self.client)

    def info(self) -> dict[str, Any]:
        found: dict[str, Any] = self.client.info()
        return found


def container_args(image_id: str, name: str, network: str, labels: Labels) -> dict[str, Any]:
    """The `containers.create` keyword arguments of the engine's container: the one place
    its privileges are written down (a unit test pins them)."""
    memory = f"{MEMORY_MB}m"
    return dict(
        image=image_id, name=name, labels=labels.as_dict(), detach=True, init=True,
        cap_add=CAP_ADD, cap_drop=CAP_DROP, security_opt=SECURITY_OPT, cgroupns="host",
        mounts=[Mount(CGROUP, CGROUP, type="bind", read_only=False)],
        tmpfs={"/var/lib/docker": f"size={STORE_MB}m,exec"},
        mem_limit=memory, memswap_limit=memory, pids_limit=PIDS, network=network,
        hostname="remote-engine")


def network_args(name: str, labels: Labels) -> dict[str, Any]:
    """Internal (no egress), and NOT `inhibit_ipv4`: the bridge keeps its address on this
    machine, which is how the host (and only the host) reaches the engine."""
    return dict(name=name, driver="bridge", internal=True, labels=labels.as_dict(),
                check_duplicate=True)


@contextlib.contextmanager
def started(host: Engine, image: BuiltImage, experiment: str) -> Iterator[RemoteEngine]:
    """A second engine up and answering for the block; everything of it (container,
    network) removed by its labels afterwards, whatever happened."""
    run = secrets.token_hex(3)
    labels = Labels(experiment, ROLE, run=run)
    name = f"bakeoff-{experiment}-{ROLE}-{run}".lower()
    try:
        network: Any = host.call("create the engine's network", host.client.networks.create,
                                 **network_args(f"{name}-net", labels))
        container: Any = host.call("create the second engine", host.client.containers.create,
                                   **container_args(image.image_id, name, network.name, labels))
        host.call("start the second engine", container.start)
        address = address_of(host, container.id, network.name)
        require_route(address, network.id)
        client = wait_until_answers(host, container.id, f"tcp://{address}:{PORT}", READY_S)
        yield RemoteEngine(container.id, network.name, address, client, labels)
    finally:
        host.remove_labelled({LABEL_EXPERIMENT: experiment, LABEL_RUN: run})


def address_of(host: Engine, container_id: str, network: str) -> str:
    container = host.call("inspect the second engine", host.client.containers.get,
                          container_id, retry=True)
    return str(container.attrs["NetworkSettings"]["Networks"][network]["IPAddress"])


def require_route(address: str, network_id: str) -> None:
    """Refuse to talk to `address` unless this machine routes it through the bridge of
    the network the test made (`br-<id>`): a packet to an address with no route of its own
    would leave by the default route, to whoever holds that address out there."""
    bridge = f"br-{network_id[:12]}"
    target = ipaddress.IPv4Address(address)
    for iface, destination, mask in routes():
        if iface == bridge and ipaddress.IPv4Network(f"{destination}/{mask}").__contains__(
                target):
            return
    raise EngineNotReadyError(f"no route to {address} through {bridge} on this machine: "
                              "the engine's network is not reachable from here, and nothing "
                              "else is tried")


def routes(table: Path = Path("/proc/net/route")) -> Iterator[tuple[str, str, str]]:
    """(interface, destination, netmask) of each IPv4 route of this machine."""
    for line in table.read_text(encoding="ascii").splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8:
            yield fields[0], _dotted(fields[1]), _dotted(fields[7])


def default_gateways(table_text: str) -> list[str]:
    """The gateways of the default routes (destination 0.0.0.0/0) in a /proc/net/route
    text."""
    found = []
    for line in table_text.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[1] == "00000000" and fields[7] == "00000000":
            found.append(_dotted(fields[2]))
    return found


def _dotted(hex_le: str) -> str:
    return socket.inet_ntoa(struct.pack("<I", int(hex_le, 16)))


def wait_until_answers(host: Engine, container_id: str, url: str,
                       within_s: float) -> docker.DockerClient:
    """A client of the engine at `url` once it answers (the client asks the engine its API
    version as it is made); a container that exited, or no answer within `within_s`, is
    `EngineNotReadyError` with its state and the tail of its log."""
    deadline = time.monotonic() + within_s
    last = ""
    while time.monotonic() < deadline:
        try:
            client = docker.DockerClient(base_url=url, timeout=API_TIMEOUT_S)
            if client.ping():
                return client
        except (docker.errors.DockerException, requests.exceptions.RequestException) as error:
            last = str(error)
        container = host.call("inspect the second engine", host.client.containers.get,
                              container_id, retry=True)
        if container.status != "running":
            break
        time.sleep(POLL_S)
    raise not_ready(host, container_id, within_s, last)


def not_ready(host: Engine, container_id: str, within_s: float,
              last: str) -> EngineNotReadyError:
    container = host.call("inspect the second engine", host.client.containers.get,
                          container_id, retry=True)
    tail = container.logs(tail=15).decode(errors="replace").rstrip()
    return EngineNotReadyError(
        f"the second engine ({container.status}) did not answer on tcp {PORT} within "
        f"{within_s:.0f} s (last: {last or 'no answer'}); its log ends:\n{tail}\n"
        "hint: it needs every capability but SYS_RESOURCE, seccomp and apparmor unconfined, "
        "cgroupns host and /sys/fs/cgroup mounted read-write (tests/integration/remote_engine.py)")


# -- images into the second engine, through its API -------------------------------------

def rootfs_tarball() -> Path:
    """Where `rootfs.bootstrap_rootfs` keeps the base's mmdebstrap tarball."""
    return buildlog.cache_dir() / f"base-{rootfs.SUITE}.tar"


def import_rootfs(engine: Engine, tarball: IO[bytes], tag: str, label: str) -> str:
    """A rootfs tar streamed (a file object, never a path the engine reads) into
    `import_image`, tagged `tag` and labelled as ours; the image ID."""
    repository, _, version = tag.partition(":")
    engine.call(f"import {tag}", engine.client.api.import_image, src=tarball,
                repository=repository, tag=version or "latest",
                changes=[f"LABEL io.bakeoff.image={label}"])
    image = engine.call(f"inspect {tag}", engine.client.images.get, tag, retry=True)
    return str(image.id)


def copy_image(source: Engine, target: Engine, ref: str) -> str:
    """`docker save REF | docker load` through both engines' APIs, streamed chunk by chunk
    (no file); the image ID on `target`, the same as on `source` (save/load keeps the
    image's config, so its ID). An image `target` already holds under `ref` with that ID
    is not sent again: the session's second engine (`remote_engine`) serves a worker's
    modules one after another, and each copies what it needs."""
    image = source.call(f"find {ref}", source.client.images.get, ref, retry=True)
    if image.id in held(target, ref):
        return str(image.id)
    # Saved by `ref` itself: the archive names that tag alone. (By the image, docker-py
    # names its first tag, which another tag made meanwhile, a registry push's, can be.)
    chunks = source.call(f"save {ref}", source.client.api.get_image, ref)
    said = target.call(f"load {ref}", target.client.api.load_image, chunks, quiet=True)
    for line in iter_stream(said):
        if "error" in line:
            raise AssertionError(f"loading {ref} into the second engine failed: {line['error']}")
    loaded = target.call(f"inspect {ref}", target.client.images.get, ref, retry=True)
    return str(loaded.id)


def held(engine: Engine, ref: str) -> set[str]:
    """The IDs of the images `engine` holds under `ref` (none, or the one)."""
    found = engine.call(f"list {ref}", engine.client.images.list, name=ref, retry=True)
    return {str(image.id) for image in found}


# -- an outage of the second engine: dockerd stopped and started in place ----------------

HOLD = "/run/bakeoff-engine.hold"  # images/engine/entrypoint.sh: no new dockerd while it exists
STORE = "/var/lib/docker"
OUTAGE_S = 60.0  # dockerd stops its containers (10 s grace each, in parallel) and exits


def in_engine(host: Engine, remote: RemoteEngine, script: str) -> str:
    """`sh -c SCRIPT` as root in the engine's container, through THIS machine's engine (so
    it works while the inner dockerd is down); its stdout, or AssertionError with both
    streams when it fails."""
    done = host.exec(remote.container_id, ["sh", "-c", script], user="root", workdir="/",
                     deadline_s=120)
    if done.exit_code != 0:
        raise AssertionError(f"in the engine's container, `{script}` exited "
                             f"{done.exit_code}: {done.stdout}{done.stderr}")
    return done.stdout


def answers(remote: RemoteEngine) -> bool:
    try:
        return bool(remote.client.ping())
    except (docker.errors.DockerException, requests.exceptions.RequestException):
        return False


def stop_dockerd(host: Engine, remote: RemoteEngine) -> None:
    """The inner engine stopped as a daemon upgrade or a `systemctl stop docker` stops it:
    SIGTERM to dockerd, which stops its containers and exits; the entrypoint holds it
    down (the hold file) until `start_dockerd`. Returns once no dockerd runs and the API
    no longer answers; the store (the tmpfs) stays."""
    in_engine(host, remote, f"touch {HOLD} && kill -TERM $(cat /var/run/docker.pid)")
    deadline = time.monotonic() + OUTAGE_S
    while time.monotonic() < deadline:
        if not answers(remote) and not in_engine(host, remote, "pidof dockerd || true").strip():
            return
        time.sleep(POLL_S)
    raise EngineNotReadyError(f"dockerd in the second engine did not stop within {OUTAGE_S:.0f} s")


def start_dockerd(host: Engine, remote: RemoteEngine) -> None:
    """The inner engine started again (the hold file removed: the entrypoint runs dockerd);
    returns once its API answers, on the same store."""
    in_engine(host, remote, f"rm -f {HOLD}")
    wait_until_answers(host, remote.container_id, remote.url, READY_S)


# -- a full engine disk: the store shrunk in place to what it holds, the rest filled -----

FILLER = f"{STORE}/bakeoff-filler"
MARGIN_MB = 16  # what the store keeps free before the filler takes it (never GiBs of RAM)
FILL_TRIES = 3  # top-ups of what the engine frees while the store is being filled


def fill_store(host: Engine, remote: RemoteEngine) -> None:
    """The engine's store (a tmpfs) remounted at just above what it holds, and that margin
    filled with a file: every write of the engine's there (a container's layer, its
    config) then fails "no space left on device"."""
    used_kb = int(in_engine(host, remote, f"df -k --output=used {STORE} | tail -n 1"))
    in_engine(host, remote, f"mount -o remount,size={used_kb + MARGIN_MB * 1024}k {STORE} && "
                            f"{{ dd if=/dev/zero of={FILLER} bs=1M 2>/dev/null; true; }}")
    free = store_free_kb(host, remote)
    for top_up in range(FILL_TRIES):
        if free <= 64:
            return
        # The engine freed some of its own files after the filler took the rest (seen
        # under load: 84 KiB back): the filler takes those too, in small blocks.
        in_engine(host, remote, f"{{ dd if=/dev/zero of={FILLER}-{top_up} bs=4k 2>/dev/null; "
                                "true; }")
        free = store_free_kb(host, remote)
    if free > 64:
        raise AssertionError(f"the engine's store still has {free} KiB free after filling")


def store_free_kb(host: Engine, remote: RemoteEngine) -> int:
    return int(in_engine(host, remote, f"df -k --output=avail {STORE} | tail -n 1"))


def free_store(host: Engine, remote: RemoteEngine) -> None:
    """The filler removed and the store back at its size."""
    in_engine(host, remote, f"rm -f {FILLER} {FILLER}-* && "
                            f"mount -o remount,size={STORE_MB}m {STORE}")
