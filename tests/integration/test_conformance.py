"""The conformance suite: what every container engine backend must do for a sample to be
safe, written against the interface (`runner.containers.backend.ContainerEngine`) only,
so the next backend (Kubernetes, issue 36) runs it unchanged. inspect_ai's sandbox
`self_check` is the model: one small probe per property, each test named after it.

Run on this machine's engine and on a second engine (a Docker engine in a container,
tests/integration/remote_engine.py), one of each per module; on the emulated cluster
whose Pods this machine's docker runs as a node would (tests/integration/kubelet_lab.py,
its images by digest from a real registry: the Pods the backend writes, played as
written; what the node cannot give, egress, skipped with its reason); and on a
Kubernetes cluster when `BAKEOFF_TEST_KUBECONTEXT` names a context
(`BAKEOFF_TEST_REGISTRY` the registry its nodes pull from, `BAKEOFF_TEST_KUBENAMESPACE`
optional): without one, those tests are reported as skipped, "not run", never as
passed. On a cluster, what Kubernetes does otherwise (docs/scale-out.md) is skipped with
its reason, never asserted as docker's. Only the `backend` fixture knows a backend's
class; every test sees a `ContainerEngine` and an image on it. Network probes go only to
containers this module made, on networks it made.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import os
import secrets
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runner.containers.backend import (
    LABEL_EXPERIMENT,
    NO_NETWORK,
    ContainerEngine,
    ContainerSpec,
    Labels,
    Resources,
    Tmpfs,
)
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage, registry
from runner.containers.kube import config, preflight
from runner.containers.kube.api import KubeApi
from runner.containers.kube.engine import KubeEngine
from runner.errors import InfraError, NotFoundError
from tests.integration.kubelet_lab import Kubelet, on_a_node
from tests.integration.registry_lab import Registry, images_built, served
from tests.integration.remote_engine import copy_image, started
from tests.unit.kube_emulator import Emulator

__all__ = ["images_built", "served"]  # the registry lab's fixtures, used by the node's

KUBECONTEXT, REGISTRY = "BAKEOFF_TEST_KUBECONTEXT", "BAKEOFF_TEST_REGISTRY"
USER = "1000:1000"
LIMITS = Resources(cpus=0.5, memory_mb=64, pids=32)
RUN_S = 60.0  # no probe takes a tenth of it
READY_S = 10.0
PORT = "8123"
# A listener (perl's core IO::Socket), a reach probe (bash's /dev/tcp), a fork loop and a
# memory hog: all in the base image, nothing installed.
LISTEN = ("perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalAddr => \"ADDR\", "
          "LocalPort => PORT, Listen => 4, ReuseAddr => 1) or die $!; $| = 1; "
          "print \"listening\\n\"; while ($c = $s->accept) { print $c \"hi\\n\"; close $c }'"
          ).replace("PORT", PORT)
# Reached: a connection made, or refused (something holds the address and answered);
# blocked: no answer at all (no route, no host behind the address).
REACH = ("for target in TARGETS; do out=$(timeout 3 bash -c \"exec 3<>/dev/tcp/$target/PORT\" "
         "2>&1); if [ $? = 0 ] || echo \"$out\" | grep -q refused; then echo REACHED $target; "
         "else echo blocked $target; fi; done").replace("PORT", PORT)
GATEWAY = ("$(perl -ne '@f = split; print join(\".\", unpack(\"C4\", pack(\"V\", hex $f[2])))"
           " if $f[1] eq \"00000000\"' /proc/net/route)")  # the default route's, if any
FORKS = ("perl -e 'for $n (1..200) { $p = fork; if (!defined $p) { print \"blocked $n\\n\"; "
         "exit 0 } if ($p == 0) { sleep 5; exit 0 } } print \"unbounded 0\\n\"'")
HOG = "perl -e '$x = \"a\" x (256 * 1024 * 1024); print \"survived\\n\"'"
PROBE = ("id -u; grep -E '^(CapEff|NoNewPrivs):' /proc/self/status | tr -d '\\t'; "
         "if touch /probe 2>/dev/null; then echo root=writable; else echo root=read-only; fi; "
         + FORKS)


@dataclass(frozen=True)
class Backend:
    """One engine under test: the interface, an image it holds, our experiment's label."""

    engine: ContainerEngine
    image: str
    experiment: str
    cluster: bool = False  # a Kubernetes cluster: what it does otherwise is skipped, said
    node: bool = False     # the node lab's (an emulated API): it gives no egress

    def spec(self, role: str, command: str, **fields: Any) -> ContainerSpec:
        """A hardened probe: the sandbox uid, a read-only root, small limits, no network."""
        spec = ContainerSpec(image=self.image, command=("bash", "-c", command),
                             labels=Labels(self.experiment, role, run=secrets.token_hex(3)),
                             resources=LIMITS, user=USER, purpose=f"the {role} probe",
                             read_only=True, tmpfs=(Tmpfs("/tmp", 16),))
        return dataclasses.replace(spec, **fields)

    def run(self, spec: ContainerSpec, stdin: bytes | None = None) -> tuple[int | None, str]:
        """Create, start, wait and read one container's exit status and stdout; removed."""
        container_id = self.engine.create(spec)
        try:
            self.engine.start(container_id, None if stdin is None else io.BytesIO(stdin))
            status = self.engine.wait(container_id, RUN_S)
            return status, self.engine.logs(container_id).decode(errors="replace")
        finally:
            self.engine.remove(container_id)

    def running(self, spec: ContainerSpec) -> str:
        """A started container's id (removed with the module's labels)."""
        container_id = self.engine.create(spec)
        self.engine.start(container_id)
        return container_id

    def network(self, *, egress: bool) -> str:
        """A network of ours, by name."""
        name = f"bakeoff-{self.experiment}-net-{secrets.token_hex(3)}"
        self.engine.create_network(name, Labels(self.experiment, "network"), egress=egress)
        return name

    def listening(self, spec: ContainerSpec) -> str:
        """A started `LISTEN` container's id, once it listens."""
        container_id = self.running(spec)
        deadline = time.monotonic() + READY_S
        while b"listening" not in self.engine.logs(container_id):
            assert time.monotonic() < deadline, "the listener never listened"
            time.sleep(0.1)
        return container_id


@contextlib.contextmanager
def second_engine(host: Engine, engine_image: BuiltImage,
                  base: BuiltImage) -> Iterator[tuple[ContainerEngine, str]]:
    """A Docker engine in a container and the base image copied into it."""
    with started(host, engine_image, f"conform{secrets.token_hex(3)}") as remote:
        second = remote.engine
        yield second, copy_image(host, second, base.tag)


def on_a_cluster(engine: Engine, tmp: Path) -> ContainerEngine:
    """The cluster `BAKEOFF_TEST_KUBECONTEXT` names, its one stream of a log proved, the
    images pushed to `BAKEOFF_TEST_REGISTRY`; skipped ("not run") without them."""
    context, registry_at = os.environ.get(KUBECONTEXT), os.environ.get(REGISTRY)
    if not context or not registry_at:
        pytest.skip(f"not run: no cluster ({KUBECONTEXT} and {REGISTRY} name one)")
    return kube_engine(engine, registry_at, config.target(
        os.environ, tmp, context=context,
        namespace=os.environ.get("BAKEOFF_TEST_KUBENAMESPACE")))


def kube_engine(engine: Engine, registry_at: str, target: config.KubeTarget) -> KubeEngine:
    """A `KubeEngine` on `target` as the commands make one: its images built by this
    engine (its image store), pushed to `registry_at` and run by digest, the nodes' pids
    limit accepted."""
    registered = registry.Registered(engine, registry_at)
    return KubeEngine(KubeApi(target), cpus=2, accept_node_pids=True, image_ref=registered,
                      user_of=registered.user, image_store=lambda: engine)


@contextlib.contextmanager
def on_the_node(engine: Engine, registry_at: Registry, tmp: Path
                ) -> Iterator[tuple[KubeEngine, Emulator, Kubelet]]:
    """A `KubeEngine` on the emulator of the API whose node is this machine's docker
    (its context `lab`), its images pushed to the lab's registry; the emulator and the
    node beside it; all it made removed."""
    with pytest.MonkeyPatch.context() as patch, on_a_node(engine, tmp, patch) as (
            emulator, node):
        yield (kube_engine(engine, registry_at.address,
                           config.target(os.environ, tmp, context="lab")), emulator, node)


def differs_on_a_cluster(backend: Backend, why: str) -> None:
    """Skip a test whose property Kubernetes has otherwise, with the reason."""
    if backend.cluster:
        pytest.skip(f"on Kubernetes: {why} (docs/scale-out.md)")


@pytest.fixture(scope="module",
                params=["this-engine", "second-engine", "node-lab", "kubernetes"])
def backend(request: pytest.FixtureRequest, engine: Engine,
            built_images: dict[str, BuiltImage],
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    """The engine under test (the only place a backend's class is named); everything this
    module made there removed by its label."""
    base = built_images["base"]
    with contextlib.ExitStack() as stack:
        found: ContainerEngine = engine
        image = base.image_id
        if request.param == "second-engine":
            found, image = stack.enter_context(second_engine(
                engine, request.getfixturevalue("engine_image"), base))
        if request.param == "node-lab":
            found, _, _ = stack.enter_context(on_the_node(
                engine, request.getfixturevalue("served"), tmp_path_factory.mktemp("node")))
        if request.param == "kubernetes":
            found = on_a_cluster(engine, tmp_path_factory.mktemp("kube"))
        experiment = f"conform-{secrets.token_hex(3)}"
        stack.callback(found.remove_labelled, {LABEL_EXPERIMENT: experiment})
        if isinstance(found, KubeEngine):
            preflight.prove_split(found, image, Labels(experiment, "probe"))
        yield Backend(found, image, experiment,
                      cluster=request.param in ("node-lab", "kubernetes"),
                      node=request.param == "node-lab")


@pytest.fixture(scope="module")
def probe(backend: Backend) -> list[str]:
    """One hardened container's report: its uid, capabilities, no-new-privileges, whether
    its root is writable, and how many processes it could fork under a pids limit of 32."""
    status, out = backend.run(backend.spec("hardening", PROBE))
    assert status == 0, out
    return out.splitlines()


def test_a_container_runs_as_the_uid_its_spec_states(probe: list[str]) -> None:
    assert probe[0] == "1000"


def test_a_container_has_no_capability(probe: list[str]) -> None:
    assert "CapEff:0000000000000000" in probe


def test_a_container_cannot_gain_privileges(probe: list[str]) -> None:
    assert "NoNewPrivs:1" in probe


def test_a_read_only_root_filesystem_is_read_only(probe: list[str]) -> None:
    assert "root=read-only" in probe


def test_the_pids_limit_stops_a_fork_loop(backend: Backend, probe: list[str]) -> None:
    differs_on_a_cluster(backend, "a Pod has no pids limit of its own; the nodes' is "
                                  "accepted (accept_node_pids_limit) and recorded")
    verdict, forks = probe[-1].split()
    assert verdict == "blocked" and 0 < int(forks) < LIMITS.pids, probe


def test_the_memory_limit_kills_a_process_past_it(backend: Backend) -> None:
    container_id = backend.engine.create(backend.spec("memory", HOG))
    try:
        backend.engine.start(container_id)
        assert backend.engine.wait(container_id, RUN_S) == 137
        state = backend.engine.inspect(container_id)
        assert (state.status, state.exit_code) == ("exited", 137)
        assert "survived" not in backend.engine.logs(container_id).decode()
    finally:
        backend.engine.remove(container_id)


def test_stdin_is_delivered_byte_exact(backend: Backend) -> None:
    """Inputs travel on stdin (several chunks of the engine's stream), closed at the end."""
    data = os.urandom(3 * 1024 * 1024 + 7)
    status, out = backend.run(backend.spec("stdin", "sha256sum", stdin=True), stdin=data)
    assert status == 0 and out.split()[0] == hashlib.sha256(data).hexdigest()


def _tar(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size, info.uid, info.gid = len(data), 1000, 1000
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_an_archive_goes_in_and_comes_out_byte_exact(backend: Backend) -> None:
    """Into a container created and never started, and back (on a cluster its Pod holds
    for it as root with CHOWN and FOWNER: tar by exec keeps the archive's owner)."""
    data = os.urandom(24 * 1024 * 1024 + 3)
    container_id = backend.engine.create(backend.spec("archive", "true", read_only=False,
                                                      tmpfs=()))
    try:
        backend.engine.put_archive(container_id, "/", _tar("blob", data))
        back = b"".join(backend.engine.get_archive(container_id, "/blob"))
    finally:
        backend.engine.remove(container_id)
    with tarfile.open(fileobj=io.BytesIO(back)) as tar:
        member = tar.extractfile("blob")
        assert member is not None and member.read() == data


# Entries of root's and of the sandbox user's, some with modes a umask would change (all
# readable: a cluster reads one back as the root that put it, who reads no user's secret).
OWNED = [("config.json", tarfile.REGTYPE, 0, 0o644), ("records", tarfile.DIRTYPE, 1000, 0o755),
         ("records/shared", tarfile.REGTYPE, 1000, 0o775),
         ("records/team", tarfile.REGTYPE, 1000, 0o664),
         ("records/sub", tarfile.DIRTYPE, 1000, 0o775)]


def test_an_archive_keeps_its_owners_and_modes(backend: Backend) -> None:
    """As docker's daemon unpacks one (as root): each entry its owner and its mode (a
    directory of the sandbox user's, 0755; its group-writable files; root's config,
    0644), read back as the archive gave them. On a cluster the Pod made to hold for it
    runs tar as root with CHOWN and FOWNER: GNU tar sets a mode after the owner."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, kind, uid, mode in OWNED:
            info = tarfile.TarInfo(name)
            info.type, info.uid, info.gid, info.mode = kind, uid, uid, mode
            tar.addfile(info, io.BytesIO(b"") if kind == tarfile.REGTYPE else None)
    container_id = backend.engine.create(backend.spec("owners", "true", read_only=False,
                                                      tmpfs=(), user="0:0"))
    try:
        backend.engine.put_archive(container_id, "/srv", buffer.getvalue())
        back = b"".join(backend.engine.get_archive(container_id, "/srv"))
    finally:
        backend.engine.remove(container_id)
    with tarfile.open(fileobj=io.BytesIO(back)) as tar:
        found = [(m.name.removeprefix("srv/"), m.type, m.uid, m.mode & 0o7777) for m in tar
                 if m.name != "srv"]
    assert sorted(found) == sorted(OWNED)


def test_a_container_past_its_deadline_is_reported_and_stopped(backend: Backend) -> None:
    """`wait` says the deadline (None, never a status) while it still runs; `kill` stops
    it (as the executor stops a sample past its deadline); `remove` leaves nothing."""
    differs_on_a_cluster(backend, "the API kills no single container: `kill` deletes the Pod")
    container_id = backend.running(backend.spec("deadline", "sleep 300"))
    began = time.monotonic()
    assert backend.engine.wait(container_id, 3) is None
    assert 2 <= time.monotonic() - began < 20
    assert backend.engine.inspect(container_id).status == "running"
    backend.engine.kill(container_id)
    assert backend.engine.wait(container_id, 20) == 137
    assert backend.engine.inspect(container_id).status == "exited"
    assert backend.engine.remove(container_id) is True
    with pytest.raises(NotFoundError):
        backend.engine.inspect(container_id)


def test_an_internal_network_has_no_way_out(backend: Backend) -> None:
    """From a network with no egress, a peer on it answers (the probe can tell) and its
    default route's gateway does not: nothing holds that address, so nothing beyond it
    answers either. On a network with egress, the same gateway answers (a closed port,
    refused): the probe tells the two apart."""
    peer_net, out_net = backend.network(egress=False), backend.network(egress=True)
    peer = backend.listening(backend.spec("peer", LISTEN.replace("ADDR", "0.0.0.0"),
                                          network=peer_net))
    address = backend.engine.inspect(peer).networks[peer_net]
    targets = REACH.replace("TARGETS", f"{address} {GATEWAY}")
    status, inside = backend.run(backend.spec("egress", targets, network=peer_net))
    assert [line.split()[0] for line in inside.splitlines()] == ["REACHED", "blocked"], inside
    if backend.node:
        pytest.skip("on the node lab: it gives no network egress (every network of it is "
                    "internal), so the twin cannot be played")
    status, outside = backend.run(backend.spec("egress", REACH.replace("TARGETS", GATEWAY),
                                               network=out_net))
    assert (status, outside.split()[0]) == (0, "REACHED"), outside


# A DNS server on the container's own loopback that only listens: each query's name.
NAMES = ("perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalAddr => \"127.0.0.1\", "
         "LocalPort => 53, Proto => \"udp\") or die $!; $| = 1; print \"listening\\n\"; "
         "while ($s->recv($d, 4096)) { $i = 12; @l = (); while ($n = ord substr($d, $i, 1)) "
         "{ push @l, substr($d, $i + 1, $n); $i += 1 + $n } print \"query \", join(\".\", "
         "@l), \"\\n\" }' & sleep 0.5; getent hosts PEER | cut -d' ' -f1 | sed 's/^/peer /'; "
         "timeout 2 getent hosts bakeoff-nowhere.invalid; sleep 0.5; echo end")


@pytest.mark.parametrize("outside", [False, True])
def test_a_container_that_resolves_only_its_networks_names_asks_nothing_outside(
        backend: Backend, outside: bool) -> None:
    """`resolve_outside=False`: a peer's name on its network resolves; any other name the
    engine's DNS forwards to the container's own loopback (a listener there sees it), so
    the lookup goes nowhere outside the container and nothing waits on it. The twin, the
    engine's own upstream: the same listener sees nothing."""
    differs_on_a_cluster(backend, "a Pod that resolves only its network's names gets them "
                                  "as hostAliases, not from the engine's DNS")
    network = backend.network(egress=False)
    name = f"bakeoff-{backend.experiment}-peer-{secrets.token_hex(2)}"
    peer = backend.running(backend.spec("peer", "sleep 60", network=network, name=name))
    address = backend.engine.inspect(peer).networks[network]
    status, out = backend.run(backend.spec("names", NAMES.replace("PEER", name),
                                           network=network, resolve_outside=outside))
    lines = [line for line in out.splitlines() if line != "listening"]
    queried = {line for line in lines if line.startswith("query ")}
    assert (status, lines[0], lines[-1]) == (0, f"peer {address}", "end"), out
    assert queried == (set() if outside else {"query bakeoff-nowhere.invalid"}), out


def test_a_container_joined_to_a_network_is_reached_there_by_its_alias(
        backend: Backend) -> None:
    """`connect` (the database, the gateway): a running listener joins a second network
    under an alias; a container made there after reaches it by that name, resolving only
    its network's names. One on a network it did not join does not, nor one made there
    after it left (`disconnect`)."""
    home, joined, apart = (backend.network(egress=False) for _ in range(3))
    alias = "conform-peer"
    peer = backend.listening(backend.spec("peer", LISTEN.replace("ADDR", "0.0.0.0"),
                                          network=home))
    backend.engine.connect(joined, peer, aliases=[alias])

    def reach(network: str) -> tuple[int | None, str]:
        return backend.run(backend.spec("client", REACH.replace("TARGETS", alias),
                                        network=network, resolve_outside=False))
    assert reach(joined) == (0, f"REACHED {alias}\n")
    assert reach(apart) == (0, f"blocked {alias}\n")
    backend.engine.disconnect(joined, peer)
    assert reach(joined) == (0, f"blocked {alias}\n")


def test_a_shared_network_namespace_is_shared_or_refused(backend: Backend) -> None:
    """A container that joins another's network namespace reaches its loopback; a backend
    without the capability refuses the spec (never runs it apart)."""
    differs_on_a_cluster(backend, "the guest is a second container of the host's Pod, "
                                  "created before the host starts (the samples' order)")
    host = backend.spec("namespace", LISTEN.replace("ADDR", "127.0.0.1"),
                        network=NO_NETWORK)
    host_id = backend.listening(host)
    guest = backend.spec("guest", REACH.replace("TARGETS", "127.0.0.1"), joins=host_id)
    if not backend.engine.capabilities.shared_network_namespace:
        with pytest.raises(InfraError):
            backend.engine.create(guest)
        return
    assert backend.run(guest) == (0, "REACHED 127.0.0.1\n")


def test_removal_by_labels_leaves_nothing(backend: Backend) -> None:
    """Everything of this module's experiment (running containers, a network) goes by its
    label, and a second sweep finds nothing left."""
    engine = backend.engine
    backend.running(backend.spec("removal", "sleep 300", network=backend.network(egress=False)))
    removed = engine.remove_labelled({LABEL_EXPERIMENT: backend.experiment})
    assert removed["container"] >= 1 and removed["network"] >= 1
    again = engine.remove_labelled({LABEL_EXPERIMENT: backend.experiment})
    assert {kind: again[kind] for kind in ("container", "network", "volume")} == {
        "container": 0, "network": 0, "volume": 0}
