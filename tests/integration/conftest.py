"""Integration fixtures: a real engine, real images, real git repositories, real Postgres.

Without an engine these tests skip with a clear reason, except in CI (CI=true), where a
missing engine is a failure: CI must run them.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from runner.containers import images
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.manifest import LoadedManifest, load_manifest
from tests.integration.attack_lab import Lab, lab_for
from tests.integration.helpers import PlainReporter, cleanup, make_target
from tests.integration.installed import Installed, InstallError, install_once
from tests.integration.longest import LONGEST_FIRST, rank
from tests.integration.remote_engine import IMAGE as ENGINE_IMAGE
from tests.integration.remote_engine import RemoteEngine, started

# The longest modules' first tests build their images on a fresh machine while the other
# workers build theirs (measured there, 2026-12-07: the browser example's setup 828 s, the
# cross agents' 822 s): twice the suite's limit (pyproject.toml's `timeout`, 1,200 s).
BUILDING_TIMEOUT_S = 2400


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration" in str(item.path):
            item.add_marker(pytest.mark.docker)
            if item.path.name in LONGEST_FIRST and item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(BUILDING_TIMEOUT_S))
    # The longest modules first (tests/integration/longest.py); a stable sort: every
    # module's tests stay together and in order, the others in the collection's order.
    items.sort(key=lambda item: rank(item.path.as_posix()))


@pytest.fixture(scope="session")
def engine() -> Engine:
    try:
        docker.from_env(timeout=10).ping()
    except Exception as error:
        if os.environ.get("CI"):
            pytest.fail(f"CI needs a Docker engine and none answers: {error}")
        pytest.skip(f"no Docker engine answers ({error}); run `make setup`")
    return Engine()


@pytest.fixture(scope="session")
def built_images(engine: Engine) -> dict[str, BuiltImage]:
    """The base, python and postgres images (cache hits when `make setup` built them)."""
    return {b.name: b for b in images.build(engine, ["base", "python", "postgres"],
                                            PlainReporter())}


@pytest.fixture(scope="session")
def browser_image(engine: Engine) -> BuiltImage:
    """`bakeoff/browser` (issue 22): Debian's chromium and Playwright, built on first use."""
    (built,) = images.build(engine, ["browser"], PlainReporter())
    return built


@pytest.fixture
def target(tmp_path: Path, engine: Engine, built_images: dict[str, BuiltImage]
           ) -> Iterator[LoadedManifest]:
    """A two-arm experiment (A, B) with Postgres; always torn down by label afterwards."""
    loaded = load_manifest(make_target(tmp_path / "repo", ["A", "B"]))
    yield loaded
    cleanup(engine, loaded)


@pytest.fixture
def lab(engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path) -> Iterator[Lab]:
    """The adversarial suite's bench: a failing base and the executor that grades attacks."""
    with lab_for(engine, built_images["python"], tmp_path) as found:
        yield found


@pytest.fixture(scope="module")
def shared_lab(engine: Engine, built_images: dict[str, BuiltImage],
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """One bench for a module of attacks, each committed straight on the base with
    `Lab.variant` (the base's run of each check is made once and reused)."""
    with lab_for(engine, built_images["python"], tmp_path_factory.mktemp("lab")) as found:
        yield found


@pytest.fixture(scope="session")
def engine_image(engine: Engine) -> BuiltImage:
    """images/engine, built when missing or changed (a cache hit after that)."""
    return images.build(engine, [ENGINE_IMAGE], PlainReporter())[0]


@pytest.fixture(scope="session")
def remote_engine(engine: Engine, engine_image: BuiltImage) -> Iterator[RemoteEngine]:
    """A second Docker engine in a container, reachable only over an internal network of
    its own, sharing no directory of this machine (tests/integration/remote_engine.py);
    removed by its labels at the end of the session."""
    with started(engine, engine_image, f"remote{secrets.token_hex(3)}") as remote:
        yield remote


@pytest.fixture(scope="session")
def installed_tool(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Installed:
    """The wheel built from HEAD and installed into a fresh virtualenv outside the source
    tree (tests/integration/installed.py), once per run: the workers of `pytest -n N`
    share one (the first to need it builds it, in the run's temporary directory they all
    sit in; the tests only read it). A failed build or install is a failure, never a skip:
    the install path is what a user takes."""
    run = tmp_path_factory.getbasetemp()
    try:
        found = install_once((run if worker_id == "master" else run.parent) / "installed")
    except InstallError as error:
        pytest.fail(f"the installed tool could not be made: {error}")
    print(f"\ninstalled {found.wheel.name}: {found.seconds} seconds")  # with -s / -rP
    return found
