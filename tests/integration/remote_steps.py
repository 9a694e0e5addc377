"""What issue 24 needs an engine to do through its API alone, as steps that run on any
engine: proved on the second engine (tests/integration/test_remote_engine.py) and timed
there against the local one (bench/remote_engine.py).

Every step goes through the project's choke point (`runner.containers.engine`), so what
it shows is what the product would get on that engine: the rootfs imported from a
stream, a toolchain built from a context streamed as a tar, a hardened container
(`create_container`'s policy) on an internal network of ours, and a tree moved in and out
(`put_archive` into one of our volumes held by a running container, `get_archive` back;
or streamed on the stdin of a one-shot container). Nothing names a path of this machine.
"""

from __future__ import annotations

import contextlib
import io
import secrets
import socket
import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from runner.containers import sandbox
from runner.containers.backend import (
    LABEL_EXPERIMENT,
    LABEL_RUN,
    NO_NETWORK,
    ContainerSpec,
    Labels,
    Resources,
    Tmpfs,
    Volume,
)
from runner.containers.dockerspec import container_args
from runner.containers.engine import Engine, iter_stream
from runner.containers.images.identity import tar_of
from tests.integration.helpers import created

LABEL = "remote-probe"  # the io.bakeoff.image label of every image the steps make
BASE_TAG = "bakeoff/remote-probe:base"
TOOLCHAIN_TAG = "bakeoff/remote-probe:toolchain"
UID = sandbox.SANDBOX_UID
USER = sandbox.SANDBOX_USER
LIMITS = Resources(cpus=0.5, memory_mb=256, pids=64)
TMP_MB = 16
DEADLINE_S = 120.0

# A toolchain image that needs no network to build (the second engine has no egress):
# a file from the context, a RUN, the sandbox user.
DOCKERFILE = f"""FROM {{base}}
COPY tool.sh /usr/local/bin/probe-tool
RUN chmod 0755 /usr/local/bin/probe-tool \\
 && useradd --uid {UID} --create-home --shell /bin/sh agent
LABEL io.bakeoff.image={LABEL}
USER agent
WORKDIR /home/agent
"""
TOOL = b"#!/bin/sh\necho \"probe-tool as $(id -u)\"\n"

# What a hardened container sees of itself, one fact a line (cgroup v1 paths, else v2).
FACTS = r"""
command -v probe-tool >/dev/null && probe-tool || echo no-probe-tool
id -u
sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status
sed -n 's/^NoNewPrivs:[[:space:]]*//p' /proc/self/status
cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max
cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max
touch /probe 2>&1 | sed 's/.*: //'
df -k /tmp | awk 'NR == 2 { print $2 }'
awk 'NR > 1 && $2 == "00000000" { n++ } END { print n + 0 }' /proc/net/route
"""


@dataclass(frozen=True)
class Facts:
    """What `FACTS` printed, read back."""

    tool: str
    uid: int
    cap_eff: str
    no_new_privs: int
    pids_max: int
    memory_bytes: int
    root_write: str
    tmp_kib: int
    default_routes: int

    @classmethod
    def parse(cls, text: str) -> Facts:
        lines = text.strip().splitlines()
        if len(lines) != 9:
            raise AssertionError(f"the hardened container printed {len(lines)} lines, not 9:\n"
                                 f"{text}")
        tool, uid, cap, nnp, pids, memory, write, tmp, routes = lines
        return cls(tool, int(uid), cap, int(nnp), int(pids), int(memory), write, int(tmp),
                   int(routes))


def build_toolchain(engine: Engine, base: str, tag: str, *, nocache: bool = True) -> str:
    """The toolchain image FROM `base`, from a context streamed as a tar; its ID."""
    context = tar_of({"Dockerfile": DOCKERFILE.format(base=base).encode(), "tool.sh": TOOL})
    stream = engine.call(f"build {tag}", engine.client.api.build, fileobj=io.BytesIO(context),
                         custom_context=True, tag=tag, rm=True, forcerm=True, decode=True,
                         pull=False, nocache=nocache)
    image_id = ""
    for chunk in iter_stream(stream):
        if "error" in chunk:
            raise AssertionError(f"building {tag} failed: {chunk['error']}")
        aux = chunk.get("aux")
        if isinstance(aux, dict) and "ID" in aux:
            image_id = str(aux["ID"])
    return image_id


def hardened_spec(image: str, labels: Labels, network: str) -> ContainerSpec:
    """A sandbox-like container: the sandbox user, a read-only root, a size-limited /tmp,
    CPU, memory and pids limits; the choke point adds cap_drop ALL, no-new-privileges and
    init."""
    return ContainerSpec(image=image, command=("sh", "-c", FACTS), labels=labels,
                         resources=LIMITS, user=USER, purpose="the hardened probe",
                         tmpfs=(Tmpfs("/tmp", TMP_MB),), network=network, read_only=True)


def run_hardened(engine: Engine, image: str, labels: Labels) -> Facts:
    """The hardened container on an internal network of ours (no egress), run to its end."""
    network = f"bakeoff-{labels.experiment}-probe-{secrets.token_hex(3)}"
    engine.create_network(network, labels, egress=False)
    done = sandbox.run_to_end(engine, hardened_spec(image, labels, network), DEADLINE_S,
                              stdout=True)
    if done.exit_code != 0:
        raise AssertionError(f"the hardened probe exited {done.exit_code}: {done.stderr_tail}")
    return Facts.parse(done.stdout.decode())


def tree(files: int, size: int) -> dict[str, bytes]:
    """A deterministic tree of `files` files of `size` bytes in a few directories."""
    return {f"src/d{i % 8}/f{i}.txt": (f"{i}:".encode() * size)[:size] for i in range(files)}


def tar_bytes(files: Mapping[str, bytes]) -> bytes:
    """`files` as one tar, owned by the sandbox user (directories implied)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uid, info.gid = len(data), 0o644, UID, UID
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def files_of(archive: bytes) -> dict[str, bytes]:
    """The regular files of a tar, by name."""
    found = {}
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar:
            handle = tar.extractfile(member) if member.isfile() else None
            if handle is not None:
                found[member.name] = handle.read()
    return found


@contextlib.contextmanager
def holder(engine: Engine, image: str, labels: Labels, size_mb: int = 64
           ) -> Iterator[Any]:
    """A running, hardened container holding a fresh tmpfs volume of ours at /work (a
    tmpfs volume keeps its content only while a container holds it), no network."""
    volume = engine.create_volume(f"bakeoff-{labels.experiment}-work-{secrets.token_hex(3)}",
                           labels, size_mb=size_mb, owner=UID)
    spec = ContainerSpec(image=image, command=("sleep", "600"), labels=labels,
                         resources=LIMITS, user=USER, purpose="the archive holder",
                         mounts=(Volume(volume, "/work"),), read_only=True)
    container: Any = created(engine, spec)
    try:
        engine.call("start the holder", container.start)
        yield container
    finally:
        sandbox.remove(engine, str(container.id))


def put_tree(engine: Engine, container: Any, archive: bytes) -> None:
    if not engine.call("put the tree", container.put_archive, "/work", archive):
        raise AssertionError("put_archive into /work was refused")


def get_tree(engine: Engine, container: Any, path: str = "/work/src") -> bytes:
    chunks, _ = engine.call("get the tree", container.get_archive, path)
    return b"".join(chunks)


STDIN_SCRIPT = "mkdir /tmp/in && tar -x -C /tmp/in && cd /tmp/in && find . -type f | wc -l"


def tree_on_stdin(engine: Engine, image: str, labels: Labels, archive: bytes) -> str:
    """A one-shot hardened container that extracts a tar from its stdin (no TTY) into its
    tmpfs and prints how many files it got. The choke point's `ContainerSpec` opens stdin
    only with a TTY (which would mangle a binary stream), so this adds `stdin_open` to its
    translation (`container_args`): a gap of the choke point, written down in
    docs/scale-out.md."""
    spec = ContainerSpec(image=image, command=("sh", "-c", STDIN_SCRIPT), labels=labels,
                         resources=LIMITS, user=USER, purpose="the stdin probe",
                         tmpfs=(Tmpfs("/tmp", TMP_MB),), network=NO_NETWORK, read_only=True)
    args = {**container_args(spec), "stdin_open": True}
    container: Any = engine.call("create the stdin probe", engine.client.containers.create,
                                 **args)
    try:
        attached = engine.call("attach stdin", container.attach_socket,
                               params={"stdin": 1, "stream": 1})
        raw = getattr(attached, "_sock", attached)
        engine.call("start the stdin probe", container.start)
        raw.sendall(archive)
        raw.shutdown(socket.SHUT_WR)
        status = engine.call("wait for the stdin probe", container.wait, timeout=DEADLINE_S)
        out = bytes(engine.call("read its output", container.logs, stdout=True, stderr=True))
        raw.close()
        if status.get("StatusCode") != 0:
            raise AssertionError(f"the stdin probe exited {status}: {out.decode()}")
        return out.decode().strip()
    finally:
        sandbox.remove(engine, str(container.id))


def remove_probes(engine: Engine, experiment: str, run: str) -> None:
    """Every container, network and volume the steps made under these labels."""
    engine.remove_labelled({LABEL_EXPERIMENT: experiment, LABEL_RUN: run})
