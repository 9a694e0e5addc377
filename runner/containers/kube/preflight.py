"""What a run must know of a cluster before it trusts it (issue 36): proofs, each by Pods
of its own, never a setting taken on trust. `prove_split`: the cluster gives one stream
of a log (a sample's result is read from its stdout alone). `prove_isolation`: the
cluster enforces NetworkPolicies (a CNI that ignores them would pass every Pod as
isolated), with a control that must connect, so a probe that never connects proves
nothing. `prove_sized`: the storage class caps a volume at the size asked, with a
control that must write. `up` on Kubernetes runs them before it makes anything of the
experiment's.
"""

from __future__ import annotations

from runner.containers.backend import NO_NETWORK, ContainerSpec, Labels, Resources, Volume
from runner.containers.kube.about import KUBE_HINT
from runner.containers.kube.engine import KubeEngine, split
from runner.errors import InfraError

PROBE_PORT = 8080
LISTEN = ("import os, socket\ns = socket.create_server(('', int(os.environ['PROBE_PORT'])))\n"
          "while True:\n    s.accept()[0].close()")
# Connects for up to 10 s (the listener may not listen yet): exit 0 once it reached it.
CONNECT = ("import os, socket, sys, time\nfor _ in range(20):\n    try:\n"
           "        socket.create_connection((sys.argv[1], int(os.environ['PROBE_PORT'])), "
           "timeout=0.5).close()\n        sys.exit(0)\n    except OSError:\n"
           "        time.sleep(0.5)\nsys.exit(1)")
PROBE_OUT, PROBE_ERR = "bakeoff-probe-stdout", "bakeoff-probe-stderr"
PROBE_VOLUME, NOBODY = "/probe", 65534
# Writes the volume's size and 8 MiB more into it, 1 MiB of fresh random bytes at a time
# (nothing a filesystem could compress or share): exit 0 when all of it went in (no cap),
# 3 when the volume refused more (ENOSPC, EDQUOT, EFBIG), 4 on any other error; the MiB
# written on stdout.
FILL = ("import errno, os, sys\nsize = (int(sys.argv[1]) + 8) * 2**20\nwritten = 0\n"
        "try:\n    with open(sys.argv[2] + '/fill', 'wb') as f:\n        while written < size:\n"
        "            written += f.write(os.urandom(2**20))\n            f.flush()\n"
        "        os.fsync(f.fileno())\nexcept OSError as e:\n    print(written // 2**20)\n"
        "    sys.exit(3 if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else 4)\n"
        "print(written // 2**20)")


def prove_split(engine: KubeEngine, image: str, labels: Labels) -> None:
    """Prove the cluster gives one stream of a log (KEP-3288's `stream`; a cluster
    without it gives both, silently) before one is trusted: a probe Pod writes a line
    to each, and its stdout must be its line alone. A sample's result is the last mark
    line of its stdout: a stderr let into it could carry a forged one."""
    made = engine.create(ContainerSpec(
        image=image, command=("sh", "-c", f"echo {PROBE_OUT}; echo {PROBE_ERR} >&2"),
        labels=labels, resources=Resources(0.1, 32, 16), user="65534:65534",
        purpose="a probe of the cluster's log streams"))
    try:
        engine.start(made)
        engine.wait(made, engine.start_deadline_s)
        pod, container = split(made)
        found = engine.api.logs(pod, container, stream="Stdout")
    finally:
        engine.remove(made)
    if found != f"{PROBE_OUT}\n".encode():
        raise InfraError(f"the cluster at {engine.address} does not give one stream of a "
                         f"log: asked for stdout, it gave {found[:200]!r}",
                         hint="enable the PodLogsQuerySplitStreams feature gate "
                              "(KEP-3288) on the API server and the kubelets")
    engine.split_proved = True


def prove_isolation(engine: KubeEngine, image: str, labels: Labels) -> None:
    """Prove the cluster enforces NetworkPolicies (a CNI that ignores them passes
    every Pod as isolated): a listener Pod on a network of its own; a client on that
    network must reach it (the control: without it a probe that never connects would
    prove nothing) and a client on no network must not. `image`: one with python3."""
    network = f"{labels.experiment}-probe-net"
    engine.create_network(network, labels, egress=False)
    try:
        listener = engine.create(_probe(image, labels, LISTEN, network, "listener"))
        try:
            engine.start(listener)
            address = engine.inspect(listener).networks[network]
            reached = {where: _reaches(engine, image, labels, address, where)
                       for where in (network, NO_NETWORK)}
        finally:
            engine.remove(listener)
    finally:
        engine.remove_network(network)
    if reached[network] != 0:
        raise InfraError(f"the isolation probe on {engine.address} could not reach its "
                         f"listener from the same network (exit {reached[network]}): "
                         "the cluster's isolation cannot be proved", hint=KUBE_HINT)
    if reached[NO_NETWORK] == 0:
        raise InfraError(f"the cluster at {engine.address} does not enforce "
                         "NetworkPolicies: a Pod on no network reached another Pod's "
                         "port", hint="run on a cluster whose CNI enforces policies "
                                      "(Calico, Cilium)")


def prove_sized(engine: KubeEngine, image: str, labels: Labels, size_mb: int) -> None:
    """Prove the storage class caps a volume at the size asked (a class that provisions
    more, or a host path that takes anything, would let a checkout outgrow `disk_mb`): a
    claim of `size_mb` (the manifest's `volume_mb`, a size every run asks) must be bound
    at that size (else its Pod's start is refused: `PodVolumes.sized`), and a Pod writing
    8 MiB past it must be refused, after at least half of it (the control: a volume that
    takes nothing proves nothing). `image`: one with python3."""
    claim = f"{labels.experiment}-probe-volume"
    engine.create_volume(claim, labels, size_mb=size_mb, owner=NOBODY)
    try:
        made = engine.create(ContainerSpec(
            image=image, command=("python3", "-c", FILL, str(size_mb), PROBE_VOLUME),
            labels=labels, resources=Resources(0.5, 64, 16), user=f"{NOBODY}:{NOBODY}",
            purpose="the volume probe", mounts=(Volume(claim, PROBE_VOLUME),)))
        try:
            engine.start(made)
            code = engine.wait(made, engine.start_deadline_s)
            said = engine.api.logs(*split(made), stream=None).split()
        finally:
            engine.remove(made)
    finally:
        engine.remove_volume(claim)
    written = int(said[0]) if said and said[0].isdigit() else 0
    if code == 0:
        raise InfraError(f"the storage class at {engine.address} does not cap a volume: a "
                         f"claim of {size_mb} MiB took {written} MiB",
                         hint="name a class whose volumes hold the size asked and no more "
                              "in [kubernetes] storage_class (a host path caps nothing)")
    if code != 3 or written < size_mb // 2:
        raise InfraError(f"the volume probe on {engine.address} could not fill its claim of "
                         f"{size_mb} MiB (exit {code}, {written} MiB written): the volumes' "
                         "cap cannot be proved", hint=KUBE_HINT)


def _probe(image: str, labels: Labels, script: str, network: str, role: str,
           *args: str) -> ContainerSpec:
    return ContainerSpec(image=image, command=("python3", "-c", script, *args), labels=labels,
                         resources=Resources(0.1, 64, 16), user="65534:65534",
                         purpose=f"the isolation probe's {role}", network=network,
                         env={"PROBE_PORT": str(PROBE_PORT)})


def _reaches(engine: KubeEngine, image: str, labels: Labels, address: str,
             network: str) -> int | None:
    """A client on `network` connecting to `address`: 0 when it reached it."""
    client = engine.create(_probe(image, labels, CONNECT, network, "client", address))
    try:
        engine.start(client)
        return engine.wait(client, engine.start_deadline_s)
    finally:
        engine.remove(client)
