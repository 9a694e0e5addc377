"""Images through a registry (issue 36, the Kubernetes backend's image step), on the real
engine and a real registry: `images/registry` (Debian's docker-registry, CNCF
distribution 2.8, FROM the local base) in a container of ours, published on 127.0.0.1
only (an engine trusts a loopback registry over HTTP). A local image is pushed under its
own id as the tag and named by the digest the registry gave it; the registry's own
answer for that tag agrees, a pull by that digest gives back the very image (its id),
two different images in one repository never share a tag, a push again is the same
digest, and the push leaves no tag behind here."""

from __future__ import annotations

import io
import secrets
import socket
import tarfile
from collections.abc import Iterator

import pytest
import requests

from runner.containers import database
from runner.containers.backend import (
    LABEL_EXPERIMENT,
    ContainerSpec,
    Labels,
    Resources,
)
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage, registry
from runner.containers.kube.api import KubeApi
from runner.containers.kube.config import KubeTarget
from runner.containers.kube.engine import KubeEngine
from runner.errors import EngineRefusedError, InfraError
from tests.integration.registry_lab import Registry, images_built, served
from tests.unit.kube_emulator import emulated

MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
__all__ = ["images_built", "served"]  # the lab's fixtures, used here


@pytest.fixture()
def own_images(engine: Engine) -> Iterator[list[str]]:
    """Two small images of this test's own (imported, no label of ours): pushing tags an
    image for a moment, and the session's other workers use the shared ones."""
    made = []
    for n in range(2):
        data = io.BytesIO()
        with tarfile.open(fileobj=data, mode="w") as tar:
            content = f"{n} {secrets.token_hex(8)}\n".encode()
            info = tarfile.TarInfo("probe.txt")
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
        tag = f"registry-probe-{secrets.token_hex(4)}"
        said = engine.call("import a probe image", engine.client.api.import_image_from_data,
                           data.getvalue(), repository="bakeoff/registry-probe", tag=tag)
        assert "error" not in str(said), said
        made.append(f"bakeoff/registry-probe:{tag}")
    try:
        yield [str(engine.client.images.get(tag).id) for tag in made]
    finally:
        for tag in made:
            engine.call("remove a probe image", engine.client.api.remove_image, tag,
                        force=True)


def registry_digest(served: Registry, repo: str, tag: str) -> str:
    answer = requests.head(served.url(f"/v2/{repo}/manifests/{tag}"),
                           headers={"Accept": MANIFEST}, timeout=10)
    assert answer.status_code == 200, answer.text
    return str(answer.headers["Docker-Content-Digest"])


def tags_of(engine: Engine, image_id: str) -> list[str]:
    return list(engine.client.images.get(image_id).tags)


def test_an_image_is_pushed_under_its_own_id_and_named_by_the_registrys_digest(
        engine: Engine, own_images: list[str], served: Registry) -> None:
    image_id = own_images[0]
    (local,) = tags_of(engine, image_id)
    repo = registry.repository(served.address, local)
    assert repo == f"{served.address}/bakeoff/registry-probe"
    pushed = registry.push(engine, image_id, repo)
    content = image_id.removeprefix("sha256:")
    assert pushed.tag == f"{repo}:id-{content}"
    digest = registry_digest(served, "bakeoff/registry-probe", f"id-{content}")
    assert pushed.reference == f"{repo}@{digest}"  # the registry's own answer agrees
    assert tags_of(engine, image_id) == [local]  # the push's tag is gone
    assert registry.push(engine, image_id, repo) == pushed  # again: the same


def test_a_pull_by_the_digest_gives_back_the_very_image_and_two_images_never_share_a_tag(
        engine: Engine, own_images: list[str], served: Registry) -> None:
    """Two different images pushed to ONE repository (an anchor's `:latest` for two
    images handed a run the wrong one): two tags, two digests, and each digest pulled
    is its own image."""
    repo = f"{served.address}/bakeoff/app"
    pushed = [registry.push(engine, image_id, repo) for image_id in own_images]
    assert len({p.tag for p in pushed}) == len({p.reference for p in pushed}) == 2
    for found in pushed:
        pulled = engine.call("pull by digest", engine.client.images.pull, found.reference)
        try:
            assert pulled.id == found.image_id
        finally:
            engine.call("drop the digest's name", engine.client.api.remove_image,
                        found.reference, noprune=True)


def test_a_registry_that_does_not_answer_is_the_pushs_refusal_and_leaves_no_tag(
        engine: Engine, own_images: list[str]) -> None:
    with socket.socket() as free:  # a loopback port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    image_id = own_images[0]
    repo = f"127.0.0.1:{port}/bakeoff/registry-probe"
    tags_before = tags_of(engine, image_id)
    with pytest.raises(EngineRefusedError) as refused:
        registry.push(engine, image_id, repo)
    assert refused.value.what == f"push {repo}:id-{image_id.removeprefix('sha256:')}"
    assert f"127.0.0.1:{port}" in refused.value.answer
    assert "connection refused" in refused.value.answer
    assert tags_of(engine, image_id) == tags_before


def test_a_kube_engine_runs_what_the_registry_holds_by_digest(
        engine: Engine, own_images: list[str], served: Registry) -> None:
    """The image step end to end up to the API: a container planned with a local image
    (by id or by tag) is a Pod that names the registry's digest (the API is the
    emulator's; the image and the registry are real)."""
    image_id = own_images[0]
    (local,) = tags_of(engine, image_id)
    images_of = registry.Registered(engine, served.address)
    with emulated() as emulator:
        emulator.autorun = True
        kube = KubeEngine(KubeApi(KubeTarget("test", emulator.url, "bakeoff")), cpus=1,
                          image_ref=images_of, accept_node_pids=True)
        planned = [kube.create(ContainerSpec(
            image=image, command=("true",), labels=Labels("registry", "sample"),
            resources=Resources(0.5, 64, 16), user="65534:65534", purpose="a sample",
            name=name)) for name, image in (("by-id", image_id), ("by-tag", local))]
        for made in planned:
            kube.start(made)
        (pushed,) = images_of.pushed  # by id and by tag: one image, pushed once
        assert [emulator.pod(name)["spec"]["containers"][0]["image"]
                for name in ("by-id", "by-tag")] == [pushed.reference] * 2
    digest = registry_digest(served, "bakeoff/registry-probe", pushed.tag.rsplit(":", 1)[1])
    assert pushed.reference == f"{served.address}/bakeoff/registry-probe@{digest}"
    assert images_of(pushed.reference) == pushed.reference  # by digest: as it is


def test_a_user_named_in_an_image_is_the_ids_docker_runs_it_as(
        engine: Engine, built_images: dict[str, BuiltImage]) -> None:
    """A Pod holds numbers only: the experiment's Postgres (`postgres`, its image's user)
    runs on a cluster as the uid:gid its image's /etc/passwd gives the name, the ids
    Docker runs the same server as here; read from a container that never starts (the
    image's entrypoint never runs). A name the image lacks is refused."""
    postgres = built_images["postgres"].image_id
    experiment = f"ids-{secrets.token_hex(3)}"
    try:
        found = registry.Registered(engine, "127.0.0.1:9").user(postgres, "postgres")
        network = f"bakeoff-{experiment}-net"
        engine.create_network(network, Labels(experiment, "score-network"), egress=False)
        server = database.start_server(engine, postgres, Labels(experiment,
                                                                "score-database"),
                                       network, f"bakeoff-{experiment}-db", databases=2)
        ran = engine.exec(server.container_id, ["sh", "-c", "id -u; id -g"],
                          user=database.USER, workdir="/", deadline_s=30)
        assert (ran.exit_code, found) == (0, ":".join(ran.stdout.split())), ran
        assert not found.startswith("0:")
        with pytest.raises(InfraError, match=r"has no user 'nobody-here' in its /etc/passwd"):
            registry.Registered(engine, "127.0.0.1:9").user(postgres, "nobody-here")
        assert engine.containers({LABEL_EXPERIMENT: registry.USER_CHECK.experiment}) == []
    finally:
        engine.remove_labelled({LABEL_EXPERIMENT: experiment})
